#!/usr/bin/env bash
# Install batchsched with its dev tools and run every check: lint, types, layering, tests.
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
