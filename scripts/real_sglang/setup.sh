#!/usr/bin/env bash
# Install SGLang from PyPI into a cached venv (keyed by version) and build CI's tiny model
# if scripts/real_vllm/setup.sh has not. Idempotent: a second run only checks.
# PyPI's sgl_kernel is CUDA-only; serve.sh puts scripts/real_sglang/shim first on PYTHONPATH.
#   LLMTOP_SGLANG_VERSION  sglang version (default 0.5.23)
#   LLMTOP_SGLANG_VENV     venv path (default ~/.cache/llmtop/sglang-venv-VERSION)
#   LLMTOP_VLLM_MODEL      the tiny model dir, shared with vLLM (default ~/.cache/llmtop/tiny-llama)
# With --venv-only, only the venv (CI installs it in the background while other steps run;
# the tiny model is then built once, by scripts/real_vllm/setup.sh).
# Prints venv=... and model=...
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
ver="${LLMTOP_SGLANG_VERSION:-0.5.23}"
venv="${LLMTOP_SGLANG_VENV:-$HOME/.cache/llmtop/sglang-venv-$ver}"
model="${LLMTOP_VLLM_MODEL:-$HOME/.cache/llmtop/tiny-llama}"
mkdir -p "$(dirname "$venv")" "$(dirname "$model")"
if [ ! -f "$venv/.llmtop-ready" ]; then
  echo "installing sglang==$ver into $venv (about 11 GB of wheels, 3-15 min)" >&2
  [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
  if ! "$venv/bin/pip" install -q "sglang==$ver" >"$venv/pip.log" 2>&1; then
    grep -v "is ignored: it is neither" "$venv/pip.log" | tail -20 >&2
    exit 1
  fi
  # CUDA builds of these come along; drop them only if they break transformers' imports
  if ! "$venv/bin/python" -c "from transformers import LlamaConfig" 2>/dev/null; then
    "$venv/bin/pip" uninstall -q -y torchvision torchaudio torchcodec || true
  fi
  touch "$venv/.llmtop-ready"
fi
if [ "${1:-}" = --venv-only ]; then echo "venv=$venv"; exit 0; fi
if [ ! -f "$model/.llmtop-ready" ]; then
  echo "building the tiny model in $model" >&2
  "$venv/bin/python" "$here/../real_vllm/make_model.py" "$model"
  touch "$model/.llmtop-ready"
fi
echo "venv=$venv"
echo "model=$model"
