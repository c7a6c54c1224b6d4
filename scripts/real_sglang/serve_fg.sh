#!/usr/bin/env bash
# Serve the tiny model with the real SGLang (CPU) in the FOREGROUND on a given loopback port:
# the `start` command of a bake-off plan (llmtop starts it, times its cold start, stops it).
# Usage: serve_fg.sh PORT [extra sglang flags...]   e.g. serve_fg.sh 18811 --max-running-requests 4
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
port="$1"; shift
ver="${LLMTOP_SGLANG_VERSION:-0.5.23}"
venv="${LLMTOP_SGLANG_VENV:-$HOME/.cache/llmtop/sglang-venv-$ver}"
model="${LLMTOP_VLLM_MODEL:-$HOME/.cache/llmtop/tiny-llama}"
export PYTHONPATH="$here/shim${PYTHONPATH:+:$PYTHONPATH}" SGLANG_USE_CPU_ENGINE=1 \
       SGLANG_CPU_OMP_THREADS_BIND="${SGLANG_CPU_OMP_THREADS_BIND:-0-1}" HF_HUB_OFFLINE=1 \
       TRANSFORMERS_OFFLINE=1 DO_NOT_TRACK=1
# the default x86 attention backend (intel_amx) needs AMX; torch_native is PyTorch's SDPA
exec "$venv/bin/python" -m sglang.launch_server \
  --model-path "$model" --served-model-name tiny-llama --host 127.0.0.1 --port "$port" \
  --device cpu --attention-backend torch_native --disable-overlap-schedule --dtype float32 \
  --max-total-tokens 8192 --max-running-requests 16 --enable-metrics "$@"
