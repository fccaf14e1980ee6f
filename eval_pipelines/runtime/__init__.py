"""The local runtime the evaluation service executes on: the built-in tool servers (one host process) and the
simulated-model endpoint, started once per process."""
