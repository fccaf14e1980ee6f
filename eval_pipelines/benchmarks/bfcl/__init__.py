"""BFCL v4 multi-turn: the adapter, its upstream worker script, our verifier and parity."""
