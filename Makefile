# The README's commands. Each one creates .venv and installs the project on first use (package registries only).
VENV ?= .venv
PYTHON ?= python3
STAMP := $(VENV)/.installed-$(shell cksum pyproject.toml | cut -d' ' -f1)

.PHONY: sweep test lint validate bench clean dagster daemon

$(STAMP): pyproject.toml
	@test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install --quiet --disable-pip-version-check -e '.[dev]'
	@rm -f $(VENV)/.installed-*
	@touch $(STAMP)

## Main job: the default model-comparison sweep through Dagster; prints the pass-rate table.
sweep: $(STAMP)
	$(VENV)/bin/eval-pipelines sweep

## Tests: lint, type check, Dagster definitions check, then the whole pytest suite.
test: $(STAMP) lint validate
	$(VENV)/bin/pytest -q

## Lint: ruff (with the complexity limit on the package), ruff format, mypy, and the layer contracts of
## docs/architecture.md (import-linter: layers, no Dagster below defs/, no import cycle).
lint: $(STAMP)
	$(VENV)/bin/ruff check eval_pipelines tests benchmarks examples
	$(VENV)/bin/ruff check --select C901 eval_pipelines
	$(VENV)/bin/ruff format --check eval_pipelines tests benchmarks examples
	$(VENV)/bin/mypy eval_pipelines
	$(VENV)/bin/lint-imports

## The Dagster UI and the daemon on the repository's instance (dagster.yaml, SQLite under data/dagster).
dagster: $(STAMP)
	$(VENV)/bin/dagster dev -w workspace.yaml

## The daemon alone (schedules, sensors, automation) on the same instance; DAGSTER_HOME must be absolute.
daemon: $(STAMP)
	DAGSTER_HOME=$(CURDIR) $(VENV)/bin/dagster-daemon run -w workspace.yaml

validate: $(STAMP)
	$(VENV)/bin/dagster definitions validate -w workspace.yaml

## Benchmarks: re-verification throughput, warehouse scale, export scale and the viewer at 100,000 rollouts (results
## in benchmarks/results/, git-ignored).
## The issue-10 set (Inspect AI comparison, latency hiding, memory, Dagster overhead): benchmarks/run_all.py.
bench: $(STAMP)
	$(VENV)/bin/python benchmarks/reverify.py
	$(VENV)/bin/python benchmarks/warehouse_scale.py
	$(VENV)/bin/python benchmarks/export_scale.py
	$(VENV)/bin/python benchmarks/viewer_scale.py

clean:
	rm -rf data/warehouse data/eval.duckdb data/dagster data/service data/artifacts data/assessment data/platform data/locks
