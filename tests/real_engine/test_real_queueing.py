"""A queueing incident on a REAL Triton and a REAL llama-server: llmtop names it.

Each test starts its own server, drives a healthy phase then the incident, and checks (with
``tests/real_engine/incidents.py``, as the vLLM incidents do) that ``--once --json --window 5``
during the incident, the TUI's Why screen (80x24, headless, live) and a replay of the
recording at the incident name ``queueing`` first with its evidence, while the healthy phase
(live and replayed) warns of nothing. About 2 minutes each. Run with ``-s`` to see llmtop's
numbers next to the server's own for the same window.

* Triton (``scripts/real_triton``): the model ``sleepy`` serves one dynamic batch of up to 4
  in 50 ms on one instance (80 requests/s at most); 64 clients keep ~60 pending and make the
  queue-duration counters ~94 % of the request time.
* llama-server (``scripts/real_llamacpp``) with ``--parallel 1``: one slot, 10 streaming
  clients, 9 requests deferred all the time (it has no queue-time metric: the gauge alone).

Opt-in: ``LLMTOP_REAL_TRITON_INCIDENTS=1`` (after scripts/real_triton/setup.sh) and
``LLMTOP_REAL_LLAMACPP_INCIDENTS=1`` (after scripts/real_llamacpp/setup.sh); set without the
cached server, a test fails rather than skips, and so does an unset one under
``LLMTOP_REQUIRE_REAL_ENGINES=1`` (CI).
"""

from __future__ import annotations

import asyncio
import math
import os
import sys
from pathlib import Path

import httpx
import pytest

from llmtop.parse.exposition import parse
from tests.real_engine.incidents import (
    ROOT,
    Incident,
    Result,
    run_incident,
    served,
    table,
    why_first,
)
from tests.real_engine.servers import REQUIRE

pytestmark = [pytest.mark.real_engine, pytest.mark.slow]
TRITON_VENV = Path(os.environ.get("LLMTOP_TRITON_VENV",
                                  Path.home() / ".cache/llmtop/triton-venv-0.7.0"))
LLAMA_DIR = Path(os.environ.get("LLMTOP_LLAMACPP_DIR", Path.home() / (
    ".cache/llmtop/llama-server-" + os.environ.get("LLMTOP_LLAMACPP_VERSION", "11434.0.0"))))
LOUD = ("warn", "critical")


def _sum(url: str, names: dict[str, str], model: str | None = None) -> dict[str, float]:
    """``names`` (key -> metric) summed over the series (of ``model``), from ``url``."""
    fams = parse(httpx.get(url, timeout=10).text)
    out: dict[str, float] = {}
    for key, name in names.items():
        fam = fams.get(name) or fams.get(name.removesuffix("_total"))
        vals = [s.value for s in (fam.samples if fam is not None else ())
                if s.name in (name, f"{name}_total")
                and (model is None or s.labels.get("model") == model)]
        if vals:
            out[key] = sum(vals)
    return out


def _need(var: str, ready: Path, setup: str) -> None:
    """Skip unless ``var=1`` (fail instead under ``LLMTOP_REQUIRE_REAL_ENGINES=1``, as CI
    runs); with it, fail when ``ready`` (what ``setup`` makes) is missing."""
    if os.environ.get(var) != "1":
        if REQUIRE:
            pytest.fail(f"LLMTOP_REQUIRE_REAL_ENGINES=1 but {var} is not 1")
        pytest.skip(f"set {var}=1 after {setup}")
    if not ready.exists():
        pytest.fail(f"{var}=1 but no {ready}: run {setup}")


def _loud(findings: list) -> list:
    return [f for f in findings
            if (f["severity"] if isinstance(f, dict) else f.severity) in LOUD]


def _check(res: Result) -> dict:
    """The healthy phase is quiet; --once, the TUI and the replay name queueing first."""
    print("\n" + table(res))
    assert not _loud(res.healthy_findings), res.healthy_findings
    assert not _loud(res.replay_healthy["diagnosis"]), res.replay_healthy["diagnosis"]
    once = res.once["diagnosis"][0]
    assert once["rule"] == "queueing" and once["severity"] in LOUD, once
    assert res.app_findings and res.app_findings[0].rule == "queueing", res.app_findings
    sev, rule = why_first(res.why_text)
    assert rule == "queueing" and sev in LOUD, res.why_text
    assert "evidence:" in res.why_text
    rep = res.replay_incident["diagnosis"][0]
    assert rep["rule"] == "queueing" and rep["severity"] in LOUD, rep
    return once


# ---------------------------------------------------------------- Triton

_TRITON = {"pending": "nv_inference_pending_request_count",
           "success": "nv_inference_request_success",
           "queue_us": "nv_inference_queue_duration_us",
           "request_us": "nv_inference_request_duration_us"}


def _triton_values(metrics_url: str) -> dict[str, float]:
    return _sum(metrics_url, _TRITON, "sleepy")


def _triton_window(a: dict[str, float], b: dict[str, float], span_s: float) -> dict:
    n = b["success"] - a["success"]
    return {"finished": n, "req_s": n / span_s,
            "queue_mean_s": (b["queue_us"] - a["queue_us"]) * 1e-6 / n if n else None,
            "request_mean_s": (b["request_us"] - a["request_us"]) * 1e-6 / n if n else None,
            "pending": (a.get("pending"), b.get("pending"))}


def test_triton_queueing_is_named(tmp_path):
    _need("LLMTOP_REAL_TRITON_INCIDENTS", TRITON_VENV / ".llmtop-ready",
          "scripts/real_triton/setup.sh")
    with served("scripts/real_triton/serve.sh", tmp_path / "triton") as st:
        url = (st / "url").read_text().strip()
        metrics = (st / "metrics_url").read_text().strip()

        def load(args, duration):
            return [sys.executable, str(ROOT / "scripts/real_triton/load.py"), url,
                    "--duration", str(duration), *args]

        inc = Incident("queueing", healthy=["--concurrency", "2"],
                       incident=["--concurrency", "64"], healthy_s=40.0,
                       ready=lambda v: v.get("pending", 0) >= 30,
                       holds=lambda v: v.get("pending", 0) >= 1,
                       load=load, values=_triton_values, window=_triton_window)
        res = asyncio.run(run_incident(metrics, inc, tmp_path))
    once = _check(res)
    ev = {e["signal"]: e["value"] for e in once["evidence"]}
    (row,) = [r for r in res.once["engines"] if r["model"] == "sleepy"]
    assert row["waiting"] >= 30
    # the server's pair of scrapes brackets llmtop's window: close, not equal
    assert ev["queue_mean"] == pytest.approx(res.server["queue_mean_s"], rel=0.3)
    assert ev["e2e_mean"] == pytest.approx(res.server["request_mean_s"], rel=0.3)
    assert ev["queue_share_of_e2e"] >= 0.8
    assert math.isclose(ev["queue_share_of_e2e"], ev["queue_mean"] / ev["e2e_mean"])
    assert "of the request time's mean" in once["summary"]
    assert "instance_group" in once["action"]


# ---------------------------------------------------------------- llama-server

_LLAMA = {"processing": "llamacpp:requests_processing",
          "deferred": "llamacpp:requests_deferred",
          "predicted": "llamacpp:tokens_predicted_total"}


def _llama_values(url: str) -> dict[str, float]:
    return _sum(f"{url}/metrics", _LLAMA)


def _llama_window(a: dict[str, float], b: dict[str, float], span_s: float) -> dict:
    return {"gen_tokens_per_s": (b["predicted"] - a["predicted"]) / span_s,
            "processing": (a.get("processing"), b.get("processing")),
            "deferred": (a.get("deferred"), b.get("deferred"))}


def test_llamacpp_queueing_is_named(tmp_path):
    _need("LLMTOP_REAL_LLAMACPP_INCIDENTS", LLAMA_DIR / "bin/llama-server",
          "scripts/real_llamacpp/setup.sh")
    args = ["--output-tokens", "200", "--prompt-tokens", "32"]
    inc = Incident("queueing", healthy=["--concurrency", "1", *args], healthy_s=40.0,
                   incident=["--concurrency", "10", *args],
                   ready=lambda v: v.get("deferred", 0) >= 7,
                   holds=lambda v: v.get("deferred", 0) >= 5,
                   values=_llama_values, window=_llama_window)
    with served("scripts/real_llamacpp/serve.sh", tmp_path / "llama", "--parallel", "1") as st:
        url = (st / "url").read_text().strip()
        res = asyncio.run(run_incident(url, inc, tmp_path))
    once = _check(res)
    (row,) = res.once["engines"]
    assert row["running"] == 1 and row["max_running"] == 1 and row["waiting"] >= 5
    assert min(res.server["deferred"]) - 1 <= row["waiting"] <= max(res.server["deferred"]) + 1
    # tokens are generated all along (llama-server counts a request's tokens when it ends,
    # and the server's pair of scrapes is ~2 s wider than llmtop's window: ±40 % seen)
    assert row["generation_tokens_per_s"] > 0 and res.server["gen_tokens_per_s"] > 0
    assert "(deferred: no free slot)" in once["summary"] and "pinned at 1" in once["summary"]
    assert "--parallel" in once["action"]
