"""The fleet traps on a real Prometheus: HA pairs counted once, the production-stack router's
re-exported names ignored, SGLang tensor-parallel copies counted once, idle histograms null.

A Prometheus of this module's own scrapes loopback exporters serving real engine text
(``tests/fixtures/metrics``): one vLLM scraped twice as an HA pair (``prometheus_replica``
``a``/``b``), a vLLM production-stack router (engine names with a ``server`` label), and an
SGLang whose gauges are repeated for ``tp_rank`` 0 and 1.
"""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

import pytest

from llmtop.demo import fleet as demo_fleet_mod
from llmtop.demo.fleet_exporters import TextTarget

from .conftest import refresh_once

FIX = Path(__file__).resolve().parent.parent / "fixtures" / "metrics"
VLLM = (FIX / "vllm-generated-v0.33.0-loggers.txt").read_text()
SGLANG = (FIX / "sglang-generated-v0.5.23-metrics_collector.txt").read_text()


def _router_text() -> str:
    """vLLM names as the production-stack router re-exports them: with a ``server`` label."""
    return re.sub(r'^(vllm:[a-zA-Z0-9_:]+)\{', r'\1{server="http://engine-0.invalid:8000",', VLLM,
                  flags=re.M)


def _tp2_text() -> str:
    """SGLang text with every ``tp_rank="0"`` series repeated as ``tp_rank="1"``."""
    extra = [line.replace('tp_rank="0"', 'tp_rank="1"') for line in SGLANG.splitlines()
             if 'tp_rank="0"' in line and not line.startswith("#")]
    return _interleave(extra)


def _interleave(extra: list[str]) -> str:
    """Put each tp_rank=1 copy right after its family's samples (the text format groups by
    family)."""
    by_family: dict[str, list[str]] = {}
    for line in extra:
        by_family.setdefault(line.split("{", 1)[0], []).append(line)
    out: list[str] = []
    lines = SGLANG.splitlines()
    for i, line in enumerate(lines):
        out.append(line)
        name = line.split("{", 1)[0] if not line.startswith("#") else None
        nxt = lines[i + 1] if i + 1 < len(lines) else "# end"
        nxt_name = nxt.split("{", 1)[0] if not nxt.startswith("#") else None
        if name and nxt_name != name:
            out.extend(by_family.pop(name, []))
    return "\n".join(out) + "\n"


@pytest.fixture(scope="module")
def traps_prom():
    if demo_fleet_mod.find_binary("prometheus") is None:
        pytest.skip("no prometheus binary: " + demo_fleet_mod.INSTALL_HINT)
    vllm, router, sglang = TextTarget(lambda: VLLM), TextTarget(_router_text), \
        TextTarget(_tp2_text)
    cfg = {"global": {"scrape_interval": "1s", "scrape_timeout": "900ms"},
           "scrape_configs": [
               {"job_name": "vllm", "static_configs": [
                   {"targets": [vllm.instance], "labels": {"prometheus_replica": "a"}},
                   {"targets": [vllm.instance], "labels": {"prometheus_replica": "b"}}]},
               {"job_name": "router", "static_configs": [{"targets": [router.instance]}]},
               {"job_name": "sglang", "static_configs": [{"targets": [sglang.instance]}]}]}
    work = tempfile.mkdtemp(prefix="llmtop-traps-")
    srv = demo_fleet_mod.start_prometheus(cfg, work)
    try:
        demo_fleet_mod.wait_scraped(srv.url, [vllm.instance, router.instance, sglang.instance])
        yield srv.url, vllm.instance, router.instance, sglang.instance
    finally:
        srv.stop()
        for t in (vllm, router, sglang):
            t.stop()


def _snapshot(url: str):
    return refresh_once(url, window_s=10.0)


def test_ha_pair_router_and_tp_copies_are_counted_once(traps_prom):
    url, vllm, router, sglang = traps_prom
    mon, snap = _snapshot(url)
    assert mon.error is None, mon.error and mon.error.message
    by_target = {r.target: r for r in snap.engines}
    assert router not in by_target  # the router's series are not an engine
    assert set(by_target) == {vllm, sglang}
    # vLLM fixture: running 3 on one engine; the HA pair must not make it 6
    want_running = sum(float(m.group(1)) for m in re.finditer(
        r"^vllm:num_requests_running\{[^}]*\} (\S+)$", VLLM, re.M))
    assert by_target[vllm].running == want_running
    # SGLang fixture: one copy per dp rank, not one per tp rank
    want_sg = sum(float(m.group(1)) for m in re.finditer(
        r'^sglang:num_running_reqs\{[^}]*tp_rank="0"[^}]*\} (\S+)$', SGLANG, re.M))
    assert by_target[sglang].running == want_sg
    (total,) = mon.totals  # both fixtures serve the same model: one total, each copy once
    assert total.running == want_running + want_sg


def test_idle_histograms_are_null_never_zero(traps_prom):
    url, vllm, _router, _sglang = traps_prom
    _mon, snap = _snapshot(url)
    row = next(r for r in snap.engines if r.target == vllm)
    # static text: every bucket rate is 0 -> no observations in the window
    assert row.ttft_s is not None and row.ttft_s.count == 0
    assert row.ttft_s.p50 is None and row.ttft_s.p99 is None and row.ttft_s.mean is None
    doc = row.to_json()
    assert doc["ttft_s"]["p95"] is None
    assert row.generation_tokens_per_s == 0.0  # a real zero rate stays 0

