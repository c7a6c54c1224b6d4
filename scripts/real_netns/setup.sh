#!/usr/bin/env bash
# Docker's port publisher, docker-proxy, for tests/real_engine/test_netns.py: Debian's docker.io
# package downloaded and unpacked (apt-get download + dpkg -x) into ~/.cache/llmtop/docker-proxy,
# never installed and never run as a service. Idempotent: a second run only checks the binary.
# Prints the binary's path.
set -euo pipefail
dest="${LLMTOP_DOCKER_PROXY_DIR:-$HOME/.cache/llmtop/docker-proxy}"
bin="$dest/usr/sbin/docker-proxy"
if [ -f "$dest/.llmtop-ready" ] && [ -x "$bin" ]; then echo "$bin"; exit 0; fi
mkdir -p "$dest"
work="$(mktemp -d)"; trap 'rm -rf "$work"' EXIT
cd "$work"
if ! apt-get download docker.io >/dev/null 2>&1; then
  sudo_=""; [ "$(id -u)" = 0 ] || sudo_="sudo -n"
  $sudo_ apt-get update -qq >/dev/null
  apt-get download docker.io >/dev/null
fi
dpkg -x docker.io_*.deb unpacked
install -D -m 0755 unpacked/usr/sbin/docker-proxy "$bin"
dpkg-deb -f docker.io_*.deb Version >"$dest/VERSION"
touch "$dest/.llmtop-ready"
echo "$bin"
