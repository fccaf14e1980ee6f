"""Verifiers of the custom CLI tools test bundle."""
