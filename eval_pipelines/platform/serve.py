"""Run the local assessment platform in the foreground: `eval-pipelines serve platform --port N`.

Also runnable as `python -m eval_pipelines.platform.serve --port 8900 --data-dir data`. Tokens come from
`PLATFORM_TOKENS` / `PLATFORM_TOKENS_FILE` (see platform.auth), judge and generator models from
`PLATFORM_MODELS_FILE` (see platform.models; the defaults are simulated). `--issue-token FILE` appends a new
token's digest to FILE and prints the token once.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

import uvicorn

from eval_pipelines.inputs.paths import data_dir
from eval_pipelines.lib.confine import make_undumpable
from eval_pipelines.lib.redact import install_log_redaction
from eval_pipelines.platform.app import create_platform_app
from eval_pipelines.platform.auth import TOKENS_ENV, TOKENS_FILE_ENV, TokenConfigError, issue_token
from eval_pipelines.platform.config import PlatformSettings
from eval_pipelines.platform.models import ModelConfigError

logger = logging.getLogger(__name__)

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8900


class PlatformConfigError(ValueError):
    """The platform cannot start with this configuration; the message says what to set."""


def load_settings(data_dir: Path, environ: Mapping[str, str] | None = None) -> PlatformSettings:
    """Settings from the environment; raises PlatformConfigError, TokenConfigError or ModelConfigError."""
    settings = PlatformSettings.from_env(data_dir, environ)
    if not len(settings.tokens):
        raise PlatformConfigError(
            f"no access tokens configured: set {TOKENS_ENV}=<token>:<space uuid>[,...] or {TOKENS_FILE_ENV}=<file> "
            "(one grant per line; `--issue-token <file>` appends one)"
        )
    return settings


def run_platform(
    host: str,
    port: int,
    data_dir: Path,
    *,
    settings: PlatformSettings | None = None,
    log_level: str = "info",
) -> None:
    """Serve until interrupted. Settings default to the environment (tokens and the model registry)."""
    resolved = settings or load_settings(data_dir)
    if not logging.getLogger().handlers:
        # A foreground server is an entry point: without this, the platform's own lines would go nowhere.
        logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    install_log_redaction()
    logger.info(
        "assessment platform on http://%s:%d (store %s, %d token(s), models %s)",
        host,
        port,
        resolved.store_path,
        len(resolved.tokens),
        resolved.models.names(),
    )
    # access_log off: access lines are noise here, and the platform logs what it stores.
    uvicorn.run(create_platform_app(resolved), host=host, port=port, log_level=log_level, access_log=False)


def main(argv: Sequence[str] | None = None) -> int:
    # This process holds keys: nothing a model or verifier runs may read its memory or environment.
    make_undumpable()
    parser = argparse.ArgumentParser(prog="platform", description="the local assessment platform (spec 002)")
    parser.add_argument("--host", default=DEFAULT_HOST)
    parser.add_argument("--port", type=int, default=DEFAULT_PORT)
    parser.add_argument("--data-dir", default=str(data_dir()), help="the store goes under <data-dir>/platform/")
    parser.add_argument("--log-level", default="info")
    parser.add_argument("--issue-token", metavar="FILE", help="append a new token to FILE, print it, and exit")
    parser.add_argument("--space-id", help="with --issue-token: the space to grant (default: a new space)")
    args = parser.parse_args(argv)
    try:
        if args.issue_token:
            issued = issue_token(Path(args.issue_token), args.space_id)
            # stdout, on request: this is the one place the token is shown, so the user can store it.
            print(f"PLATFORM_TOKEN={issued.token}\nPLATFORM_SPACE_ID={issued.space_id}")
            return 0
        run_platform(args.host, args.port, Path(args.data_dir), log_level=args.log_level)
    except (PlatformConfigError, TokenConfigError, ModelConfigError, ValueError) as exc:
        print(f"platform: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
