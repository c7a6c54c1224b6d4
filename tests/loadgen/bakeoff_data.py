"""Bake-off reports for the output tests: the fixture made from two real demo probes
(``scripts/bakeoff_fixture.py``) and a synthetic one whose every number is known."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "bakeoff"
REAL = FIXTURES / "from-two-probes.json"
CORE = FIXTURES / "demo-two-engines.json"
"""Written by the bake-off command itself (branch bakeoff-core); used when present."""
COMMAND = FIXTURES / "from-bakeoff-command.json"
"""The bake-off command's own report, run here against two demo engines (see its
``fixture_note``)."""


def real() -> dict[str, Any]:
    return json.loads(REAL.read_text(encoding="utf-8"))


def _q(v: float | None) -> dict[str, float | None]:
    return {"p50": None if v is None else v / 2, "p90": v, "p95": v, "p99": v,
            "mean": None if v is None else v / 2}


def engine(name: str, tps_per_c: float, ttft: float, knee: int, sla: int,
           levels: tuple[int, ...] = (1, 2, 4, 8, 16)) -> dict[str, Any]:
    """An engine whose output tok/s is ``tps_per_c * min(c, knee)`` and TTFT p95
    ``ttft * c`` seconds; knee and SLA boundary where told."""
    steps = []
    for i, c in enumerate(levels):
        tps = tps_per_c * min(c, knee)
        steps.append({"index": i, "concurrency": c, "rate": None, "requests": 4 * c,
                      "partial": False, "output_tokens_per_s": tps, "requests_per_s": tps / 100,
                      "achieved_concurrency": float(c), "goodput_per_s": tps / 100,
                      "ttft_s": _q(ttft * c), "itl_s": _q(0.01 * (1 + c / 16)),
                      "itl_request_s": _q(0.01), "tpot_s": _q(0.01), "e2e_s": _q(1.0),
                      "errors": {}, "errors_total": 0, "client_bound": False})
    by = {s["concurrency"]: s for s in steps}
    top = steps[-1]
    return {
        "name": name, "url": f"http://127.0.0.1:1/{name}", "engine": "vllm",
        "engine_version": "0.11.0", "error": None, "cold_start_s": 61.5,
        "target": f"http://127.0.0.1:1/{name}", "model": "m", "steps": steps,
        "options": {"sweep": True, "ttft_slo": 0.5},
        "saturation": {"concurrency": knee, "knee_load": knee * 0.9, "step": by[knee]["index"],
                       "output_tokens_per_s": by[knee]["output_tokens_per_s"],
                       "requests_per_s": by[knee]["requests_per_s"]},
        "max_throughput": {"concurrency": top["concurrency"], "step": top["index"],
                           "output_tokens_per_s": top["output_tokens_per_s"],
                           "requests_per_s": top["requests_per_s"]},
        "sla_boundary": {"concurrency": sla, "step": by[sla]["index"], "met": True,
                         "slo": {"ttft": 0.5, "itl": None, "tpot": None},
                         "requests_per_s": by[sla]["requests_per_s"],
                         "output_tokens_per_s": by[sla]["output_tokens_per_s"],
                         "goodput_per_s": by[sla]["requests_per_s"]},
        "stop_reason": "ladder_done",
        "server": {"running_peak": 16, "waiting_peak": 3, "kv_peak": 0.42,
                   "preemptions": 0, "kv_capacity_tokens": 430016,
                   "gpu_mem_peak_bytes": 70 * 2**30, "gpu_util_peak": 0.97},
        "cost_per_mtok_usd": {"sla": 1.25, "max": 0.8}, "short_outputs": 0.0,
        "comparable": True, "settings": {"max_num_seqs": 256, "gpu_memory_utilization": 0.9},
    }


def synthetic(n: int = 2) -> dict[str, Any]:
    """``n`` engines: fast (knee c=8, SLA c=16), slow (both c=4), then copies named e3..."""
    eps = [engine("fast-engine", 100.0, 0.02, knee=8, sla=16),
           engine("slow-engine", 60.0, 0.05, knee=4, sla=4)]
    for i in range(2, n):
        e = copy.deepcopy(eps[i % 2])
        e["name"] = f"e{i + 1}-engine"
        eps.append(e)
    return {"kind": "bakeoff", "endpoints": eps[:n],
            "traffic": {"kind": "synthetic", "seed": 0, "requests_per_step": 64,
                        "hash": "0123abcd"},
            "warnings": ["slow-engine: a warning sentence for the test."]}


def failed(name: str = "trt-engine") -> dict[str, Any]:
    """An engine that never got ready (no steps)."""
    return {"name": name, "url": "http://127.0.0.1:2", "engine": None, "engine_version": None,
            "error": "not ready after 600 s; last log lines: CUDA out of memory",
            "cold_start_s": None, "steps": [], "server": None, "cost_per_mtok_usd": None,
            "short_outputs": None}
