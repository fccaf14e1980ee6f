"""The viewer's web app: server-rendered pages over the catalog, and `serve` for `eval-pipelines view`.

Every page is rendered by Jinja2 with autoescaping on: transcripts, tool arguments, verifier messages and judge
rationales are model output and may be hostile HTML. The pages carry no script at all, and the Content-Security-
Policy says so, so even a template that forgot to escape could not run one.
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles
from jinja2 import Environment, PackageLoader, StrictUndefined
from starlette.exceptions import HTTPException as StarletteHTTPException

from eval_pipelines.reports.data import UNKNOWN_COST, ReportError
from eval_pipelines.reports.judges import flag_text
from eval_pipelines.reports.viewer.judges import calibration, judge_anchor, judge_flag
from eval_pipelines.reports.viewer.queries import (
    DEFAULT_PER_PAGE,
    ERROR_CLASSES,
    FLAGS,
    MAX_PER_PAGE,
    OUTCOMES,
    BadRequest,
    NotFound,
    RolloutFilter,
    ViewerCatalog,
    param,
    positive_int_param,
)

_PACKAGE = "eval_pipelines.reports.viewer"

#: No script, no frame, no foreign origin: the pages need only their own stylesheet.
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; base-uri 'none'; "
        "frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}


def _url(path: str, params: Mapping[str, Any] | None = None, **more: Any) -> str:
    """A link that keeps the given parameters, leaving out the empty ones."""
    merged = {**(params or {}), **more}
    query = urlencode({k: v for k, v in merged.items() if v not in (None, "")})
    return f"{path}?{query}" if query else path


def _rollout_url(rollout_id: str) -> str:
    return "/rollouts/" + quote(rollout_id, safe="")


def _rate(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _interval(low: float | None, high: float | None) -> str:
    # As the CLI table shows it: a t-interval may run past [0, 1], a pass rate cannot.
    if low is None or high is None:
        return "-"
    return f"{max(low, 0.0):.2f}-{min(high, 1.0):.2f}"


def _usd(value: float | None) -> str:
    return UNKNOWN_COST if value is None else f"${value:.4f}"


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f} s"


def _number(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.3g}"
    return f"{value:,}" if isinstance(value, int) else str(value)


def _timestamp(value: datetime | str | None) -> str:
    if value is None:
        return "-"
    if isinstance(value, datetime):
        return value.isoformat(sep=" ", timespec="seconds")
    return str(value)


def _environment() -> Environment:
    env = Environment(
        loader=PackageLoader(_PACKAGE, "templates"),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.globals.update(
        url=_url,
        rollout_url=_rollout_url,
        interval=_interval,
        OUTCOMES=OUTCOMES,
        ERROR_CLASSES=ERROR_CLASSES,
        FLAGS=FLAGS,
        judge_flag=judge_flag,
        judge_anchor=judge_anchor,
        flag_text=flag_text,
    )
    env.filters.update(rate=_rate, usd=_usd, seconds=_seconds, num=_number, ts=_timestamp)
    return env


def create_app(db: Path | ViewerCatalog) -> FastAPI:
    """The viewer of the catalog at `db` (raises ReportError when there is none)."""
    catalog = db if isinstance(db, ViewerCatalog) else ViewerCatalog(db)
    templates = _environment()
    app = FastAPI(title="eval-pipelines viewer", docs_url=None, redoc_url=None, openapi_url=None)
    app.mount("/static", StaticFiles(packages=[(_PACKAGE, "static")]), name="static")

    def page(template: str, status_code: int = 200, **context: Any) -> HTMLResponse:
        html = templates.get_template(template).render(catalog_path=str(catalog.path), **context)
        return HTMLResponse(html, status_code=status_code, headers=SECURITY_HEADERS)

    @app.get("/", response_class=HTMLResponse)
    def home(request: Request) -> HTMLResponse:
        snapshot = catalog.snapshot()
        if not snapshot.sweeps:
            return page(
                "index.html",
                sweeps=[],
                matrix=None,
                shown=None,
                has_benchmarks=False,
                catalog_note=snapshot.catalog_note,
            )
        shown = snapshot.sweep(param(request.query_params, "sweep"))
        return page(
            "index.html",
            sweeps=snapshot.sweeps,
            matrix=snapshot.matrix(shown),
            shown=shown,
            has_benchmarks=snapshot.has_benchmark_rollouts(shown),
            catalog_note=snapshot.catalog_note,
            judges=calibration(snapshot, shown),
        )

    @app.get("/judges", response_class=HTMLResponse)
    def judges(request: Request) -> HTMLResponse:
        snapshot = catalog.snapshot()
        shown = snapshot.sweep(param(request.query_params, "sweep"))
        return page("judges.html", sweep_id=shown, judges=calibration(snapshot, shown))

    @app.get("/parity", response_class=HTMLResponse)
    def parity(request: Request) -> HTMLResponse:
        snapshot = catalog.snapshot()
        shown = snapshot.sweep(param(request.query_params, "sweep"))
        return page("parity.html", p=snapshot.parity(shown), sweeps=snapshot.sweeps)

    @app.get("/rollouts", response_class=HTMLResponse)
    def rollouts(request: Request) -> HTMLResponse:
        params = request.query_params
        wanted = RolloutFilter.parse(params)
        per_page = positive_int_param(params, "per_page", DEFAULT_PER_PAGE, MAX_PER_PAGE)
        snapshot = catalog.snapshot()
        listed = snapshot.rollouts(wanted, positive_int_param(params, "page", 1), per_page)
        keep = {**wanted.query(listed.sweep_id), "per_page": None if per_page == DEFAULT_PER_PAGE else per_page}
        return page(
            "rollouts.html",
            listed=listed,
            keep=keep,
            facets=snapshot.facets(listed.sweep_id),
            sweeps=snapshot.sweeps,
        )

    @app.get("/rollouts/{rollout_id}", response_class=HTMLResponse)
    def rollout(rollout_id: str) -> HTMLResponse:
        snapshot = catalog.snapshot()
        detail = snapshot.rollout(rollout_id)
        row = detail.row
        peers = snapshot.compare(row["sweep_id"], row["task_id"], row["scenario_id"], [], [])
        return page(
            "rollout.html",
            d=detail,
            r=row,
            peers=[m for m in peers.models if m[0] != row["model_name"]],
            judge_flags=calibration(snapshot, row["sweep_id"]).flags(row["scenario_id"]),
        )

    @app.get("/compare", response_class=HTMLResponse)
    def compare(request: Request) -> HTMLResponse:
        params = request.query_params
        task = param(params, "task")
        if task is None:
            raise BadRequest("name a task: /compare?task=<task_id>&models=<model a>,<model b>")
        models = [m.strip() for m in (param(params, "models") or "").split(",") if m.strip()]
        comparison = catalog.snapshot().compare(
            param(params, "sweep"),
            task,
            param(params, "scenario"),
            models,
            [param(params, "a"), param(params, "b")],
        )
        return page("compare.html", c=comparison, models=models)

    def failure(status_code: int, title: str) -> Callable[[Request, Exception], HTMLResponse]:
        def handler(request: Request, exc: Exception) -> HTMLResponse:
            detail = getattr(exc, "detail", None) or str(exc)
            return page("error.html", status_code=status_code, title=title, message=str(detail))

        return handler

    app.add_exception_handler(NotFound, failure(404, "Not found"))
    app.add_exception_handler(BadRequest, failure(400, "Bad request"))
    # The catalog went away or cannot be read (e.g. `make clean` while the viewer runs).
    app.add_exception_handler(ReportError, failure(503, "No catalog"))

    def http_error(request: Request, exc: Exception) -> HTMLResponse:
        status = getattr(exc, "status_code", 500)
        return page("error.html", status_code=status, title=f"HTTP {status}", message=str(getattr(exc, "detail", "")))

    app.add_exception_handler(StarletteHTTPException, http_error)
    return app


def serve(db: Path, host: str, port: int, announce: Callable[[str], None] = print) -> None:
    """Serve the viewer in the foreground until SIGINT/SIGTERM. Raises ReportError without a catalog and
    OSError when the address cannot be listened on, both before anything is served."""
    app = create_app(db)
    family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
    # Bound here rather than by uvicorn, which would log the error and exit the process: the CLI reports it.
    sock = socket.create_server((host, port), family=family)
    config = uvicorn.Config(app, log_level="warning", access_log=False, log_config=None, timeout_graceful_shutdown=2)
    shown = f"[{host}]" if ":" in host else host
    announce(f"viewer of {Path(db).resolve()} on http://{shown}:{sock.getsockname()[1]}/ (Ctrl-C stops it)")
    try:
        uvicorn.Server(config).run(sockets=[sock])
    except KeyboardInterrupt:
        # uvicorn shuts down gracefully on Ctrl-C, then raises it again; stopping is what the user asked for.
        pass
    finally:
        sock.close()
