#!/usr/bin/env bash
# Helm, for the chart tests (tests/integration/test_helm_chart.py): built from the Go module
# proxy with `go install` and cached by version, like the control plane's binaries.
#
#   scripts/helm.sh install    # build helm (about 3 CPU-minutes the first time), then cached
#   scripts/helm.sh path       # print the cached binary's path (exit 1 if not installed)
#
# BATCHSCHED_HELM_VERSION picks the release (default below); BATCHSCHED_CACHE_DIR the cache.
set -euo pipefail

HELM_VERSION="${BATCHSCHED_HELM_VERSION:-v3.22.0}"
CACHE_ROOT="${BATCHSCHED_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/batchsched}"
HELM_DIR="$CACHE_ROOT/helm/$HELM_VERSION"
HELM="$HELM_DIR/bin/helm"

log() { printf '[helm] %s\n' "$*" >&2; }
die() { printf '[helm] ERROR: %s\n' "$*" >&2; exit 1; }

find_go() {
  local go="${GO:-}"
  [[ -n "$go" ]] || go="$(command -v go || true)"
  [[ -n "$go" ]] || go=/usr/local/go/bin/go
  [[ -x "$go" ]] || die "Go toolchain not found (install Go >= 1.24 or set GO=/path/to/go)"
  printf '%s\n' "$go"
}

cmd_install() {
  mkdir -p "$HELM_DIR"
  if command -v flock >/dev/null; then
    # Two test runs starting at once build it once.
    exec 7>"$HELM_DIR/.install.lock"
    flock 7
  fi
  if [[ -x "$HELM" ]] && "$HELM" version --short >/dev/null 2>&1; then
    log "cached ($HELM, $("$HELM" version --short))"
    return 0
  fi
  local go gobin="$HELM_DIR/gobin" buildlog="$HELM_DIR/build.log"
  go="$(find_go)"
  rm -rf "$gobin"
  mkdir -p "$gobin"
  log "go install helm.sh/helm/v3/cmd/helm@$HELM_VERSION with $("$go" version | awk '{print $3}'); log: $buildlog"
  export CGO_ENABLED=0 GOBIN="$gobin" GOFLAGS=-mod=mod GOTOOLCHAIN="${GOTOOLCHAIN:-local}" GOWORK=off
  # Stamped in as Helm's Makefile does: the release (else `helm version` says v3.x-dev) and the
  # Kubernetes version `helm template` and `helm lint` assume, one minor above the client-go
  # in the release's go.mod (else v1.20, and a chart's kubeVersion >= 1.30 fails to render).
  local gomod client_go major minor
  # -json reports a failure in its "Error" field, on stdout.
  "$go" mod download -json "helm.sh/helm/v3@$HELM_VERSION" >"$buildlog" 2>&1 || true
  gomod="$(sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p' "$buildlog")"
  [[ -f "$gomod" ]] || die "go mod download helm.sh/helm/v3@$HELM_VERSION failed: $(grep -v '^[{}]' "$buildlog" | tail -n 3)"
  client_go="$(awk '$1 == "k8s.io/client-go" {print $2}' "$gomod")"
  [[ "$client_go" =~ ^v0\.([0-9]+)\. ]] || die "no k8s.io/client-go v0.Y in $gomod"
  major=1 minor="${BASH_REMATCH[1]}"
  local ldflags="-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION"
  local pkg
  for pkg in helm.sh/helm/v3/pkg/chartutil helm.sh/helm/v3/pkg/lint/rules; do
    ldflags+=" -X $pkg.k8sVersionMajor=$major -X $pkg.k8sVersionMinor=$minor"
  done
  if ! "$go" install -trimpath -ldflags "$ldflags" "helm.sh/helm/v3/cmd/helm@$HELM_VERSION" \
    >"$buildlog" 2>&1; then
    tail -n 20 "$buildlog" >&2
    die "go install helm@$HELM_VERSION failed (log: $buildlog)"
  fi
  [[ -x "$gobin/helm" ]] || die "go install left no helm binary in $gobin"
  mkdir -p "$HELM_DIR/bin"
  mv -f "$gobin/helm" "$HELM"
  rm -rf "$gobin"
  log "installed $HELM ($("$HELM" version --short))"
}

cmd_path() {
  [[ -x "$HELM" ]] || die "helm $HELM_VERSION is not installed; run: scripts/helm.sh install"
  printf '%s\n' "$HELM"
}

case "${1:-}" in
  install) cmd_install ;;
  path) cmd_path ;;
  *) sed -n '2,8p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
