"""The simulated models, labelled simulated everywhere: agents, the NPC player, the rubric judge, the task
generator and the platform's judge and generator personas, all served on the OpenAI-compatible wire by one local
endpoint (`endpoint.create_sim_app`). They stand in for real models offline and in tests, never in a claim."""
