#!/usr/bin/env bash
# Serve the tiny model with the real vLLM (CPU) on a free loopback port.
# Usage: serve.sh STATE_DIR [extra vllm flags...]
# Writes STATE_DIR/url and STATE_DIR/pid; the server log goes to STATE_DIR/server.log.
# Stop it with: kill "$(cat STATE_DIR/pid)". LLMTOP_VLLM_START_S: how long to wait (240 s).
set -euo pipefail
state="$1"; shift
venv="${LLMTOP_VLLM_VENV:-$HOME/.cache/llmtop/vllm-venv}"
model="${LLMTOP_VLLM_MODEL:-$HOME/.cache/llmtop/tiny-llama}"
mkdir -p "$state"
port=$("$venv/bin/python" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
export HF_HUB_OFFLINE=1 VLLM_CPU_KVCACHE_SPACE=1 VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1 \
       VLLM_HOST_IP=127.0.0.1 TRANSFORMERS_OFFLINE=1
"$venv/bin/python" -m vllm.entrypoints.openai.api_server \
  --model "$model" --served-model-name tiny-llama --host 127.0.0.1 --port "$port" \
  --max-model-len 1024 --dtype float32 --enable-prefix-caching --enforce-eager "$@" \
  >"$state/server.log" 2>&1 &
pid=$!
echo "$pid" >"$state/pid"
url="http://127.0.0.1:$port"
start_s="${LLMTOP_VLLM_START_S:-240}"  # a loaded box can need more (the routers' test: 600)
for _ in $(seq 1 "$start_s"); do
  if curl -fsS "$url/health" >/dev/null 2>&1; then echo "$url" >"$state/url"; echo "$url"; exit 0; fi
  if ! kill -0 "$pid" 2>/dev/null; then echo "vLLM exited; see $state/server.log" >&2; tail -20 "$state/server.log" >&2; exit 1; fi
  sleep 1
done
echo "vLLM did not become healthy in $start_s s; see $state/server.log" >&2
kill "$pid" 2>/dev/null || true
exit 1
