#!/usr/bin/env bash
# Fetch Debian's real Prometheus (+ promtool) and VictoriaMetrics binaries into a cache folder
# for fleet mode's integration tests, `llmtop demo fleet` and benchmarks/fleet.py.
#
#   bash scripts/fleet_servers.sh            # -> .cache/fleet-bin/{prometheus,promtool,victoria-metrics}
#   LLMTOP_FLEET_BIN_DIR=/opt/fb bash scripts/fleet_servers.sh
#
# The packages are downloaded with `apt-get download` and unpacked with `dpkg -x`: nothing is
# installed system-wide and no system service is started, with or without root. When apt's
# package lists are missing it runs `apt-get update` (as root) or an update into a private
# state folder (without root). Prints the folder on stdout, one `NAME PATH` line per binary
# on stderr. Idempotent: does nothing when the binaries are already there.
set -euo pipefail
cd "$(dirname "$0")/.."
dest="${LLMTOP_FLEET_BIN_DIR:-$PWD/.cache/fleet-bin}"
bins=(prometheus promtool victoria-metrics)

have_all() {
  for b in "${bins[@]}"; do [ -x "$dest/$b" ] || return 1; done
}

if have_all; then
  echo "$dest"
  exit 0
fi
if ! command -v apt-get >/dev/null || ! command -v dpkg >/dev/null; then
  echo "fleet_servers: needs apt-get and dpkg (Debian/Ubuntu); install Prometheus and" \
       "VictoriaMetrics by hand and set LLMTOP_PROMETHEUS_BIN / LLMTOP_VICTORIA_BIN" >&2
  exit 1
fi

mkdir -p "$dest"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
chmod 755 "$work"  # apt's sandbox user (_apt) writes the .deb files here
apt_opts=(-q -o APT::Sandbox::User="$(id -un)")

download() {
  (cd "$work" && apt-get "${apt_opts[@]}" "$@" download prometheus victoria-metrics) >&2
}

if ! download 2>/dev/null; then
  if [ "$(id -u)" = 0 ]; then
    echo "fleet_servers: apt-get update" >&2
    apt-get -q update >&2
    download
  else
    # No root: an apt update into private state and cache folders.
    state="$work/apt"
    mkdir -p "$state/lists/partial" "$state/cache/archives/partial"
    priv=(-o Dir::State::Lists="$state/lists" -o Dir::Cache="$state/cache"
          -o Debug::NoLocking=1)
    echo "fleet_servers: apt-get update (private state in $state)" >&2
    apt-get "${apt_opts[@]}" "${priv[@]}" update >&2
    download "${priv[@]}"
  fi
fi

for deb in "$work"/*.deb; do
  dpkg -x "$deb" "$work/root"
done
for b in "${bins[@]}"; do
  install -m 755 "$work/root/usr/bin/$b" "$dest/$b"
  echo "$b $dest/$b" >&2
done
"$dest/prometheus" --version 2>&1 | head -1 >&2
echo "$dest"
