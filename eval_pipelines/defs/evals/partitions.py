"""Scenario x model partitions: two dynamic dimensions (the key string reads `model|scenario`).

The scenario dimension's keys are the scenario ids as users write and see them (`email_ops:1.0.0`): a scenario id
holds only `[A-Za-z0-9_.-]` and one `:` (schemas/scenarios.py), none of the characters Dagster drops from a
multi-partition key. The warehouse's folders use the path form (`scenario=email_ops_1.0.0`, see
`inputs.scenarios.partition_key`); `keys_of` maps a partition to those folder keys."""

from __future__ import annotations

import dagster as dg

from eval_pipelines.inputs.scenarios import partition_key

MODELS = dg.DynamicPartitionsDefinition(name="models")
SCENARIOS = dg.DynamicPartitionsDefinition(name="scenarios")
SCENARIO_MODEL = dg.MultiPartitionsDefinition({"model": MODELS, "scenario": SCENARIOS})


def partition_of(model_name: str, scenario_id: str) -> dg.MultiPartitionKey:
    """The partition of one model (its name in the sweep config) and one scenario (its id, `email_ops:1.0.0`)."""
    return dg.MultiPartitionKey({"model": model_name, "scenario": scenario_id})


def keys_of(context: dg.AssetExecutionContext | dg.AssetCheckExecutionContext) -> tuple[str, str]:
    """(model_key, scenario_key) of the partition being materialised, as the warehouse's folders name them."""
    key = context.partition_key
    if not isinstance(key, dg.MultiPartitionKey):
        raise ValueError(f"expected a model|scenario partition, got {key!r}")
    dims = key.keys_by_dimension
    return dims["model"], partition_key(dims["scenario"])
