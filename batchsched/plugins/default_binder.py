"""DefaultBinder: binds through the Binding subresource via an injected client.

The core only decides; the client that talks to the API server arrives with the live scheduler.
"""

from __future__ import annotations

from typing import ClassVar, Protocol

from batchsched.framework.cycle_state import CycleState
from batchsched.framework.registry import NoArgs
from batchsched.framework.status import OK, Status, error
from batchsched.model.pod import PodView


class BindingClient(Protocol):
    async def bind(self, namespace: str, name: str, uid: str, node_name: str) -> None:
        """POST pods/binding; raises on failure."""
        ...


class NotConnected:
    """The client when no API server is attached (what-if runs): binding is an error."""

    async def bind(self, namespace: str, name: str, uid: str, node_name: str) -> None:
        raise RuntimeError("no API server client attached to DefaultBinder")


class DefaultBinder:
    name: ClassVar[str] = "DefaultBinder"

    def __init__(self, args: NoArgs | None = None, client: BindingClient | None = None) -> None:
        self.client: BindingClient = client or NotConnected()

    async def bind(self, state: CycleState, pod: PodView, node_name: str) -> Status:
        try:
            await self.client.bind(pod.namespace, pod.name, pod.uid, node_name)
        except Exception as err:  # the binder reports, the runtime decides what to retry
            return error(f"binding {pod.key} to {node_name}: {err}")
        return OK
