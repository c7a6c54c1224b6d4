#!/usr/bin/env bash
# Install the two PyPI routers (Rust wheels that run on CPU) into a cached venv keyed by
# their versions. Idempotent: a second run only checks. Prints venv=...
#   LLMTOP_VLLM_ROUTER_VERSION    vllm-router version   (default 0.1.17)
#   LLMTOP_SGLANG_ROUTER_VERSION  sglang-router version (default 0.3.2)
#   LLMTOP_ROUTERS_VENV           venv path (default ~/.cache/llmtop/routers-venv-V1-V2)
set -euo pipefail
vr="${LLMTOP_VLLM_ROUTER_VERSION:-0.1.17}"
sr="${LLMTOP_SGLANG_ROUTER_VERSION:-0.3.2}"
venv="${LLMTOP_ROUTERS_VENV:-$HOME/.cache/llmtop/routers-venv-$vr-$sr}"
mkdir -p "$(dirname "$venv")"
if [ ! -f "$venv/.llmtop-ready" ]; then
  echo "installing vllm-router==$vr sglang-router==$sr into $venv (about 60 MB, ~20 s)" >&2
  [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
  if ! "$venv/bin/pip" install -q "vllm-router==$vr" "sglang-router==$sr" >"$venv/pip.log" 2>&1; then
    grep -v "is ignored: it is neither" "$venv/pip.log" | tail -20 >&2
    exit 1
  fi
  "$venv/bin/vllm-router" --help >/dev/null
  "$venv/bin/python" -c "import sglang_router"
  touch "$venv/.llmtop-ready"
fi
echo "venv=$venv"
