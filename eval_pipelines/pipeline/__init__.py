"""The steps of a sweep, Dagster-free: build the launch request, collect rollouts into the warehouse,
re-verify stored rollouts. The Dagster assets in `defs/` are thin wrappers around these."""
