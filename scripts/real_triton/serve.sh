#!/usr/bin/env bash
# Serve a Python-backend model with a known service time (model/: 50 ms per dynamic batch of
# up to 4; a negative INPUT0 makes the batch fail) with the real tritonserver bundled in the
# nvidia-pytriton wheel, on free loopback ports (HTTP and metrics; gRPC off).
# Usage: serve.sh STATE_DIR [extra tritonserver flags, e.g. --metrics-config summary_latencies=true]
# Writes STATE_DIR/url (inference), STATE_DIR/metrics_url and STATE_DIR/pid; the log goes to
# STATE_DIR/server.log. Stop it with: kill "$(cat STATE_DIR/pid)"
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
state="$1"; shift
venv="${LLMTOP_TRITON_VENV:-$HOME/.cache/llmtop/triton-venv-0.7.0}"
py="$venv/bin/python"
[ -f "$venv/.llmtop-ready" ] || { echo "no Triton venv at $venv: run scripts/real_triton/setup.sh" >&2; exit 1; }
mkdir -p "$state"
state="$(cd "$state" && pwd)"
site="$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
pyver="$("$py" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
libdir="$("$py" -c 'import sysconfig; print(sysconfig.get_config_var("LIBDIR"))')"
tree="$site/pytriton/tritonserver"

# A backend folder with the stub for this interpreter (what PyTriton does, without copying).
rm -rf "$state/backends" "$state/models"
mkdir -p "$state/backends/python" "$state/models/sleepy/1"
ln -s "$tree/backends/python/libtriton_python.so" "$tree/backends/python/triton_python_backend_utils.py" \
  "$state/backends/python/"
ln -s "$tree/python_backend_stubs/$pyver/triton_python_backend_stub" "$state/backends/python/"
cp "$here/model/config.pbtxt" "$state/models/sleepy/"
cp "$here/model/model.py" "$state/models/sleepy/1/"

ports=($("$py" -c '
import socket
socks = [socket.socket() for _ in range(2)]
for s in socks:
    s.bind(("127.0.0.1", 0))
print(*(s.getsockname()[1] for s in socks))'))
http_port="${ports[0]}"; metrics_port="${ports[1]}"

# The stub links libpython without an rpath (else the system's libpython may load); the bare
# binary needs the wheel's bundled libs, and the venv's bin first on PATH (else the stub
# imports another numpy and every inference returns an empty output).
export LD_LIBRARY_PATH="$libdir:$site/nvidia_pytriton.libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PATH="$venv/bin:$PATH"
"$tree/bin/tritonserver" --model-repository "$state/models" --backend-directory "$state/backends" \
  --http-address 127.0.0.1 --http-port "$http_port" --http-thread-count 32 --allow-grpc false \
  --allow-metrics true --metrics-address 127.0.0.1 --metrics-port "$metrics_port" \
  --allow-gpu-metrics false --exit-timeout-secs 5 --log-verbose 0 "$@" >"$state/server.log" 2>&1 &
pid=$!
echo "$pid" >"$state/pid"
url="http://127.0.0.1:$http_port"
for _ in $(seq 1 120); do
  if curl -fsS "$url/v2/health/ready" >/dev/null 2>&1; then
    echo "$url" >"$state/url"
    echo "http://127.0.0.1:$metrics_port/metrics" >"$state/metrics_url"
    echo "$url"
    exit 0
  fi
  if ! kill -0 "$pid" 2>/dev/null; then echo "tritonserver exited; see $state/server.log" >&2; tail -20 "$state/server.log" >&2; exit 1; fi
  sleep 0.5
done
echo "tritonserver was not ready in 60 s; see $state/server.log" >&2
kill "$pid" 2>/dev/null || true
exit 1
