"""`eval-pipelines doctor`: what is installed, what is running, where the data is, and whether the sandbox is on.

Reads only: package metadata, the project directory, the Dagster instance file (as YAML, without Dagster) and
the environment; reaches PostgreSQL and the Celery broker by a TCP connect and the local services by their
`/health` (short timeouts). No secret is printed: URLs are shown as scheme://host:port.
"""

from __future__ import annotations

import datetime as dt
import os
import re
import socket
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

from eval_pipelines.inputs.paths import (
    DATA_DIR_ENV,
    PROJECT_DIR_ENV,
    cache_dir,
    dagster_config_dir,
    data_dir,
    project_dir,
    sweeps_dir,
)

DISTRIBUTION = "eval_pipelines"
#: The addresses `eval-pipelines serve`, `view` and `dagster dev` listen on by default.
LOCAL_SERVICES = (
    ("evaluation service", "127.0.0.1", 8800, "/health"),
    ("assessment platform", "127.0.0.1", 8900, "/health"),
    ("viewer", "127.0.0.1", 8765, "/"),
    ("Dagster UI", "127.0.0.1", 3000, "/server_info"),
)
PG_ENV = ("DAGSTER_PG_HOST", "DAGSTER_PG_PORT")
BROKER_URL_ENV = "DAGSTER_CELERY_BROKER_URL"
BACKEND_URL_ENV = "DAGSTER_CELERY_BACKEND_URL"
_DEFAULT_PORTS = {"redis": 6379, "rediss": 6379, "amqp": 5672, "amqps": 5671, "postgresql": 5432}
_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")
_EXTRA = re.compile(r"""extra\s*==\s*["']([^"']+)["']""")
CONNECT_TIMEOUT_SECONDS = 0.5


@dataclass
class Line:
    label: str
    value: str
    #: False: something configured is missing or unreachable (the command then exits 1).
    ok: bool = True


@dataclass
class Section:
    title: str
    lines: list[Line] = field(default_factory=list)


def _version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def requirements_by_extra(distribution: str = DISTRIBUTION) -> dict[str, list[str]]:
    """The distribution names of each extra ("" for the core), from the installed package's metadata."""
    found: dict[str, list[str]] = {}
    for requirement in metadata.requires(distribution) or []:
        name = _NAME.match(requirement)
        if name is None:
            continue
        extra = _EXTRA.search(requirement)
        if "sys_platform" in requirement and sys.platform == "win32" and "!= 'win32'" in requirement:
            continue
        key = extra.group(1) if extra else ""
        if name.group(1).replace("-", "_").lower() != distribution.lower():  # `dev` names `eval_pipelines[celery]`
            found.setdefault(key, []).append(name.group(1))
    return found


def installed_section(version_of: Callable[[str], str | None] = _version) -> Section:
    section = Section("installed")
    own = version_of(DISTRIBUTION)
    where = Path(__file__).resolve().parents[1]
    section.lines.append(
        Line(
            "eval_pipelines", f"{own or 'not installed as a distribution'} at {where} (Python {sys.version.split()[0]})"
        )
    )
    try:
        extras = requirements_by_extra()
    except metadata.PackageNotFoundError:
        return section
    for extra, names in sorted(extras.items()):
        versions = {name: version_of(name) for name in names}
        missing = sorted(n for n, v in versions.items() if v is None)
        label = "core" if not extra else f"extra {extra}"
        if not missing:
            shown = ", ".join(f"{n} {v}" for n, v in versions.items() if n.lower().startswith(("dagster", "celery")))
            section.lines.append(Line(label, "installed" + (f" ({shown})" if shown else "")))
        elif extra:
            section.lines.append(
                Line(label, f"not installed (missing {', '.join(missing)}; pip install 'eval_pipelines[{extra}]')")
            )
        else:  # a core dependency missing is a broken install
            section.lines.append(Line(label, f"missing {', '.join(missing)}: reinstall eval_pipelines", ok=False))
    return section


def _instance_file(environ: Mapping[str, str]) -> Path:
    home = environ.get("DAGSTER_HOME")
    return Path(home) / "dagster.yaml" if home else dagster_config_dir() / "dagster.yaml"


def instance_storage(path: Path) -> str:
    """`sqlite`, `postgres`, another storage's name, or `missing`/`unreadable` (the file as YAML, no Dagster)."""
    try:
        config: Any = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError:
        return "missing"
    except yaml.YAMLError:
        return "unreadable"
    storage = config.get("storage") if isinstance(config, dict) else None
    if isinstance(storage, dict) and storage:
        return str(next(iter(storage)))
    return "sqlite (Dagster's default)"


def project_section(environ: Mapping[str, str]) -> Section:
    section = Section("data")
    root = project_dir()
    section.lines.append(
        Line("project dir", f"{root}" + (f" (${PROJECT_DIR_ENV})" if PROJECT_DIR_ENV in environ else ""))
    )
    data = data_dir()
    section.lines.append(
        Line(
            "data dir",
            f"{data}"
            + (f" (${DATA_DIR_ENV})" if DATA_DIR_ENV in environ else "")
            + ("" if data.is_dir() else ": not made yet"),
        )
    )
    catalog = data / "eval.duckdb"
    if catalog.is_file():
        built = dt.datetime.fromtimestamp(catalog.stat().st_mtime, dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
        section.lines.append(Line("catalog", f"{catalog} (built {built})"))
    else:
        section.lines.append(Line("catalog", f"{catalog}: none yet (`eval-pipelines sweep` builds it)"))
    sweeps = sweeps_dir()
    names = sorted(p.name for p in sweeps.glob("*.y*ml"))
    section.lines.append(Line("sweeps", f"{sweeps}: {', '.join(names) or 'none'}"))
    section.lines.append(Line("scenarios", f"{root / 'scenarios'} (beside the built-in ones)"))
    instance = _instance_file(environ)
    where = "$DAGSTER_HOME" if environ.get("DAGSTER_HOME") else "project"
    section.lines.append(Line("Dagster instance", f"{instance} ({where}): storage {instance_storage(instance)}"))
    section.lines.append(Line("cache", f"{cache_dir()} (benchmark and agent venvs)"))
    return section


def reachable(host: str, port: int, timeout: float = CONNECT_TIMEOUT_SECONDS) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def _address(url: str) -> tuple[str, str, int] | None:
    """scheme://host:port of a URL, without its credentials; None when it names no host."""
    parts = urlsplit(url)
    if not parts.hostname:
        return None
    try:
        port = parts.port or _DEFAULT_PORTS.get(parts.scheme, 0)
    except ValueError:
        return None
    return parts.scheme, parts.hostname, port


def _answers(host: str, port: int, path: str) -> bool:
    import httpx

    try:
        return httpx.get(f"http://{host}:{port}{path}", timeout=CONNECT_TIMEOUT_SECONDS * 2).status_code < 500
    except httpx.HTTPError:
        return False


def _postgres_line(environ: Mapping[str, str], connect: Callable[[str, int], bool]) -> Line:
    if instance_storage(_instance_file(environ)) != "postgres" and not environ.get("DAGSTER_PG_HOST"):
        return Line("postgres", "not configured (the instance is SQLite under data/dagster)")
    if instance_storage(_instance_file(environ)) == "postgres" and _version("dagster-postgres") is None:
        return Line("postgres", "the instance uses Postgres: pip install 'eval_pipelines[postgres]'", ok=False)
    host, pg_port = environ.get("DAGSTER_PG_HOST"), environ.get("DAGSTER_PG_PORT", "5432")
    if not host:
        return Line("postgres", "the instance uses Postgres but DAGSTER_PG_HOST is not set", ok=False)
    up = pg_port.isdigit() and connect(host, int(pg_port))
    return Line("postgres", f"{host}:{pg_port} " + ("reachable" if up else "NOT reachable"), ok=up)


def _broker_line(label: str, env: str, environ: Mapping[str, str], connect: Callable[[str, int], bool]) -> Line:
    url = environ.get(env)
    if not url:
        return Line(label, f"not configured (${env})")
    address = _address(url)
    if address is None:
        return Line(label, f"${env} names no host ({urlsplit(url).scheme}://)")
    scheme, host, port = address
    up = connect(host, port)
    kind = {"redis": "redis", "rediss": "redis", "amqp": "rabbitmq", "amqps": "rabbitmq"}.get(scheme, scheme)
    return Line(label, f"{kind} {scheme}://{host}:{port} " + ("reachable" if up else "NOT reachable"), ok=up)


def running_section(
    environ: Mapping[str, str],
    connect: Callable[[str, int], bool] = reachable,
    answers: Callable[[str, int, str], bool] = _answers,
) -> Section:
    section = Section("running", [_postgres_line(environ, connect)])
    section.lines.append(_broker_line("celery broker", BROKER_URL_ENV, environ, connect))
    section.lines.append(_broker_line("celery results", BACKEND_URL_ENV, environ, connect))
    executor = environ.get("EVAL_PIPELINES_EXECUTOR", "") or "in-process"
    section.lines.append(Line("executor", f"{executor} ($EVAL_PIPELINES_EXECUTOR)"))
    for label, host, port, path in LOCAL_SERVICES:
        up = answers(host, port, path)
        state = "answering" if up else "not running"
        if not up and port == 8800:
            state += " (a sweep starts its own embedded service)"
        section.lines.append(Line(label, f"http://{host}:{port} {state}"))
    return section


def sandbox_section() -> Section:
    from eval_pipelines.toolservers.files import SANDBOX_NAMESPACES, command_sandbox

    sandbox = command_sandbox()
    active = sandbox.mode == SANDBOX_NAMESPACES
    value = sandbox.mode + (f" ({sandbox.reason})" if sandbox.reason else "")
    if not active:
        value += ": model-chosen commands are NOT isolated from the host's files and network"
    return Section("sandbox", [Line("run_command", value, ok=active)])


def diagnose(environ: Mapping[str, str] | None = None) -> list[Section]:
    env = os.environ if environ is None else environ
    return [installed_section(), project_section(env), running_section(env), sandbox_section()]


def render(sections: list[Section]) -> str:
    width = max(len(line.label) for s in sections for line in s.lines)
    out: list[str] = []
    for section in sections:
        out.append(f"{section.title}:")
        out.extend(f"  {'!' if not line.ok else ' '} {line.label.ljust(width)}  {line.value}" for line in section.lines)
    return "\n".join(out)
