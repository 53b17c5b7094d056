"""Kubernetes API adapters (kubernetes-asyncio): the only code that talks to the API server."""
