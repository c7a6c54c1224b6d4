"""Fleet mode's bad input, each a clear state (never a traceback), with ``httpx.MockTransport``
and the recorded envelopes in ``tests/fleet/fixtures`` (real Prometheus 2.42 and
VictoriaMetrics 1.79 answers; Thanos/Mimir written from their sources, see the README there).
Also auth (token file re-read, basic auth, tenant headers, params) and backend detection.
"""

from __future__ import annotations

import asyncio
import io
import json
from pathlib import Path

import httpx
import pytest

from llmtop.cli.fleet import run_fleet_once
from llmtop.config import Config, PrometheusConfig
from llmtop.fleet.monitor import FleetMonitor
from llmtop.sources.prometheus import PromClient, PromError, display_url

FIXTURES = Path(__file__).parent / "fixtures"
DISCOVERY = {"status": "success", "data": {"resultType": "vector", "result": [
    {"metric": {"__name__": "vllm:num_requests_running", "job": "vllm"}, "value": [1, "2"]}]}}
DATA = {"status": "success", "data": {"resultType": "vector", "result": [
    {"metric": {"llmtop_name": "vllm:num_requests_running", "instance": "engine-1.invalid:8000",
                "job": "vllm", "model_name": "m"}, "value": [1, "3"]}]}}


def _fixture(name: str) -> httpx.Response:
    d = json.loads((FIXTURES / name).read_text())
    resp = d["response"]
    body = resp["body"]
    content = json.dumps(body) if not isinstance(body, str) else body
    headers = {k: v for k, v in resp.get("headers", {}).items()
               if k.lower() not in ("content-length", "content-encoding")}
    return httpx.Response(resp["status"], content=content.encode(), headers=headers)


def _json(body: dict, status: int = 200) -> httpx.Response:
    return httpx.Response(status, json=body)


def _server(query=None, targets=None, buildinfo="prometheus-2.42-buildinfo.json", seen=None):
    """A fake server: buildinfo, targets, metadata, and ``query(request)`` for queries."""

    def handler(request: httpx.Request) -> httpx.Response:
        if seen is not None:
            seen.append(request)
        path = request.url.path
        if path.endswith("/api/v1/status/buildinfo"):
            return _fixture(buildinfo)
        if path.endswith("/api/v1/targets"):
            return targets(request) if targets else _fixture("prometheus-2.42-targets.json")
        if path.endswith("/api/v1/metadata"):
            return _json({"status": "success", "data": {}})
        if "/api/v1/label/" in path:  # as a backend without the label-values API
            return httpx.Response(404, text="404 page not found")
        if query is not None:
            return query(request)
        form = dict(httpx.QueryParams(request.content.decode()))
        return _json(DISCOVERY if "count by (__name__, job)" in form["query"] else DATA)

    return httpx.MockTransport(handler)


def _once(transport, *, as_json=True, **kw):
    cfg = Config(prometheus=PrometheusConfig(url="http://127.0.0.1:9090", **kw))
    out, err = io.StringIO(), io.StringIO()
    rc = run_fleet_once(cfg, as_json=as_json, out=out, err=err, transport=transport)
    doc = json.loads(out.getvalue()) if as_json else out.getvalue()
    return rc, doc, err.getvalue()


def test_unreachable_is_a_state():
    def refuse(request):
        raise httpx.ConnectError("connection refused")

    rc, doc, err = _once(httpx.MockTransport(refuse))
    assert rc == 1 and doc["error"]["kind"] == "unreachable"
    assert "connection refused" in doc["error"]["message"] and "cannot reach" in err
    assert doc["engines"] == []


def test_401_says_which_credential_is_missing():
    rc, doc, _err = _once(_server(query=lambda r: _fixture("mimir-query-no-org-id.json"),
                                 buildinfo="mimir-query-no-org-id.json"))
    assert rc == 1 and doc["error"]["kind"] == "unauthorized"
    assert "no credential configured" in doc["error"]["message"]


def test_403_names_the_token_file_never_the_token(tmp_path):
    tok = tmp_path / "token"
    tok.write_text("s3cr3t-token\n")
    seen: list[httpx.Request] = []
    t = _server(query=lambda r: httpx.Response(403, text="forbidden"),
                buildinfo="prometheus-2.42-buildinfo.json", seen=seen)
    rc, doc, err = _once(t, bearer_token_file=str(tok))
    assert rc == 1 and doc["error"]["kind"] == "unauthorized"
    assert str(tok) in doc["error"]["message"] and "refused" in doc["error"]["message"]
    assert "s3cr3t" not in json.dumps(doc) and "s3cr3t" not in err
    assert seen[0].headers["authorization"] == "Bearer s3cr3t-token"
    rc, text, err = _once(t, as_json=False, bearer_token_file=str(tok))
    assert "s3cr3t" not in text + err


def test_bad_match_shows_prometheus_message():
    rc, doc, err = _once(_server(query=lambda r: _fixture("prometheus-2.42-query-bad.json")),
                         match='namespace=~"(')
    assert rc == 1 and doc["error"]["kind"] == "bad_query"
    assert "unclosed left parenthesis" in doc["error"]["message"]
    assert "unclosed left parenthesis" in err


def test_victoriametrics_parse_error_is_a_bad_query_not_too_big():
    _rc, doc, _err = _once(_server(query=lambda r: _fixture("victoriametrics-1.79-query-bad.json"),
                                  buildinfo="victoriametrics-1.79-buildinfo.json"))
    assert doc["error"]["kind"] == "bad_query" and "unparsed data" in doc["error"]["message"]
    assert doc["source"]["kind"] == "victoriametrics"


@pytest.mark.parametrize("resp", [
    lambda r: _fixture("mimir-query-max-series.json"),
    lambda r: _json({"status": "error", "errorType": "timeout",
                     "error": "query timed out in expression evaluation"}, 503),
    lambda r: _json({"status": "error", "errorType": "execution", "error": "query processing "
                     "would load too many samples into memory in query execution"}, 422),
])
def test_422_and_503_suggest_a_narrower_match(resp):
    rc, doc, _err = _once(_server(query=resp))
    assert rc == 1 and doc["error"]["kind"] == "too_big"
    assert "narrower --match" in doc["error"]["message"]


def test_html_from_an_auth_proxy():
    page = "<!DOCTYPE html><html><body>Sign in</body></html>"
    t = httpx.MockTransport(lambda r: httpx.Response(200, text=page,
                                                     headers={"content-type": "text/html"}))
    rc, doc, _err = _once(t)
    assert rc == 1 and doc["error"]["kind"] == "bad_payload"
    assert "HTML" in doc["error"]["message"]


def test_empty_result_is_a_state_not_an_empty_table():
    empty = {"status": "success", "data": {"resultType": "vector", "result": []}}
    rc, doc, _err = _once(_server(query=lambda r: _json(empty)), match='namespace="nope"')
    assert rc == 1 and doc["error"]["kind"] == "empty"
    assert 'namespace="nope"' in doc["error"]["message"]


def test_no_targets_endpoint_falls_back_to_the_config_interval():
    t = _server(targets=lambda r: httpx.Response(404, text="404 page not found"))
    rc, doc, _err = _once(t, scrape_interval_s=15.0)
    assert rc == 0 and doc["error"] is None
    assert doc["scrape_interval_s"] == 15.0 and doc["window_s"] == 60.0
    assert any("/api/v1/targets" in w for w in doc["warnings"])
    (row,) = doc["engines"]
    assert row["running"] == 3.0 and row["waiting"] is None  # missing stays null


@pytest.mark.parametrize("name", ["thanos-query-partial-warnings.json",
                                  "victoriametrics-cluster-query-partial.json"])
def test_partial_answers_are_flagged(name):
    def query(request):
        form = dict(httpx.QueryParams(request.content.decode()))
        if "count by (__name__, job)" in form["query"]:
            return _json(DISCOVERY)
        resp = _fixture(name)
        body = json.loads(resp.content)
        body["data"] = DATA["data"]
        return _json(body)

    rc, doc, _err = _once(_server(query=query))
    assert rc == 0 and doc["partial"] is True
    assert doc["warnings"][0].startswith("PARTIAL")
    rc, text, _err = _once(_server(query=query), as_json=False)
    assert "PARTIAL" in text.splitlines()[0]


def test_url_credentials_never_shown_and_sent_as_basic_auth():
    seen: list[httpx.Request] = []
    cfg = PrometheusConfig(url="https://alice:pw123@mimir.example:8443/prometheus/",
                           headers=(("X-Scope-OrgID", "team-llm"),),
                           params=(("dedup", "true"),))
    assert display_url(cfg.url) == "https://mimir.example:8443/prometheus"

    async def go():
        c = PromClient(cfg, transport=_server(seen=seen))
        try:
            await c.query("up", 100.0)
            return c.display_url
        finally:
            await c.aclose()

    shown = asyncio.run(go())
    assert "pw123" not in shown and "alice" not in shown
    req = seen[0]
    assert req.url.path == "/prometheus/api/v1/query"
    assert req.headers["authorization"].startswith("Basic ")
    assert req.headers["x-scope-orgid"] == "team-llm"
    form = dict(httpx.QueryParams(req.content.decode()))
    assert form["dedup"] == "true" and form["time"] == "100"


def test_token_file_is_re_read_when_it_changes(tmp_path):
    tok = tmp_path / "token"
    tok.write_text("one")
    seen: list[httpx.Request] = []

    async def go():
        c = PromClient(PrometheusConfig(url="http://127.0.0.1:9090",
                                        bearer_token_file=str(tok)),
                       transport=_server(seen=seen))
        try:
            await c.query("up", 1.0)
            tok.write_text("second-token")  # rotated (size changes with it)
            await c.query("up", 1.0)
        finally:
            await c.aclose()

    asyncio.run(go())
    assert [r.headers["authorization"] for r in seen] == ["Bearer one", "Bearer second-token"]


def test_basic_auth_password_from_a_file(tmp_path):
    pw = tmp_path / "pw"
    pw.write_text("hunter2\n")
    seen: list[httpx.Request] = []

    async def go():
        c = PromClient(PrometheusConfig(url="http://127.0.0.1:9090", basic_user="bob",
                                        basic_password_file=str(pw)),
                       transport=_server(seen=seen))
        try:
            await c.query("up", 1.0)
        finally:
            await c.aclose()

    asyncio.run(go())
    assert seen[0].headers["authorization"] == httpx.BasicAuth("bob", "hunter2")._auth_header


@pytest.mark.parametrize(("url", "buildinfo", "kind"), [
    ("http://p:9090", "prometheus-2.42-buildinfo.json", "prometheus"),
    ("http://vm:8428", "victoriametrics-1.79-buildinfo.json", "victoriametrics"),
    ("http://vmselect:8481/select/0/prometheus", "prometheus-2.42-buildinfo.json",
     "victoriametrics"),
    ("http://mimir/prometheus", "prometheus-2.42-buildinfo.json", "mimir"),
])
def test_backend_detection(url, buildinfo, kind):
    async def go():
        c = PromClient(PrometheusConfig(url=url), transport=_server(buildinfo=buildinfo))
        try:
            return await c.detect()
        finally:
            await c.aclose()

    assert asyncio.run(go()).kind == kind


def test_range_queries_are_aligned_and_capped():
    seen: list[httpx.Request] = []

    async def go():
        c = PromClient(PrometheusConfig(url="http://127.0.0.1:9090"),
                       transport=_server(query=lambda r: _fixture(
                           "prometheus-2.42-query-range.json"), seen=seen))
        try:
            return await c.query_range("up", 1_000.5, 1_000_007.3, 15.0)
        finally:
            await c.aclose()

    res = asyncio.run(go())
    assert res.result_type == "matrix"
    form = dict(httpx.QueryParams(seen[0].content.decode()))
    start, end, step = float(form["start"]), float(form["end"]), float(form["step"])
    assert start % step == 0 and end % step == 0
    assert (end - start) / step <= 11_000


def test_monitor_never_raises_on_a_garbage_answer():
    t = httpx.MockTransport(lambda r: httpx.Response(200, text="not json at all"))

    async def go():
        mon = FleetMonitor(Config(prometheus=PrometheusConfig(url="http://127.0.0.1:9090")),
                           transport=t)
        try:
            return mon, await mon.tick()
        finally:
            await mon.aclose()

    mon, snap = asyncio.run(go())
    assert isinstance(mon.error, PromError) and mon.error.kind == "bad_payload"
    assert snap.engines == []


def _tick(transport, clock=None, **kw):
    async def go():
        extra = {"clock": clock} if clock else {}
        mon = FleetMonitor(Config(prometheus=PrometheusConfig(url="http://127.0.0.1:9090", **kw)),
                           transport=transport, **extra)
        try:
            return mon, await mon.tick()
        finally:
            await mon.aclose()

    return asyncio.run(go())


def test_victoriametrics_evaluation_time_skips_its_hidden_30_seconds():
    seen: list[httpx.Request] = []
    t = _server(buildinfo="victoriametrics-1.79-buildinfo.json",
                targets=lambda r: _fixture("victoriametrics-1.79-targets.json"), seen=seen)
    mon, snap = _tick(t, clock=lambda: 1_000_000.0)
    assert mon.backend.kind == "victoriametrics"
    assert snap.time == 1_000_000.0 - 30.0  # aligned to the 1 s scrape interval too
    times = {dict(httpx.QueryParams(r.content.decode())).get("time") for r in seen
             if r.url.path.endswith("/api/v1/query")}
    assert times == {"999970"}


def test_series_with_pod_are_grouped_by_namespace_and_pod():
    disc = json.loads(json.dumps(DISCOVERY))
    disc["data"]["result"].append({"metric": {"llmtop_name": "has_pod"}, "value": [1, "4"]})
    data = {"status": "success", "data": {"resultType": "vector", "result": [
        {"metric": {"llmtop_name": "vllm:num_requests_running", "namespace": "prod",
                    "pod": "vllm-0", "job": "prod/vllm", "model_name": "m"}, "value": [1, "2"]}]}}

    def query(request):
        form = dict(httpx.QueryParams(request.content.decode()))
        return _json(disc if "count by (__name__, job)" in form["query"] else data)

    mon, snap = _tick(_server(query=query))
    assert mon.plan.group == ("namespace", "pod")
    (row,) = snap.engines
    assert row.target == "prod/vllm-0" and row.labels == {"namespace": "prod", "pod": "vllm-0",
                                                          "job": "prod/vllm"}


def test_dcgm_consumer_pod_from_exported_labels():
    from llmtop.fleet.rows import gpu_records

    labels = {"Hostname": "node-7", "gpu": "0", "UUID": "GPU-1", "modelName": "NVIDIA H100",
              "pod": "dcgm-exporter-abc", "namespace": "gpu-operator",
              "exported_pod": "vllm-0", "exported_namespace": "prod", "container": "vllm"}
    (g,) = gpu_records({"DCGM_FI_DEV_GPU_UTIL": [(labels, 87.0)],
                        "DCGM_FI_DEV_FB_USED": [(labels, 1024.0)]})
    assert g.host == "node-7" and g.util == 0.87 and g.mem_used_bytes == 1024 * 1024 * 1024
    assert [p.name for p in g.processes] == ["prod/vllm-0/vllm"]


def test_a_passing_outage_keeps_the_last_rows_and_says_so():
    up = {"ok": True}

    def handler(request):
        if not up["ok"]:
            raise httpx.ConnectError("connection refused")
        return _server().handle_request(request)

    clock = {"t": 1000.0}

    async def go():
        mon = FleetMonitor(Config(prometheus=PrometheusConfig(url="http://127.0.0.1:9090")),
                           transport=httpx.MockTransport(handler), clock=lambda: clock["t"])
        try:
            first = await mon.tick()
            up["ok"] = False
            clock["t"] += 60
            second = await mon.tick()
            return mon, first, second
        finally:
            await mon.aclose()

    mon, first, second = asyncio.run(go())
    assert second is first and second.engines  # the rows stay
    assert mon.error is not None and mon.error.kind == "unreachable"
    assert "UNREACHABLE" in mon.header_text()


def test_names_come_from_the_label_values_api_not_a_query_over_every_series():
    sent: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/api/v1/label/__name__/values"):
            sent.append("labels:" + request.url.params["match[]"])
            return _json({"status": "success", "data": ["vllm:num_requests_running"]})
        if request.url.path.endswith("/api/v1/query"):
            q = dict(httpx.QueryParams(request.content.decode()))["query"]
            sent.append(q)
            if q.startswith("count by (__name__, job)"):  # now only the presence series
                return _json(DISCOVERY)
        return _server().handle_request(request)

    mon, snap = _tick(httpx.MockTransport(handler))
    assert mon.error is None and [r.running for r in snap.engines] == [3.0]
    assert sent[0].startswith("labels:{__name__=~") and 'server=""' in sent[0]
    counts = [q for q in sent if q.startswith("count by (__name__, job)")]
    assert len(counts) == 1 and "vllm:num_requests_running|sglang" in counts[0]
    assert "(vllm|sglang|lmdeploy" not in counts[0]  # not the every-series selector


def test_the_post_body_is_the_form_urlencode_writes():
    """The quoted-once body (``_form``) reads back as the parameters, special characters and
    all, and is byte for byte what ``urllib.parse.urlencode`` writes."""
    from urllib.parse import parse_qsl, urlencode

    from llmtop.sources.prometheus import _form

    params = {"query": 'sum by (le) (rate(x_bucket{a=~"b|c",d!="é &+"}[60s])) > 0',
              "time": "1700000000.5", "timeout": "10s", "dedup": "true"}
    for _ in range(2):  # the second from the cache
        body = _form(params)
        assert body == urlencode(params).encode()
        assert dict(parse_qsl(body.decode())) == params


def test_a_refresh_empties_its_answers_once_the_rows_are_built():
    """The decoded answers are freed when the rows are built (their query tasks sit in
    reference cycles, which would keep them for the cyclic collector to walk), and the rows
    do not depend on them afterwards."""
    kept: list[list] = []
    real = FleetMonitor._run

    async def spy(self, queries, t):
        out = await real(self, queries, t)
        kept.extend(r.result for r in out.values())
        return out

    cfg = Config(prometheus=PrometheusConfig(url="http://127.0.0.1:9090"))

    async def go():
        mon = FleetMonitor(cfg, transport=_server())
        mon.warm_baseline = False
        try:
            return await mon.tick()
        finally:
            await mon.aclose()

    FleetMonitor._run = spy  # type: ignore[method-assign]
    try:
        snap = asyncio.run(go())
    finally:
        FleetMonitor._run = real  # type: ignore[method-assign]
    assert kept and all(a == [] for a in kept)
    row = next(r for r in snap.engines if r.model == "m")
    assert row.running == 3.0 and row.labels["instance"] == "engine-1.invalid:8000"
