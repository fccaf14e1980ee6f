"""Real benchmarks (BFCL v4 multi-turn, τ²-bench) run from their pinned upstream packages, each in a venv of its
own: environments, the upstream worker, the generic upstream tool server, and the catalog that materialises a
benchmark as an ordinary scenario folder. See `catalog.py` for the adapter contract."""
