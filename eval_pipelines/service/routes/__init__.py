"""The evaluation service's routes, one router per resource; `create_app` mounts each bare and under `/v1`."""

from eval_pipelines.service.routes import auth, models, rollouts, runs, scenarios, taskgen

ROUTERS = (auth.router, runs.router, rollouts.router, scenarios.router, models.router, taskgen.router)

__all__ = ["ROUTERS"]
