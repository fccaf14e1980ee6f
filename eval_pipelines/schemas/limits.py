"""Size limits on what comes in: request bodies, names, model replies, JSON nesting. One home for all of them,
so a service, a client and a test agree on the same numbers."""

from __future__ import annotations

#: A request body of the evaluation service (spec 000): far above any launch or resume, far below memory.
MAX_SERVICE_REQUEST_BYTES = 4 << 20
#: A request body of the assessment platform other than a dataset upload.
MAX_PLATFORM_REQUEST_BYTES = 4 << 20
#: A dataset upload to the assessment platform (the file and its form fields).
MAX_PLATFORM_UPLOAD_BYTES = 64 << 20
#: A run name, a dataset or judge name: a label, not a document.
MAX_NAME_CHARS = 256
#: A scenario or task id.
MAX_ID_CHARS = 256
#: An id that names a file or folder (a task, an NPC profile, a verifier module, a scenario): with a suffix such
#: as `_calendar.json` it must still fit in a file name's 255 bytes.
MAX_PLAIN_NAME_CHARS = 128
#: One chat-completion reply; a larger one is an endpoint error, read no further.
MAX_MODEL_REPLY_BYTES = 8 << 20
#: Nesting of an uploaded JSON document or a scenario's JSON file (template, task, NPCs, seed); deeper is refused
#: before it can exhaust the parser's stack.
MAX_JSON_DEPTH = 64
#: User messages a simulated user says at most in one conversation when its task does not say (τ²'s default).
DEFAULT_USER_MAX_TURNS = 30
#: The most user messages a task may ask its simulated user for: every one is a model call.
MAX_USER_TURNS = 200
#: len(task_ids) x rollout_count of one run; a larger launch is refused before anything is allocated.
DEFAULT_MAX_ROLLOUTS_PER_RUN = 10_000
#: One rollout's stored artifacts, as decompressed JSON (and as the file itself): far above any real rollout (the
#: benchmark task's is 35 KB) and far below a verifier worker's 2 GiB address space. A larger file, or a zstd frame
#: that claims to expand beyond it, is refused before it is read whole.
MAX_ARTIFACTS_BYTES = 64 << 20
#: A request body of a built-in tool server: a step's arguments, or a workspace created from a seed or from a stored
#: final state (re-verification), which comes out of a rollout's artifacts and so is never larger than they are.
MAX_TOOL_SERVER_REQUEST_BYTES = MAX_ARTIFACTS_BYTES
#: Tasks (processes and their threads: the kernel's pids limit counts both) a verifier worker and everything it starts
#: may hold at once: room for a verifier's subprocesses and a numeric library's thread pool, not for a fork bomb.
VERIFIER_MAX_TASKS = 128
#: Tasks an upstream benchmark worker (`benchmarks/worker.py`) and what it starts may hold at once.
UPSTREAM_WORKER_MAX_TASKS = 64
#: An upstream worker's address space: an upstream package with its data (τ²'s airline db, litellm) fits easily.
UPSTREAM_WORKER_MEMORY_BYTES = 8 << 30
#: An upstream worker's CPU time over its whole life (one per tool host or sweep step): a parity run of thousands
#: of gradings, not a runaway loop for ever.
UPSTREAM_WORKER_CPU_SECONDS = 6 * 3600
#: The largest file an upstream worker may write (in its private temp directory).
UPSTREAM_WORKER_FILE_BYTES = 256 << 20
#: One reply line of an upstream worker: a whole benchmark's tasks and gold at materialisation time.
MAX_UPSTREAM_REPLY_BYTES = 256 << 20
#: What is kept of an upstream worker's stderr for error messages (the end of it).
UPSTREAM_STDERR_BYTES = 16 << 10
#: Calls in flight to one model at once (a sweep model's `max_concurrency`, the platform judges' per run).
MAX_MODEL_CONCURRENCY = 256
#: Workspaces behind the `tool_server_url`s of task listings (one per listing, task and server, seeded on first
#: use) that exist at once; past it the least recently used is deleted. They share the tool host with rollouts,
#: whose own bound is the host's `max_workspaces`.
MAX_CALLER_WORKSPACES = 256
#: Caller workspaces of one listing's URLs; past it the listing's own least recently used one is deleted, never
#: another caller's.
MAX_WORKSPACES_PER_LISTING = 64
#: Most workspaces one `POST /workspaces/batch-delete` may name (finished rollouts' workspaces, deleted together).
MAX_WORKSPACES_PER_BATCH_DELETE = 256
#: A caller workspace unused for this long is deleted.
CALLER_WORKSPACE_IDLE_SECONDS = 3600
#: Task listings whose URLs can still provision a workspace; the oldest are forgotten first.
MAX_LISTING_TOKENS = 4096
#: How long a listing's URLs can provision a new workspace after the listing was made.
LISTING_TOKEN_SECONDS = 24 * 3600
#: A tool call forwarded to a caller workspace (an NPC's reply may wait on a model).
CALLER_STEP_TIMEOUT_SECONDS = 120.0
