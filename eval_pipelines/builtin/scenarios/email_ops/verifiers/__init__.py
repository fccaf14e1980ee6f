"""Programmatic verifiers of the email_ops scenario: each module checks the email tool server's state."""
