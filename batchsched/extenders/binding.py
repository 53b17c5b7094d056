"""The binder extender: the one `extenders:` entry with a bindVerb binds the pods it is
interested in (ExtenderBindingArgs -> ExtenderBindingResult)."""

from __future__ import annotations

from collections.abc import Sequence

from batchsched.extenders.client import ExtenderClient, ExtenderUnavailable, Observe
from batchsched.extenders.protocol import ProtocolError, binding_args, parse_binding_result
from batchsched.extenders.settings import ExtenderSettings
from batchsched.model.pod import PodView


class ExtenderBinding:
    """Satisfies plugins/extenders.py's BinderExtender."""

    def __init__(self, client: ExtenderClient) -> None:
        self.client = client
        self.ignorable = client.settings.ignorable

    @classmethod
    def of(
        cls, extenders: Sequence[ExtenderSettings], observe: Observe | None = None
    ) -> ExtenderBinding | None:
        binders = [e for e in extenders if e.bind_verb]
        if not binders:
            return None
        if observe is None:
            return cls(ExtenderClient(binders[0]))
        return cls(ExtenderClient(binders[0], observe=observe))

    def interested(self, pod: PodView) -> bool:
        return self.client.settings.is_interested(pod)

    async def bind(self, pod: PodView, node_name: str) -> None:
        answer = await self.client.post(
            self.client.settings.bind_verb, binding_args(pod, node_name)
        )
        try:
            parse_binding_result(answer)
        except ProtocolError as err:
            raise ExtenderUnavailable(f"extender {self.client.name}: {err}") from err

    async def close(self) -> None:
        await self.client.close()
