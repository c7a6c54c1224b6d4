#!/usr/bin/env bash
# Fetch Debian's real Prometheus (+ promtool) and VictoriaMetrics binaries into a cache folder
# for fleet mode's integration tests, `llmtop demo fleet` and benchmarks/fleet.py.
#
#   bash scripts/fleet_servers.sh            # -> .cache/fleet-bin/{prometheus,promtool,victoria-metrics}
#   LLMTOP_FLEET_BIN_DIR=/opt/fb bash scripts/fleet_servers.sh
#
# The work is llmtop.demo.fleet_bins (what `llmtop demo fleet --yes` runs from an installed
# package): `apt-get download` + `dpkg -x`, nothing installed system-wide, no service started;
# without root, apt's lists go in a private folder. Needs only python3 (standard library).
# Prints the folder on stdout. Idempotent: does nothing when the binaries are already there.
set -euo pipefail
cd "$(dirname "$0")/.."
dest="${LLMTOP_FLEET_BIN_DIR:-$PWD/.cache/fleet-bin}"
PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" python3 -m llmtop.demo.fleet_bins --dest "$dest"
