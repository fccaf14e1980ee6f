"""The platform's routes, one router per resource."""

from eval_pipelines.platform.routes import assessments, datasets, judges, synth

ROUTERS = (datasets.router, judges.router, assessments.router, synth.router)

__all__ = ["ROUTERS"]
