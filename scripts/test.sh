#!/usr/bin/env bash
# Install batchsched with its dev tools and run every check: lint, types, layering, tests (the
# integration tests on the pinned Kubernetes, then again on the next release, see below).
# This is the README's test command; .ci/run calls it. Exits non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"

# Outside a virtual environment, on a Python that forbids pip installs (PEP 668: Debian's and
# Ubuntu's system python3), everything goes into .venv here, made once; inside one, or on a
# Python that allows it (CI's), into that Python as before.
if "$PYTHON" - <<'PY'
import os, sys, sysconfig
outside_venv = sys.prefix == sys.base_prefix
managed = os.path.exists(os.path.join(sysconfig.get_path("stdlib"), "EXTERNALLY-MANAGED"))
sys.exit(0 if outside_venv and managed else 1)
PY
then
  [[ -x .venv/bin/python ]] || "$PYTHON" -m venv .venv
  PYTHON="$PWD/.venv/bin/python"
fi
# lint-imports and the tests' subprocesses run from the same environment as pip installs into.
PATH="$(dirname "$("$PYTHON" -c 'import sys; print(sys.executable)')"):$PATH"
export PATH

echo "== install"
# report: matplotlib, for the tests of `batchsched simulate --report` (an extra for users).
"$PYTHON" -m pip install --quiet --disable-pip-version-check -e '.[dev,report]'

echo "== ruff"
"$PYTHON" -m ruff check .
"$PYTHON" -m ruff format --check .

echo "== mypy --strict"
"$PYTHON" -m mypy --strict

echo "== import-linter (the layers; the core does no I/O)"
lint-imports

echo "== helm (for the chart's tests; cached after the first build)"
bash scripts/helm.sh install

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
