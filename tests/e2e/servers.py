"""Misbehaving (and one healthy) metrics servers on 127.0.0.1, for the end-to-end tests.

Every server is a raw asyncio TCP listener on ``127.0.0.1:0`` (one port per case) so the
bytes on the wire are exactly what a test wants: a ``Content-Length`` larger than the body
followed by a close, a body over the 32 MiB cap sent in chunks, a slow answer, ... All the
listeners share one event loop running in a daemon thread (``ServerSet``).

Each case is a function ``(path, n) -> Reply | None`` where ``n`` counts the ``/metrics``
requests to that server (1, 2, ...); ``None`` answers 404 (identity endpoints).
"""

from __future__ import annotations

import asyncio
import json
import re
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

__all__ = [
    "CASES",
    "HEALTHY_ENGINE",
    "VLLM_FIXTURE",
    "Reply",
    "ServerSet",
    "closed_port",
    "vllm_body",
]

VLLM_FIXTURE = (
    Path(__file__).resolve().parents[1] / "fixtures" / "metrics"
    / "vllm-real-cpu-v0.32.0-under-load.txt"
)
HEALTHY_ENGINE = "vllm"
_MIB = 1024 * 1024
_FIXTURE_START = 1.79535416043e09
_VALUE = re.compile(r"^(vllm:[^\s{]+)(\{[^}]*\})?\s+(\S+)\s*$")


@dataclass
class Reply:
    """One HTTP answer, written as raw bytes."""

    status: int = 200
    body: bytes = b""
    content_type: str = "text/plain; version=0.0.4; charset=utf-8"
    headers: dict[str, str] = field(default_factory=dict)
    content_length: int | None = None
    """Declared Content-Length; None = ``len(body)``; -1 = chunked (``chunks`` is sent)."""
    delay_s: float = 0.0
    """Sleep before answering."""
    close_after: bool = False
    """Close the connection right after writing (a truncated body)."""
    chunks: Callable[[], Iterator[bytes]] | None = None
    chunk_delay_s: float = 0.0
    """Sleep between chunks (a trickling body)."""
    drop: bool = False
    """Close the connection without answering at all."""
    raw: bytes | None = None
    """Write exactly these bytes (no HTTP framing), then close."""


def _fixture() -> list[str]:
    return VLLM_FIXTURE.read_text(encoding="utf-8").splitlines()


def vllm_body(scale: float = 1.0, *, start_time: float = _FIXTURE_START,
              drop: tuple[str, ...] = (), replace: dict[str, str] | None = None,
              ranks: int = 1) -> str:
    """The real vLLM 0.32 capture with every ``vllm:`` counter, bucket, count and sum
    multiplied by ``scale`` (so counters advance with a realistic spread and buckets stay
    cumulative), ``process_start_time_seconds`` set to ``start_time``, families whose name
    starts with one of ``drop`` removed, and samples named in ``replace`` (full sample name,
    e.g. ``vllm:kv_cache_usage_perc``) given that literal value text. ``ranks`` > 1 repeats
    every ``engine="0"`` sample for data-parallel ranks 1.. (rank r with values x (r + 1))."""
    out: list[str] = []
    replace = replace or {}
    for line in _fixture():
        if drop and any(
            line.startswith(d) or line.startswith(f"# HELP {d}") or line.startswith(f"# TYPE {d}")
            for d in drop
        ):
            continue
        if line.startswith("process_start_time_seconds "):
            out.append(f"process_start_time_seconds {start_time!r}")
            continue
        m = _VALUE.match(line)
        if m:
            name, labels, value = m.group(1), m.group(2) or "", m.group(3)
            if name in replace:
                out.append(f"{name}{labels} {replace[name]}")
                continue
            if name.endswith(("_total", "_bucket", "_count", "_sum")):
                out.append(f"{name}{labels} {float(value) * scale!r}")
            else:
                out.append(line)
            for r in range(1, ranks if 'engine="0"' in labels else 1):
                rl = labels.replace('engine="0"', f'engine="{r}"')
                if name.endswith(("_total", "_bucket", "_count", "_sum")):
                    out.append(f"{name}{rl} {float(value) * scale * (r + 1)!r}")
                elif name.endswith("_created") or name.endswith("_info"):
                    out.append(f"{name}{rl} {value}")
                else:
                    out.append(f"{name}{rl} {float(value) * (r + 1)!r}")
            continue
        out.append(line)
    return "\n".join(out) + "\n"


def _vllm_identity(path: str) -> Reply | None:
    if path == "/version":
        return Reply(body=b'{"version": "0.32.0"}', content_type="application/json")
    if path == "/v1/models":
        doc = {"object": "list", "data": [{"id": "tiny-llama", "object": "model",
                                           "owned_by": "vllm", "max_model_len": 1024}]}
        return Reply(body=json.dumps(doc).encode(), content_type="application/json")
    return None


# ---------------------------------------------------------------------------- cases

def healthy(path: str, n: int) -> Reply | None:
    """A real vLLM capture whose counters grow by 10 % of their value per scrape."""
    if path != "/metrics":
        return _vllm_identity(path)
    return Reply(body=vllm_body(1.0 + 0.1 * n).encode())


def partial(path: str, n: int) -> Reply | None:
    """vLLM without the waiting gauge, TTFT histogram and prefix-cache counters."""
    if path != "/metrics":
        return _vllm_identity(path)
    drop = ("vllm:num_requests_waiting", "vllm:time_to_first_token_seconds",
            "vllm:prefix_cache_")
    return Reply(body=vllm_body(1.0 + 0.1 * n, drop=drop).encode())


def slow_identity(path: str, n: int) -> Reply | None:
    """Healthy, but the identity endpoints answer after 0.3 s (first contact is slower)."""
    if path != "/metrics":
        ident = _vllm_identity(path)
        return None if ident is None else Reply(body=ident.body,
                                                content_type=ident.content_type, delay_s=0.3)
    return Reply(body=vllm_body(1.0 + 0.1 * n).encode())


def fast_then_slow(path: str, n: int) -> Reply | None:
    """Healthy at the first scrape, then every ``/metrics`` answer takes 4 s (goes stale)."""
    if path != "/metrics":
        return _vllm_identity(path)
    return Reply(body=vllm_body(1.0 + 0.1 * n).encode(), delay_s=0.0 if n <= 1 else 4.0)


def ok_then_500(path: str, n: int) -> Reply | None:
    """Healthy at the first scrape, HTTP 500 from the second on."""
    if path != "/metrics":
        return _vllm_identity(path)
    if n <= 1:
        return Reply(body=vllm_body(1.1).encode())
    return http_500(path, n)


def ok_then_drop(path: str, n: int) -> Reply | None:
    """Healthy at the first scrape, then the connection is closed without an answer."""
    if path != "/metrics":
        return _vllm_identity(path)
    if n <= 1:
        return Reply(body=vllm_body(1.1).encode())
    return Reply(drop=True)


def counter_reset(path: str, n: int) -> Reply | None:
    """Second scrape: counters fall to a tenth, same process start time (a reset only)."""
    if path != "/metrics":
        return _vllm_identity(path)
    return Reply(body=vllm_body(1.0 if n <= 1 else 0.1).encode())


def future_start(path: str, n: int) -> Reply | None:
    """Healthy, but its clock is a day ahead: ``process_start_time_seconds`` is tomorrow
    (fixed at import, so it does not move between scrapes)."""
    if path != "/metrics":
        return _vllm_identity(path)
    return Reply(body=vllm_body(1.0 + 0.1 * n, start_time=_TOMORROW).encode())


_TOMORROW = float(int(time.time())) + 86400.0


def dp2(path: str, n: int) -> Reply | None:
    """vLLM with two data-parallel engine ranks (``engine="0"``/``"1"``)."""
    if path != "/metrics":
        return _vllm_identity(path)
    return Reply(body=vllm_body(1.0 + 0.1 * n, ranks=2).encode())


def restart(path: str, n: int) -> Reply | None:
    """Second scrape: counters fall to a tenth and the process start time moves on."""
    if path != "/metrics":
        return _vllm_identity(path)
    if n <= 1:
        return Reply(body=vllm_body(1.0).encode())
    return Reply(body=vllm_body(0.1, start_time=_FIXTURE_START + 3600.0).encode())


def nan_values(path: str, n: int) -> Reply | None:
    """vLLM with NaN/+Inf/-Inf gauges, NaN/+Inf histogram sums, NaN ITL buckets and a
    NaN-then-+Inf prompt-token counter; the other counters still advance."""
    if path != "/metrics":
        return _vllm_identity(path)
    text = vllm_body(1.0 + 0.1 * n, replace={
        "vllm:kv_cache_usage_perc": "NaN",
        "vllm:num_requests_running": "+Inf",
        "vllm:num_requests_waiting": "-Inf",
        "vllm:time_to_first_token_seconds_sum": "NaN",
        "vllm:e2e_request_latency_seconds_sum": "+Inf",
        "vllm:prompt_tokens_total": "+Inf" if n > 1 else "NaN",
        "vllm:inter_token_latency_seconds_bucket": "NaN",
    })
    return Reply(body=text.encode())


def slow(path: str, n: int) -> Reply | None:
    """Answers every request 4 s late (past any --timeout the tests use)."""
    return Reply(body=vllm_body().encode(), delay_s=4.0)


def http_500(path: str, n: int) -> Reply:
    return Reply(status=500, body=b'{"error": {"message": "engine core died"}}',
                 content_type="application/json")


def http_401(path: str, n: int) -> Reply:
    return Reply(status=401, body=b'{"error": "Unauthorized"}', content_type="application/json")


def html_200(path: str, n: int) -> Reply:
    return Reply(body=b"<!DOCTYPE html>\n<html><head><title>Login</title></head>"
                      b"<body>Please sign in</body></html>\n",
                 content_type="text/html; charset=utf-8")


def html_as_text(path: str, n: int) -> Reply:
    """HTML served as text/plain (a proxy error page with the wrong content type)."""
    return Reply(body=b"<html><body><h1>502 Bad Gateway</h1></body></html>\n",
                 content_type="text/plain")


def garbage_200(path: str, n: int) -> Reply:
    return Reply(body=b"\x00\x01 this is {not] metrics ::: \xff\xfe\n}}}}\nvalue=???\n" * 50,
                 content_type="text/plain")


def truncated(path: str, n: int) -> Reply:
    """Declares the full capture, sends a third of it, closes."""
    full = vllm_body().encode()
    return Reply(body=full[: len(full) // 3], content_length=len(full), close_after=True)


def huge_declared(path: str, n: int) -> Reply:
    """Declares a 33 MiB body (over the 32 MiB cap) and sends only its start."""
    return Reply(body=b"# filler\n" * 100, content_length=33 * _MIB, close_after=True)


def _huge_chunks(total: int) -> Callable[[], Iterator[bytes]]:
    block = (b"vllm:num_requests_running{model_name=\"x\"} 1.0\n" * 1400)[:65536]

    def gen() -> Iterator[bytes]:
        sent = 0
        while sent < total:
            yield block
            sent += len(block)

    return gen


def huge_chunked(path: str, n: int) -> Reply:
    """Streams 33 MiB with chunked encoding (no Content-Length): the cap must stop it."""
    return Reply(content_length=-1, chunks=_huge_chunks(33 * _MIB))


def huge_chunked_small(path: str, n: int) -> Reply:
    """Streams 2 MiB chunked: over a 1 MiB cap set in the Config (in-process tests)."""
    return Reply(content_length=-1, chunks=_huge_chunks(2 * _MIB))


def restart_higher(path: str, n: int) -> Reply | None:
    """Second scrape: a new process start time and counters *higher* than before (the new
    process already did more work than the old one): still a restart, never a spike."""
    if path != "/metrics":
        return _vllm_identity(path)
    if n <= 1:
        return Reply(body=vllm_body(1.0).encode())
    return Reply(body=vllm_body(3.0, start_time=_FIXTURE_START + 3600.0).encode())


def restart_created(path: str, n: int) -> Reply | None:
    """No ``process_start_time_seconds``; the second scrape has every ``_created`` an hour
    later and counters three times higher: only ``_created`` tells of the restart."""
    if path != "/metrics":
        return _vllm_identity(path)
    text = vllm_body(1.0 if n <= 1 else 3.0, drop=("process_start_time_seconds",))
    if n > 1:
        text = re.sub(r"^(vllm:\S+_created(?:\{[^}]*\})?) (\S+)$",
                      lambda m: f"{m.group(1)} {float(m.group(2)) + 3600.0!r}", text,
                      flags=re.M)
    return Reply(body=text.encode())


def bad_identity(path: str, n: int) -> Reply | None:
    """Healthy metrics; every identity endpoint answers something odd (wrong JSON shapes,
    HTML, 500, a 5 s hang, a 1 MiB body)."""
    odd: dict[str, Reply] = {
        "/version": Reply(body=b'{"version": {"nested": 1}}', content_type="application/json"),
        "/v1/models": Reply(body=b'{"data": "not a list"}', content_type="application/json"),
        "/server_info": Reply(body=b"[1, 2, 3]", content_type="application/json"),
        "/v2": Reply(body=b'{"name": 5, "extensions": "x"}', content_type="application/json"),
        "/props": Reply(body=b"<html>props</html>", content_type="text/html"),
        "/info": Reply(status=500, body=b"boom"),
        "/api/version": Reply(body=b'{"version": "0.1"}', delay_s=5.0),
    }
    if path != "/metrics":
        return odd.get(path, Reply(body=b"{" * (1 << 20), content_type="application/json"))
    return Reply(body=vllm_body(1.0 + 0.1 * n).encode())


def crlf(path: str, n: int) -> Reply | None:
    """The healthy capture with CRLF line ends (some proxies rewrite them)."""
    if path != "/metrics":
        return _vllm_identity(path)
    return Reply(body=vllm_body(1.0 + 0.1 * n).replace("\n", "\r\n").encode())


def bom(path: str, n: int) -> Reply | None:
    """The healthy capture behind a UTF-8 byte-order mark."""
    if path != "/metrics":
        return _vllm_identity(path)
    return Reply(body=b"\xef\xbb\xbf" + vllm_body(1.0 + 0.1 * n).encode())


def gzipped(path: str, n: int) -> Reply | None:
    """The healthy capture, gzip-encoded (``Content-Encoding: gzip``)."""
    if path != "/metrics":
        return _vllm_identity(path)
    import gzip

    return Reply(body=gzip.compress(vllm_body(1.0 + 0.1 * n).encode()),
                 headers={"Content-Encoding": "gzip"})


SGLANG_FIXTURE = VLLM_FIXTURE.with_name("sglang-generated-v0.5.23-metrics_collector.txt")


def engine_swap(path: str, n: int) -> Reply | None:
    """The port serves vLLM at the first scrape and SGLang from the second on (a different
    engine started on the same port)."""
    if path != "/metrics":
        return _vllm_identity(path) if n <= 1 else None
    if n <= 1:
        return Reply(body=vllm_body().encode())
    return Reply(body=SGLANG_FIXTURE.read_bytes())


def http_403(path: str, n: int) -> Reply:
    return Reply(status=403, body=b"Forbidden", content_type="text/plain")


def http_404(path: str, n: int) -> Reply:
    return Reply(status=404, body=b'{"detail": "Not Found"}', content_type="application/json")


def redirect_loop(path: str, n: int) -> Reply:
    return Reply(status=302, headers={"Location": "/metrics"}, body=b"")


def bad_gzip(path: str, n: int) -> Reply:
    return Reply(body=b"this is not gzip at all" * 10, headers={"Content-Encoding": "gzip"})


def json_200(path: str, n: int) -> Reply:
    return Reply(body=b'{"status": "error", "message": "metrics disabled"}',
                 content_type="application/json")


_DEEP = b"[" * 5000 + b"]" * 5000


def deep_json_200(path: str, n: int) -> Reply:
    """JSON nested 5000 deep (past Python's recursion limit), status 200."""
    return Reply(body=_DEEP, content_type="application/json")


def deep_json_500(path: str, n: int) -> Reply:
    """The same as the body of an HTTP 500 (llmtop reads JSON error messages)."""
    return Reply(status=500, body=_DEEP, content_type="application/json")


def hang_up(path: str, n: int) -> Reply:
    """Accepts the connection, reads the request, closes without a byte."""
    return Reply(drop=True)


def not_http(path: str, n: int) -> Reply:
    """Another protocol on the port (an SSH banner)."""
    return Reply(raw=b"SSH-2.0-OpenSSH_9.6p1 Ubuntu-3ubuntu13\r\n")


def bad_status_line(path: str, n: int) -> Reply:
    """HTTP-looking, but the status line is broken."""
    return Reply(raw=b"HTTP/1.1 OK-ish\r\nContent-Length: 2\r\n\r\nhi")


def node_exporter(path: str, n: int) -> Reply:
    """Valid Prometheus text, but not an inference engine's."""
    text = (
        "# HELP node_load1 1m load average.\n# TYPE node_load1 gauge\nnode_load1 0.42\n"
        "# HELP node_cpu_seconds_total Seconds the CPUs spent in each mode.\n"
        "# TYPE node_cpu_seconds_total counter\n"
        + "".join(f'node_cpu_seconds_total{{cpu="{i}",mode="idle"}} {1000.0 * n + i}\n'
                  for i in range(8))
    )
    return Reply(body=text.encode())


def trickle(path: str, n: int) -> Reply:
    """Headers at once, then the body one 1 KiB chunk per 0.2 s (past any timeout)."""
    body = vllm_body().encode()

    def gen() -> Iterator[bytes]:
        for i in range(0, len(body), 1024):
            yield body[i:i + 1024]

    return Reply(content_length=-1, chunks=gen, chunk_delay_s=0.2)


def one_long_line(path: str, n: int) -> Reply:
    """1 MiB on one line that starts like a vLLM sample and never closes its label."""
    return Reply(body=b"vllm:num_requests_running{model_name=\"" + b"a" * _MIB + b"\n")


def empty_200(path: str, n: int) -> Reply:
    return Reply(body=b"")


CASES: dict[str, Callable[[str, int], Reply | None]] = {
    "healthy": healthy,
    "partial": partial,
    "restart": restart,
    "dp2": dp2,
    "future_start": future_start,
    "counter_reset": counter_reset,
    "ok_then_500": ok_then_500,
    "ok_then_drop": ok_then_drop,
    "slow_identity": slow_identity,
    "fast_then_slow": fast_then_slow,
    "nan": nan_values,
    "slow": slow,
    "http_500": http_500,
    "http_401": http_401,
    "html": html_200,
    "html_as_text": html_as_text,
    "garbage": garbage_200,
    "truncated": truncated,
    "huge_declared": huge_declared,
    "huge_chunked": huge_chunked,
    "huge_chunked_small": huge_chunked_small,
    "empty": empty_200,
    "restart_higher": restart_higher,
    "restart_created": restart_created,
    "bad_identity": bad_identity,
    "engine_swap": engine_swap,
    "crlf": crlf,
    "bom": bom,
    "gzipped": gzipped,
    "http_403": http_403,
    "http_404": http_404,
    "redirect_loop": redirect_loop,
    "bad_gzip": bad_gzip,
    "json_200": json_200,
    "node_exporter": node_exporter,
    "hang_up": hang_up,
    "not_http": not_http,
    "bad_status_line": bad_status_line,
    "deep_json_200": deep_json_200,
    "deep_json_500": deep_json_500,
    "trickle": trickle,
    "one_long_line": one_long_line,
}


# ---------------------------------------------------------------------------- plumbing

_REASONS = {200: "OK", 302: "Found", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found",
            500: "Internal Server Error"}


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then closed)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class ServerSet:
    """Named case servers on 127.0.0.1 (port 0 each), served by one loop in one thread.

    ``start(names)`` starts fresh listeners and returns ``{name: port}``; ``counts[port]``
    is how many ``/metrics`` requests that listener answered.
    """

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.counts: dict[int, int] = {}
        self.requests: dict[int, list[tuple[str, dict[str, str]]]] = {}
        """Per port: (path, request headers with lower-case names) of every request."""
        self._servers: list[asyncio.AbstractServer] = []
        self._conns: set[asyncio.Task[None]] = set()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True,
                                        name="e2e-servers")
        self._thread.start()

    def start(self, names: list[str] | tuple[str, ...]) -> dict[str, int]:
        """Fresh listeners (new ports, counters at zero) for ``names``: ``{name: port}``."""
        out = {}
        for name in names:
            fut = asyncio.run_coroutine_threadsafe(self._listen(name), self.loop)
            out[name] = fut.result(10)
        return out

    async def _listen(self, name: str) -> int:
        case = CASES[name]
        box: dict[str, int] = {}

        async def client(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            task = asyncio.current_task()
            if task is not None:
                self._conns.add(task)
                task.add_done_callback(self._conns.discard)
            try:
                await self._serve(box["port"], case, reader, writer)
            except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
                pass
            finally:
                try:
                    writer.close()
                except Exception:
                    pass

        server = await asyncio.start_server(client, "127.0.0.1", 0)
        self._servers.append(server)
        box["port"] = port = server.sockets[0].getsockname()[1]
        self.counts[port] = 0
        self.requests[port] = []
        return port

    async def _serve(self, port: int, case: Callable[[str, int], Reply | None],
                     reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:  # keep-alive: one request after another on this connection
            head = await reader.readuntil(b"\r\n\r\n")
            line = head.split(b"\r\n", 1)[0].decode("latin-1")
            parts = line.split(" ")
            path = parts[1].split("?", 1)[0] if len(parts) > 1 else "/"
            hdrs = {}
            for h in head.split(b"\r\n")[1:]:
                k, sep, v = h.decode("latin-1").partition(":")
                if sep:
                    hdrs[k.strip().lower()] = v.strip()
            self.requests[port].append((path, hdrs))
            if path == "/metrics":
                self.counts[port] += 1
            reply = case(path, self.counts[port])
            if reply is None:
                reply = Reply(status=404, body=b"Not Found")
            if reply.delay_s:
                await asyncio.sleep(reply.delay_s)
            if reply.drop:
                return
            if reply.raw is not None:
                writer.write(reply.raw)
                await writer.drain()
                return
            hdr = [f"HTTP/1.1 {reply.status} {_REASONS.get(reply.status, 'X')}",
                   f"Content-Type: {reply.content_type}"]
            hdr += [f"{k}: {v}" for k, v in reply.headers.items()]
            if reply.content_length == -1:
                hdr.append("Transfer-Encoding: chunked")
            else:
                n = len(reply.body) if reply.content_length is None else reply.content_length
                hdr.append(f"Content-Length: {n}")
            if reply.close_after:
                hdr.append("Connection: close")
            writer.write(("\r\n".join(hdr) + "\r\n\r\n").encode("latin-1"))
            if reply.content_length == -1 and reply.chunks is not None:
                for chunk in reply.chunks():
                    writer.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                    await writer.drain()
                    if reply.chunk_delay_s:
                        await asyncio.sleep(reply.chunk_delay_s)
                writer.write(b"0\r\n\r\n")
            else:
                writer.write(reply.body)
            await writer.drain()
            if reply.close_after:
                return

    def close(self) -> None:
        async def stop() -> None:
            for s in self._servers:
                s.close()
            conns = list(self._conns)
            for t in conns:
                t.cancel()
            await asyncio.gather(*conns, return_exceptions=True)
            for s in self._servers:
                try:
                    await asyncio.wait_for(s.wait_closed(), 2)
                except Exception:
                    pass

        try:
            asyncio.run_coroutine_threadsafe(stop(), self.loop).result(5)
        except Exception:
            pass
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(5)
