"""The local services, started for the pipeline and reached only through `clients/` (see services.py)."""
