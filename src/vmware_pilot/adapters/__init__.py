"""Adapters: the parts that reach outside systems on the engine's behalf (the webhook sender)."""
