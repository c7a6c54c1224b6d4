"""A local OpenAI-compatible streaming mock server for the probe's tests and benchmarks.

Raw asyncio HTTP/1.1 (keep-alive, chunked SSE), so that the server is cheap and its timing is
exact: the first content event is written ``ttft`` seconds after the request arrived and event
``i`` at ``ttft + i * itl`` (absolute schedule, no drift). With ``ttft == itl == 0`` the whole
stream is written in one go (the zero-delay benchmark mode).

Failure modes are chosen per request by the ``model`` field:

- ``fail-503``: HTTP 503 with ``Retry-After``;
- ``fail-429`` / ``fail-429-N``: HTTP 429 with ``Retry-After`` (``-N``: only the first N requests);
- ``fail-close``: close the connection after 3 content events (truncated stream);
- ``fail-malformed``: a ``data: {not json`` line after 2 content events, then go on.

Endpoints: ``GET /v1/models``, ``POST /v1/completions``, ``POST /v1/chat/completions``,
``POST /tokenize`` (with ``--tokenize``; 1 token per 4 characters, as ``usage`` reports too),
``GET /stats`` (request arrival times per model; how late, on average, the mock itself
wrote the first content event: its own share of any TTFT over-read; what it received and
sent: streams asked for and completed, content events written), ``GET /metrics`` (with
``--metrics``: ``vllm:generation_tokens_total``, every content event written, as a server
counts tokens it generated, also for streams the client cut off; and
``vllm:request_success_total``, the streams written to the end). Binds 127.0.0.1 only.

``--late-crlf S``: a stream's last chunk ``0\r\n`` is written, then its final ``\r\n`` S
seconds later in a packet of its own, and the connection is closed (as llama-server does).

Run: ``python tests/loadgen/mock_server.py --ttft 0.2 --itl 0.02`` prints ``PORT <n>``.
From Python: ``start_mock(ttft=0.2, itl=0.02) -> MockProcess`` (a separate process).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import subprocess
import sys
import time
from dataclasses import dataclass

__all__ = ["MockProcess", "count_tokens", "serve", "start_mock"]

MODEL = "mock-model"


def count_tokens(text: str) -> int:
    """The mock's tokenizer: one token per 4 characters, at least 1."""
    return max(1, math.ceil(len(text) / 4))


@dataclass
class _Cfg:
    ttft: float = 0.0
    itl: float = 0.0
    tokenize: bool = False
    usage_style: str = "vllm"  # vllm | llamacpp | none
    retry_after: float = 1.0
    no_ignore_eos: bool = False  # reject requests carrying ignore_eos (OpenAI-like strictness)
    metrics: bool = False
    late_crlf: float = 0.0


class _State:
    def __init__(self, cfg: _Cfg) -> None:
        self.cfg = cfg
        self.arrivals: dict[str, list[float]] = {}
        self.requests = 0
        self.late_sum = 0.0
        """Sum over streams of how late the first content event was written (s)."""
        self.late_n = 0
        self.streams = 0
        """Streaming requests received."""
        self.streams_done = 0
        """Streams written to the end."""
        self.tokens = 0
        """Content events written (the generation counter)."""


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def _head(status: str, ctype: bytes, extra: bytes = b"", length: int | None = None) -> bytes:
    h = b"HTTP/1.1 " + status.encode() + b"\r\nContent-Type: " + ctype + b"\r\n" + extra
    if length is None:
        h += b"Transfer-Encoding: chunked\r\n"
    else:
        h += b"Content-Length: %d\r\n" % length
    return h + b"Connection: keep-alive\r\n\r\n"


def _json_response(status: str, obj: object, extra: bytes = b"") -> bytes:
    body = json.dumps(obj).encode()
    return _head(status, b"application/json", extra, len(body)) + body


def _prompt_text(req: dict) -> str:
    if "messages" in req:
        return " ".join(str(m.get("content", "")) for m in req["messages"])
    p = req.get("prompt", "")
    return p if isinstance(p, str) else " ".join(map(str, p))


def _events(req: dict, chat: bool, cfg: _Cfg, n: int) -> tuple[list[bytes], bytes]:
    """Content event payloads (one per token) and the tail (finish, usage, [DONE])."""
    rid = b"cmpl-mock"
    obj = b"chat.completion.chunk" if chat else b"text_completion"
    pre = b'data: {"id":"' + rid + b'","object":"' + obj + b'","model":"m","choices":[{"index":0,'
    if chat:
        evs = [pre + b'"delta":{"content":" tok%d"},"finish_reason":null}]}\n\n' % i
               for i in range(n)]
    else:
        evs = [pre + b'"text":" tok%d","finish_reason":null}]}\n\n' % i for i in range(n)]
    prompt_tokens = count_tokens(_prompt_text(req))
    usage = {"prompt_tokens": prompt_tokens, "completion_tokens": n,
             "total_tokens": prompt_tokens + n}
    want_usage = bool((req.get("stream_options") or {}).get("include_usage"))
    fin: dict = {"id": "cmpl-mock", "object": obj.decode(), "model": "m",
                 "choices": [{"index": 0, "finish_reason": "length",
                              **({"delta": {}} if chat else {"text": ""})}]}
    tail = b""
    if cfg.usage_style == "llamacpp" and want_usage:
        fin["usage"] = usage
        tail += b"data: " + json.dumps(fin).encode() + b"\n\n"
    else:
        tail += b"data: " + json.dumps(fin).encode() + b"\n\n"
        if cfg.usage_style == "vllm" and want_usage:
            u = {"id": "cmpl-mock", "object": obj.decode(), "model": "m", "choices": [],
                 "usage": usage}
            tail += b"data: " + json.dumps(u).encode() + b"\n\n"
    tail += b"data: [DONE]\n\n"
    return evs, tail


async def _stream(writer: asyncio.StreamWriter, req: dict, chat: bool, st: _State,
                  t_arrive: float, model: str) -> bool:
    """Write one streaming response. Returns False when the connection must be closed."""
    cfg = st.cfg
    n = int(req.get("max_tokens") or 16)
    st.streams += 1
    evs, tail = _events(req, chat, cfg, n)
    head = _head("200 OK", b"text/event-stream")
    if chat:
        role = (b'data: {"id":"cmpl-mock","object":"chat.completion.chunk","model":"m",'
                b'"choices":[{"index":0,"delta":{"role":"assistant","content":""},'
                b'"finish_reason":null}]}\n\n')
        head += _chunk(role)
    if model == "fail-malformed":
        evs.insert(min(2, len(evs)), b"data: {not json\n\n")
    if cfg.ttft == 0 and cfg.itl == 0:
        if model == "fail-close":
            writer.write(head + _chunk(b"".join(evs[:3])))
            st.tokens += 3
            await writer.drain()
            return False
        writer.write(head + _chunk(b"".join(evs) + tail))
        st.tokens += len(evs)
        return await _end(writer, st)
    writer.write(head)
    loop = asyncio.get_running_loop()
    for i, ev in enumerate(evs):
        if model == "fail-close" and i == 3:
            await writer.drain()
            return False
        due = t_arrive + cfg.ttft + i * cfg.itl
        delay = due - loop.time()
        if delay > 0:
            await asyncio.sleep(delay)
        writer.write(_chunk(ev))
        st.tokens += 1
        if i == 0:
            st.late_sum += loop.time() - due
            st.late_n += 1
    writer.write(_chunk(tail))
    return await _end(writer, st)


async def _end(writer: asyncio.StreamWriter, st: _State) -> bool:
    """The last chunk; with ``late_crlf`` its final CRLF alone, later, then a close."""
    if st.cfg.late_crlf:
        writer.write(b"0\r\n")
        await writer.drain()
        st.streams_done += 1
        await asyncio.sleep(st.cfg.late_crlf)
        writer.write(b"\r\n")
        await writer.drain()
        return False
    writer.write(b"0\r\n\r\n")
    await writer.drain()
    st.streams_done += 1
    return True


async def _handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                  st: _State) -> None:
    loop = asyncio.get_running_loop()
    try:
        while True:
            try:
                head = await reader.readuntil(b"\r\n\r\n")
            except (asyncio.IncompleteReadError, ConnectionError):
                return
            t_arrive = loop.time()
            lines = head.split(b"\r\n")
            method, path, _ = lines[0].decode("latin-1").split(" ", 2)
            length = 0
            for ln in lines[1:]:
                if ln[:15].lower() == b"content-length:":
                    length = int(ln[15:].strip())
            body = await reader.readexactly(length) if length else b""
            keep = await _route(writer, method, path.split("?")[0], body, st, t_arrive)
            if not keep:
                return
    except (ConnectionError, RuntimeError, asyncio.CancelledError):
        return  # the client went away (cancelled streams at the end of a run)
    finally:
        try:
            writer.close()
        except Exception:
            pass


async def _route(writer: asyncio.StreamWriter, method: str, path: str, body: bytes,
                 st: _State, t_arrive: float) -> bool:
    cfg = st.cfg
    if method == "GET" and path == "/v1/models":
        writer.write(_json_response("200 OK", {"object": "list",
                                               "data": [{"id": MODEL, "object": "model"}]}))
        return True
    if method == "GET" and path == "/stats":
        writer.write(_json_response("200 OK", {
            "requests": st.requests, "arrivals": st.arrivals, "first_late_n": st.late_n,
            "first_late_mean_s": st.late_sum / st.late_n if st.late_n else None,
            "streams": st.streams, "streams_done": st.streams_done, "tokens": st.tokens}))
        return True
    if method == "GET" and path == "/metrics" and cfg.metrics:
        body = (b"# TYPE vllm:generation_tokens_total counter\n"
                b'vllm:generation_tokens_total{model_name="%s"} %d\n' % (MODEL.encode(),
                                                                         st.tokens)
                + b"# TYPE vllm:request_success_total counter\n"
                b'vllm:request_success_total{finished_reason="length",model_name="%s"} %d\n'
                % (MODEL.encode(), st.streams_done))
        writer.write(_head("200 OK", b"text/plain; version=0.0.4", length=len(body)) + body)
        return True
    if method == "POST" and path == "/tokenize" and cfg.tokenize:
        req = json.loads(body)
        n = count_tokens(_prompt_text(req))
        writer.write(_json_response("200 OK", {"count": n, "max_model_len": 8192,
                                               "tokens": list(range(n))}))
        return True
    if method == "POST" and path in ("/v1/completions", "/v1/chat/completions"):
        req = json.loads(body)
        model = str(req.get("model", ""))
        st.requests += 1
        arr = st.arrivals.setdefault(model, [])
        arr.append(time.time())
        if cfg.no_ignore_eos and "ignore_eos" in req:
            writer.write(_json_response("400 Bad Request",
                                        {"error": {"message": "unknown field ignore_eos"}}))
            return True
        if model.startswith("fail-429"):
            limit = int(model.split("-")[2]) if model.count("-") == 2 else None
            if limit is None or len(arr) <= limit:
                ra = b"Retry-After: %g\r\n" % cfg.retry_after
                writer.write(_json_response("429 Too Many Requests",
                                            {"error": {"message": "slow down"}}, ra))
                return True
        if model == "fail-503":
            ra = b"Retry-After: %g\r\n" % cfg.retry_after
            writer.write(_json_response("503 Service Unavailable",
                                        {"error": {"message": "overloaded"}}, ra))
            return True
        if not req.get("stream"):
            n = int(req.get("max_tokens") or 16)
            pt = count_tokens(_prompt_text(req))
            writer.write(_json_response("200 OK", {
                "choices": [{"index": 0, "text": " tok" * n, "finish_reason": "length"}],
                "usage": {"prompt_tokens": pt, "completion_tokens": n,
                          "total_tokens": pt + n}}))
            return True
        return await _stream(writer, req, path.endswith("chat/completions"), st, t_arrive,
                             model)
    writer.write(_json_response("404 Not Found", {"error": "not found"}))
    return True


async def serve(cfg: _Cfg, port: int = 0, ready: asyncio.Future | None = None) -> None:
    """Serve forever on 127.0.0.1:port; prints ``PORT <n>`` when listening."""
    st = _State(cfg)
    server = await asyncio.start_server(lambda r, w: _handle(r, w, st), "127.0.0.1", port,
                                        backlog=2048)
    real = server.sockets[0].getsockname()[1]
    print(f"PORT {real}", flush=True)
    async with server:
        await server.serve_forever()


class MockProcess:
    """A mock server running in its own process. ``url`` is ``http://127.0.0.1:PORT``."""

    def __init__(self, proc: subprocess.Popen, port: int) -> None:
        self.proc = proc
        self.port = port
        self.url = f"http://127.0.0.1:{port}"

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def __enter__(self) -> MockProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start_mock(*, ttft: float = 0.0, itl: float = 0.0, tokenize: bool = False,
               usage_style: str = "vllm", retry_after: float = 1.0,
               no_ignore_eos: bool = False, cpu: int | None = None, metrics: bool = False,
               late_crlf: float = 0.0) -> MockProcess:
    """Start the mock in a separate process and wait until it listens."""
    cmd = [sys.executable, os.path.abspath(__file__), "--ttft", str(ttft), "--itl", str(itl),
           "--usage-style", usage_style, "--retry-after", str(retry_after)]
    if tokenize:
        cmd.append("--tokenize")
    if no_ignore_eos:
        cmd.append("--no-ignore-eos")
    if metrics:
        cmd.append("--metrics")
    if late_crlf:
        cmd += ["--late-crlf", str(late_crlf)]
    if cpu is not None and sys.platform.startswith("linux"):
        cmd = ["taskset", "-c", str(cpu), *cmd]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.startswith("PORT "):
        proc.kill()
        raise RuntimeError(f"mock server did not start: {line!r}")
    return MockProcess(proc, int(line.split()[1]))


def _main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--ttft", type=float, default=0.0)
    ap.add_argument("--itl", type=float, default=0.0)
    ap.add_argument("--tokenize", action="store_true")
    ap.add_argument("--usage-style", default="vllm", choices=["vllm", "llamacpp", "none"])
    ap.add_argument("--retry-after", type=float, default=1.0)
    ap.add_argument("--no-ignore-eos", action="store_true")
    ap.add_argument("--metrics", action="store_true")
    ap.add_argument("--late-crlf", type=float, default=0.0)
    a = ap.parse_args()
    cfg = _Cfg(ttft=a.ttft, itl=a.itl, tokenize=a.tokenize, usage_style=a.usage_style,
               retry_after=a.retry_after, no_ignore_eos=a.no_ignore_eos, metrics=a.metrics,
               late_crlf=a.late_crlf)
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    try:
        asyncio.run(serve(cfg, a.port))
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    _main()
