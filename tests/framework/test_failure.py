"""FitError's aggregation: the reasons kube-scheduler prints for a pod that fits nowhere."""

from __future__ import annotations

from batchsched.framework.failure import FitError
from batchsched.framework.status import Code, Status
from tests.builders import make_pod


def test_each_reason_counts_once_per_node_that_gave_it_and_a_node_with_two_counts_for_both() -> (
    None
):
    statuses = {
        "n1": Status(Code.UNSCHEDULABLE, ("Insufficient cpu",)),
        "n2": Status(Code.UNSCHEDULABLE, ("Insufficient cpu", "Insufficient memory")),
        "n3": Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ("node(s) had untolerated taint",)),
    }
    failure = FitError(make_pod("p").view(), 3, statuses)
    assert failure.histogram() == {
        "Insufficient cpu": 2,
        "Insufficient memory": 1,
        "node(s) had untolerated taint": 1,
    }
    assert failure.message() == (
        "0/3 nodes are available: 1 Insufficient memory, 1 node(s) had untolerated taint, "
        "2 Insufficient cpu."
    )
