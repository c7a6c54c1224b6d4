"""Fleet mode's routers and roles (issue 42): the router's own series read from Prometheus
by the same adapter as in direct mode (two answers ``W`` apart), backends linked to the
engine rows by host:port, roles from pod labels; and the same against a real Prometheus
scraping the real vLLM router's captured /metrics (a fixture served over HTTP)."""

from __future__ import annotations

import asyncio
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from llmtop.config import Config, PrometheusConfig
from llmtop.demo.fleet import find_binary, start_prometheus
from llmtop.fleet.monitor import FleetMonitor
from llmtop.fleet.stack import fleet_stack
from llmtop.model import EngineRow
from tests.conftest import fixture_text
from tests.stack.build import scaled

from .conftest import _missing

ROUTER = fixture_text("routers/vllm-router-rr.txt")  # workers 127.0.0.1:39201 and :38637
A, B = "127.0.0.1:39201", "127.0.0.1:38637"


def _answer(text: str, job: str, instance: str) -> list[dict]:
    """``text`` as a Prometheus instant-query answer (``{"metric", "value"}``)."""
    out = []
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out.append({"metric": {"__name__": s.name, **s.labels, "job": job,
                                   "instance": instance}, "value": [0, repr(s.value)]})
    return out


def _rows() -> list[EngineRow]:
    return [EngineRow(key=f"{t}|m", target=t, engine="vllm", model="m", max_running=m)
            for t, m in ((A, 1.0), (B, 8.0))]


def test_routers_from_two_answers_w_apart_with_pod_roles():
    base = _answer(scaled(ROUTER, 0.5), "router", "127.0.0.1:34981")
    for it in base:
        it["metric"]["llmtop_base"] = "1"
    results = {"stack": [
        *_answer(ROUTER, "router", "127.0.0.1:34981"), *base,
        *({"metric": {"instance": t, "job": "vllm", "llm_d_ai_role": "both",
                      "llmtop_name": "llmtop_roles"}, "value": [0, "1"]} for t in (A, B))]}
    rows = _rows()
    [r] = fleet_stack(results, ("instance",), 1000.0, 10.0, rows)
    assert r.target == "127.0.0.1:34981" and r.engine == "vllm-router"
    assert r.policy == "round_robin"
    assert r.requests_per_s == pytest.approx((66 + 65) * 0.5 / 10.0)  # Δ over the window
    assert (r.healthy_backends, r.total_backends, r.open_breakers) == (2, 2, 0)
    by = {b.target: b for b in r.backends}
    assert set(by) == {A, B}
    assert by[A].routed_share == pytest.approx(66 / 131)
    assert by[A].capacity_share == pytest.approx(1 / 9)  # 1 seat of 9
    assert {x.target: (x.router, x.role) for x in rows} == {
        A: ("127.0.0.1:34981", "both"), B: ("127.0.0.1:34981", "both")}


def test_no_router_series_no_routers_and_bad_answers_are_skipped():
    rows = _rows()
    assert fleet_stack({}, ("instance",), 1.0, 10.0, rows) == []
    junk = [{"metric": {"__name__": "vllm_router_worker_health"}, "value": [0, "x"]},
            {"nope": 1}]
    assert fleet_stack({"stack": junk}, ("instance",), 1.0, 10.0, rows) == []
    assert all(r.router is None for r in rows)


def _handler(text: str, t0: float) -> type[BaseHTTPRequestHandler]:
    class H(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            data = scaled(text, 1.0 + (time.monotonic() - t0) / 5.0).encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *a) -> None:
            return

    return H


class _Served:
    """Loopback /metrics servers whose counters grow with time (``scaled``)."""

    def __init__(self, bodies: dict[str, str]) -> None:
        t0 = time.monotonic()
        self.servers: dict[str, ThreadingHTTPServer] = {}
        for name, text in bodies.items():
            srv = ThreadingHTTPServer(("127.0.0.1", 0), _handler(text, t0))
            threading.Thread(target=srv.serve_forever, daemon=True).start()
            self.servers[name] = srv

    def addr(self, name: str) -> str:
        return f"127.0.0.1:{self.servers[name].server_address[1]}"

    def close(self) -> None:
        for s in self.servers.values():
            s.shutdown()
            s.server_close()


def _until_scraped(url: str, n: int, limit_s: float = 40.0) -> None:
    """Wait until Prometheus holds ``n`` scrapes of the router (its first comes late)."""
    q = "min(count_over_time(vllm_router_requests_total[60s]))"
    end = time.monotonic() + limit_s
    while time.monotonic() < end:
        res = httpx.get(url + "/api/v1/query", params={"query": q}, timeout=5).json()
        got = res["data"]["result"]
        if got and float(got[0]["value"][1]) >= n:
            return
        time.sleep(0.5)
    raise AssertionError(f"Prometheus did not scrape the router {n} times in {limit_s} s")


@pytest.mark.ci_step
def test_real_prometheus_gives_the_router_its_backends_and_roles(tmp_path):
    if not find_binary("prometheus"):
        _missing("prometheus")
    calm = fixture_text("vllm-real-cpu-v0.32.0-calm-a.txt")
    served = _Served({"a": calm, "b": calm})
    a, b = served.addr("a"), served.addr("b")
    router = scaled(ROUTER, 1.0, urls={f"http://{A}": f"http://{a}", f"http://{B}": f"http://{b}"})
    served2 = _Served({"router": router})
    prom = None
    try:
        cfg = {"global": {"scrape_interval": "1s"}, "scrape_configs": [
            {"job_name": "router", "static_configs": [{"targets": [served2.addr("router")]}]},
            {"job_name": "vllm", "static_configs": [
                {"targets": [a], "labels": {"llm_d_ai_role": "prefill"}},
                {"targets": [b], "labels": {"llm_d_ai_role": "decode"}}]}]}
        prom = start_prometheus(cfg, str(tmp_path))
        _until_scraped(prom.url, 6)
        conf = Config(prometheus=PrometheusConfig(url=prom.url, window_s=4.0,
                                                  scrape_interval_s=1.0))

        async def go():
            mon = FleetMonitor(conf)
            try:
                return await mon.tick()
            finally:
                await mon.aclose()

        snap = asyncio.run(go())
    finally:
        if prom is not None:
            prom.stop()
        served.close()
        served2.close()
    [r] = snap.routers
    assert r.engine == "vllm-router" and r.policy == "round_robin"
    assert r.requests_per_s is not None and r.requests_per_s > 0
    assert {x.target for x in r.backends} == {a, b}
    rows = {x.target: x for x in snap.engines}
    assert rows[a].role == "prefill" and rows[b].role == "decode"
    assert rows[a].router == r.target == served2.addr("router")
