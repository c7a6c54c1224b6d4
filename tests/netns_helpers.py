"""A network namespace made by a test, with a listener process inside (root only).

``engine_in_namespace(argv_tail)`` makes a namespace with ``ip netns add``, joins it to the
host by a veth pair (a ``/30`` in ``10.250.0.0/16`` picked by the test process's pid), starts a
Python process inside that listens on 0.0.0.0:8000 and [::1]:8001 with ``argv_tail`` on its
command line, and removes all of it afterwards. ``skip_reason()`` says why it cannot run here.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

__all__ = ["Namespace", "engine_in_namespace", "skip_reason"]

LISTENER = """
import socket, sys
s4 = socket.socket(); s4.bind(("0.0.0.0", 8000)); s4.listen()
s6 = socket.socket(socket.AF_INET6)
s6.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
s6.bind(("::1", 8001)); s6.listen()
print("ready", flush=True)
sys.stdin.read()
"""


@dataclass(frozen=True)
class Namespace:
    """The namespace made: its name, its address, and the listener's pid."""

    name: str
    addr: str
    pid: int


def skip_reason() -> str | None:
    """Why a namespace cannot be made here (None: it can)."""
    if not sys.platform.startswith("linux"):
        return "network namespaces are Linux only"
    if os.geteuid() != 0:
        return "making a network namespace needs root"
    if shutil.which("ip") is None:
        return "no `ip` command (iproute2)"
    return None


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=10)


@contextlib.contextmanager
def engine_in_namespace(argv_tail: Sequence[str]) -> Iterator[Namespace]:
    """A namespace holding a listener whose command line ends with ``argv_tail``."""
    tag = os.getpid() % 100000
    name, host_if, ns_if = f"llmtop-t{tag}", f"llt{tag}a", f"llt{tag}b"
    block = (tag % 16000) * 4  # one /30 per test process
    net, first = f"10.250.{block // 256}", block % 256
    proc: subprocess.Popen[str] | None = None
    try:
        try:
            _ip("netns", "add", name)
            _ip("link", "add", host_if, "type", "veth", "peer", "name", ns_if, "netns", name)
            _ip("addr", "add", f"{net}.{first + 1}/30", "dev", host_if)
            _ip("link", "set", host_if, "up")
            _ip("-n", name, "addr", "add", f"{net}.{first + 2}/30", "dev", ns_if)
            _ip("-n", name, "link", "set", ns_if, "up")
            _ip("-n", name, "link", "set", "lo", "up")
        except (subprocess.CalledProcessError, OSError) as exc:
            import pytest

            why = getattr(exc, "stderr", b"") or b""
            pytest.skip(f"cannot make a network namespace here: {exc} {why.decode().strip()}")
        proc = subprocess.Popen(["ip", "netns", "exec", name, sys.executable, "-c", LISTENER,
                                 *argv_tail], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                text=True)
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        yield Namespace(name, f"{net}.{first + 2}", proc.pid)
    finally:
        if proc is not None:
            proc.kill()
            proc.wait(timeout=10)
        with contextlib.suppress(subprocess.CalledProcessError, OSError):
            _ip("link", "del", host_if)
        with contextlib.suppress(subprocess.CalledProcessError, OSError):
            _ip("netns", "del", name)
