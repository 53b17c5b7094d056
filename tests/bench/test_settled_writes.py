"""The bench's API write counts are read once they stop moving (harness_phase.settled_writes):
Events trail bindings, and a count taken at the last binding leaves some out."""

from __future__ import annotations

import pytest
from kubernetes_asyncio.client import ApiClient

from batchsched.bench import harness_phase


def reads(*counts: int) -> list[dict[str, int]]:
    return [{"POST events": n} for n in counts]


@pytest.mark.parametrize(
    ("counts", "expected"),
    [
        pytest.param((10, 10), 10, id="already quiet"),
        pytest.param((7, 9, 10, 10, 12), 10, id="trailing Events counted once they stop"),
    ],
)
async def test_the_count_is_the_first_that_two_reads_agree_on(
    monkeypatch: pytest.MonkeyPatch, counts: tuple[int, ...], expected: int
) -> None:
    answers = iter(reads(*counts))

    async def api_writes(api: ApiClient) -> dict[str, int]:
        return next(answers)

    monkeypatch.setattr(harness_phase, "api_writes", api_writes)
    settled = await harness_phase.settled_writes(ApiClient(), quiet=0.0, limit=60.0)
    assert settled == {"POST events": expected}


async def test_a_count_that_never_settles_is_read_until_the_limit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    counter = iter(range(1_000_000))

    async def api_writes(api: ApiClient) -> dict[str, int]:
        return {"PUT leases": next(counter)}

    monkeypatch.setattr(harness_phase, "api_writes", api_writes)
    settled = await harness_phase.settled_writes(ApiClient(), quiet=0.001, limit=0.05)
    assert settled["PUT leases"] > 0
