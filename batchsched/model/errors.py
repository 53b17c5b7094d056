"""Errors raised while reading Kubernetes objects at the edge of the core."""

from __future__ import annotations


class InvalidObject(ValueError):
    """A Kubernetes object that cannot be read; the message names object, field and value."""

    def __init__(self, kind: str, name: str, field: str, message: str) -> None:
        self.kind = kind
        self.name = name
        self.field = field
        self.message = message
        super().__init__(f"{kind} {name}: {field}: {message}")
