"""Building a SignatureBatch (framework/batch.py): which pods and plugins can be batched.

- A pod has a signature only without inter-pod (anti-)affinity, topology spread constraints,
  host ports, resource claims or a preset node: those make a node's verdict depend on other
  nodes or on the pods placed so far. Names and uids are left out; labels stay in (default
  spread constraints select by them, so whether PodTopologySpread SKIPs may differ), and so do
  annotations (GPU requests are read from them).
- Every Filter and Score plugin left enabled after PreFilter/PreScore must be one whose result
  for a node depends only on the pod's signature and that node (`NODE_LOCAL_PLUGINS`,
  framework/signature.py); any other plugin (spread, affinity, out-of-tree ones) turns
  batching off.
"""

from __future__ import annotations

from batchsched.framework.batch import SignatureBatch
from batchsched.framework.batch_totals import BY_VALUE_NORMALIZERS, Scorer
from batchsched.framework.cycle_state import CycleState, MissingState
from batchsched.framework.runner import ProfileRunner, Within
from batchsched.framework.signature import NODE_LOCAL_PLUGINS
from batchsched.framework.status import Code, Status, is_ok
from batchsched.model.pod import PodView
from batchsched.snapshot import Snapshot


def build_batch(
    runner: ProfileRunner, pod: PodView, snapshot: Snapshot, within: Within | None
) -> SignatureBatch | None:
    """A batch for `pod`'s signature, or None when a plugin is not node-local or PreFilter,
    PreScore or a first evaluation says something the runner must report itself."""
    profile = runner.profile
    state = CycleState()
    try:
        # A hint leaves out no candidate: a node without room now may have room for a later
        # pod of the signature. Its nodes are the only ones the first evaluation filters.
        hints: list[frozenset[str]] = []
        candidates, _ = runner.run_pre_filter(state, pod, snapshot, within, hints)
        if isinstance(candidates, Status) or not candidates:
            return None
        enabled = [p for p in profile.filter if p.name not in state.skip_filter]
        if any(p.name not in NODE_LOCAL_PLUGINS for p in enabled):
            return None
        for plugin in profile.pre_score:
            status = plugin.pre_score(state, pod, snapshot, candidates)
            if status.code is Code.SKIP:
                state.skip_score.add(plugin.name)
            elif not is_ok(status):
                return None
        scoring = [s for s in profile.score if s.plugin.name not in state.skip_score]
        if any(s.plugin.name not in NODE_LOCAL_PLUGINS for s in scoring):
            return None
        scorers = [
            Scorer(
                s.plugin.score,
                s.weight,
                s.normalizer,
                s.plugin.name in BY_VALUE_NORMALIZERS,
                s.plugin.name,
            )
            for s in scoring
        ]
        batch = SignatureBatch(
            runner, snapshot, state, candidates, [p.filter for p in enabled], scorers, hints
        )
        return batch if batch.refresh(pod) else None
    except MissingState:
        return None
