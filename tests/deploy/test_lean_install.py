"""What an installation without the optional extras gets: the code location loads without dagster-celery (the
`celery` extra), and the code location, the CLI and the report work without the `postgres` and `mcp` extras and
without any plotting library (the charts are SVG drawn by the package itself).

Each check runs in a fresh interpreter: this process has long imported everything."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from eval_pipelines.defs.evals.executors import CELERY_EXTRA_HINT, CELERY_SWEEP_JOB, EXECUTOR_ENV
from tests.deploy.conftest import REPO

#: Makes `import dagster_celery` raise ImportError in the child, as it does where the extra is not installed.
WITHOUT_CELERY = "import sys; sys.modules['dagster_celery'] = None\n"
#: Modules only the `celery` extra brings.
CELERY_MODULES = ("dagster_celery", "celery", "kombu", "redis")


def _python(script: str, **env: str) -> subprocess.CompletedProcess[str]:
    child_env = {k: v for k, v in os.environ.items() if k != EXECUTOR_ENV} | env
    return subprocess.run(
        [sys.executable, "-c", script], cwd=REPO, env=child_env, capture_output=True, text=True, timeout=120
    )


def test_the_code_location_loads_without_the_celery_extra() -> None:
    script = WITHOUT_CELERY + (
        "import json\n"
        "from eval_pipelines.definitions import defs\n"
        "imported = sorted(name for name, module in sys.modules.items() if module is not None)\n"
        "print(json.dumps({'jobs': sorted(job.name for job in defs.jobs), 'modules': imported}))\n"
    )
    result = _python(script)
    assert result.returncode == 0, result.stderr[-3000:]
    loaded = json.loads(result.stdout.splitlines()[-1])
    assert "sweep_partition" in loaded["jobs"] and CELERY_SWEEP_JOB not in loaded["jobs"]
    assert not [m for m in loaded["modules"] if m.split(".")[0] in CELERY_MODULES]


def test_the_code_location_offers_the_celery_job_with_the_extra() -> None:
    result = _python("from eval_pipelines.definitions import defs; print(sorted(job.name for job in defs.jobs))")
    assert result.returncode == 0, result.stderr[-3000:]
    assert CELERY_SWEEP_JOB in result.stdout


def test_asking_for_celery_without_the_extra_refuses_to_load_and_names_the_extra() -> None:
    # Falling back to the in-process job would run every step on the run worker of a deployment sized for workers.
    result = _python(WITHOUT_CELERY + "import eval_pipelines.definitions", **{EXECUTOR_ENV: "celery"})
    assert result.returncode != 0
    assert CELERY_EXTRA_HINT in result.stderr and EXECUTOR_ENV in result.stderr


#: Makes these imports fail in the child, as where the extras (and no plotting library) are installed.
WITHOUT_EXTRAS = (
    "import sys\n"
    "for name in ('matplotlib', 'PIL', 'mcp', 'mcp_types', 'dagster_postgres', 'psycopg2'):\n"
    "    sys.modules[name] = None\n"
)


def test_the_code_location_the_cli_and_a_report_work_without_the_extras_or_a_plotting_library(
    tmp_path: Path,
) -> None:
    script = WITHOUT_EXTRAS + (
        "import contextlib\n"
        "from pathlib import Path\n"
        "import eval_pipelines.definitions\n"
        "from eval_pipelines.cli import main\n"
        "from eval_pipelines.reports import build_report\n"
        "from tests.reports.conftest import report_attempts\n"
        "from tests.reports.synthetic_warehouse import build\n"
        "with contextlib.redirect_stdout(sys.stderr), contextlib.suppress(SystemExit):\n"
        "    main(['--help'])\n"
        f"db = build(Path({str(tmp_path)!r}), report_attempts())\n"
        f"files = build_report(db, Path({str(tmp_path / 'report.html')!r}))\n"
        "print(sorted(path.name for path in files.paths))\n"
    )
    result = _python(script)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "usage: eval-pipelines" in result.stderr
    names = ["report.html", *(f"report_{n}.svg" for n in ("cost", "pass_hat_k", "pass_rate", "task_heatmap"))]
    assert json.loads(result.stdout.splitlines()[-1].replace("'", '"')) == names
