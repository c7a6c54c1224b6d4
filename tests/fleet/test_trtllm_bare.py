"""TensorRT-LLM 1.1's unprefixed metric names in fleet mode, on a real Prometheus.

TRT-LLM 1.1.0rc5 exposed five bare names (``request_success_total`` and the
``e2e_request_latency`` / ``time_to_first_token`` / ``time_per_output_token`` /
``request_queue_time`` ``_seconds`` histograms) with ``model_name`` and ``engine_type``
labels (``../shared/METRICS.md`` §7, after Dynamo's docs; the shared fixtures hold no real
1.1 output, so the text here is hand-made in that shape, as ``tests/parse/test_trtllm.py``'s
``BARE``). Those words are generic: another application on the same Prometheus exports a
``request_success_total`` and a ``time_to_first_token_seconds`` of its own, without
``engine_type``. Fleet mode must list the TRT-LLM instance, with its rates and quantiles
equal to the server's PromQL, and never the other application.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from llmtop.demo import fleet as demo_fleet_mod

from .conftest import promql, refresh_once

LE = ("0.05", "0.1", "0.25", "0.5", "1.0", "+Inf")
MODEL = "Qwen3-0.6B"


def _hist(name: str, labels: str, n: int, spread: tuple[float, ...]) -> list[str]:
    cum = [math.floor(n * f) for f in spread] + [n]
    out = [f"# TYPE {name} histogram"]
    out += [f'{name}_bucket{{{labels},le="{le}"}} {c}' for le, c in zip(LE, cum, strict=True)]
    out += [f"{name}_sum{{{labels}}} {0.3 * n}", f"{name}_count{{{labels}}} {n}"]
    return out


class _Exporter:
    """Two /metrics texts whose counters grow with each scrape."""

    def __init__(self) -> None:
        self.t0 = time.monotonic()

    def text(self, path: str) -> str:
        n = int((time.monotonic() - self.t0) * 4) + 1  # 4 requests a second
        if path == "/trt":
            lab = f'model_name="{MODEL}",engine_type="trtllm"'
            lines = ["# TYPE request_success_total counter",
                     f'request_success_total{{{lab},finished_reason="stop"}} {n}']
            lines += _hist("time_to_first_token_seconds", lab, n, (0.0, 0.2, 0.7, 0.9, 1.0))
            lines += _hist("e2e_request_latency_seconds", lab, n, (0.0, 0.0, 0.1, 0.5, 0.8))
            return "\n".join(lines) + "\n"
        lab = 'route="/checkout"'  # an unrelated web app with the same generic words
        lines = ["# TYPE request_success_total counter", f"request_success_total{{{lab}}} {9 * n}"]
        lines += _hist("time_to_first_token_seconds", lab, 9 * n, (0.5, 0.6, 0.7, 0.8, 0.9))
        return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def bare_fleet(prometheus_bin: str, tmp_path_factory: pytest.TempPathFactory
               ) -> Iterator[tuple[str, str, str]]:
    exp = _Exporter()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = exp.text(self.path).encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    target = f"127.0.0.1:{httpd.server_address[1]}"
    cfg = {"global": {"scrape_interval": "1s", "scrape_timeout": "900ms"},
           "scrape_configs": [
               {"job_name": "trtllm", "metrics_path": "/trt", "static_configs": [
                   {"targets": [target], "labels": {"instance": "trt-1.invalid:8000"}}]},
               {"job_name": "shop", "metrics_path": "/shop", "static_configs": [
                   {"targets": [target], "labels": {"instance": "shop-1.invalid:8080"}}]}]}
    srv = demo_fleet_mod.start_prometheus(cfg, str(tmp_path_factory.mktemp("bare")),
                                          binary=prometheus_bin)
    try:
        demo_fleet_mod.wait_scraped(srv.url, ["trt-1.invalid:8000", "shop-1.invalid:8080"],
                                    min_samples=4)
        time.sleep(1.5)
        yield srv.url, "trt-1.invalid:8000", "shop-1.invalid:8080"
    finally:
        srv.stop()
        httpd.shutdown()


def test_bare_trtllm_names_make_a_row_and_the_other_app_none(bare_fleet):
    url, trt, shop = bare_fleet
    mon, snap = refresh_once(url, window_s=3.0)
    assert mon.error is None, mon.error and mon.error.message
    assert "trtllm" in mon.plan.engines
    assert {r.target for r in snap.engines} == {trt}, [r.key for r in snap.engines]
    assert shop not in {t for r in snap.engines for t in (r.labels or {}).values()}
    (row,) = snap.engines
    assert row.engine == "trtllm" and row.model == MODEL and row.state == "ok"
    want = promql(url, 'sum(rate(request_success_total{engine_type!=""}[3s]))', snap.time)
    assert row.requests_per_s == pytest.approx(float(want[0]["value"][1]), rel=1e-6)
    for q, phi in (("p50", 0.5), ("p90", 0.9)):
        want = promql(url, f'histogram_quantile({phi}, sum by (le) (rate('
                      f'time_to_first_token_seconds_bucket{{engine_type!=""}}[3s])))', snap.time)
        assert getattr(row.ttft_s, q) == pytest.approx(float(want[0]["value"][1]), rel=1e-6)
    assert row.e2e_s is not None and row.e2e_s.p50 is not None
    # every query that names a bare word also asks for engine_type
    for q in mon.plan.queries().values():
        for word in ("request_success_total{", "time_to_first_token_seconds_bucket{"):
            for part in q.split(word)[1:]:
                assert part.split("}", 1)[0].count('engine_type!=""') == 1, q
