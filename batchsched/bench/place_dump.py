"""`python -m batchsched.bench place-dump --nodes 1500 --pods 60000`: write a dump as
`kubectl get nodes,all -A -o yaml` would print it for a busy GPU cluster, then time
`batchsched place` on it.

Most pods are bound (training workers on GPU nodes, small services on CPU nodes); a few
hundred are pending. Services, Deployments and ReplicaSets are there too, as `get all` lists
them, so the reader's skipping of kinds it does not read is part of what is timed.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import TextIO

from batchsched.configfile.block_yaml import BlockReader

_STAMP = "2026-01-01T00:00:00Z"


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser("place-dump", help="time `batchsched place` on a big dump")
    parser.add_argument("--nodes", type=int, default=1500)
    parser.add_argument("--pods", type=int, default=60000)
    parser.add_argument("--pending", type=int, default=300)
    parser.add_argument("--out", type=Path, default=Path("/tmp/batchsched-dump.yaml"))
    parser.add_argument("--write-only", action="store_true", help="write the dump, no timing")
    parser.add_argument("--json", action="store_true", help="as `kubectl get -o json` prints it")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    with args.out.open("w") as out:
        write_dump(out, args.nodes, args.pods, args.pending)
    if args.json:  # the same objects, through the YAML reader once
        (dump,) = read_yaml(args.out)
        args.out.write_text(json.dumps(dump, indent=4))
    size = args.out.stat().st_size / 1e6
    print(f"wrote {args.out}: {args.nodes} nodes, {args.pods} pods, {size:.1f} MB")
    if args.write_only:
        return 0
    command = [sys.executable, "-m", "batchsched.cli", "place", "--cluster", str(args.out)]
    load = os.getloadavg()[0]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run([*command, "--output", "json"], stdout=subprocess.DEVNULL, check=False)
    seconds = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    # CPU time beside wall time: on a shared machine the wall time is mostly the others'.
    print(
        f"{' '.join(command)}: exit {done.returncode}, {seconds:.1f} s wall, {cpu:.1f} s CPU "
        f"(load average {load:.1f} before)"
    )
    return done.returncode


def read_yaml(path: Path) -> list[object]:
    """The dump's documents, through place's own reader (PyYAML would take a minute)."""
    return list(BlockReader().documents(path.read_text(encoding="utf-8")))


def write_dump(out: TextIO, nodes: int, pods: int, pending: int) -> None:
    """A state a cluster could be in: GPU nodes are the first three quarters, one bound
    Job in eight runs one-GPU pods on them (six or seven of a node's eight GPUs used), the
    others CPU pods on any node. A Job's eight pods share its namespace (owner references never
    cross one). The pending pods ask for 2 GPUs (they fit where two are free) or 4 (none fit)."""
    gpu_nodes = max(1, nodes * 3 // 4)
    out.write("apiVersion: v1\nkind: List\nitems:\n")
    for i in range(nodes):
        out.write(_node(i, gpu=i < gpu_nodes))
    for i in range(pods):
        if i < pods - pending:
            gpus = 1 if i // 8 % 8 == 0 else 0  # one Job in eight, one GPU per pod
            node = (i // 64 * 8 + i % 8) % gpu_nodes if gpus else i % nodes
            out.write(_pod(i, f"node-{node}", gpus))
        else:
            out.write(_pod(i, "", gpus=2 if i // 8 % 2 else 4))
    for i in range(max(1, pods // 100)):
        out.write(_service(i))
        out.write(_deployment(i))
    out.write('metadata:\n  resourceVersion: ""\n')


def _node(i: int, gpu: bool) -> str:
    extra = '      nvidia.com/gpu: "8"\n' if gpu else ""
    product = "      nvidia.com/gpu.product: NVIDIA-H100-80GB-HBM3\n" if gpu else ""
    return f"""- apiVersion: v1
  kind: Node
  metadata:
    creationTimestamp: "{_STAMP}"
    labels:
      kubernetes.io/arch: amd64
      kubernetes.io/hostname: node-{i}
      kubernetes.io/os: linux
      topology.kubernetes.io/zone: zone-{i % 4}
{product}    name: node-{i}
    resourceVersion: "{1000 + i}"
    uid: 00000000-0000-0000-0000-{i:012d}
  spec:
    podCIDR: 10.{i // 256}.{i % 256}.0/24
  status:
    allocatable:
      cpu: "190"
      ephemeral-storage: "1800Gi"
      memory: 2000Gi
{extra}      pods: "250"
    capacity:
      cpu: "192"
      ephemeral-storage: "2Ti"
      memory: 2048Gi
{extra}      pods: "250"
    conditions:
    - lastHeartbeatTime: "{_STAMP}"
      lastTransitionTime: "{_STAMP}"
      message: kubelet is posting ready status
      reason: KubeletReady
      status: "True"
      type: Ready
    nodeInfo:
      architecture: amd64
      containerRuntimeVersion: containerd://1.7.24
      kubeletVersion: v1.34.4
      operatingSystem: linux
"""


def _pod(i: int, node: str, gpus: int) -> str:
    job = f"job-{i // 8}"
    bound = f"    nodeName: {node}\n" if node else ""
    phase = "Running" if node else "Pending"
    gpu_request = f'          nvidia.com/gpu: "{gpus}"\n' if gpus else ""
    toleration = (
        "    tolerations:\n    - effect: NoSchedule\n"
        "      key: nvidia.com/gpu\n      operator: Exists\n"
        if gpus
        else ""
    )
    return f"""- apiVersion: v1
  kind: Pod
  metadata:
    creationTimestamp: "{_STAMP}"
    labels:
      app: train
      job-name: {job}
    name: {job}-{i % 8}
    namespace: team-{i // 8 % 16}
    ownerReferences:
    - apiVersion: batch/v1
      controller: true
      kind: Job
      name: {job}
      uid: 10000000-0000-0000-0000-{i // 8:012d}
    resourceVersion: "{50000 + i}"
    uid: 20000000-0000-0000-0000-{i:012d}
  spec:
    containers:
    - image: registry.example/train:1.4
      name: worker
      resources:
        requests:
          cpu: "4"
          memory: 16Gi
{gpu_request}{bound}    restartPolicy: Never
    schedulerName: {"gpu-scheduler" if gpus else "default-scheduler"}
{toleration}  status:
    phase: {phase}
    qosClass: Burstable
"""


def _service(i: int) -> str:
    return f"""- apiVersion: v1
  kind: Service
  metadata:
    name: svc-{i}
    namespace: team-{i % 16}
  spec:
    clusterIP: 10.96.{i // 256}.{i % 256}
    ports:
    - port: 80
      protocol: TCP
      targetPort: 8080
    selector:
      app: svc-{i}
    type: ClusterIP
"""


def _deployment(i: int) -> str:
    return f"""- apiVersion: apps/v1
  kind: Deployment
  metadata:
    name: web-{i}
    namespace: team-{i % 16}
  spec:
    replicas: 2
    selector:
      matchLabels:
        app: web-{i}
  status:
    replicas: 2
"""
