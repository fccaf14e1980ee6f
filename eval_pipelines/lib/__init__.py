"""Small Dagster-free utilities shared across layers (serving ASGI apps, retries)."""
