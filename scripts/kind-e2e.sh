#!/usr/bin/env bash
# batchsched end to end on a kind cluster, for machines with a Docker engine:
#
#   scripts/kind-e2e.sh            # build, create (or reuse) the cluster, install, run examples
#   scripts/kind-e2e.sh --delete   # ... and delete the cluster at the end, pass or fail
#
# 1. builds the image (Dockerfile) and loads it onto the kind nodes;
# 2. creates the cluster from deploy/kind/cluster.yaml: two workers labelled as GPU nodes,
#    given 8 fake nvidia.com/gpu each (node status capacity, as for any extended resource);
# 3. installs deploy/ (kubectl apply -k) and switches the node agent to fake mode (a DGX H100
#    from the topology model instead of NVML) with deploy/kind/agent-fake.patch.yaml;
# 4. waits for the scheduler's leader, and for the agents' NodeResourceTopology objects;
# 5. submits deploy/examples (a PodGroup + Job gang, a PyTorchJob-style gang) and waits for
#    them to complete, then prints where the pods ran.
#
# Environment: KIND_CLUSTER_NAME (batchsched), KIND_NODE_IMAGE (kindest/node:v1.34.0; 1.30 or
# later: the agent's admission policy needs ValidatingAdmissionPolicy v1), IMAGE
# (batchsched:0.1.0, the name deploy/ uses), WAIT (300s), KIND, KUBECTL, DOCKER (the tools).
# Needs docker, kind (>= 0.20) and kubectl (>= 1.30) on PATH. Not run in CI (no Docker engine).
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CLUSTER="${KIND_CLUSTER_NAME:-batchsched}"
NODE_IMAGE="${KIND_NODE_IMAGE:-kindest/node:v1.34.0}"
IMAGE="${IMAGE:-batchsched:0.1.0}"
WAIT="${WAIT:-300s}"
KIND="${KIND:-kind}"
KUBECTL="${KUBECTL:-kubectl}"
DOCKER="${DOCKER:-docker}"
SYSTEM_NS=batchsched-system
EXAMPLES_NS=ml-research
EXAMPLE_IMAGE=busybox:1.36
FAKE_GPUS=8
DELETE=0

log() { printf '[kind-e2e] %s\n' "$*" >&2; }
die() { printf '[kind-e2e] ERROR: %s\n' "$*" >&2; exit 1; }

usage() { sed -n '2,20p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }

k() { "$KUBECTL" --context "kind-$CLUSTER" "$@"; }

parse_args() {
  local a
  for a in "$@"; do
    case "$a" in
      --delete) DELETE=1 ;;
      -h | --help) usage; exit 0 ;;
      *) usage >&2; die "unknown argument '$a'" ;;
    esac
  done
}

check_tools() {
  local tool
  for tool in "$DOCKER" "$KIND" "$KUBECTL"; do
    command -v "$tool" >/dev/null || die "$tool not found on PATH"
  done
  "$DOCKER" info >/dev/null 2>&1 || die "no Docker engine answers ($DOCKER info failed)"
}

build_image() {
  log "building $IMAGE"
  "$DOCKER" build --tag "$IMAGE" "$REPO_ROOT"
  "$DOCKER" image inspect "$EXAMPLE_IMAGE" >/dev/null 2>&1 || "$DOCKER" pull "$EXAMPLE_IMAGE"
}

create_cluster() {
  if "$KIND" get clusters 2>/dev/null | grep -qx "$CLUSTER"; then
    log "reusing kind cluster $CLUSTER"
  else
    log "creating kind cluster $CLUSTER ($NODE_IMAGE)"
    "$KIND" create cluster --name "$CLUSTER" --image "$NODE_IMAGE" \
      --config "$REPO_ROOT/deploy/kind/cluster.yaml" --wait "$WAIT"
  fi
  log "loading $IMAGE and $EXAMPLE_IMAGE onto the nodes"
  "$KIND" load docker-image --name "$CLUSTER" "$IMAGE" "$EXAMPLE_IMAGE"
}

gpu_nodes() {
  k get nodes --selector nvidia.com/gpu.present=true --output 'jsonpath={.items[*].metadata.name}'
}

fake_gpu_capacity() {
  local node
  for node in $(gpu_nodes); do
    log "node $node: $FAKE_GPUS fake nvidia.com/gpu"
    k patch node "$node" --subresource=status --type=merge \
      --patch "{\"status\":{\"capacity\":{\"nvidia.com/gpu\":\"$FAKE_GPUS\"}}}" >/dev/null
  done
}

install_batchsched() {
  log "installing deploy/"
  k apply --server-side -k "$REPO_ROOT/deploy"
  k wait --for=condition=Established --timeout="$WAIT" -f "$REPO_ROOT/deploy/crds"
  k -n "$SYSTEM_NS" patch daemonset batchsched-agent --type=json \
    --patch-file="$REPO_ROOT/deploy/kind/agent-fake.patch.yaml"
  k -n "$SYSTEM_NS" rollout status deployment/batchsched-scheduler --timeout="$WAIT"
  k -n "$SYSTEM_NS" rollout status daemonset/batchsched-agent --timeout="$WAIT"
}

wait_leader() {
  local holder="" deadline=$((SECONDS + 120))
  while [[ -z "$holder" ]]; do
    ((SECONDS < deadline)) || die "no scheduler replica took the gpu-scheduler Lease"
    holder="$(k -n "$SYSTEM_NS" get lease gpu-scheduler \
      --output 'jsonpath={.spec.holderIdentity}' 2>/dev/null || true)"
    [[ -n "$holder" ]] || sleep 2
  done
  log "scheduler leader: $holder"
}

wait_topology() {
  local node deadline=$((SECONDS + 120))
  for node in $(gpu_nodes); do
    until k get noderesourcetopologies.topology.node.k8s.io "$node" >/dev/null 2>&1; do
      ((SECONDS < deadline)) || die "the agent on $node published no NodeResourceTopology"
      sleep 2
    done
    log "node $node: topology published"
  done
}

run_examples() {
  log "submitting deploy/examples"
  k apply --server-side -f "$REPO_ROOT/deploy/examples/namespace.yaml"
  k apply --server-side -f "$REPO_ROOT/deploy/examples/podgroup-job.yaml" \
    -f "$REPO_ROOT/deploy/examples/pytorchjob-pods.yaml"
  k -n "$EXAMPLES_NS" wait --for=condition=Complete --timeout="$WAIT" job/resnet-train
  k -n "$EXAMPLES_NS" wait --for=jsonpath='{.status.phase}'=Succeeded --timeout="$WAIT" \
    pod/llm-finetune-master-0 pod/llm-finetune-worker-0
  k -n "$EXAMPLES_NS" get podgroups,pods --output wide
  log "scheduled by batchsched:"
  k -n "$EXAMPLES_NS" get events --field-selector reason=Scheduled \
    --output 'custom-columns=POD:.involvedObject.name,BY:.reportingComponent,MESSAGE:.message'
}

diagnose() {
  log "FAILED; what the cluster says:"
  k -n "$SYSTEM_NS" get pods --output wide || true
  k -n "$SYSTEM_NS" logs deployment/batchsched-scheduler --tail=50 || true
  k -n "$SYSTEM_NS" logs daemonset/batchsched-agent --tail=30 || true
  k -n "$EXAMPLES_NS" get podgroups,pods --output wide || true
  k -n "$EXAMPLES_NS" get events --sort-by=.lastTimestamp | tail -n 30 || true
}

finish() {
  local rc=$?
  ((rc == 0)) || diagnose
  if ((DELETE)); then
    "$KIND" delete cluster --name "$CLUSTER" || true
  else
    log "cluster kept: kubectl --context kind-$CLUSTER ...; delete: $KIND delete cluster --name $CLUSTER"
  fi
  exit "$rc"
}

main() {
  parse_args "$@"
  check_tools
  build_image
  trap finish EXIT
  create_cluster
  fake_gpu_capacity
  install_batchsched
  wait_leader
  wait_topology
  run_examples
  log "PASSED"
}

main "$@"
