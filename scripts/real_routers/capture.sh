#!/usr/bin/env bash
# Capture a real router's /metrics in front of two llmtop demo vLLM engines under light load.
# Usage: capture.sh OUT_DIR vllm|sglang rr|pd|down|imbalance
#   rr    round robin over A and B, 2 clients for 5 s
#   imbalance  round robin over A (--max-num-seqs 1) and B (--max-num-seqs 8), 12 clients
#         of 32-token requests for 6 s (metrics taken while the load runs)
#   pd    P/D mode (A prefill, B decode), 2 clients for 5 s
#   down  round robin, load, then B killed, load again, health checks fail (~8 s)
# Writes OUT_DIR/<router>-<mode>.txt whose first line is a "# source:" line.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
out="$1"; kind="$2"; mode="$3"
py="${LLMTOP_PY:-$root/.venv/bin/python}"
venv="$("$here/setup.sh" | sed -n 's/^venv=//p')"
work="$(mktemp -d)"
model=meta-llama/Llama-3.1-8B-Instruct
cleanup() {
  "$here/stop.sh" "$work/router" || true
  for d in a b; do [ -f "$work/$d.pid" ] && kill "$(cat "$work/$d.pid")" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
start_demo() {  # start_demo NAME [demo flags...] -> URL
  local name="$1"; shift
  "$py" -m llmtop demo serve --engines vllm --no-background --ready-file "$work/$name.json" "$@" \
    >"$work/$name.log" 2>&1 &
  echo $! >"$work/$name.pid"
  for _ in $(seq 1 100); do [ -s "$work/$name.json" ] && break; sleep 0.1; done
  "$py" -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["engines"][0]["metrics_url"].rsplit("/",1)[0])' "$work/$name.json"
}
demo_a=(); demo_b=(); m="$mode"
case "$mode" in
  down) m=rr;;
  imbalance) m=rr; demo_a=(--max-num-seqs 1); demo_b=(--max-num-seqs 8);;
esac
a="$(start_demo a "${demo_a[@]}")"; b="$(start_demo b "${demo_b[@]}")"
"$here/serve.sh" "$work/router" "$kind" "$m" "$a" "$b" >/dev/null
url="$(cat "$work/router/url")"; murl="$(cat "$work/router/metrics_url")"
if [ "$mode" = imbalance ]; then
  "$venv/bin/python" "$here/load.py" "$url" --clients 12 --seconds 6 --max-tokens 32 --model "$model" >"$work/load1.json" &
  lpid=$!
  sleep 5; curl -fsS "$murl" >"$work/metrics.txt"; wait "$lpid"
  note="A has --max-num-seqs 1, B --max-num-seqs 8; load: 12 closed-loop clients of 32-token requests for 6 s, metrics taken at 5 s ($(cat "$work/load1.json"))"
else
  "$venv/bin/python" "$here/load.py" "$url" --clients 2 --seconds 5 --model "$model" >"$work/load1.json"
  note="load: 2 closed-loop clients for 5 s ($(cat "$work/load1.json"))"
fi
if [ "$mode" = down ]; then
  kill "$(cat "$work/b.pid")"; rm -f "$work/b.pid"
  sleep 1
  "$venv/bin/python" "$here/load.py" "$url" --clients 2 --seconds 3 --model "$model" >"$work/load2.json"
  sleep 8
  note="$note; then worker B ($b) killed, 2 clients for 3 s ($(cat "$work/load2.json")), 8 s of failing health checks"
fi
ver="$("$venv/bin/pip" show "${kind}-router" | sed -n 's/^Version: //p')"
mkdir -p "$out"
f="$out/$kind-router-$mode.txt"
{
  echo "# source: $kind-router $ver, command: $(cat "$work/router/cmd" | sed "s|$venv/bin/||"), captured $(date -u +%Y-%m-%dT%H:%M:%SZ) on this CPU machine"
  echo "# workers: A=$a B=$b, two llmtop demo vLLM engines (llmtop demo serve --engines vllm --no-background); $note"
  if [ -f "$work/metrics.txt" ]; then cat "$work/metrics.txt"; else curl -fsS "$murl"; fi
} >"$f"
echo "$f"
