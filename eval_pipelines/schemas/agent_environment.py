"""Where a custom agent runs when it cannot share this project's interpreter: `agent_environment` of a sweep model
and of `POST /runs` (a local extension, beside `agent`).

SimLab's agents and its cookbook adapters import mcp 1.x and litellm; this project pins mcp 2.x. Naming an
environment runs the agent in a worker process of that interpreter (`agents/remote.py`), talking to the rollout
over pipes; without one the agent is imported in-process as before.
"""

from __future__ import annotations

import re

from pydantic import Field, model_validator

from eval_pipelines.schemas._base import StrictModel

#: Requirements of one agent environment (pip specifiers), and pip flags beside them.
MAX_AGENT_REQUIREMENTS = 64
#: Folders put on the agent's `sys.path`.
MAX_AGENT_PATHS = 16
#: One requirement, flag or path.
MAX_AGENT_ENVIRONMENT_ITEM_CHARS = 1024
#: Tasks (processes and threads) an agent worker and what it starts may hold at once: litellm's and an agent
#: framework's thread pools, not a fork bomb.
AGENT_WORKER_MAX_TASKS = 256
#: An agent worker's address space: litellm and an agent framework fit easily.
AGENT_WORKER_MEMORY_BYTES = 8 << 30
#: An agent worker's CPU time (one worker per rollout): far above any rollout's, below a runaway loop's.
AGENT_WORKER_CPU_SECONDS = 3600
#: The largest file an agent worker may write (in its private temp directory, its HOME).
AGENT_WORKER_FILE_BYTES = 256 << 20
#: One line the agent worker sends (a tool call, a recorded message, the final artifacts).
MAX_AGENT_WORKER_LINE_BYTES = 64 << 20
#: What is kept of an agent worker's stderr for error messages (the end of it).
AGENT_WORKER_STDERR_BYTES = 16 << 10
#: How long an agent worker may take to import its agent and report that it started.
AGENT_WORKER_START_TIMEOUT_SECONDS = 120.0
#: One request body the model proxy accepts from an agent.
MAX_AGENT_PROXY_REQUEST_BYTES = 32 << 20
#: Variables of the agent's environment that only the rollout sets: the model's name, provider, endpoint and key,
#: which the agent gets as SimLab's runner exports them (the endpoint and key are the rollout's proxy's).
RESERVED_AGENT_ENV_PREFIXES = ("SIMLAB_", "OPENAI_", "LITELLM_")
AGENT_ENV_NAME_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]*$"
#: The venv folders of agent environments are named `<prefix><hash of the install>` under the cache's `venvs/`.
AGENT_VENV_PREFIX = "agent-"


class AgentEnvironment(StrictModel):
    """Exactly one of `python` (an interpreter), `venv` (a virtualenv's folder) or `requirements` (installed once
    into a cached venv, with `pip_flags`). `paths` go on the agent's `sys.path`; default: the project directory.
    The agent runs in the project directory, as SimLab runs one in the directory it was started from."""

    python: str | None = Field(
        default=None, min_length=1, max_length=MAX_AGENT_ENVIRONMENT_ITEM_CHARS, description="an interpreter"
    )
    venv: str | None = Field(
        default=None, min_length=1, max_length=MAX_AGENT_ENVIRONMENT_ITEM_CHARS, description="a virtualenv's folder"
    )
    requirements: list[str] | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_AGENT_REQUIREMENTS,
        description="pip requirements installed into a cached venv on first use (the same list: the same venv)",
    )
    pip_flags: list[str] = Field(
        default_factory=list,
        max_length=MAX_AGENT_REQUIREMENTS,
        description="flags for that pip install, e.g. ['--ignore-requires-python']",
    )
    paths: list[str] | None = Field(
        default=None,
        max_length=MAX_AGENT_PATHS,
        description="folders put on the agent's sys.path (a cookbook's src/); relative ones are of the project "
        "directory; default: the project directory",
    )
    env: dict[str, str] = Field(
        default_factory=dict,
        max_length=MAX_AGENT_PATHS,
        description="settings for the agent's environment variables (e.g. SYSTEM_PROMPT_PATH), never secrets: they "
        "are stored with the run; SIMLAB_*, OPENAI_* and LITELLM_* are the rollout's own",
    )

    @model_validator(mode="after")
    def _one_interpreter(self) -> AgentEnvironment:
        chosen = [name for name in ("python", "venv", "requirements") if getattr(self, name) is not None]
        if len(chosen) != 1:
            raise ValueError("name exactly one of python, venv or requirements")
        if self.pip_flags and self.requirements is None:
            raise ValueError("pip_flags apply to requirements only")
        for item in [*(self.requirements or []), *self.pip_flags, *(self.paths or [])]:
            if not item.strip() or len(item) > MAX_AGENT_ENVIRONMENT_ITEM_CHARS:
                raise ValueError(f"an empty or overlong item: {item[:40]!r}")
        for name, value in self.env.items():
            if not re.match(AGENT_ENV_NAME_PATTERN, name) or name.startswith(RESERVED_AGENT_ENV_PREFIXES):
                raise ValueError(f"env: {name!r} is not a variable name the agent's settings may use")
            if len(value) > MAX_AGENT_ENVIRONMENT_ITEM_CHARS:
                raise ValueError(f"env: the value of {name!r} is too long")
        return self
