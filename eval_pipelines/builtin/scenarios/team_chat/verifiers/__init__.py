"""Programmatic verifiers of the team_chat scenario: each module checks the chat and email tool servers' state."""
