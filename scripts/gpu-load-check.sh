#!/bin/bash
# What GpuLoadAware would see on this GPU node, idle and then busy: the agent's NVML load
# reading (`batchsched-agent --print`), parsed back by the scheduler, next to nvidia-smi.
# Run it on a machine with an NVIDIA GPU and the project installed (or on PYTHONPATH):
#   OUT=/tmp/load bash scripts/gpu-load-check.sh
# Busy means a PyTorch matmul loop holding 40 GB when torch with CUDA is there, else 40 GiB
# allocated through libcuda (memory only). Leaves each reading as JSON under $OUT.
set -u
OUT=${OUT:-$(mktemp -d)}
mkdir -p "$OUT"
python3 --version
nvidia-smi --query-gpu=name,driver_version,utilization.gpu,memory.used,memory.total --format=csv
if [ -n "${WHEELS:-}" ]; then  # a machine without an index: install from carried wheels
  python3 -m pip install -q --no-index --find-links "$WHEELS" --target /tmp/deps \
    kubernetes-asyncio pydantic prometheus-client cryptography nvidia-ml-py PyYAML 2>&1 | tail -2
  export PYTHONPATH=$PWD:/tmp/deps
fi
read_load() {  # $1: label
  python3 -m gpu.agent_cli --node-name dev --print > "$OUT/$1.json" 2> "$OUT/$1.err"
  echo "agent --print rc=$? ($1)"
  python3 - "$OUT/$1.json" "$1" <<'PY'
import json, sys
from gpu.nrt import parse_nrt
from batchsched.plugins.gpu_load_aware import GpuLoadAware
obj = json.load(open(sys.argv[1]))
m = parse_nrt(obj)
print(sys.argv[2], "annotation:", obj["metadata"]["annotations"].get("batchsched.io/gpu-load"))
print(sys.argv[2], "parsed:", m.load)
p = GpuLoadAware()
if m.load:
    load = p.node_load(m.load, 1)
    print(sys.argv[2], "node_load", round(load, 1), "score", p.score_of(load))
PY
  nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader
}
read_load idle
python3 -m gpu.probe 2>&1 | head -20
if python3 -c "import torch; assert torch.cuda.is_available()" 2>/dev/null; then
  python3 - <<'PY' &
import time, torch
a = torch.randn(8192, 8192, device="cuda"); b = torch.randn(8192, 8192, device="cuda")
hold = torch.empty(int(40e9) // 4, device="cuda")  # ~40 GB held
end = time.time() + 25
while time.time() < end:
    c = a @ b
torch.cuda.synchronize()
PY
  LOADPID=$!
  for i in 1 2 3 4 5 6 7 8 9 10; do
    nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader | grep -qv '^0 %' && break
    sleep 1  # device-side only: waiting for the load generator to warm up
  done
  sleep 3
  read_load busy
  wait $LOADPID
else
  echo "no torch with CUDA here: holding 40 GB through libcuda (memory only, no compute)"
  python3 - "$OUT/held" <<'PY' &
import ctypes, os, sys, time
cu = ctypes.CDLL("libcuda.so.1")
assert cu.cuInit(0) == 0
dev = ctypes.c_int(); assert cu.cuDeviceGet(ctypes.byref(dev), 0) == 0
ctx = ctypes.c_void_p(); assert cu.cuCtxCreate_v2(ctypes.byref(ctx), 0, dev) == 0
ptr = ctypes.c_uint64(); rc = cu.cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t(40 * 2**30))
print("cuMemAlloc 40 GiB rc", rc, flush=True)
open(sys.argv[1], "w").write("held")
time.sleep(20)
PY
  HOLDPID=$!
  for i in $(seq 1 30); do [ -e "$OUT/held" ] && break; sleep 0.5; done
  read_load held
  wait $HOLDPID
  python3 -c "import sys; print(sys.path)" | head -1
  pip list 2>/dev/null | grep -i -E "torch|cupy|jax|numba|cuda" | head
fi
