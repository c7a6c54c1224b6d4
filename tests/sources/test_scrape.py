"""Scraper: classification against real loopback servers and httpx.MockTransport."""

from __future__ import annotations

import asyncio
import socket

import httpx
import pytest
from aiohttp import web

from llmtop.config import Config, Target
from llmtop.sources.scrape import Scraper, default_metrics_path, engine_from_identity
from llmtop.sources.scrape_identity import IDENTITY_TIMEOUT_S
from llmtop.targets import parse_target

from .helpers import free_port, http_server, raw_server

METRICS = '# HELP vllm:num_requests_running x\nvllm:num_requests_running{model_name="m"} 1.0\n'


def _t(port: int, *, timeout_s: float = 10.0, engine: str | None = None, **kw) -> Target:
    spec = f"{engine}@127.0.0.1:{port}" if engine else f"127.0.0.1:{port}"
    t = parse_target(spec, timeout_s=timeout_s)
    if kw:
        from dataclasses import replace

        t = replace(t, **kw)
    return t


async def _scrape(target: Target, config: Config | None = None, transport=None):
    s = Scraper(config or Config(targets=(target,)), transport=transport)
    try:
        return await s.scrape(target)
    finally:
        await s.aclose()


async def test_ok_records_body_times_and_safe_headers_only():
    async def metrics(_req):
        return web.Response(
            text=METRICS,
            content_type="text/plain",
            headers={"Process-Start-Time-Unix": "1700000000", "X-Secret-Ish": "no"},
        )

    async with http_server({"/metrics": metrics}) as port:
        raw = await _scrape(_t(port, engine="vllm"))
    assert raw.status == "ok", raw.error
    assert raw.body == METRICS and raw.error is None and raw.http_status == 200
    assert raw.url == f"http://127.0.0.1:{port}/metrics"
    assert raw.content_type.startswith("text/plain")
    assert raw.headers == {"process-start-time-unix": "1700000000"}
    assert raw.elapsed_s is not None and raw.elapsed_s >= 0
    assert raw.t_wall > 1e9 and raw.t_mono > 0
    assert raw.engine_hint == "vllm" and raw.target == f"vllm@127.0.0.1:{port}"


async def test_refused_port_is_down():
    raw = await _scrape(_t(free_port()))
    assert raw.status == "down" and raw.error == "connection refused" and raw.body is None


async def test_timeout_covers_whole_request():
    async def hang(reader, _writer):
        await reader.read()  # until the client gives up

    async with raw_server(hang) as port:
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        raw = await _scrape(_t(port, timeout_s=0.3))
        took = loop.time() - t0
    assert raw.status == "down" and raw.error == "timeout after 0.3s"
    print(f"timeout scrape took {took:.3f}s")


async def test_slow_body_times_out_too():
    async def trickle(_req):
        resp = web.StreamResponse()
        await resp.prepare(_req)
        for _ in range(20):
            await resp.write(b"a 1\n")
            await asyncio.sleep(0.05)
        return resp

    async with http_server({"/metrics": trickle}) as port:
        raw = await _scrape(_t(port, timeout_s=0.3))
    assert raw.status == "down" and raw.error == "timeout after 0.3s"


@pytest.mark.parametrize("code", [500, 503, 404])
async def test_http_error_keeps_status(code):
    async def err(_req):
        return web.Response(status=code, text="nope")

    async with http_server({"/metrics": err}) as port:
        raw = await _scrape(_t(port))
    assert raw.status == "http_error" and raw.http_status == code
    assert raw.error == f"HTTP {code}" and raw.body is None


async def test_llamacpp_501_message_kept():
    body = ('{"error":{"code":501,"message":"This server does not support metrics endpoint. '
            'Start it with `--metrics`","type":"not_supported_error"}}')

    async def err(_req):
        return web.Response(status=501, text=body, content_type="application/json")

    async with http_server({"/metrics": err}) as port:
        raw = await _scrape(_t(port))
    assert raw.status == "http_error" and raw.http_status == 501
    assert raw.error.startswith("HTTP 501: ") and "--metrics" in raw.error


@pytest.mark.parametrize("code", [401, 403])
async def test_unauthorized(code):
    async def deny(_req):
        return web.Response(status=code, text="denied")

    async with http_server({"/metrics": deny}) as port:
        raw = await _scrape(_t(port))
    assert raw.status == "unauthorized" and raw.http_status == code
    assert raw.error == f"unauthorized (HTTP {code}) — set an API key"


async def test_html_with_200_by_content_type_and_by_sniffing():
    async def html(_req):
        return web.Response(text="<html><body>login</body></html>", content_type="text/html")

    async def sneaky(_req):
        return web.Response(text="\n  <!DOCTYPE html><html></html>", content_type="text/plain")

    async with http_server({"/metrics": html, "/sneaky": sneaky}) as port:
        raw = await _scrape(_t(port))
        raw2 = await _scrape(_t(port, metrics_path="/sneaky"))
    assert raw.status == "bad_payload" and raw.error == "HTML page" and raw.http_status == 200
    assert raw2.status == "bad_payload" and raw2.error == "HTML page"


async def test_body_over_cap_with_and_without_content_length():
    async def big(_req):
        return web.Response(text="x 1\n" * 1000)

    async def big_chunked(req):
        resp = web.StreamResponse()
        resp.enable_chunked_encoding()
        await resp.prepare(req)
        for _ in range(100):
            await resp.write(b"x 1\n" * 10)
        return resp

    cfg = Config(body_cap_bytes=100)
    async with http_server({"/metrics": big, "/chunked": big_chunked}) as port:
        raw = await _scrape(_t(port), cfg)
        raw2 = await _scrape(_t(port, metrics_path="/chunked"), cfg)
    assert raw.status == "bad_payload" and raw.error == "body over 100 bytes"
    assert raw2.status == "bad_payload" and raw2.error == "body over 100 bytes"
    assert raw.body is None


async def test_content_length_over_cap_stops_before_reading():
    async def big(_req):
        return web.Response(body=b"y" * (2 * 1024 * 1024))

    async with http_server({"/metrics": big}) as port:
        raw = await _scrape(_t(port), Config(body_cap_bytes=1024 * 1024))
    assert raw.status == "bad_payload" and raw.error == "body over 1 MiB"


async def test_truncated_body_content_length_larger_than_sent():
    async def liar(reader, writer):
        await reader.readuntil(b"\r\n\r\n")
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 1000\r\n\r\na 1\nb 2\n"
        )
        await writer.drain()
        writer.close()

    async with raw_server(liar) as port:
        raw = await _scrape(_t(port))
    assert raw.status == "bad_payload" and raw.error == "truncated body"


async def test_connection_closed_before_response_is_down():
    async def rude(reader, writer):
        await reader.readuntil(b"\r\n\r\n")
        writer.close()

    async with raw_server(rude) as port:
        raw = await _scrape(_t(port))
    assert raw.status == "down" and "closed" in raw.error


async def test_garbage_text_stays_ok():
    junk = "this is not {{ prometheus \x01\n"

    async def garbage(_req):
        return web.Response(body=junk.encode() + b"\xff\xfe", content_type="text/plain")

    async with http_server({"/metrics": garbage}) as port:
        raw = await _scrape(_t(port))
    assert raw.status == "ok" and raw.body.startswith(junk) and "\ufffd" in raw.body


async def test_dns_failure_is_down():
    def handler(request: httpx.Request) -> httpx.Response:
        err = httpx.ConnectError("[Errno -2] Name or service not known")
        err.__cause__ = socket.gaierror(-2, "Name or service not known")
        raise err

    t = parse_target("no-such-host.invalid:8000")
    raw = await _scrape(t, transport=httpx.MockTransport(handler))
    assert raw.status == "down" and raw.error == "DNS lookup failed for no-such-host.invalid"


async def test_reset_is_down():
    def handler(request: httpx.Request) -> httpx.Response:
        err = httpx.ReadError("reset")
        err.__cause__ = ConnectionResetError(104, "Connection reset by peer")
        raise err

    raw = await _scrape(_t(1), transport=httpx.MockTransport(handler))
    assert raw.status == "down" and raw.error == "connection reset"


async def test_bearer_only_when_configured_and_headers_sent():
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, text=METRICS)

    tr = httpx.MockTransport(handler)
    t = _t(8000, engine="vllm")
    s = Scraper(Config(targets=(t,)), transport=tr)
    raw = await s.scrape(t)
    metrics_reqs = [r for r in seen if r.url.path == "/metrics"]
    assert raw.status == "ok"
    assert "authorization" not in metrics_reqs[-1].headers
    assert all("authorization" not in r.headers for r in seen)  # identity probes too

    seen.clear()
    s2 = Scraper(Config(targets=(t,), api_key="global-key"), transport=tr)
    await s2.scrape(t)
    assert all(r.headers["authorization"] == "Bearer global-key" for r in seen)

    seen.clear()
    t3 = _t(8000, api_key="target-key", headers=(("X-Team", "infra"),))
    raw3 = await Scraper(Config(api_key="global-key"), transport=tr).scrape(t3)
    r = [r for r in seen if r.url.path == "/metrics"][-1]
    assert r.headers["authorization"] == "Bearer target-key" and r.headers["x-team"] == "infra"
    for text in (repr(raw3), str(raw3.headers), str(raw3.identity)):
        assert "target-key" not in text and "infra" not in text
    await s.aclose()
    await s2.aclose()


def test_tls_verify_default_true_and_insecure():
    t = parse_target("https://127.0.0.1:8443")
    assert Scraper(Config()).verify_for(t) is True
    assert Scraper(Config(verify_tls=False)).verify_for(t) is False
    t2 = parse_target("https://127.0.0.1:8443", verify_tls=False)
    assert Scraper(Config()).verify_for(t2) is False


@pytest.fixture
def self_signed(tmp_path):
    import shutil
    import subprocess

    if not shutil.which("openssl"):
        pytest.skip("openssl not installed")
    cert, key = tmp_path / "c.pem", tmp_path / "k.pem"
    r = subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-subj", "/CN=127.0.0.1", "-keyout", str(key), "-out", str(cert)],
        capture_output=True,
        check=False,
    )
    if r.returncode != 0:
        pytest.skip("openssl could not make a certificate")
    return cert, key


async def test_tls_self_signed_refused_unless_insecure(self_signed):
    import ssl

    cert, key = self_signed
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(cert, key)

    async def metrics(_req):
        return web.Response(text=METRICS)

    app = web.Application()
    app.router.add_get("/metrics", metrics)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=ctx)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]
    try:
        t = parse_target(f"https://127.0.0.1:{port}")
        raw = await _scrape(t)
        assert raw.status == "down" and "TLS certificate verify failed" in raw.error
        raw2 = await _scrape(t, Config(verify_tls=False))
        assert raw2.status == "ok"
    finally:
        await runner.cleanup()


async def test_identify_against_fake_vllm():
    async def version(_req):
        return web.json_response({"version": "0.33.0"})

    async def models(_req):
        return web.json_response(
            {"object": "list", "data": [{"id": "m", "owned_by": "vllm", "max_model_len": 4096}]}
        )

    async with http_server({"/version": version, "/v1/models": models}) as port:
        s = Scraper(Config())
        ident = await s.identify(_t(port))
        await s.aclose()
    assert ident == {
        "host": "127.0.0.1",
        "version": "0.33.0",
        "owned_by": "vllm",
        "models": ["m"],
        "max_model_len": 4096,
        "engine": "vllm",
    }


async def test_identify_other_engines_and_whitelist():
    async def v2(_req):
        return web.json_response({"name": "triton", "version": "2.50.0", "extensions": ["x"]})

    async def server_info(_req):
        return web.json_response({"version": "0.5.23", "tp_size": 2, "api_key": "SECRET-SG"})

    async with http_server({"/v2": v2, "/server_info": server_info}) as port:
        s = Scraper(Config())
        ident = await s.identify(_t(port))
        await s.aclose()
    assert ident["triton"] == {"name": "triton", "version": "2.50.0", "extensions": ["x"]}
    assert ident["sglang"] == {"version": "0.5.23", "tp_size": 2}
    assert ident["engine"] == "triton" and "SECRET-SG" not in repr(ident)


async def test_identify_down_target_returns_host_only():
    s = Scraper(Config())
    ident = await s.identify(_t(free_port()))
    await s.aclose()
    assert ident == {"host": "127.0.0.1"}


async def test_identity_on_first_ok_scrape_and_after_restart():
    start = {"v": "100"}

    async def metrics(_req):
        return web.Response(text=METRICS, headers={"Process-Start-Time-Unix": start["v"]})

    async def version(_req):
        return web.json_response({"version": "0.33.0"})

    async with http_server({"/metrics": metrics, "/version": version}) as port:
        t = _t(port)
        s = Scraper(Config(targets=(t,)))
        r1 = await s.scrape(t)
        r2 = await s.scrape(t)
        start["v"] = "200"
        r3 = await s.scrape(t)
        s.reidentify(t.name)
        r4 = await s.scrape(t)
        r5 = await s.scrape(t)
        await s.aclose()
    assert r1.identity is not None and r1.identity["version"] == "0.33.0"
    assert r2.identity is None
    assert r3.identity is not None
    assert r4.identity is not None and r5.identity is None


async def test_identity_waits_for_first_ok_scrape():
    state = {"up": False}

    async def metrics(_req):
        if not state["up"]:
            return web.Response(status=503)
        return web.Response(text=METRICS)

    async with http_server({"/metrics": metrics}) as port:
        t = _t(port)
        s = Scraper(Config(targets=(t,)))
        r1 = await s.scrape(t)
        state["up"] = True
        r2 = await s.scrape(t)
        await s.aclose()
    assert r1.status == "http_error" and r1.identity is None
    assert r2.status == "ok" and r2.identity == {"host": "127.0.0.1"}


def test_default_paths():
    assert default_metrics_path("ollama") == "/api/ps"
    assert default_metrics_path("trtllm") == "/metrics"
    assert default_metrics_path("trtllm", {"prometheus_metrics": True}) == "/prometheus/metrics"
    assert default_metrics_path(None) == "/metrics"
    assert engine_from_identity({"owned_by": "tensorrt_llm"}) == "trtllm"
    assert engine_from_identity({"host": "h"}) is None


async def test_ollama_uses_api_ps():
    async def ps(_req):
        return web.json_response({"models": []})

    async with http_server({"/api/ps": ps}) as port:
        raw = await _scrape(_t(port, engine="ollama"))
    assert raw.status == "ok" and raw.url.endswith("/api/ps"), (raw.status, raw.url, raw.error)


async def test_trtllm_prefers_prometheus_when_it_answers():
    async def prom(_req):
        return web.Response(text="trtllm_x 1\n")

    async def iters(_req):
        return web.json_response([{"iter": 1}])

    async with http_server({"/prometheus/metrics": prom, "/metrics": iters}) as port:
        raw = await _scrape(_t(port, engine="trtllm"))
        assert raw.status == "ok" and raw.url.endswith("/prometheus/metrics")
        assert raw.identity["prometheus_metrics"] is True

    async with http_server({"/metrics": iters}) as port:
        raw = await _scrape(_t(port, engine="trtllm"))
        assert raw.status == "ok" and raw.url.endswith(f":{port}/metrics")


async def test_triton_http_port_falls_back_to_8002_once():
    calls: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(f"{request.url.port}{request.url.path}")
        if request.url.port == 8002 and request.url.path == "/metrics":
            return httpx.Response(200, text="nv_inference_count 1\n")
        return httpx.Response(404)

    t = parse_target("triton@gpu1:8000")
    s = Scraper(Config(targets=(t,)), transport=httpx.MockTransport(handler))
    r1 = await s.scrape(t)
    r2 = await s.scrape(t)
    await s.aclose()
    assert r1.status == "ok" and r1.url == "http://gpu1:8002/metrics"
    assert r2.url == "http://gpu1:8002/metrics"
    assert calls.count("8000/metrics") == 1


async def test_triton_fallback_failure_explains():
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(404)

    t = parse_target("triton@gpu1:8000")
    raw = await _scrape(t, transport=httpx.MockTransport(handler))
    assert raw.status == "http_error" and "8002" in raw.error


async def test_scrape_never_raises_on_odd_transport_errors():
    def handler(request: httpx.Request) -> httpx.Response:
        raise RuntimeError("boom")

    raw = await _scrape(_t(1), transport=httpx.MockTransport(handler))
    assert raw.status == "down" and raw.error


async def test_unhinted_triton_found_by_identity_falls_back_to_8002():
    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/v2" and request.url.port == 8000:
            return httpx.Response(200, json={"name": "triton", "version": "2.50.0"})
        if request.url.port == 8002 and request.url.path == "/metrics":
            return httpx.Response(200, text="nv_inference_count 1\n")
        return httpx.Response(404)

    t = parse_target("gpu1:8000")
    s = Scraper(Config(targets=(t,)), transport=httpx.MockTransport(handler))
    raw = await s.scrape(t)
    await s.aclose()
    assert raw.status == "ok" and raw.url == "http://gpu1:8002/metrics"
    assert raw.engine_hint == "triton" and raw.identity["triton"]["version"] == "2.50.0"


async def test_connections_are_kept_alive_between_scrapes():
    peers: list[object] = []

    async def metrics(req):
        peers.append(req.transport.get_extra_info("peername"))
        return web.Response(text=METRICS)

    async with http_server({"/metrics": metrics}) as port:
        t = _t(port, engine="dcgm")  # dcgm: no identity probes, only /metrics
        s = Scraper(Config(targets=(t,)))
        for _ in range(3):
            assert (await s.scrape(t)).status == "ok"
        await s.aclose()
    assert len(peers) == 3 and len(set(peers)) == 1


async def test_deferred_identity_never_delays_data_and_comes_with_the_next_scrape():
    answer = asyncio.Event()  # the identity endpoint answers only after the first scrape

    async def metrics(_req):
        return web.Response(text=METRICS)

    async def version(_req):
        await answer.wait()  # a slow identity endpoint: slower than the first scrape
        return web.json_response({"version": "0.33.0"})

    async with http_server({"/metrics": metrics, "/version": version}) as port:
        t = _t(port, engine="vllm")
        s = Scraper(Config(targets=(t,)), defer_identity=True)
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        r1 = await s.scrape(t)
        took = loop.time() - t0
        pending = s.identity_pending(t.name)
        answer.set()
        r2 = await s.scrape(t)  # waits for the identity still in flight
        r3 = await s.scrape(t)
        await s.aclose()
    # the data came without waiting out the identity probe's timeout
    assert r1.status == "ok" and r1.identity is None and pending and took < IDENTITY_TIMEOUT_S
    assert r2.identity is not None and r2.identity["version"] == "0.33.0"
    assert r3.identity is None and not s.identity_pending(t.name)


async def test_deferred_identity_still_waits_when_the_path_depends_on_it():
    async def iters(_req):
        return web.json_response([{"iter": 1}])

    async def prom(_req):
        return web.Response(text="trtllm_x 1\n")

    async def models(_req):
        return web.json_response({"data": [{"id": "m", "owned_by": "tensorrt_llm"}]})

    routes = {"/metrics": iters, "/prometheus/metrics": prom, "/v1/models": models}
    async with http_server(routes) as port:
        t = _t(port)  # no hint: identity finds trtllm-serve, whose Prometheus path is better
        s = Scraper(Config(targets=(t,)), defer_identity=True)
        raw = await s.scrape(t)
        await s.aclose()
    assert raw.status == "ok" and raw.url.endswith("/prometheus/metrics")
    assert raw.identity is not None and raw.identity["engine"] == "trtllm"


async def test_deferred_identity_is_cancelled_on_close():
    async def metrics(_req):
        return web.Response(text=METRICS)

    async def version(_req):
        await asyncio.sleep(5)
        return web.json_response({"version": "x"})

    async with http_server({"/metrics": metrics, "/version": version}) as port:
        t = _t(port, engine="vllm")
        s = Scraper(Config(targets=(t,)), defer_identity=True)
        assert (await s.scrape(t)).status == "ok" and s.identity_pending(t.name)
        await asyncio.wait_for(s.aclose(), 2)
    assert not s.identity_pending(t.name)


async def test_plain_http_builds_no_ssl_context(monkeypatch):
    built: list[object] = []
    real = httpx.create_ssl_context

    def counting(*a, **kw):
        built.append(kw.get("verify"))
        return real(*a, **kw)

    monkeypatch.setattr(httpx, "create_ssl_context", counting)

    async def metrics(_req):
        return web.Response(text=METRICS)

    async with http_server({"/metrics": metrics}) as port:
        raw = await _scrape(_t(port, engine="dcgm"))
    assert raw.status == "ok" and built == []


async def test_remote_target_goes_through_the_environment_proxy_loopback_never(monkeypatch):
    """HTTP_PROXY is honoured for a remote host (the request reaches the proxy on 127.0.0.1
    in absolute form; the remote host itself is never contacted), NO_PROXY exempts a host,
    and a loopback target is always fetched directly."""
    seen: list[bytes] = []

    async def proxy(r, w):
        head = await r.readuntil(b"\r\n\r\n")
        seen.append(head.split(b"\r\n", 1)[0])
        body = METRICS.encode()
        w.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n"
                b"Connection: close\r\n\r\n" % len(body) + body)
        await w.drain()

    async def metrics(_req):
        return web.Response(text=METRICS, content_type="text/plain")

    async with raw_server(proxy) as pport, http_server({"/metrics": metrics}) as port:
        monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{pport}")
        monkeypatch.setenv("NO_PROXY", "exempt.invalid")
        for var in ("http_proxy", "no_proxy", "ALL_PROXY", "all_proxy"):
            monkeypatch.delenv(var, raising=False)
        remote = parse_target("vllm@remote.invalid:8000", timeout_s=2.0)
        local = _t(port, engine="vllm")
        s = Scraper(Config(targets=(remote, local)), defer_identity=True)
        try:
            got_remote = await s.scrape(remote)
            got_local = await s.scrape(local)
        finally:
            await s.aclose()
    assert got_remote.status == "ok" and "num_requests_running" in (got_remote.body or "")
    assert got_local.status == "ok"
    # HTTP_PROXY is process-wide: another test's client in this xdist worker (a demo's /gpus
    # poll) may pass through the proxy meanwhile; what is checked is this Scraper's traffic
    ours = [line for line in seen if b"remote.invalid" in line or f":{port}/".encode() in line]
    assert ours and all(line.startswith(b"GET http://remote.invalid:8000/") for line in ours)
    from llmtop.sources.scrape import _env_proxy

    assert _env_proxy(parse_target("exempt.invalid:8000")) is None


async def test_direct_plain_http_sends_the_client_headers_and_no_cookies():
    """Plain-http scrapes skip httpx's client layer; the server must see the same request:
    user agent, Accept, the API key and extra headers, and never a cookie it set."""
    seen: list[dict[str, str]] = []

    async def metrics(req):
        seen.append(dict(req.headers))
        return web.Response(text=METRICS, content_type="text/plain",
                            headers={"Set-Cookie": "session=abc; Path=/"})

    async with http_server({"/metrics": metrics}) as port:
        t = _t(port, engine="vllm", api_key="k-1", headers=(("X-Team", "infra"),))
        s = Scraper(Config(targets=(t,)), defer_identity=True)
        try:
            raws = [await s.scrape(t) for _ in range(3)]
        finally:
            await s.aclose()
    assert [r.status for r in raws] == ["ok"] * 3 and raws[-1].body == METRICS
    assert len(seen) == 3
    for h in seen:
        assert h["User-Agent"].startswith("llmtop/")
        assert "text/plain" in h["Accept"]
        assert h["Authorization"] == "Bearer k-1" and h["X-Team"] == "infra"
        assert "Cookie" not in h


async def test_a_redirecting_url_is_followed_every_time():
    hits: list[str] = []

    async def moved(req):
        hits.append(req.path)
        raise web.HTTPFound("/metrics2")

    async def metrics2(req):
        hits.append(req.path)
        return web.Response(text=METRICS, content_type="text/plain")

    async with http_server({"/metrics": moved, "/metrics2": metrics2}) as port:
        t = _t(port, engine="vllm")
        s = Scraper(Config(targets=(t,)), defer_identity=True)
        try:
            raws = [await s.scrape(t) for _ in range(3)]
        finally:
            await s.aclose()
    assert [r.status for r in raws] == ["ok"] * 3
    assert all(r.body == METRICS for r in raws)
    # the first scrape found the redirect on the direct path and asked again through the
    # client; later ones go through the client at once (no extra request)
    assert hits == ["/metrics", "/metrics", "/metrics2", "/metrics", "/metrics2",
                    "/metrics", "/metrics2"]
