"""Helpers for the exporter tests: an ``llmtop export`` child process on loopback."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from llmtop.demo.fleet import find_binary, free_port  # noqa: F401 - re-exported for tests

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class ExporterProc:
    proc: subprocess.Popen[str]
    url: str
    """``http://127.0.0.1:PORT/metrics``."""
    log: list[str]

    @property
    def hostport(self) -> str:
        return self.url.split("//", 1)[1].split("/", 1)[0]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)


def start_exporter(args: list[str], tmp: Path, *, cmd: str = "export") -> ExporterProc:
    """``llmtop export ARGS --listen 127.0.0.1:0`` (no user config); waits for its URL."""
    env = {**os.environ, "XDG_CONFIG_HOME": str(tmp), "PYTHONPATH": str(ROOT)}
    env.pop("LLMTOP_CONFIG", None)
    proc = subprocess.Popen([sys.executable, "-m", "llmtop", cmd, *args,
                             "--listen", "127.0.0.1:0"], stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            env=env, start_new_session=True)
    log: list[str] = []
    deadline = time.monotonic() + 30
    assert proc.stderr is not None
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            if proc.poll() is not None:
                raise AssertionError(f"exporter exited: {''.join(log)}")
            continue
        log.append(line)
        if "serving http://" in line or "serving https://" in line:
            url = line.split("serving ", 1)[1].split()[0]
            # keep reading what it says, so that a full pipe never blocks it
            threading.Thread(target=lambda: log.extend(proc.stderr or ()), daemon=True).start()
            return ExporterProc(proc, url, log)
    proc.kill()
    raise AssertionError(f"exporter did not start: {''.join(log)}")


@pytest.fixture
def exporter_factory(tmp_path: Path) -> Iterator[object]:
    started: list[ExporterProc] = []

    def make(args: list[str], cmd: str = "export") -> ExporterProc:
        e = start_exporter(args, tmp_path, cmd=cmd)
        started.append(e)
        return e

    yield make
    for e in started:
        e.stop()


def need_binary(name: str) -> str:
    path = find_binary(name)
    if not path:
        msg = f"no {name} binary (bash scripts/fleet_servers.sh fetches it)"
        if os.environ.get("LLMTOP_FLEET_REQUIRE_SERVERS") == "1":
            pytest.fail(msg)
        pytest.skip(msg)
    return path


def self_signed(tmp_path: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 (with the IP in subjectAltName, as Go's TLS
    in Prometheus requires) and its key, made by the ``openssl`` command (skips without)."""
    import shutil

    if not shutil.which("openssl"):
        pytest.skip("openssl not installed")
    crt, key = tmp_path / "server.crt", tmp_path / "server.key"
    r = subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
         "-keyout", str(key), "-out", str(crt)], capture_output=True, check=False)
    if r.returncode != 0:
        pytest.skip(f"openssl could not make a certificate: {r.stderr[-200:]!r}")
    return crt, key


@pytest.fixture
def cert(tmp_path: Path) -> tuple[Path, Path]:
    """``self_signed``'s certificate and key."""
    return self_signed(tmp_path)
