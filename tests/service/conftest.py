from tests.service.eval_service_fixtures import client, data_dir, eval_service, generator, scripted

__all__ = ["client", "data_dir", "eval_service", "generator", "scripted"]
