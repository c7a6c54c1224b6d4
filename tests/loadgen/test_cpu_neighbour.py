"""The probe beside a process that burns a CPU: its stalls are reported, the step is
client-bound, and pinning the generator away from the burner (``--cpu-pin``) removes them.

Linux only (CPU affinity). The burner runs under ``SCHED_FIFO`` on CPU 0, so the kernel's
real-time throttling (``sched_rt_runtime_us``, 95 % by default) leaves ordinary tasks on that
CPU about 50 ms a second: the starvation does not depend on how busy the box already is, nor
on nice levels (which autogroup confines to a session, and the probe's worker has its own).
It needs the right to set a real-time policy (root, or CAP_SYS_NICE) and a bounded RT share;
the burner also stops itself after 60 s. Marked ``hostile``: beside other tests (the README's
command runs 4 workers) it starved their rate tests too, so it runs alone (``pytest -n 0 -m
hostile``, as ``.ci/run`` does).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from .mock_server import start_mock

pytestmark = [
    pytest.mark.slow,
    pytest.mark.hostile,  # starves CPU 0 for every process on it: never beside other tests
    pytest.mark.skipif(not hasattr(os, "sched_setaffinity") or (os.cpu_count() or 1) < 2,
                       reason="needs Linux CPU affinity and 2 CPUs"),
]

BURN = """import os, sys, time
os.sched_setaffinity(0, {0})
try:
    os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))
except (OSError, AttributeError) as exc:
    print("no-rt", exc, flush=True)
    sys.exit(3)
print("burning", flush=True)
end = time.monotonic() + 60
while time.monotonic() < end:
    pass
"""


def _rt_bounded() -> bool:
    """True when real-time tasks are throttled (they cannot take a CPU for good)."""
    try:
        with open("/proc/sys/kernel/sched_rt_runtime_us", encoding="ascii") as f:
            return int(f.read().strip()) >= 0
    except (OSError, ValueError):
        return False


def _probe(url: str, tmp_path, *flags: str) -> dict:
    out = tmp_path / "probe.json"
    done = subprocess.run(
        [sys.executable, "-m", "llmtop", "probe", url, "--concurrency", "32", "--duration", "6",
         "--output-tokens", "64", "--prompt-tokens", "32", "--json", str(out), "--yes",
         *flags], capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    return json.loads(out.read_text())


def test_a_cpu_burner_beside_the_generator_is_seen_and_pinning_away_helps(tmp_path):
    if not _rt_bounded():
        pytest.skip("real-time tasks are not throttled here (sched_rt_runtime_us = -1)")
    with start_mock(ttft=0.05, itl=0.01, cpu=1) as m:
        burner = subprocess.Popen([sys.executable, "-c", BURN], stdout=subprocess.PIPE,
                                  text=True)
        try:
            first = burner.stdout.readline().strip() if burner.stdout else ""
            if not first.startswith("burning"):
                pytest.skip(f"cannot run a real-time burner here: {first}")
            starved = _probe(m.url, tmp_path, "--cpu-pin", "0")  # the burner's CPU
            apart = _probe(m.url, tmp_path, "--cpu-pin", "1")
        finally:
            burner.kill()
            burner.wait()
    s, a = starved["steps"][0], apart["steps"][0]
    print(f"\nburner's CPU: {s['stalls']}, {s['client_bound_reasons']}\napart: {a['stalls']}")
    assert starved["client"]["protection"]["cpu_pin"] == [0]
    assert s["stalls"]["count"] >= 1, s["stalls"]
    assert s["client_bound"], s
    assert any("generator paused" in r or "event-loop lag" in r
               for r in s["client_bound_reasons"]), s["client_bound_reasons"]
    assert starved["capacity"]["holds_rps"] is None  # a client-bound step is no capacity
    assert a["stalls"]["total_s"] < s["stalls"]["total_s"], (a["stalls"], s["stalls"])
