#!/usr/bin/env bash
# Serve the tiny model with the real vLLM (CPU) in the FOREGROUND on a given loopback port:
# the `start` command of a bake-off plan (llmtop starts it, times its cold start, stops it).
# Usage: serve_fg.sh PORT [extra vllm flags...]      e.g. serve_fg.sh 8011 --max-num-seqs 2
set -euo pipefail
port="$1"; shift
venv="${LLMTOP_VLLM_VENV:-$HOME/.cache/llmtop/vllm-venv}"
model="${LLMTOP_VLLM_MODEL:-$HOME/.cache/llmtop/tiny-llama}"
export HF_HUB_OFFLINE=1 VLLM_CPU_KVCACHE_SPACE=1 VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1 \
       VLLM_HOST_IP=127.0.0.1 TRANSFORMERS_OFFLINE=1
exec "$venv/bin/python" -m vllm.entrypoints.openai.api_server \
  --model "$model" --served-model-name tiny-llama --host 127.0.0.1 --port "$port" \
  --max-model-len 1024 --dtype float32 --enable-prefix-caching --enforce-eager "$@"
