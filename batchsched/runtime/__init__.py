"""The asyncio runtime: scheduling queue, loops, binding, leader election, HTTP endpoints."""
