"""Run the local evaluation service with uvicorn: `eval-pipelines serve eval-service --host --port`.

Also runnable as `python -m eval_pipelines.service.serve --host 127.0.0.1 --port 8800 --data-dir data`.
Keys come from `EVAL_SERVICE_API_KEYS` or `EVAL_SERVICE_KEYS_FILE` (see service.auth).
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from types import FrameType

import uvicorn

from eval_pipelines.inputs.paths import data_dir
from eval_pipelines.lib.confine import make_undumpable
from eval_pipelines.lib.redact import install_log_redaction
from eval_pipelines.service.api import EvaluationService, create_app, service_of
from eval_pipelines.service.auth import KeyConfigError
from eval_pipelines.service.settings import ServiceSettings

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8800


class DrainingServer(uvicorn.Server):
    """Starts draining (503 + Retry-After on new work) the moment a shutdown signal arrives, while uvicorn
    finishes the requests in flight, rather than only once the lifespan shutdown runs."""

    def __init__(self, config: uvicorn.Config, service: EvaluationService) -> None:
        super().__init__(config)
        self.service = service

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        self.service.begin_drain()
        super().handle_exit(sig, frame)


def run_eval_service(
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    data_dir: Path = Path("data"),
    scenarios_dir: Path | None = None,
    *,
    log_level: str = "info",
) -> None:
    """Serve until interrupted. Raises KeyConfigError when no API keys are configured."""
    install_log_redaction()
    settings = ServiceSettings.from_environment(Path(data_dir), Path(scenarios_dir) if scenarios_dir else None)
    app = create_app(settings)
    config = uvicorn.Config(app, host=host, port=port, log_level=log_level, lifespan="on", timeout_keep_alive=30)
    DrainingServer(config, service_of(app)).run()


def main(argv: Sequence[str] | None = None) -> int:
    # This process holds keys: nothing a model or verifier runs may read its memory or environment.
    make_undumpable()
    parser = argparse.ArgumentParser(prog="eval-service", description="the local evaluation service (spec 000)")
    parser.add_argument("--host", default=DEFAULT_HOST)
    parser.add_argument("--port", type=int, default=DEFAULT_PORT)
    parser.add_argument("--data-dir", default=str(data_dir()), help="store and artifacts go under <data-dir>/service/")
    parser.add_argument("--scenarios-dir", default=None)
    parser.add_argument("--log-level", default="info")
    args = parser.parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    install_log_redaction()
    try:
        run_eval_service(args.host, args.port, Path(args.data_dir), args.scenarios_dir, log_level=args.log_level)
    except KeyConfigError as exc:
        print(f"eval-service: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
