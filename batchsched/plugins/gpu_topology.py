"""GpuTopology: GPU pods get healthy GPUs of an allowed model, in the best set a node offers,
on the node where GPU fragmentation grows least; pods without GPUs keep off GPU nodes.

- PreFilter reads the pod's GPU request (whole GPUs from `nvidia.com/gpu`, a share from the
  annotation `batchsched.io/gpu-milli`, allowed models from `batchsched.io/gpu-models`) and
  SKIPs pods that ask for no GPU.
- Filter: the node's GPU product is allowed, and it has enough whole free GPUs (in a set of the
  required connectivity, if one is asked for), or one GPU with room for the share.
- Score: the GPU set's quality first, then the FGD fragmentation delta (Weng et al., ATC '23),
  then packing; for pods without GPUs, the delta minus a penalty on GPU nodes. Raw scores are
  rank-normalized so the order survives the 0..100 scale.
- Reserve records the chosen GPUs in the snapshot (undo-logged); they are released when the
  runner forgets the pod.
- The delta includes the price of any place on a scarce node the pod takes (gpu/scarcity.py,
  kept by plugins/gpu_scarcity.py), re-read at each PreScore and after each Reserve.
- PreEnqueue admits every pod and counts each arriving pod once into an online estimate of the
  workload (gpu/workload_estimate.py); the fragmentation target follows that estimate, so the
  score sees the GPU models the arriving pods are restricted to. It starts from the configured
  typical pods (by default the openb mix) as a prior.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Sequence
from typing import ClassVar, Final

from batchsched.framework.cycle_state import CycleState, StateKey
from batchsched.framework.interfaces import MAX_NODE_SCORE, PreFilterResult
from batchsched.framework.status import OK, SKIP, Status, unresolvable, unschedulable
from batchsched.model.pod import PodView
from batchsched.node_info import gpu_host
from batchsched.plugins.gpu_scarcity import Scarcity
from batchsched.plugins.gpu_scoring import Demand, GpuScorer, NodeStates, rank_normalize
from batchsched.plugins.gpu_topology_args import GpuTopologyArgs
from batchsched.snapshot import NodeInfo, Snapshot
from gpu.fragmentation import FragmentationModel
from gpu.placement import best_gpu_set
from gpu.requests import NO_GPU, GpuRequest, InvalidGpuRequest, gpu_request
from gpu.topology import LinkLevel
from gpu.workload import (
    DEFAULT_COVERAGE,
    PodShape,
    Workload,
    typical_workload,
)
from gpu.workload_estimate import (
    Host,
    host_ranks,
    per_supply,
)

WRONG_MODEL: Final = "node(s) didn't have the requested GPU model"
NO_WHOLE_GPUS: Final = "node(s) didn't have enough free whole GPUs"
NO_CONNECTED_SET: Final = "node(s) had no GPU set of the requested connectivity"
NO_SHARE_ROOM: Final = "node(s) had no GPU with enough free share"
# Pods already counted into the estimate (PreEnqueue runs again on every update of a pending
# pod): the most recent uids, enough for any burst of pending pods.
_SEEN_LIMIT: Final = 100_000


PRE_FILTER_KEY: Final[StateKey[GpuRequest]] = StateKey("PreFilterGpuTopology")
PRE_SCORE_KEY: Final[StateKey[tuple[Demand, dict[int, int]]]] = StateKey("PreScoreGpuTopology")


class GpuTopology:
    name: ClassVar[str] = "GpuTopology"

    def __init__(self, args: GpuTopologyArgs | None = None) -> None:
        args = args or GpuTopologyArgs()
        self._args = args
        self.estimate = args.estimate()
        self._seen: OrderedDict[str, None] = OrderedDict()
        # GPU nodes per Host (model, allocatable cpu and memory, healthy GPUs), and the
        # (node count, GPU node count) it was taken at.
        self._supply: dict[Host, int] = {}
        self._factors: dict[PodShape, float] = {}  # per_supply's factor per shape, this supply
        # The snapshot (id, gpu_hosts_version, node and GPU node counts) last counted.
        self._supply_at: tuple[int, int, int, int] = (-1, -1, -1, -1)
        self._ranks: dict[Host, int] = {}  # host_ranks of the supply
        priced = args.scarce_host_share > 0 or args.scarce_whole_nodes
        self._scarcity: Scarcity | None = None
        if self.estimate is not None and args.per_supply and args.per_supply_capacity and priced:
            self._scarcity = Scarcity(args.scarce_host_share, args.scarce_whole_nodes)
        self.scoring_version = 0  # framework/interfaces.py VersionedScoring
        self._states = NodeStates()  # kept across targets: a node's state is not the target's
        self._by_generation = self._states.by_generation  # read inline by score()
        self._use(self.estimate.current if self.estimate is not None else args.workload())
        # Named already, so the runner's with_plugin() hands back these same objects.
        self._wrong_model = unresolvable(WRONG_MODEL).with_plugin(self.name)
        self._no_whole = unschedulable(NO_WHOLE_GPUS).with_plugin(self.name)
        self._no_set = unschedulable(NO_CONNECTED_SET).with_plugin(self.name)
        self._no_share = unschedulable(NO_SHARE_ROOM).with_plugin(self.name)
        # The pod of the cycle in progress and what PreFilter/PreScore made of it: Filter and
        # Score run per node, and an identity check is cheaper than a CycleState read.
        self._filter_pod: PodView | None = None
        self._request = NO_GPU
        self._score_pod: PodView | None = None
        self._table: dict[int, int] = {}
        self._demand: Demand = (0, 0, 0, 0)

    def _use(self, target: Workload) -> None:
        """Score against `target` from now on (a fresh scorer: the cached scores were for the
        old one)."""
        args = self._args
        arriving = target
        if args.per_supply and args.per_supply_capacity and self.estimate is not None:
            arriving = typical_workload(target.shapes, DEFAULT_COVERAGE)
            weighted = per_supply(target, self._supply, True, self._factors)
            target = typical_workload(weighted.shapes, DEFAULT_COVERAGE)
        elif self._supply and args.per_supply:
            target = per_supply(target, self._supply, False, self._factors)
        # Stranded GPUs are measured at the arriving pods' own cpu and memory per GPU: the
        # shares weighted by supply say which shapes each node meets, not what pods need per
        # GPU (their 120-core, 720 GiB shapes would make every 96-core node look short of cpu).
        self.fragmentation = FragmentationModel(target, stranded_at=arriving)
        self._new_scorer()

    def _new_scorer(self) -> None:
        """A scorer for the current target and prices (the cached scores were for the old)."""
        args = self._args
        self._scorer = GpuScorer(
            self.fragmentation,
            args.cpu_pod_gpu_node_penalty,
            args.stranded_weight,
            self._states,
            self._ranks,
            None if self._scarcity is None else self._scarcity.prices,
        )
        self._score_pod = None  # its table belongs to the old scorer
        self.scoring_version += 1  # kept lone-pod batches scored with the old one are dropped

    def _note_supply(self, snapshot: Snapshot) -> None:
        """Recount the GPU nodes per Host when what GPU nodes offer may have changed: nodes
        came or went, a node's allocatable or its GPUs' model, count or health moved."""
        at = (id(snapshot), snapshot.gpu_hosts_version, len(snapshot.nodes), snapshot.gpu_nodes)
        if at == self._supply_at:
            return
        self._supply_at = at
        # Counted by plain tuples, one Host per kind (a Host per node cost 9 ms on 5000 nodes,
        # paid by the first decision after nodes came or went).
        hosts: dict[tuple[str, int, int, int], int] = {}
        for info in snapshot.nodes:
            if (key := gpu_host(info)) is not None:
                hosts[key] = hosts.get(key, 0) + 1
        supply = {Host(*key): count for key, count in hosts.items()}
        if supply != self._supply:
            self._supply = supply
            self._ranks = host_ranks(supply)
            self._factors = {}
            self._use(self.estimate.current if self.estimate is not None else self._args.workload())

    def _note_scarcity(self, snapshot: Snapshot) -> None:
        """Re-price the places left on scarce nodes if they (or the demand to come) moved:
        before each scoring and after each placement, since the pods of a kept batch are
        placed one after another without a PreScore, and one burst of them can take every
        place (the batch sees the new scoring version and scores again)."""
        scarcity, estimate = self._scarcity, self.estimate
        if (
            scarcity is not None
            and estimate is not None
            and scarcity.update(snapshot, self._supply, estimate)
        ):
            self._new_scorer()

    def pre_enqueue(self, pod: PodView) -> Status:
        """Admits every pod; counts a pod seen for the first time into the workload estimate."""
        estimate = self.estimate
        if estimate is None or pod.uid in self._seen:
            return OK
        self._seen[pod.uid] = None
        if len(self._seen) > _SEEN_LIMIT:
            self._seen.popitem(last=False)
        shape = pod_shape(pod)
        if shape is not None and estimate.observe(shape):
            self._use(estimate.current)
        return OK

    def pre_filter(
        self, state: CycleState, pod: PodView, snapshot: Snapshot
    ) -> tuple[PreFilterResult | None, Status]:
        try:
            request = gpu_request(pod)
        except InvalidGpuRequest as err:
            return None, unresolvable(str(err))
        state.write(PRE_FILTER_KEY, request)
        if not request.wants_gpu:
            return None, SKIP
        self._filter_pod, self._request = pod, request
        return None, OK

    def filter(self, state: CycleState, pod: PodView, node: NodeInfo) -> Status:
        request = self._request if pod is self._filter_pod else state.read(PRE_FILTER_KEY)
        ledger = node.gpu
        if ledger is None:
            return self._no_whole if request.count else self._no_share
        models = request.models
        if models is not None and ledger.model not in models:
            return self._wrong_model
        count = request.count
        if not count:
            return OK if ledger.max_free >= request.milli else self._no_share
        if ledger.whole_free < count:
            return self._no_whole
        if request.connectivity is not LinkLevel.SYS:
            choice = best_gpu_set(ledger.topology, ledger.free, count)
            if choice is None or choice.level < request.connectivity:
                return self._no_set
        return OK

    def pre_score(
        self, state: CycleState, pod: PodView, snapshot: Snapshot, nodes: Sequence[NodeInfo]
    ) -> Status:
        request = _request_of(state, pod)
        if not request.wants_gpu and snapshot.gpu_nodes == 0:
            return SKIP  # a cluster without GPUs: every node scores the same
        if not request.wants_gpu and pod.resource_claims:
            return SKIP  # its devices come through DRA claims: DynamicResources scores them
        if self.estimate is not None and self._args.per_supply:
            self._note_supply(snapshot)
            self._note_scarcity(snapshot)
        requests = pod.requests
        demand = (request.count, request.milli, requests.milli_cpu, requests.memory)
        table = self._scorer.table(demand)
        state.write(PRE_SCORE_KEY, (demand, table))
        self._score_pod, self._demand, self._table = pod, demand, table
        return OK

    def score(self, state: CycleState, pod: PodView, node: NodeInfo) -> int:
        if pod is self._score_pod:
            # GpuScorer.score inline: two dict lookups for a node whose state this demand met
            # before (a method call deeper, they cost the live gang path 0.3 ms per 3-pod gang
            # on 5000 nodes, and a 1000-pod gang's first evaluation 1-2 ms).
            number = self._by_generation.get(node.generation)
            if number is None:
                number = self._states.of(node)
            table = self._table
            found = table.get(number)
            if found is None:
                found = table[number] = self._scorer.raw(self._demand, node)
            return found
        demand, table = state.read(PRE_SCORE_KEY)
        return self._scorer.score(demand, table, node)

    def normalize_scores(
        self, state: CycleState, pod: PodView, nodes: Sequence[NodeInfo], scores: list[int]
    ) -> None:
        rank_normalize(scores, MAX_NODE_SCORE)

    def reserve(
        self, state: CycleState, pod: PodView, node_name: str, snapshot: Snapshot
    ) -> Status:
        request = _request_of(state, pod)
        if not request.wants_gpu:
            self._note_scarcity(snapshot)
            return OK
        info = snapshot.get(node_name)
        if info is None or info.gpu is None:
            return self._no_whole if request.count else self._no_share
        held = snapshot.gpu_grants(pod.uid)
        free = list(info.gpu.free)
        for index, milli in held:  # choose as if the pod held nothing yet
            free[index] += milli
        grants = self._scorer.choose(info, request.count, request.milli, free)
        if grants is None:
            return self._no_whole if request.count else self._no_share
        if grants != held:
            snapshot.assign_gpus(pod.uid, grants)
        self._note_scarcity(snapshot)
        return OK

    def unreserve(
        self, state: CycleState, pod: PodView, node_name: str, snapshot: Snapshot
    ) -> None:
        # The runner forgets the pod right after Unreserve, which gives back its GPUs (and a
        # trial's undo log restores any earlier assignment): nothing to release twice here.
        snapshot.forget_gpu_hint(pod.uid)


def nodes_with_room(nodes: Iterable[NodeInfo], request: GpuRequest) -> list[NodeInfo]:
    """The nodes with enough free GPUs of an allowed model for `request`: Filter's checks but
    connectivity, which needs the GPU set (the simulator's SimCandidates narrows by them)."""
    count, milli, models = request.count, request.milli, request.models
    return [
        info
        for info in nodes
        if (ledger := info.gpu) is not None
        and (ledger.whole_free >= count if count else ledger.max_free >= milli)
        and (models is None or ledger.model in models)
    ]


def pod_shape(pod: PodView) -> PodShape | None:
    """The pod as the fragmentation measure sees it; None for a malformed GPU request (its
    PreFilter reports that)."""
    try:
        request = gpu_request(pod)
    except InvalidGpuRequest:
        return None
    requests = pod.requests
    return PodShape(
        requests.milli_cpu, requests.memory, request.count, request.milli, request.models
    )


def _request_of(state: CycleState, pod: PodView) -> GpuRequest:
    found = state.get(PRE_FILTER_KEY)
    if found is not None:
        return found
    try:
        return gpu_request(pod)
    except InvalidGpuRequest:
        return NO_GPU
