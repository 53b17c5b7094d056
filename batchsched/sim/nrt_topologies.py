"""NodeResourceTopology objects of a cluster file -> the GPU topology of each node.

The cluster file's reader keeps them raw (it sits in the same layer as gpu.nrt); this is the
step `batchsched place` and `simulate` take after reading, as the live scheduler's cache does
on an NRT event.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from batchsched.cluster_file import ClusterFileError
from batchsched.model.errors import InvalidObject
from gpu.nrt import parse_nrt
from gpu.topology import NodeTopology


def measured_topologies(
    raw: Iterable[tuple[str, Mapping[str, object]]],
) -> dict[str, NodeTopology]:
    """Node name -> its agent-measured topology; an NRT without GPU detail (NFD's
    topology-updater writes those) leaves the node's GPUs derived from its labels."""
    found: dict[str, NodeTopology] = {}
    for origin, obj in raw:
        try:
            measured = parse_nrt(obj)
        except InvalidObject as err:
            raise ClusterFileError(f"{origin}: {err}") from err
        if measured.topology is not None:
            found[measured.node] = measured.topology
    return found
