#!/usr/bin/env bash
# Install batchsched with its dev tools and run every check: lint, types, layering, tests (the
# integration tests on the pinned Kubernetes, then again on the next release, see below).
# This is the README's test command; .ci/run calls it. Exits non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"

echo "== install"
"$PYTHON" -m pip install --quiet --disable-pip-version-check -e '.[dev]'

echo "== ruff"
"$PYTHON" -m ruff check .

echo "== mypy --strict"
"$PYTHON" -m mypy --strict

echo "== import-linter (the layers; the core does no I/O)"
lint-imports

echo "== pytest"
"$PYTHON" -m pytest "$@"

# The integration tests once more on the next Kubernetes release, where the upstream Workload
# API (scheduling.k8s.io/v1alpha2) and kube-scheduler's gang scheduling are served. Its
# binaries are built once (about 10 min on 2 cores) and cached like the default version's.
NEXT_K8S_VERSION="${BATCHSCHED_NEXT_K8S_VERSION:-v1.36.3}"
if (($# > 0)); then
  echo "== pytest tests/integration on Kubernetes $NEXT_K8S_VERSION: skipped (pytest arguments given)"
elif [[ "$NEXT_K8S_VERSION" == none ]]; then
  echo "== pytest tests/integration on a second Kubernetes: skipped (BATCHSCHED_NEXT_K8S_VERSION=none)"
else
  echo "== control plane $NEXT_K8S_VERSION (cached after the first build)"
  BATCHSCHED_K8S_VERSION="$NEXT_K8S_VERSION" bash scripts/control-plane.sh install
  echo "== pytest tests/integration on Kubernetes $NEXT_K8S_VERSION"
  BATCHSCHED_K8S_VERSION="$NEXT_K8S_VERSION" "$PYTHON" -m pytest tests/integration
fi
