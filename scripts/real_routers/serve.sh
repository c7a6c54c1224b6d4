#!/usr/bin/env bash
# Start a real router (vllm-router or sglang-router) on free 127.0.0.1 ports in front of
# given OpenAI-compatible workers.
# Usage: serve.sh STATE_DIR vllm|sglang rr|pd URL_A [URL_B ...] [-- extra router flags...]
#   rr: round robin over every URL (--worker-urls ...)
#   pd: P/D disaggregation, URL_A prefill, the rest decode (vllm: --vllm-pd-disaggregation,
#       sglang: --pd-disaggregation)
# Writes STATE_DIR/url (serving URL), STATE_DIR/metrics_url (its /metrics, on its own
# --prometheus-port), STATE_DIR/pid, STATE_DIR/cmd (the command line), STATE_DIR/router.log.
# Stop it with: scripts/real_routers/stop.sh STATE_DIR
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
state="$1"; kind="$2"; mode="$3"; shift 3
urls=(); extra=()
while [ $# -gt 0 ]; do
  if [ "$1" = -- ]; then shift; extra=("$@"); break; fi
  urls+=("$1"); shift
done
[ ${#urls[@]} -ge 1 ] || { echo "serve.sh: no worker URL given" >&2; exit 2; }
venv="$("$here/setup.sh" | sed -n 's/^venv=//p')"
mkdir -p "$state"
read -r port mport < <("$venv/bin/python" -c '
import socket
ss = [socket.socket() for _ in range(2)]
for s in ss: s.bind(("127.0.0.1", 0))
print(*[s.getsockname()[1] for s in ss])')
case "$kind" in
  vllm) cmd=("$venv/bin/vllm-router"); pdflag=--vllm-pd-disaggregation;;
  sglang) cmd=("$venv/bin/python" -m sglang_router.launch_router); pdflag=--pd-disaggregation;;
  *) echo "serve.sh: router must be vllm or sglang, not $kind" >&2; exit 2;;
esac
cmd+=(--host 127.0.0.1 --port "$port" --prometheus-host 127.0.0.1 --prometheus-port "$mport"
      --policy round_robin --health-check-interval-secs 2 --worker-startup-check-interval 1
      --worker-startup-timeout-secs 120)
case "$mode" in
  rr) cmd+=(--worker-urls "${urls[@]}");;
  pd) cmd+=("$pdflag" --prefill "${urls[0]}"); for u in "${urls[@]:1}"; do cmd+=(--decode "$u"); done;;
  *) echo "serve.sh: mode must be rr or pd, not $mode" >&2; exit 2;;
esac
cmd+=("${extra[@]}")
echo "${cmd[*]}" >"$state/cmd"
rm -f "$state/url" "$state/metrics_url"
"${cmd[@]}" >"$state/router.log" 2>&1 &
pid=$!
echo "$pid" >"$state/pid"
url="http://127.0.0.1:$port"; murl="http://127.0.0.1:$mport/metrics"
for _ in $(seq 1 120); do
  if curl -fsS "$murl" >/dev/null 2>&1 && curl -fsS "$url/health" >/dev/null 2>&1; then
    echo "$url" >"$state/url"; echo "$murl" >"$state/metrics_url"
    echo "url=$url"; echo "metrics_url=$murl"; exit 0
  fi
  if ! kill -0 "$pid" 2>/dev/null; then
    echo "$kind router exited; see $state/router.log" >&2; tail -20 "$state/router.log" >&2; exit 1
  fi
  sleep 0.5
done
echo "$kind router did not answer in 60 s; see $state/router.log" >&2
kill "$pid" 2>/dev/null || true
exit 1
