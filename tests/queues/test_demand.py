"""What pods and gangs ask of quota (milli-GPUs, per-model flavor keys) and what nodes offer."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from batchsched.model.resources import Resources
from queues.demand import PRODUCT_LABEL, _resources, capacity_of, gang_demand, gpus, pod_demand
from queues.model import GPU, flavor_key
from tests.builders import PodBuilder, make_node, make_pod

H100 = "NVIDIA-H100-80GB-HBM3"
A100 = "NVIDIA-A100-SXM4-80GB"
GI = 2**30


@pytest.mark.parametrize(
    ("pod", "product", "expected"),
    [
        pytest.param(
            make_pod().cpu("2").memory("4Gi"),
            None,
            {"cpu": 2000, "memory": 4 * GI},
            id="a cpu pod counts millicores and bytes and no GPU",
        ),
        pytest.param(
            make_pod().cpu("8").gpus(2),
            None,
            {"cpu": 8000, GPU: 2000},
            id="whole GPUs count 1000 milli-GPU each",
        ),
        pytest.param(
            make_pod().gpus(2),
            H100,
            {GPU: 2000, flavor_key(H100): 2000},
            id="a placed pod also counts against its node's GPU model",
        ),
        pytest.param(
            make_pod().gpus(1),
            "",
            {GPU: 1000},
            id="a node without a GPU model label adds no flavor key",
        ),
        pytest.param(
            make_pod().cpu("1").annotation("batchsched.io/gpu-milli", "460"),
            A100,
            {"cpu": 1000, GPU: 460, flavor_key(A100): 460},
            id="a share of one GPU counts its milli-GPUs",
        ),
        pytest.param(
            make_pod().gpus(1).annotation("batchsched.io/gpu-milli", "460"),
            None,
            {GPU: 1000},
            id="a share next to whole GPUs is a bad request and counts the whole GPUs",
        ),
        pytest.param(
            make_pod().annotation("batchsched.io/gpu-milli", "lots"),
            None,
            {},
            id="a bad share without whole GPUs counts no GPU",
        ),
        pytest.param(
            make_pod().req("example.com/fpga", 2).req("ephemeral-storage", "1Gi"),
            None,
            {"example.com/fpga": 2, "ephemeral-storage": GI},
            id="other resources count in their own units",
        ),
        pytest.param(make_pod(), None, {}, id="a pod asking nothing demands nothing"),
    ],
)
def test_pod_demand(pod: PodBuilder, product: str | None, expected: dict[str, int]) -> None:
    assert pod_demand(pod.view(), product) == expected


def test_a_gang_sums_its_members_each_on_its_own_node_s_model() -> None:
    a = make_pod("a").cpu("8").gpus(4).view()
    b = make_pod("b").cpu("8").gpus(4).view()
    c = make_pod("c").cpu("1").view()
    demand = gang_demand([a, b, c], {a.uid: H100, b.uid: A100})
    assert demand == {
        "cpu": 17_000,
        GPU: 8000,
        flavor_key(H100): 4000,
        flavor_key(A100): 4000,
    }
    assert gpus(demand) == 8.0


def test_an_unplaced_gang_has_no_flavor_keys() -> None:
    members = [make_pod(f"m{i}").gpus(8).view() for i in range(3)]
    assert gang_demand(members) == {GPU: 24_000}


def test_capacity_counts_gpus_overall_and_per_model_from_the_product_label() -> None:
    nodes = [
        make_node("h1").gpus(8).label(PRODUCT_LABEL, H100).view(),
        make_node("h2").gpus(8).label(PRODUCT_LABEL, H100).view(),
        make_node("a1").gpus(4).label(PRODUCT_LABEL, A100).view(),
        make_node("unlabelled").gpus(2).view(),
        make_node("cpu-only").label(PRODUCT_LABEL, H100).view(),
    ]
    capacity = capacity_of((n.allocatable, n.labels) for n in nodes)
    assert capacity[GPU] == 22_000
    assert capacity[flavor_key(H100)] == 16_000
    assert capacity[flavor_key(A100)] == 4000
    assert capacity["cpu"] == 5 * 4000
    assert capacity["memory"] == 5 * 32 * GI
    assert "pods" not in capacity


amounts = st.integers(0, 2**40)


@given(
    amounts,
    amounts,
    amounts,
    amounts,
    st.dictionaries(
        st.sampled_from(["nvidia.com/gpu", "b.io/x", "a.io/y", "hugepages-2Mi"]), amounts
    ),
)
def test_a_pod_s_resources_count_each_non_zero_amount_but_pods_in_the_names_order(
    cpu: int, memory: int, storage: int, pods: int, scalar: dict[str, int]
) -> None:
    requests = Resources(cpu, memory, storage, pods, scalar)
    # What it was before issue #17 made it read the fields directly.
    expected = {name: requests.get(name) for name in requests.names() if name != "pods"}
    got = _resources(requests)
    assert got == expected
    assert list(got) == list(expected)
