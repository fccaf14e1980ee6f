"""Scenario x model partitions: two dynamic dimensions (the key string reads `model|scenario`)."""

from __future__ import annotations

import dagster as dg

MODELS = dg.DynamicPartitionsDefinition(name="models")
SCENARIOS = dg.DynamicPartitionsDefinition(name="scenarios")
SCENARIO_MODEL = dg.MultiPartitionsDefinition({"model": MODELS, "scenario": SCENARIOS})


def partition_of(model_key: str, scenario_key: str) -> dg.MultiPartitionKey:
    return dg.MultiPartitionKey({"model": model_key, "scenario": scenario_key})


def keys_of(context: dg.AssetExecutionContext | dg.AssetCheckExecutionContext) -> tuple[str, str]:
    """(model_key, scenario_key) of the partition being materialised."""
    key = context.partition_key
    if not isinstance(key, dg.MultiPartitionKey):
        raise ValueError(f"expected a model|scenario partition, got {key!r}")
    dims = key.keys_by_dimension
    return dims["model"], dims["scenario"]
