"""Programmatic verifiers of the office_ops scenario: each module checks the state of one or more tool servers."""
