"""The default install has no aiohttp (an optional extra): the demo, the monitor and the probe
work without it, and asking for the aiohttp probe client says how to install it.

The subprocess tests put a fake ``aiohttp`` package first on ``PYTHONPATH`` whose import
raises ``ImportError``; every child (the demo engines, the probe worker) inherits it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from llmtop.demo.launcher import start_demo
from llmtop.loadgen.client import AIOHTTP_INSTALL, ClientUnavailable, StreamClient
from llmtop.loadgen.options import ProbeOptions
from llmtop.loadgen.prepare import ProbeSetupError, prepare

_DEFAULT_MODULES = (
    "llmtop.cli.main", "llmtop.cli.demo", "llmtop.cli.probe",
    "llmtop.demo.server", "llmtop.demo.openai", "llmtop.demo.launcher",
    "llmtop.loadgen.worker", "llmtop.loadgen.runner", "llmtop.loadgen.prepare",
    "llmtop.loadgen.client", "llmtop.sources.prometheus", "llmtop.monitor",
    "llmtop.demo.fleet", "llmtop.cli.fleet", "llmtop.ui.app", "llmtop.cli.record",
)


@pytest.fixture
def blocked_env(tmp_path: Path) -> dict[str, str]:
    pkg = tmp_path / "block" / "aiohttp"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(
        'raise ImportError("aiohttp is blocked by tests/test_no_aiohttp.py")\n')
    root = str(Path(__file__).resolve().parents[1])
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path / "block"), root])
    return env


def _run(args: list[str], env: dict[str, str], timeout: float = 90) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], env=env, capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)


def test_blocker_blocks(blocked_env):
    p = _run(["-c", "import aiohttp"], blocked_env)
    assert p.returncode != 0 and "blocked by tests/test_no_aiohttp.py" in p.stderr


def test_default_modules_do_not_import_aiohttp(blocked_env):
    mods = [m for m in _DEFAULT_MODULES if _importable(m)]
    code = ("import importlib, sys\n"
            f"for m in {mods!r}: importlib.import_module(m)\n"
            "print('aiohttp' in sys.modules)\n")
    p = _run(["-c", code], blocked_env)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "False"


def _importable(name: str) -> bool:
    import importlib.util

    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:
        return False


def test_demo_once_and_probe_without_aiohttp(blocked_env, tmp_path, monkeypatch):
    p = _run(["-m", "llmtop", "--demo", "--once", "--json"], blocked_env)
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    engines = {e["engine"]: e for e in doc["engines"]}
    assert set(engines) == {"vllm", "sglang", "triton"}
    for e in engines.values():
        assert e["state"] == "ok", e
        assert e["kv_cache_usage"] is not None and e["running"] is not None

    monkeypatch.setenv("PYTHONPATH", blocked_env["PYTHONPATH"])  # the demo child too
    demo = start_demo(engines=["vllm"])
    try:
        base = demo.targets[0].base_url
        assert base.startswith("http://127.0.0.1:")
        report = tmp_path / "probe.json"
        p = _run(["-m", "llmtop", "probe", base, "--concurrency", "2", "--duration", "2",
                  "--prompt-tokens", "16", "--output-tokens", "8", "--yes",
                  "--json", str(report)], blocked_env)
        assert p.returncode == 0, p.stderr + p.stdout
        steps = json.loads(report.read_text())["steps"]
        assert sum(s["requests"] for s in steps) > 0, steps
    finally:
        demo.stop()
    assert demo.proc.returncode is not None


def test_aiohttp_client_missing_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "aiohttp", None)  # import aiohttp -> ImportError
    with pytest.raises(ClientUnavailable) as exc:
        StreamClient("http://127.0.0.1:9/v1/completions")
    assert AIOHTTP_INSTALL in str(exc.value)
    assert AIOHTTP_INSTALL == "pip install 'llmtop-tui[aiohttp]'"


async def test_prepare_with_aiohttp_client_missing_is_a_setup_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "aiohttp", None)
    opts = ProbeOptions(url="http://127.0.0.1:9", client="aiohttp", model="m")
    with pytest.raises(ProbeSetupError) as exc:
        await prepare(opts)
    assert "pip install 'llmtop-tui[aiohttp]'" in str(exc.value)
