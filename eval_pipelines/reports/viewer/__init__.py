"""`eval-pipelines view`: a web viewer of the catalog, to see every rollout behind a pass rate.

Pages (server-rendered, no script): `/` the sweeps and a model x scenario matrix of pass rates; `/rollouts` the
rollout list, filtered and paged; `/rollouts/<rollout_id>` one rollout (transcript, tool calls, state diffs,
verdicts, judgements, NPC conversations, usage, status events, error); `/compare?task=...&models=a,b` two models on
one task; `/judges` every judge of a sweep graded against the verifiers, with its disagreeing rollouts. Reads the
DuckDB catalog read-only, like every report.

The package imports nothing itself: the CLI, the report and the Dagster assets import `links` for their deep
links without loading the web app.
"""
