"""CostAware (reference plugin, off by default): prefer the nodes whose GPU-hour costs least.

The price is read per node from an annotation, else a label, of the same key (a decimal, in
whatever currency the cluster's price list uses: only the order matters). Spot capacity is
cheaper but can be reclaimed: `spotPenalty` adds that risk to a spot node's price (0.25 prices
it 25 % dearer than its list price; -0.1 favours spot further), so a long training job can
prefer on-demand at a small price gap and still take spot when the gap is wide.

Score is the effective price in milli-units; NormalizeScore maps the cheapest feasible node to
100 and the dearest to 0. A node without a readable price scores 0 (never preferred over a
priced one), which is also what a bad price string gets: a price is cluster data, not a reason
to fail a pod's cycle.
"""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal, InvalidOperation
from typing import ClassVar, Final

from pydantic import Field

from batchsched.framework.cycle_state import CycleState
from batchsched.framework.interfaces import MAX_NODE_SCORE
from batchsched.framework.registry import PluginArgs
from batchsched.model.node import NodeView
from batchsched.model.pod import PodView
from batchsched.snapshot import NodeInfo

UNPRICED: Final = -1


class CostAwareArgs(PluginArgs):
    price_key: str = "batchsched.io/price-per-gpu-hour"
    capacity_type_key: str = "karpenter.sh/capacity-type"
    spot_values: tuple[str, ...] = ("spot",)
    spot_penalty: float = Field(default=0.0, ge=-0.99, le=10.0)


class CostAware:
    name: ClassVar[str] = "CostAware"

    def __init__(self, args: CostAwareArgs | None = None) -> None:
        self.args = args or CostAwareArgs()
        self._spot = frozenset(self.args.spot_values)

    def price(self, node: NodeView) -> float | None:
        """The node's effective price per GPU-hour, spot risk included; None if unpriced."""
        text = node.annotations.get(self.args.price_key) or node.labels.get(self.args.price_key)
        if text is None:
            return None
        try:
            price = float(Decimal(text.strip()))
        except (InvalidOperation, ValueError):
            return None
        if price < 0 or price != price:  # a negative or NaN price is not a price
            return None
        if node.labels.get(self.args.capacity_type_key) in self._spot:
            price *= 1 + self.args.spot_penalty
        return price

    def score(self, state: CycleState, pod: PodView, node: NodeInfo) -> int:
        price = self.price(node.node)
        return UNPRICED if price is None else round(price * 1000)

    def normalize_scores(
        self, state: CycleState, pod: PodView, nodes: Sequence[NodeInfo], scores: list[int]
    ) -> None:
        priced = [s for s in scores if s != UNPRICED]
        if not priced:
            scores[:] = [0] * len(scores)
            return
        low, high = min(priced), max(priced)
        for i, raw in enumerate(scores):
            if raw == UNPRICED:
                scores[i] = 0
            elif high == low:
                scores[i] = MAX_NODE_SCORE
            else:
                scores[i] = MAX_NODE_SCORE * (high - raw) // (high - low)
