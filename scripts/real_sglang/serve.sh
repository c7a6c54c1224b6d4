#!/usr/bin/env bash
# Serve the tiny model with the real SGLang (CPU, plain-PyTorch paths) on a free loopback port.
# Usage: serve.sh STATE_DIR [extra sglang flags...]
# Writes STATE_DIR/url and STATE_DIR/pid; the server log goes to STATE_DIR/server.log.
# Defaults --max-total-tokens 8192 --max-running-requests 16 unless given (a later flag wins).
# Stop it with: kill "$(cat STATE_DIR/pid)"
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
state="$1"; shift
mkdir -p "$state"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
# serve_fg.sh execs the server, so $! is the server's own pid
bash "$here/serve_fg.sh" "$port" "$@" >"$state/server.log" 2>&1 &
pid=$!
echo "$pid" >"$state/pid"
url="http://127.0.0.1:$port"
for _ in $(seq 1 300); do
  if curl -fsS "$url/health" >/dev/null 2>&1; then echo "$url" >"$state/url"; echo "$url"; exit 0; fi
  if ! kill -0 "$pid" 2>/dev/null; then echo "SGLang exited; see $state/server.log" >&2; grep -v "is ignored" "$state/server.log" | tail -20 >&2; exit 1; fi
  sleep 1
done
echo "SGLang did not become healthy in 300 s; see $state/server.log" >&2
kill "$pid" 2>/dev/null || true
exit 1
