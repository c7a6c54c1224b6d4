"""TensorRT-LLM 1.1's unprefixed metric names in fleet mode, on real engine-shaped text.

``tests/fixtures/metrics/trtllm-generated-1.1-bare.txt`` is the engine's own metric
definitions (``tensorrt_llm/metrics/collector.py`` in its unprefixed 1.1 version, labels as
``tensorrt_llm/serve/openai_server.py`` sets them) rendered by prometheus_client through the
multiprocess collector, as ``trtllm-serve`` serves ``/prometheus/metrics``: see its
``# source:`` line and ``gen_trtllm_bare.py`` beside it, which this file re-runs to check the
fixture. Its shape: ``request_success_total{finished_reason}`` and four histograms, labels
``engine_type="undefined"`` and ``model_name="undefined"``, the engine's long bucket lists
(TTFT 0.001 ... 2560 s), no ``_created`` series.

Those words are generic: another application on the same Prometheus (hand-made here: a
web shop) exports a ``request_success_total`` and a ``time_to_first_token_seconds`` of its
own, without ``engine_type``. Fleet mode must list the TRT-LLM instance, with its rates and
quantiles equal to the server's PromQL (on a real Prometheus and a real VictoriaMetrics), and
never the other application.
"""

from __future__ import annotations

import math
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from llmtop.demo import fleet as demo_fleet_mod
from llmtop.fleet import queries
from llmtop.fleet.queries import BARE_MATCHER, BARE_PRESENCE, BARE_TRTLLM, classify, engine_of
from llmtop.fleet.states import read_state
from llmtop.parse import trtllm
from llmtop.parse.exposition import parse

from .conftest import VICTORIA_LATENCY_OFFSET_S, promql, refresh_once

METRICS = Path(__file__).parent.parent / "fixtures" / "metrics"
FIXTURE = METRICS / "trtllm-generated-1.1-bare.txt"
GENERATOR = METRICS / "gen_trtllm_bare.py"
REAL = FIXTURE.read_text()
UNDEFINED = "undefined"  # what trtllm-serve's openai_server.py puts in both labels
_VALUE = re.compile(r"^([^#\s][^ ]*(?:\{[^}]*\})?) (\S+)$")


def _body(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if not ln.startswith(("# source:", "# note:"))]


def _names(text: str) -> set[str]:
    return {m.group(1).split("{")[0] for ln in text.splitlines() if (m := _VALUE.match(ln))}


def scaled(text: str, n: int) -> str:
    """``text`` with every sample value times ``n``: the same series, ``n`` times the
    requests (cumulative buckets stay cumulative)."""
    out = []
    for ln in text.splitlines():
        m = _VALUE.match(ln)
        out.append(f"{m.group(1)} {float(m.group(2)) * n!r}" if m else ln)
    return "\n".join(out) + "\n"


# ----------------------------------------------------------------------------- the text


def test_the_fixture_is_the_generators_rendering_of_the_engines_definitions():
    """Nobody edited the fixture by hand: the generator, run afresh, gives the same lines
    (the multiprocess collector's family order varies from run to run, as on the server)."""
    got = subprocess.run([sys.executable, str(GENERATOR)], capture_output=True, text=True,
                         timeout=60, check=True).stdout
    assert got.startswith("# source: GENERATED from the engine's metric definitions")
    assert REAL.startswith("# source: GENERATED from the engine's metric definitions")
    assert sorted(_body(got)) == sorted(_body(REAL))


def test_llmtops_bare_names_are_exactly_the_engines():
    fams = parse(REAL)
    assert {n: f.type for n, f in fams.items()} == {
        "request_success": "counter", "e2e_request_latency_seconds": "histogram",
        "time_to_first_token_seconds": "histogram",
        "time_per_output_token_seconds": "histogram",
        "request_queue_time_seconds": "histogram"}
    assert _names(REAL) == set(BARE_TRTLLM)  # every sample name, and nothing else
    assert BARE_PRESENCE in _names(REAL)
    assert not any("_created" in n for n in _names(REAL))  # multiprocess: none
    labels = {frozenset(s.labels) - {"le"} for f in fams.values() for s in f.samples}
    assert labels == {frozenset({"engine_type", "model_name"}),
                      frozenset({"engine_type", "model_name", "finished_reason"})}
    assert {s.labels[k] for f in fams.values() for s in f.samples
            for k in ("engine_type", "model_name")} == {UNDEFINED}
    ttft = sorted({s.labels["le"] for s in fams["time_to_first_token_seconds"].samples
                   if "le" in s.labels}, key=float)
    assert ttft[0] == "0.001" and ttft[-2:] == ["2560.0", "+Inf"] and len(ttft) == 23
    for name in _names(REAL):
        assert engine_of(name) == "trtllm"
        assert re.fullmatch(queries._BARE_RE, name)  # listed by the discovery query


def test_created_series_of_an_in_process_registry_are_not_bare_names():
    """A host that registers the collector in an ordinary registry exposes ``_created``
    gauges too (``request_success_created``, ``time_to_first_token_seconds_created``):
    never listed, never an engine name."""
    sys.path.insert(0, str(METRICS))
    try:
        import gen_trtllm_bare
    finally:
        sys.path.remove(str(METRICS))
    plain = gen_trtllm_bare.render(plain=True)
    created = {n for n in _names(plain) if n.endswith("_created")}
    assert created == {"request_success_created", "e2e_request_latency_seconds_created",
                       "time_to_first_token_seconds_created",
                       "time_per_output_token_seconds_created",
                       "request_queue_time_seconds_created"}
    for name in created:
        assert name not in BARE_TRTLLM and not re.fullmatch(queries._BARE_RE, name)
        assert classify(name, {}) == "skip"
    assert _names(plain) - created == _names(REAL)


def test_the_direct_mode_reads_the_real_text():
    s = trtllm.normalize(REAL)
    (m,) = s.models
    assert m.model == "default"  # model_name="undefined" and no identity: not "undefined"
    assert m.counters["requests"] == 8 and m.counters_by["finished"]["length"] == 2
    assert m.hists["ttft"].count == 8 and m.hists["ttft"].bounds[0] == 0.001
    assert m.hists["queue"].count == 3  # a zero queue time is not observed upstream
    assert set(m.hists) == {"e2e", "ttft", "tpot", "queue"}


def test_the_inventory_names_trtllm_serves_undefined_model_as_the_adapter_does():
    """The ``state`` query's inventory of a trtllm-serve instance carries its
    ``model_name="undefined"``: read as the adapter reads it (the default model), it is the
    same row; another engine's model label is kept as it is."""
    def item(tag: str, model: str, v: str = "1") -> dict:
        return {"metric": {"llmtop_name": tag, "instance": "a:1", "job": "j",
                           "model_name": model}, "value": [0, v]}

    info = read_state([item("inventory:trtllm", UNDEFINED), item("last_ts:trtllm", UNDEFINED, "5"),
                       item("inventory:vllm", UNDEFINED)], ("instance",))
    assert set(info.inventory) == {(("a:1",), "default"), (("a:1",), UNDEFINED)}
    assert info.inventory[(("a:1",), "default")][0] == "trtllm"
    assert info.inventory[(("a:1",), UNDEFINED)][0] == "vllm"
    assert info.last_ts == {(("a:1",), "default"): 5.0}


# ----------------------------------------------------------------------------- real server


def _hist(name: str, labels: str, n: int, spread: tuple[float, ...]) -> list[str]:
    les = ("0.05", "0.1", "0.25", "0.5", "1.0", "+Inf")
    cum = [math.floor(n * f) for f in spread] + [n]
    out = [f"# TYPE {name} histogram"]
    out += [f'{name}_bucket{{{labels},le="{le}"}} {c}' for le, c in zip(les, cum, strict=True)]
    out += [f"{name}_sum{{{labels}}} {0.3 * n}", f"{name}_count{{{labels}}} {n}"]
    return out


class _Exporter:
    """The engine's text (values times the scrapes so far) and the shop's."""

    def __init__(self) -> None:
        self.t0 = time.monotonic()

    def text(self, path: str) -> str:
        n = int((time.monotonic() - self.t0) * 4) + 1  # 8 x 4 requests a second
        if path == "/prometheus/metrics":
            return scaled(REAL, n)
        lab = 'route="/checkout"'  # an unrelated web app with the same generic words
        lines = ["# TYPE request_success_total counter", f"request_success_total{{{lab}}} {9 * n}"]
        lines += _hist("time_to_first_token_seconds", lab, 9 * n, (0.5, 0.6, 0.7, 0.8, 0.9))
        return "\n".join(lines) + "\n"


@pytest.fixture(scope="module", params=["prometheus", "victoriametrics"])
def bare_fleet(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
               ) -> Iterator[tuple[str, str, str, dict]]:
    """(server URL, TRT-LLM instance, shop instance, the ``PrometheusConfig`` extras) on a
    real Prometheus and a real VictoriaMetrics (samples visible after 1 s)."""
    kind = request.param
    binary = request.getfixturevalue("prometheus_bin" if kind == "prometheus"
                                     else "victoria_bin")
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
               {"job_name": "trtllm", "metrics_path": "/prometheus/metrics", "static_configs": [
                   {"targets": [target], "labels": {"instance": "trt-1.invalid:8000"}}]},
               {"job_name": "shop", "metrics_path": "/shop", "static_configs": [
                   {"targets": [target], "labels": {"instance": "shop-1.invalid:8080"}}]}]}
    work = str(tmp_path_factory.mktemp("bare"))
    extra: dict = {}
    if kind == "prometheus":
        srv = demo_fleet_mod.start_prometheus(cfg, work, binary=binary)
    else:
        off = f"{VICTORIA_LATENCY_OFFSET_S:g}s"
        srv = demo_fleet_mod.start_victoria(cfg, work, binary=binary, latency_offset=off)
        extra["params"] = (("latency_offset", off),)
    try:
        demo_fleet_mod.wait_scraped(srv.url, ["trt-1.invalid:8000", "shop-1.invalid:8080"],
                                    min_samples=4)
        time.sleep(1.5 + (VICTORIA_LATENCY_OFFSET_S if extra else 0))
        yield srv.url, "trt-1.invalid:8000", "shop-1.invalid:8080", extra
    finally:
        srv.stop()
        httpd.shutdown()


def test_bare_trtllm_names_make_a_row_and_the_other_app_none(bare_fleet):
    url, trt, shop, extra = bare_fleet
    mon, snap = refresh_once(url, window_s=3.0, **extra)
    assert mon.error is None, mon.error and mon.error.message
    assert "trtllm" in mon.plan.engines
    assert {r.target for r in snap.engines} == {trt}, [r.key for r in snap.engines]
    assert shop not in {t for r in snap.engines for t in (r.labels or {}).values()}
    # one row: the adapter reads model_name="undefined" as the default model, and so does the
    # inventory (it once made a second, stale "undefined" row of the same instance)
    assert [r.key for r in snap.engines] == [f"{trt}|default"]
    (row,) = snap.engines
    assert row.engine == "trtllm" and row.model == "default" and row.state == "ok"
    assert row.last_ok_age_s is not None and row.last_ok_age_s < 3
    want = promql(url, 'sum(rate(request_success_total{engine_type!=""}[3s]))', snap.time)
    assert row.requests_per_s == pytest.approx(float(want[0]["value"][1]), rel=1e-6)
    for name, attr in (("time_to_first_token_seconds", "ttft_s"),
                       ("e2e_request_latency_seconds", "e2e_s"),
                       ("request_queue_time_seconds", "queue_s")):
        for q, phi in (("p50", 0.5), ("p90", 0.9)):
            want = promql(url, f"histogram_quantile({phi}, sum by (le) (rate("
                          f'{name}_bucket{{engine_type!=""}}[3s])))', snap.time)
            got = getattr(getattr(row, attr), q)
            assert got == pytest.approx(float(want[0]["value"][1]), rel=1e-6), (name, q)
    # every query that names a bare word also asks for engine_type
    for q in mon.plan.queries().values():
        for word in ("request_success_total{", "time_to_first_token_seconds_bucket{"):
            for part in q.split(word)[1:]:
                assert part.split("}", 1)[0].count(BARE_MATCHER) == 1, q
