#!/usr/bin/env bash
# The census: N fresh-clone runs of the README's test command, one after another.
#   bash scripts/census.sh N [REPO]      (REPO: the clone's source, default this checkout)
# Each run: `git clone REPO`, then exactly the README's command, timed from before the venv
# is made (install included):
#   python3 -m venv .venv && .venv/bin/pip install -q -e '.[test]' && .venv/bin/python -m pytest -q
# (plus --durations=5, which changes nothing else). Prints one table row per run: wall s
# (install included), passed/failed/skipped, pytest's own seconds, the five slowest tests,
# and the load average at the start. Each run's log is kept in $CENSUS_DIR (default
# /tmp/llmtop-census); the clones are removed. Exit status: 0 when every run was green.
set -uo pipefail
n="${1:?usage: census.sh N [REPO]}"
repo="${2:-$(cd "$(dirname "$0")/.." && pwd)}"
dir="${CENSUS_DIR:-/tmp/llmtop-census}"
mkdir -p "$dir"
commit="$(git -C "$repo" rev-parse --short HEAD)"  # every run tests this commit
echo "census of $repo at $commit: $n fresh-clone runs; logs in $dir"
echo "| run | wall s | passed/failed/skipped | pytest s | load at start | five slowest |"
echo "|---|---|---|---|---|---|"
bad=0
for i in $(seq 1 "$n"); do
  clone="$(mktemp -d /tmp/llmtop-census-clone.XXXXXX)"
  log="$dir/run-$i.log"
  load="$(cut -d' ' -f1-3 /proc/loadavg)"
  git clone -q "$repo" "$clone/llmtop" && git -C "$clone/llmtop" checkout -q "$commit"
  start=$(date +%s.%N)
  (cd "$clone/llmtop" && python3 -m venv .venv && .venv/bin/pip install -q -e '.[test]' \
    && .venv/bin/python -m pytest -q --durations=5) >"$log" 2>&1
  rc=$?
  wall=$(python3 -c "import time; print(round(time.time() - $start))")
  summary="$(grep -E '^(=+ )?[0-9]+ (passed|failed)' "$log" | tail -1 | sed 's/=//g')"
  count() { echo "$summary" | grep -oE "[0-9]+ $1" | grep -oE '^[0-9]+' || echo 0; }
  pyt="$(echo "$summary" | grep -oE 'in [0-9.]+s' | grep -oE '[0-9.]+' || echo '?')"
  slow="$(grep -A6 'slowest 5 durations' "$log" | grep -E '^[0-9.]+s ' \
    | awk '{printf "%s %s; ", $1, $3}')"
  [ "$rc" = 0 ] || bad=$((bad + 1))
  echo "| $i | $wall | $(count passed)/$(count failed)/$(count skipped) | $pyt | $load | ${slow%; } |"
  rm -rf "$clone"
done
echo "$bad of $n runs failed"
[ "$bad" = 0 ]
