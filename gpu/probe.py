"""What the node agent's NVML reader sees on this machine, in words an operator can check
against `nvidia-smi topo -m`: `python3 -m gpu.probe [--fake dgx-h100]`.

GPUs (index, model, memory, bus id, NUMA node, health), the link between every pair, and the
GPU set the scheduler would pick for a k-GPU pod on an idle node. It needs only nvidia-ml-py:
nothing is published, no API server is contacted.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from gpu.nvml import NodeReading, NvmlError, NvmlLibrary, NvmlReader
from gpu.placement import best_gpu_set
from gpu.topology import MILLI_PER_GPU, LinkLevel

_SHORT = {
    LinkLevel.SELF: "X",
    LinkLevel.NVSWITCH: "NVS",
    LinkLevel.NVLINK: "NV",
    LinkLevel.PIX: "PIX",
    LinkLevel.PXB: "PXB",
    LinkLevel.PHB: "PHB",
    LinkLevel.SYS: "SYS",
}


def describe(reading: NodeReading, sizes: Sequence[int]) -> str:
    topology = reading.topology
    lines = [f"driver {reading.driver}; {len(topology.gpus)} GPU(s) of {topology.model!r}"]
    health = {h.index: h for h in reading.health}
    for gpu in topology.gpus:
        state = "healthy" if gpu.healthy else "UNHEALTHY: " + "; ".join(health[gpu.index].reasons)
        lines.append(
            f"  GPU{gpu.index} {gpu.model} {gpu.memory_mib} MiB bus {gpu.pci_bus_id} "
            f"NUMA {gpu.numa_node} uuid {gpu.uuid} mig {len(gpu.mig)} {state}"
        )
    count = len(topology.gpus)
    header = "       " + "".join(f"GPU{j:<4}" for j in range(count))
    lines.append(header)
    for i in range(count):
        cells = []
        for j in range(count):
            link = topology.links[i][j]
            short = _SHORT[link.level]
            lanes = str(link.nvlinks) if link.level == LinkLevel.NVLINK else ""
            cells.append(f"{short}{lanes}")
        lines.append(f"  GPU{i:<3}" + "".join(f"{c:<7}" for c in cells))
    islands, numa = list(topology.islands), list(topology.numa_groups)
    lines.append(f"  NVLink islands {islands}; NUMA groups {numa}")
    free = [MILLI_PER_GPU if g.healthy else 0 for g in topology.gpus]
    for k in sizes:
        choice = best_gpu_set(topology, free, k)
        if choice is None:
            lines.append(f"  best set for {k} GPU(s): none (fewer healthy GPUs)")
        else:
            lines.append(
                f"  best set for {k} GPU(s): {list(choice.indices)} worst link "
                f"{choice.level.name}, {choice.numa_nodes} NUMA node(s), "
                f"{choice.bandwidth_gbps} GB/s NVLink"
            )
    return "\n".join(lines)


def library(fake: str | None) -> NvmlLibrary:
    if fake is not None:
        from gpu.fake_nvml import FAKE_MACHINES, FakeNvml

        return FakeNvml(FAKE_MACHINES[fake])
    import pynvml  # the real library: nvidia-ml-py

    lib: NvmlLibrary = pynvml
    return lib


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m gpu.probe", description=__doc__)
    parser.add_argument("--fake", help="read a reference machine instead (e.g. dgx-h100)")
    parser.add_argument("--k", type=int, action="append", help="GPU set sizes (default 1,2,4,8)")
    args = parser.parse_args(argv)
    reader = NvmlReader(library(args.fake))
    try:
        reader.open()
    except NvmlError as err:
        print(f"gpu.probe: NVML: {err}", file=sys.stderr)
        return 1
    try:
        reading = reader.read()
    except NvmlError as err:
        print(f"gpu.probe: NVML: {err}", file=sys.stderr)
        return 1
    finally:
        reader.close()
    print(describe(reading, args.k or [1, 2, 4, 8]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
