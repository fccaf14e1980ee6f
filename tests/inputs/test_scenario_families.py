"""A family id (`email_ops`) names the newest version of a scenario wherever a scenario id is taken."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from eval_pipelines.inputs.paths import builtin_scenarios_dir
from eval_pipelines.inputs.scenarios import ScenarioCatalog

BUILTIN_EMAIL_OPS = builtin_scenarios_dir() / "email_ops"


def _version(root: Path, version: str) -> None:
    folder = root / f"email_ops_{version}"
    shutil.copytree(BUILTIN_EMAIL_OPS, folder, ignore=shutil.ignore_patterns("__pycache__"))
    template = json.loads((folder / "template.json").read_text(encoding="utf-8"))
    template["scenario_id"] = f"email_ops:{version}"
    (folder / "template.json").write_text(json.dumps(template), encoding="utf-8")


def test_a_family_id_resolves_to_its_newest_version_numerically(tmp_path: Path) -> None:
    for version in ("1.9.0", "1.10.0", "1.2.0"):
        _version(tmp_path, version)
    catalog = ScenarioCatalog(tmp_path)
    assert catalog.get("email_ops").scenario_id == "email_ops:1.10.0"
    assert catalog.get("email_ops:1.9.0").scenario_id == "email_ops:1.9.0"  # an exact id stays exact
    assert catalog.get("email_ops_1.2.0").scenario_id == "email_ops:1.2.0"  # and so does a partition key
    with pytest.raises(KeyError):
        catalog.get("email")  # a prefix is not a family
    # the listing puts a family's newest version first: SimLab's `--template email_ops` takes the first one
    assert catalog.ids() == ["email_ops:1.10.0", "email_ops:1.9.0", "email_ops:1.2.0"]
