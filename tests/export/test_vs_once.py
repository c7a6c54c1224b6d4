"""The normalized series equal ``llmtop --once --json`` over the same scrapes and window.

Two bodies per engine are taken from running demo engines (vLLM, SGLang, Triton: the formats
the real engines emit) ``WINDOW_S`` apart; ``--once --json`` and the exporter each read the
same two scrapes, at the same times, and every engine value, quantile and GPU reading of the
JSON must be the exporter's sample, and every ``null`` an absent series.
"""

from __future__ import annotations

import asyncio
import io
import json
import time

import httpx
from prometheus_client.parser import text_string_to_metric_families

from llmtop.config import Config
from llmtop.demo.launcher import start_demo
from llmtop.export.names import ENGINE_VALUES, QUANTILE_VALUES, QUANTILES
from llmtop.export.run import publish_direct
from llmtop.monitor import Monitor
from llmtop.once import run_once
from tests.export.scripted import ScriptedScraper, exporter_monitor, raw

WINDOW_S = 2.0


def _bodies() -> tuple[Config, dict[str, list[str]]]:
    demo = start_demo(engines=["vllm", "sglang", "triton"])
    try:
        time.sleep(1.0)
        urls = {t.name: t.base_url + "/metrics" for t in demo.targets}
        got: dict[str, list[str]] = {n: [] for n in urls}
        for _ in range(2):
            for n, u in urls.items():
                got[n].append(httpx.get(u, timeout=5).text)
            time.sleep(WINDOW_S)
        return Config(targets=tuple(demo.targets), discover=False), got
    finally:
        demo.stop()


def _script(config: Config, bodies: dict[str, list[str]]) -> dict:
    return {t.name: [raw(t, 100.0 + i * WINDOW_S, b) for i, b in enumerate(bodies[t.name])]
            for t in config.targets}


def samples(text: str) -> dict[tuple[str, frozenset], float]:
    out = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out[(s.name, frozenset(s.labels.items()))] = s.value
    return out


def _labels(row: dict, **more: str) -> frozenset:
    d = {"target": row["target"], "engine": row["engine"], "model": row["model"], **more}
    if row.get("role"):
        d["role"] = row["role"]
    if row.get("rank"):
        d["rank"] = row["rank"]
    return frozenset((k, v) for k, v in d.items() if v)


def _value(row: dict, field: str):
    """A row's JSON value of an ``ENGINE_VALUES`` field (the profile's capacity is inside
    ``capacity``)."""
    if field == "capacity_requests_per_s":
        return (row["capacity"] or {}).get("requests_per_s")
    return row[field]


def rows_equal(engines: list[dict], got: dict) -> tuple[int, int]:
    """Every engine value of ``--once --json`` rows is the exporter's sample, and every null
    an absent series; returns (values compared, nulls checked absent)."""
    compared = absent = 0
    for row in engines:
        good = row["state"] in ("ok", "restarted")
        for r in [row, *row["ranks"]]:
            for name, field, _ in ENGINE_VALUES:
                key = (name, _labels(r))
                v = _value(r, field)
                if v is None or not good:
                    assert key not in got, key
                    absent += 1
                else:
                    assert got[key] == v, (key, v)
                    compared += 1
            for name, field, _ in QUANTILE_VALUES:
                for q, f in QUANTILES:
                    key = (name, _labels(r, quantile=q))
                    v = (r[field] or {}).get(f)
                    if v is None or not good:
                        assert key not in got, key
                    else:
                        assert got[key] == v, (key, v)
                        compared += 1
        up = got[("llmtop_engine_up", _labels(row))]
        assert up == (1.0 if good else 0.0), (row["target"], row["state"], up)
        assert got[("llmtop_engine_state", _labels(row, state=row["state"]))] == 1.0
    return compared, absent


def test_series_equal_once_json():
    config, bodies = _bodies()
    out = io.StringIO()
    once_mon = Monitor(config, scraper=ScriptedScraper(_script(config, bodies)))
    assert run_once(config, window_s=0.0, as_json=True, monitor=once_mon, out=out) == 0
    doc = json.loads(out.getvalue())
    assert doc["window_s"] == WINDOW_S

    async def export() -> bytes:
        mon, state = exporter_monitor(config, _script(config, bodies))
        try:
            for _ in range(2):
                snap = await mon.tick()
            publish_direct(state, mon, snap, WINDOW_S, time.monotonic())
            return state.render()
        finally:
            await mon.aclose()

    got = samples(asyncio.run(export()).decode())
    assert got[("llmtop_window_seconds", frozenset())] == WINDOW_S
    assert {r["engine"] for r in doc["engines"]} == {"vllm", "sglang", "triton"}
    compared, absent = rows_equal(doc["engines"], got)
    assert compared >= 60 and absent >= 1  # each engine's numbers; and what one lacks
    assert doc["gpus"], "Triton's nv_gpu_* give GPUs to compare"
    for g in doc["gpus"]:
        gl = {"host": g["host"], "gpu": str(g["index"]), "uuid": g["uuid"], "name": g["name"]}
        lab = frozenset((k, v) for k, v in gl.items() if v)
        for name, field in (("llmtop_gpu_utilization_ratio", "util"),
                            ("llmtop_gpu_memory_used_bytes", "mem_used_bytes"),
                            ("llmtop_gpu_memory_total_bytes", "mem_total_bytes"),
                            ("llmtop_gpu_power_watts", "power_w"),
                            ("llmtop_gpu_temperature_celsius", "temp_c")):
            if g[field] is None:
                assert (name, lab) not in got
            else:
                assert got[(name, lab)] == g[field], (name, g[field])
