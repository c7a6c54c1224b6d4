#!/usr/bin/env bash
# Serve the tiny GGUF model with the real llama-server (built by setup.sh) on a free loopback
# port, with --metrics.
# Usage: serve.sh STATE_DIR [extra llama-server flags, e.g. --parallel 1]  (default: 2 slots, 2048 tokens each;
# 16 HTTP threads: the default, slots + 4, makes /metrics wait behind queued requests)
# Writes STATE_DIR/url and STATE_DIR/pid; the server log goes to STATE_DIR/server.log.
# Stop it with: kill "$(cat STATE_DIR/pid)"
set -euo pipefail
state="$1"; shift
ver="${LLMTOP_LLAMACPP_VERSION:-11434.0.0}"
dir="${LLMTOP_LLAMACPP_DIR:-$HOME/.cache/llmtop/llama-server-$ver}"
bin="$dir/bin/llama-server"
model="$dir/tiny-llama.gguf"
[ -x "$bin" ] && [ -f "$model" ] || { echo "no llama-server/model in $dir: run scripts/real_llamacpp/setup.sh" >&2; exit 1; }
mkdir -p "$state"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
# 2 slots unless the flags say how many (llama-server warns when --parallel comes twice)
slots=(--parallel 2)
for a in "$@"; do case "$a" in --parallel|-np) slots=() ;; esac; done
"$bin" -m "$model" --alias tiny-llama --host 127.0.0.1 --port "$port" --metrics \
  "${slots[@]}" --ctx-size 4096 --threads 2 --threads-http 16 --no-webui "$@" >"$state/server.log" 2>&1 &
pid=$!
echo "$pid" >"$state/pid"
url="http://127.0.0.1:$port"
for _ in $(seq 1 120); do
  if curl -fsS "$url/health" >/dev/null 2>&1; then echo "$url" >"$state/url"; echo "$url"; exit 0; fi
  if ! kill -0 "$pid" 2>/dev/null; then echo "llama-server exited; see $state/server.log" >&2; tail -20 "$state/server.log" >&2; exit 1; fi
  sleep 0.5
done
echo "llama-server was not healthy in 60 s; see $state/server.log" >&2
kill "$pid" 2>/dev/null || true
exit 1
