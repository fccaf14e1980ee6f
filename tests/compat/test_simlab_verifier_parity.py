"""The same verifier modules, run by SimLab 0.2.0's own runner (`simlab.verifiers.runner.run_verifier`, in the
SimLab client venv) and by this project's contained worker over the same rollout, give the same verdicts: the
keyword call, the reading of each return shape, the adapter's attributes (`task_file` included) and the
`collinear.core` imports. Where the two differ on purpose (a verifier that raises: a `verifier` error here, a
failure there; an explicit `{"success": False}`) the test says so, as docs/compat.md does."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from eval_pipelines.schemas.artifacts import META_SIMLAB_SERVERS, META_SIMLAB_TASK, META_TOOL_SERVERS, RunArtifacts
from eval_pipelines.verifiers.isolation import IsolatedVerifierRunner, VerifyJob
from tests.compat.conftest import client_venv, describe

pytestmark = pytest.mark.slow

TASK = {
    "meta": {"task_id": "t1", "display_name": "Do it", "difficulty": "easy", "category": "ops"},
    "task": "do it",
    "apps": ["coding"],
    "tool_servers": [{"name": "coding-env", "tool_server_url": ""}],
    "npcs": [],
    "verifiers": [{"func": "python_module", "module": "collinear.scenarios.parity.verifiers.keyword_only"}],
}
URL = "http://127.0.0.1:9/workspaces/w1/hosted"
METADATA = {"page_id": "PAGE-7"}

#: module -> source; each is a verifier written for SimLab
MODULES = {
    "keyword_only": "def verify(*, run_artifacts):\n    return True, 'keyword ' + run_artifacts.task_id\n",
    "returns_int": "def verify(run_artifacts):\n    return 1\n",
    "returns_none": "def verify(run_artifacts):\n    return None\n",
    "returns_text": "def verify(run_artifacts):\n    return 'looks good'\n",
    "returns_int_pair": "def verify(run_artifacts):\n    return (0, 'not there')\n",
    "returns_result": (
        "from collinear.core.verifier import VerifierResult\n"
        "from collinear.core.run_artifacts import RunArtifacts\n"
        "def verify(run_artifacts):\n"
        "    return VerifierResult(isinstance(run_artifacts, RunArtifacts), 'shimmed', 'out')\n"
    ),
    "reads_adapter": (
        "import json\n"
        "def verify(run_artifacts):\n"
        "    with open(run_artifacts.task_file, encoding='utf-8') as file:\n"
        "        task = json.load(file)\n"
        "    seen = [task, run_artifacts.agent_strategy, run_artifacts.verifier_input, run_artifacts.rollback_input,\n"
        "            run_artifacts.rollout_trace_path, run_artifacts.log_probs, run_artifacts.reference_folder_id,\n"
        "            run_artifacts.model, run_artifacts.provider, run_artifacts.max_steps,\n"
        "            run_artifacts.server_url(), run_artifacts.server_url('coding-env'),\n"
        "            run_artifacts.tool_server_name, run_artifacts.seed_data]\n"
        "    return True, json.dumps(seen)\n"
    ),
    "raises": "def verify(run_artifacts):\n    raise KeyError('resource')\n",
    "explicit_dict": "def verify(run_artifacts):\n    return {'success': False, 'message': 'explicit'}\n",
}

_UNDER_SIMLAB = """
import json, sys, tempfile
from pathlib import Path
from simlab.agents.base import RunArtifacts
from simlab.verifiers.runner import build_verifier_artifacts, run_verifier

folder, task, url, metadata = Path(sys.argv[1]), json.loads(sys.argv[2]), sys.argv[3], json.loads(sys.argv[4])
with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as file:
    json.dump(task, file)
artifacts = RunArtifacts(task_id="t1", task="do it", metadata=metadata, final_observation="all done")
adapter = build_verifier_artifacts(artifacts, Path(file.name), {"coding-env": url})
verdicts = {}
for path in sorted(folder.glob("*.py")):
    if path.stem == "__init__":
        continue
    result = run_verifier(f"collinear.scenarios.parity.verifiers.{path.stem}", adapter, "parity",
                          local_verifier_path=path)
    verdicts[path.stem] = [bool(result.success), result.message]
print(json.dumps(verdicts))
"""


@pytest.fixture(scope="module")
def verifiers_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("parity") / "verifiers"
    folder.mkdir()
    (folder / "__init__.py").write_text("")
    for name, source in MODULES.items():
        (folder / f"{name}.py").write_text(source)
    return folder


def _under_simlab(verifiers_dir: Path) -> dict[str, list[Any]]:
    python = client_venv("simlab") / "python"
    result = subprocess.run(
        [str(python), "-c", _UNDER_SIMLAB, str(verifiers_dir), json.dumps(TASK), URL, json.dumps(METADATA)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, describe(result)
    verdicts: dict[str, list[Any]] = json.loads(result.stdout.strip().splitlines()[-1])
    return verdicts


def _here(verifiers_dir: Path) -> dict[str, tuple[bool, bool, str]]:
    artifacts = RunArtifacts(
        task_id="t1",
        task="do it",
        final_observation="all done",
        metadata={
            META_SIMLAB_SERVERS: {"files": "coding-env"},
            META_TOOL_SERVERS: {"files": URL.removesuffix("/hosted")},
            META_SIMLAB_TASK: TASK,
            **METADATA,
        },
    )
    with IsolatedVerifierRunner(verifiers_dir, timeout_seconds=60) as runner:
        [outcomes] = runner.run([VerifyJob(artifacts, tuple(MODULES))])
    return {o.module: (o.success, o.is_error, o.message) for o in outcomes}


def test_simlabs_runner_and_ours_give_the_same_verdicts(verifiers_dir: Path) -> None:
    simlab = _under_simlab(verifiers_dir)
    here = _here(verifiers_dir)
    for module in MODULES:
        if module in {"raises", "explicit_dict"}:
            continue
        assert here[module] == (simlab[module][0], False, simlab[module][1]), (module, simlab[module], here[module])
    assert json.loads(here["reads_adapter"][2]) == json.loads(simlab["reads_adapter"][1])
    assert here["keyword_only"][:2] == (True, False) and here["returns_result"][2] == "shimmed"

    # On purpose: a raise is no verdict here (a `verifier` error), a failure under SimLab ...
    assert simlab["raises"] == [False, "Verifier error: 'resource'"]
    assert here["raises"][:2] == (False, True) and "KeyError" in here["raises"][2]
    # ... and a dict stating a failure is that failure here, while SimLab reads the dict by its truth.
    assert simlab["explicit_dict"][0] is True
    assert here["explicit_dict"] == (False, False, "explicit")
