#!/usr/bin/env bash
# One bench on an earlier commit, then on this checkout, back to back on the same machine,
# each with its own code (the scheduler processes the e2e benches start included).
#   scripts/bench-before-after.sh REV BENCH [ARGS...]
#   e.g. scripts/bench-before-after.sh 188c075 e2e --nodes 100 --pods 1000
set -euo pipefail
if [ $# -lt 2 ]; then
  echo "usage: $0 REV BENCH [ARGS...]" >&2
  exit 2
fi
rev=$1
shift
root=$(cd "$(dirname "$0")/.." && pwd)
python=${PYTHON:-python3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir "$work/before"
git -C "$root" archive "$rev" | tar -x -C "$work/before"
for side in before after; do
  if [ "$side" = before ]; then
    src="$work/before"
    label="$(git -C "$root" rev-parse --short "$rev")"
  else
    src="$root"
    label="$(git -C "$root" rev-parse --short HEAD)$(git -C "$root" diff --quiet || echo +changes)"
  fi
  echo "===== $side ($label): python -m batchsched.bench $*"
  (cd "$src" && PYTHONPATH="$src" "$python" -m batchsched.bench "$@")
done
