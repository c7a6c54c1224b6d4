#!/usr/bin/env bash
# Install the `nvidia-pytriton` wheel (it bundles a real tritonserver, 2.51.0, with its Python
# backend; no GPU, torch or CUDA packages needed) into a cached venv.
# Idempotent: a second run only checks. Prints the venv path.
#   LLMTOP_TRITON_VENV  venv path (default ~/.cache/llmtop/triton-venv-0.7.0)
set -euo pipefail
ver=0.7.0
venv="${LLMTOP_TRITON_VENV:-$HOME/.cache/llmtop/triton-venv-$ver}"
mkdir -p "$(dirname "$venv")"
if [ ! -f "$venv/.llmtop-ready" ]; then
  echo "installing nvidia-pytriton==$ver into $venv (about 370 MB, under a minute)" >&2
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --upgrade pip
  if ! "$venv/bin/pip" install -q "nvidia-pytriton==$ver" >"$venv/pip.log" 2>&1; then
    grep -v "is ignored: it is neither" "$venv/pip.log" | tail -20 >&2
    exit 1
  fi
  touch "$venv/.llmtop-ready"
fi
tritonserver="$(ls "$venv"/lib/python3*/site-packages/pytriton/tritonserver/bin/tritonserver)"
[ -x "$tritonserver" ] || { echo "no tritonserver binary in $venv" >&2; exit 1; }
echo "venv=$venv"
