"""The Dockerfile and deploy/k8s/values.yaml agree, checked without a registry or a Docker daemon (this machine can
pull no base image): they name one image, the code location and the commands the chart runs exist in what the image
installs, the runtime stage installs the built wheel as a non-root user, and the build context keeps the package
while leaving out venvs, data and history."""

from __future__ import annotations

import importlib
import json
import re
import shlex
import tomllib
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

import dagster as dg
import pytest
import yaml
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name

from tests.deploy.conftest import REPO

DOCKERFILE = REPO / "Dockerfile"
DOCKERIGNORE = REPO / ".dockerignore"
VALUES = REPO / "deploy" / "k8s" / "values.yaml"
K8S_README = REPO / "deploy" / "k8s" / "README.md"
PYPROJECT = REPO / "pyproject.toml"
RUNTIME_BASE = "python:3.11-slim"
#: The Helm chart's own commands in the image: the webserver and the daemon (through /bin/bash -c), the code
#: location's `dagster api grpc` with its readiness probe `dagster api grpc-health-check`, and the launched runs'
#: `dagster api execute_run`.
CHART_COMMANDS = ("dagster-webserver", "dagster-daemon", "dagster")
#: What a setting of values.yaml needs installed in the image, as distribution names.
PROVIDERS = {
    "K8sRunLauncher": "dagster-k8s",
    "CeleryK8sRunLauncher": "dagster-celery-k8s",
    "S3ComputeLogManager": "dagster-aws",
    "GCSComputeLogManager": "dagster-gcp",
    "AzureBlobComputeLogManager": "dagster-azure",
}


@dataclass
class Stage:
    base: str
    name: str | None
    instructions: list[tuple[str, str]] = field(default_factory=list)

    def args_of(self, keyword: str) -> list[str]:
        return [args for kw, args in self.instructions if kw == keyword]


@dataclass
class Dockerfile:
    global_args: dict[str, str]
    stages: list[Stage]

    @property
    def runtime(self) -> Stage:
        return self.stages[-1]

    def stage(self, name: str) -> Stage:
        return next(s for s in self.stages if s.name == name)

    def arg(self, name: str) -> str:
        return self.global_args[name]


def _parse_dockerfile(text: str) -> Dockerfile:
    """Instructions with continuation lines joined and comments dropped; enough of the syntax for this file."""
    logical: list[str] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        logical.append(pending + line)
        pending = ""
    assert not pending, "the Dockerfile ends inside a continuation line"
    global_args: dict[str, str] = {}
    stages: list[Stage] = []
    for line in logical:
        keyword, _, args = line.partition(" ")
        keyword, args = keyword.upper(), args.strip()
        if keyword == "FROM":
            words = args.split()
            stages.append(Stage(base=words[0], name=words[2] if len(words) == 3 and words[1].upper() == "AS" else None))
        elif not stages:
            assert keyword == "ARG", f"{keyword} before the first FROM"
            name, _, default = args.partition("=")
            global_args[name] = default
        else:
            stages[-1].instructions.append((keyword, args))
    return Dockerfile(global_args, stages)


def _exec_form(args: str) -> list[str]:
    value = json.loads(args)  # the shell form would wrap the command in `/bin/sh -c` and lose signals
    assert isinstance(value, list) and all(isinstance(v, str) for v in value), args
    return value


def _env(stage: Stage) -> dict[str, str]:
    env: dict[str, str] = {}
    for args in stage.args_of("ENV"):
        for item in shlex.split(args):
            name, _, value = item.partition("=")
            env[name] = value
    return env


def _pip_install_commands(stage: Stage) -> list[list[str]]:
    """Each `pip install ...` of the stage's RUN instructions, as words (flags of RUN itself dropped)."""
    commands = []
    for args in stage.args_of("RUN"):
        for command in re.split(r"&&|;", args):
            words = [w for w in shlex.split(command) if not w.startswith("--mount=")]
            if words[:2] == ["pip", "install"] or words[:4] == ["python", "-m", "pip", "install"]:
                commands.append(words)
    return commands


def _option(words: list[str], name: str) -> str:
    for i, word in enumerate(words):
        if word == name:
            return words[i + 1]
        if word.startswith(name + "="):
            return word.split("=", 1)[1]
    raise AssertionError(f"{name} missing from {words}")


def _bind_mounts(stage: Stage) -> dict[str, tuple[str, str]]:
    """target -> (from stage, source) of the stage's `RUN --mount=type=bind,from=...` mounts."""
    mounts = {}
    for args in stage.args_of("RUN"):
        for spec in re.findall(r"--mount=(\S+)", args):
            fields = dict(item.split("=", 1) for item in spec.split(","))
            if fields.get("type") == "bind" and "from" in fields:
                mounts[fields["target"]] = (fields["from"], fields.get("source", "/"))
    return mounts


@pytest.fixture(scope="module")
def dockerfile() -> Dockerfile:
    return _parse_dockerfile(DOCKERFILE.read_text())


@pytest.fixture(scope="module")
def values() -> dict[str, Any]:
    data = yaml.safe_load(VALUES.read_text())
    assert isinstance(data, dict)
    return data


@pytest.fixture(scope="module")
def pyproject() -> dict[str, Any]:
    return tomllib.loads(PYPROJECT.read_text())


def _image_extras(dockerfile: Dockerfile) -> set[str]:
    return {extra.strip() for extra in dockerfile.arg("EXTRAS").split(",") if extra.strip()}


def _requirements(pyproject: dict[str, Any], extras: set[str]) -> set[str]:
    """Canonical names of the distributions the package requires with `extras` (following self-references)."""
    project = pyproject["project"]
    own_name = canonicalize_name(project["name"])
    names: set[str] = set()
    wanted, seen = [None, *extras], set()
    while wanted:
        extra = wanted.pop()
        if extra in seen:
            continue
        seen.add(extra)
        specs = project["dependencies"] if extra is None else project["optional-dependencies"][extra]
        for spec in specs:
            requirement = Requirement(spec)
            if requirement.marker is not None and not requirement.marker.evaluate({"sys_platform": "linux"}):
                continue
            if canonicalize_name(requirement.name) == own_name:
                wanted.extend(requirement.extras)
            else:
                names.add(canonicalize_name(requirement.name))
    return names


def _images(values: dict[str, Any]) -> dict[str, dict[str, Any]]:
    images = {
        "dagsterWebserver": values["dagsterWebserver"]["image"],
        "dagsterDaemon": values["dagsterDaemon"]["image"],
    }
    for deployment in values["dagster-user-deployments"]["deployments"]:
        images[f"dagster-user-deployments/{deployment['name']}"] = deployment["image"]
    return images


def _grpc_target(args: list[str]) -> tuple[str, str]:
    """The module and attribute of `dagster api grpc` arguments."""
    module = _option(args, "--module-name") if "--module-name" in args else _option(args, "-m")
    attribute = _option(args, "--attribute") if "--attribute" in args else _option(args, "-a")
    return module, attribute


def test_the_wheel_is_built_in_a_builder_stage_for_the_runtime_python(
    dockerfile: Dockerfile, pyproject: dict[str, Any]
) -> None:
    assert len(dockerfile.stages) >= 2, "multi-stage: the build tools stay out of the runtime image"
    assert dockerfile.runtime.base == RUNTIME_BASE
    builder = dockerfile.stage("builder")
    # Wheels built by another Python than the runtime's could carry the wrong ABI tags.
    assert builder.base == dockerfile.runtime.base
    assert SpecifierSet(pyproject["project"]["requires-python"]).contains(RUNTIME_BASE.split(":")[1].split("-")[0])
    build = " ".join(builder.args_of("RUN"))
    assert "python -m build --wheel" in build or "pip wheel" in build
    # The builder sees the whole package: what pyproject.toml ships (modules, templates, the readme) is in it.
    copied = {src for args in builder.args_of("COPY") for src in args.split()[:-1] if not src.startswith("--")}
    assert "." in copied or {"pyproject.toml", pyproject["project"]["readme"], "eval_pipelines"} <= copied


def test_the_runtime_stage_installs_the_built_wheels_not_the_source(dockerfile: Dockerfile) -> None:
    runtime, builder = dockerfile.runtime, dockerfile.stage("builder")
    installs = _pip_install_commands(runtime)
    assert len(installs) == 1, installs
    words = installs[0]
    assert "-e" not in words and "--editable" not in words and not any(w.startswith("--editable=") for w in words)
    # Only the builder's wheels: an index would let pip pick another build of the package or of a dependency.
    assert "--no-index" in words
    wheel_dir = _option(words, "--find-links")
    source_stage, source = _bind_mounts(runtime)[wheel_dir]
    assert source_stage == builder.name
    builder_runs = " ".join(builder.args_of("RUN"))
    assert re.search(rf"--wheel-dir[ =]{re.escape(source)}(\s|$)", builder_runs), "the builder writes elsewhere"
    assert any(word.startswith("eval_pipelines[") or word == "eval_pipelines" for word in words)
    # No source tree in the runtime image: the package there is the installed wheel, nothing shadows it.
    copied = [args for args in runtime.args_of("COPY") if "--from=" not in args]
    assert not copied, copied


def test_the_runtime_stage_runs_as_a_numeric_non_root_user_owning_dagster_home(
    dockerfile: Dockerfile, values: dict[str, Any]
) -> None:
    runtime = dockerfile.runtime
    users = runtime.args_of("USER")
    assert users, "the runtime stage must not run as root"
    uid = users[-1].split(":")[0]
    # Kubernetes enforces `runAsNonRoot` (values.yaml) only for a numeric user.
    assert uid.isdigit() and int(uid) != 0, users[-1]
    dagster_home = Path(_env(runtime)["DAGSTER_HOME"])
    chowns = [shlex.split(command) for args in runtime.args_of("RUN") for command in args.split("&&")]
    owned = [Path(words[-1]) for words in chowns if words[:1] == ["chown"] and words[-2].split(":")[0] == uid]
    assert any(dagster_home == p or p in dagster_home.parents for p in owned), (dagster_home, owned)
    deployment = values["dagster-user-deployments"]["deployments"][0]
    assert deployment["podSecurityContext"]["runAsNonRoot"] is True


def test_values_run_this_one_image_everywhere(dockerfile: Dockerfile, values: dict[str, Any]) -> None:
    images = _images(values)
    assert {image["repository"] for image in images.values()} == {images["dagsterWebserver"]["repository"]}, images
    assert len({str(image["tag"]) for image in images.values()}) == 1, images
    repository = images["dagsterWebserver"]["repository"]
    labels = dict(item.split("=", 1) for args in dockerfile.runtime.args_of("LABEL") for item in shlex.split(args))
    assert repository.rsplit("/", 1)[-1] == labels["org.opencontainers.image.title"]
    for document in (DOCKERFILE, VALUES, K8S_README):
        assert f"docker build -t {repository}:" in document.read_text(), document


def test_the_code_location_in_values_exists_and_is_the_images_default_command(
    dockerfile: Dockerfile, values: dict[str, Any]
) -> None:
    [deployment] = values["dagster-user-deployments"]["deployments"]
    args = deployment["dagsterApiGrpcArgs"]
    module, attribute = _grpc_target(args)
    assert isinstance(getattr(importlib.import_module(module), attribute), dg.Definitions)
    # `docker run <image>` serves what the chart serves, as the chart writes it (deployment-user.yaml).
    [cmd] = dockerfile.runtime.args_of("CMD")
    assert _exec_form(cmd) == ["dagster", "api", "grpc", "-h", "0.0.0.0", "-p", str(deployment["port"]), *args]
    workspace = yaml.safe_load((REPO / "workspace.yaml").read_text())
    [location] = workspace["load_from"]
    assert (location["python_module"]["module_name"], location["python_module"]["attribute"]) == (module, attribute)


def test_the_image_has_no_entrypoint_to_prepend_to_the_charts_commands(dockerfile: Dockerfile) -> None:
    # The code location's container gets its command as `args`: an ENTRYPOINT would be prepended to it.
    assert not dockerfile.runtime.args_of("ENTRYPOINT")


def test_the_commands_run_in_the_image_are_console_scripts_of_what_it_installs(
    dockerfile: Dockerfile, pyproject: dict[str, Any]
) -> None:
    installed = _requirements(pyproject, _image_extras(dockerfile))
    scripts = {ep.name: ep for ep in entry_points(group="console_scripts")}
    [cmd] = dockerfile.runtime.args_of("CMD")
    for command in {*CHART_COMMANDS, _exec_form(cmd)[0]}:
        assert command in scripts, command
        distribution = scripts[command].dist
        assert distribution is not None and canonicalize_name(distribution.name) in installed, command
    # `docker run <image> eval-pipelines ...`: the package's own script, from the wheel.
    module, _, function = pyproject["project"]["scripts"]["eval-pipelines"].partition(":")
    assert callable(getattr(importlib.import_module(module), function))


def test_the_image_installs_what_the_helm_values_configure_and_celery_only_when_they_use_it(
    dockerfile: Dockerfile, values: dict[str, Any], pyproject: dict[str, Any]
) -> None:
    extras = _image_extras(dockerfile)
    assert extras <= set(pyproject["project"]["optional-dependencies"]), extras
    installed = _requirements(pyproject, extras)
    configured = (values["runLauncher"]["type"], values.get("computeLogManager", {}).get("type"))
    # The chart's instance storage is always PostgreSQL (the chart's own or `postgresql.postgresqlHost`).
    needed = {"dagster-postgres", *(PROVIDERS[kind] for kind in configured if kind in PROVIDERS)}
    assert needed <= installed, needed - installed
    deployment_env = [
        var for d in values["dagster-user-deployments"]["deployments"] for var in d.get("env", []) if "value" in var
    ]
    uses_celery = values["runLauncher"]["type"].startswith("Celery") or any(
        var["name"] == "EVAL_PIPELINES_EXECUTOR" and var["value"] == "celery" for var in deployment_env
    )
    assert ("celery" in extras) == uses_celery


def test_ports_and_dagster_home_agree_with_the_values(dockerfile: Dockerfile, values: dict[str, Any]) -> None:
    exposed = {int(port.split("/")[0]) for args in dockerfile.runtime.args_of("EXPOSE") for port in args.split()}
    webserver = values["dagsterWebserver"]
    ports = [webserver["service"]["port"], *(d["port"] for d in values["dagster-user-deployments"]["deployments"])]
    for port in ports:
        assert port in exposed, port
        assert port >= 1024, f"the non-root user cannot bind port {port}"
    # The chart's default probe asks port 80: it must follow the webserver's port.
    assert webserver["readinessProbe"]["httpGet"]["port"] == webserver["service"]["port"]
    # The chart mounts the instance's dagster.yaml into global.dagsterHome and sets DAGSTER_HOME to it.
    assert values["global"]["dagsterHome"] == _env(dockerfile.runtime)["DAGSTER_HOME"]


def _ignore_rules(text: str) -> list[tuple[bool, re.Pattern[str]]]:
    """(negated, regex) per .dockerignore line: `*` and `?` stay within a path segment, `**` spans segments."""
    rules = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        negated = line.startswith("!")
        pattern = line.removeprefix("!").strip().lstrip("/")
        regex, i = "", 0
        while i < len(pattern):
            if pattern.startswith("**/", i):
                regex, i = regex + "(?:.*/)?", i + 3
            elif pattern.startswith("**", i):
                regex, i = regex + ".*", i + 2
            elif pattern[i] == "*":
                regex, i = regex + "[^/]*", i + 1
            elif pattern[i] == "?":
                regex, i = regex + "[^/]", i + 1
            elif pattern[i] == "[":
                end = pattern.index("]", i)
                regex, i = regex + pattern[i : end + 1], end + 1
            else:
                regex, i = regex + re.escape(pattern[i]), i + 1
        rules.append((negated, re.compile(regex + r"\Z")))
    return rules


def _ignored(path: str, rules: list[tuple[bool, re.Pattern[str]]]) -> bool:
    """Docker leaves a path out when it, or a folder above it, matches; the last matching line decides."""
    parts = path.split("/")
    candidates = ["/".join(parts[:n]) for n in range(1, len(parts) + 1)]
    ignored = False
    for negated, regex in rules:
        if any(regex.match(candidate) for candidate in candidates):
            ignored = not negated
    return ignored


def test_the_build_context_keeps_the_package_and_leaves_out_venvs_data_and_history(
    pyproject: dict[str, Any],
) -> None:
    rules = _ignore_rules(DOCKERIGNORE.read_text())
    for path in (
        ".venv/bin/python",
        ".venv-clients/collinear/bin/python",
        "benchmarks/.venv-inspect/bin/python",
        "data/eval.duckdb",
        "data/warehouse/rollouts/model=m/scenario=s/part.parquet",
        ".git/HEAD",
        "benchmarks/results/export_scale.json",
        # A stale egg-info feeds the wheel build the file list of an old tree.
        "eval_pipelines.egg-info/SOURCES.txt",
        "eval_pipelines/reports/__pycache__/build.cpython-311.pyc",
    ):
        assert _ignored(path, rules), path
    needed = ["pyproject.toml", pyproject["project"]["readme"]]
    needed += [
        path.relative_to(REPO).as_posix()
        for path in (REPO / "eval_pipelines").rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
    ]
    assert len(needed) > 100
    kept_out = [path for path in needed if _ignored(path, rules)]
    assert not kept_out, kept_out
