#!/usr/bin/env bash
# Stop a router started by serve.sh: SIGTERM, then SIGKILL after 5 s. Usage: stop.sh STATE_DIR
set -uo pipefail
state="$1"
[ -f "$state/pid" ] || exit 0
pid="$(cat "$state/pid")"
kill "$pid" 2>/dev/null || { rm -f "$state/pid"; exit 0; }
for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
kill -9 "$pid" 2>/dev/null || true
rm -f "$state/pid"
