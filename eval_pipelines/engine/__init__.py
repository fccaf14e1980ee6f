"""The rollout engine: executes one rollout, and many under a concurrency bound."""
