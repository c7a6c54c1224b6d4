"""Streaming request -> ``Result``: the shared SSE parser and the optional aiohttp client.

``SSEReader`` splits SSE events on blank lines and decodes JSON with orjson when it is
importable (stdlib json otherwise); every event is timestamped with the arrival time of the
chunk that carried it (``time.perf_counter``). ``StreamClient`` (aiohttp, raw chunk reads) is
the alternative hot path; the default is ``rawhttp.RawStreamClient`` (chosen by measurement,
``benchmarks/README-probe.md``). aiohttp is an optional extra (``llmtop-tui[aiohttp]``),
imported when a ``StreamClient`` is made; without it that raises ``ClientUnavailable``
naming the install command. Runs only inside the worker process.

Error classes: ``http_<status>``, ``connect``, ``timeout``, ``truncated_stream`` (the stream
ended before ``[DONE]`` and before a finish reason), ``malformed_event`` (a ``data:`` line
that is not JSON; the request counts as failed), ``stream_error`` (an ``error`` object in the
stream), ``client_error`` (anything else, e.g. TLS).
"""

from __future__ import annotations

import asyncio
import email.utils
import time
from array import array
from typing import TYPE_CHECKING, Any

from llmtop.errors import LlmtopError

if TYPE_CHECKING:
    import aiohttp

try:  # orjson is optional: measurably faster per event (see benchmarks/README-probe.md)
    import orjson

    _loads = orjson.loads

    def _dumps(obj: Any) -> bytes:
        return orjson.dumps(obj)

    JSON_LIB = "orjson"
except ImportError:  # pragma: no cover - exercised where orjson is missing
    import json

    _loads = json.loads

    def _dumps(obj: Any) -> bytes:
        return json.dumps(obj, separators=(",", ":")).encode()

    JSON_LIB = "json"

__all__ = ["AIOHTTP_INSTALL", "JSON_LIB", "ClientUnavailable", "Result", "SSEReader",
           "StreamClient", "dumps", "parse_retry_after", "require_aiohttp"]

AIOHTTP_INSTALL = "pip install 'llmtop-tui[aiohttp]'"


class ClientUnavailable(LlmtopError):
    """The asked-for HTTP client library is not installed."""


def require_aiohttp() -> Any:
    """The ``aiohttp`` module; ``ClientUnavailable`` (with the install command) without it."""
    try:
        import aiohttp
    except ImportError:
        raise ClientUnavailable("client=aiohttp needs aiohttp, which is not installed: "
                                f"{AIOHTTP_INSTALL} (or use the default raw client)") from None
    return aiohttp


dumps = _dumps
_perf = time.perf_counter


class Result:
    """One finished (or failed) request. Times are ``perf_counter`` seconds."""

    __slots__ = (
        "error",
        "gaps",
        "n_content",
        "output_tokens",
        "prompt_tokens",
        "retry_after",
        "t_end",
        "t_first",
        "t_intended",
        "t_last",
        "t_send",
    )

    def __init__(self, t_send: float, t_intended: float | None = None) -> None:
        self.t_send = t_send
        self.t_intended = t_intended
        """With ``--rate``: when the schedule meant it to be sent (``t_send`` is when it was)."""
        self.t_first: float | None = None
        self.t_last: float | None = None
        self.t_end = t_send
        self.n_content = 0
        """Content events so far (kept current while the stream runs, so a request cut off
        still says how many tokens it had received)."""
        self.output_tokens: int | None = None
        """From ``usage.completion_tokens``; else the number of content events."""
        self.prompt_tokens: int | None = None
        self.error: str | None = None
        self.retry_after: float | None = None
        self.gaps = array("d")
        """Per-chunk inter-token gaps (between consecutive content events)."""

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def tokens(self) -> int:
        return self.output_tokens if self.output_tokens is not None else self.n_content


def parse_retry_after(value: str | None, now: float | None = None) -> float | None:
    """``Retry-After`` (delta seconds or an HTTP date) -> seconds to wait, or None."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        dt = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if dt is None:
        return None
    return max(0.0, dt.timestamp() - (time.time() if now is None else now))


class StreamClient:
    """A pooled aiohttp session bound to one endpoint URL."""

    def __init__(self, endpoint_url: str, *, api_key: str | None = None, insecure: bool = False,
                 timeout_s: float = 300.0) -> None:
        aiohttp = self._aiohttp = require_aiohttp()
        self.endpoint_url = endpoint_url
        from llmtop.model.request_records import probe_traceparent

        self._headers = {"Content-Type": "application/json", "Accept": "text/event-stream",
                         "traceparent": probe_traceparent()}  # marks the probe's requests
        if api_key:
            self._headers["Authorization"] = f"Bearer {api_key}"
        self._connector = aiohttp.TCPConnector(limit=0, ssl=False if insecure else None,
                                               ttl_dns_cache=300)
        self._timeout = aiohttp.ClientTimeout(total=timeout_s, sock_connect=min(10.0, timeout_s),
                                              sock_read=min(60.0, timeout_s))
        self.session = aiohttp.ClientSession(connector=self._connector, timeout=self._timeout,
                                             auto_decompress=False)

    async def aclose(self) -> None:
        await self.session.close()

    async def request(self, body: bytes, res: Result | None = None) -> Result:
        """Send one streaming request (``body`` is the JSON payload) into ``res`` (a new
        ``Result`` when None); never raises except ``CancelledError``."""
        res = Result(_perf()) if res is None else res
        aiohttp = self._aiohttp
        try:
            async with self.session.post(self.endpoint_url, data=body,
                                         headers=self._headers) as resp:
                if resp.status != 200:
                    res.error = f"http_{resp.status}"
                    if resp.status in (429, 503):
                        res.retry_after = parse_retry_after(resp.headers.get("Retry-After"))
                    await resp.read()
                    res.t_end = _perf()
                    return res
                await self._read_stream(resp.content, res)
        except asyncio.CancelledError:
            raise
        except (aiohttp.ClientConnectorError, ConnectionRefusedError) as exc:
            res.error = "timeout" if isinstance(exc, asyncio.TimeoutError) else "connect"
        except (asyncio.TimeoutError, aiohttp.ServerTimeoutError):
            res.error = "timeout"
        except (aiohttp.ClientPayloadError, aiohttp.ServerDisconnectedError,
                ConnectionResetError):
            res.error = "truncated_stream" if res.n_content or res.t_first else "connect"
        except aiohttp.ClientError:
            res.error = "client_error"
        except OSError:
            res.error = "connect"
        res.t_end = _perf()
        return res

    @staticmethod
    async def _read_stream(content: aiohttp.StreamReader, res: Result) -> None:
        """Read raw chunks, split SSE events, update ``res``. Sets ``res.error`` itself."""
        sse = SSEReader(res)
        async for chunk in content.iter_any():
            if sse.feed(chunk, _perf()):
                return
        sse.finish()


class SSEReader:
    """Incremental SSE parser for one response: ``feed(bytes, arrival_time)`` per chunk.

    ``feed`` returns True when the request failed (``res.error`` set) and reading must stop;
    ``finish()`` at the end of the body decides ``truncated_stream`` and the token count.
    """

    __slots__ = ("buf", "done", "finished", "gaps_append", "res", "t_last")

    def __init__(self, res: Result) -> None:
        self.res = res
        self.buf = b""
        self.done = False
        self.finished = False
        self.t_last: float | None = None
        self.gaps_append = res.gaps.append

    def _fail(self, error: str) -> bool:
        res = self.res
        res.error = error
        res.t_last = self.t_last
        return True

    def feed(self, chunk: bytes, t: float) -> bool:
        buf = self.buf
        if buf:
            chunk = buf + chunk
        if b"\r" in chunk:
            if chunk[-1:] == b"\r":  # a CRLF may straddle two chunks: keep the CR
                chunk, buf = chunk[:-1], b"\r"
            else:
                buf = b""
            chunk = chunk.replace(b"\r\n", b"\n")
        else:
            buf = b""
        events = chunk.split(b"\n\n")
        rest = events.pop()
        if rest:
            buf = rest + buf if buf else rest
        self.buf = buf
        res = self.res
        for ev in events:
            if not ev.startswith(b"data:"):
                if b"\ndata:" not in ev:
                    continue  # comment, event:, id:, retry: lines only
                data = b"\n".join(ln[5:].lstrip(b" ") for ln in ev.split(b"\n")
                                  if ln.startswith(b"data:"))
            elif b"\n" in ev:
                data = b"\n".join(ln[5:].lstrip(b" ") for ln in ev.split(b"\n")
                                  if ln.startswith(b"data:"))
            else:
                data = ev[5:].lstrip(b" ")
            if data[:6] == b"[DONE]":
                self.done = True
                continue
            try:
                obj = _loads(data)
            except ValueError:
                return self._fail("malformed_event")
            if not isinstance(obj, dict):
                return self._fail("malformed_event")
            choices = obj.get("choices")
            if choices:
                c = choices[0]
                text = c.get("text")
                if text is None:
                    d = c.get("delta")
                    if d:
                        text = d.get("content") or d.get("reasoning_content")
                if text:
                    res.n_content += 1
                    if self.t_last is None:
                        res.t_first = t
                    else:
                        self.gaps_append(t - self.t_last)
                    self.t_last = t
                if c.get("finish_reason"):
                    self.finished = True
            usage = obj.get("usage")
            if usage:
                ct = usage.get("completion_tokens")
                if ct is not None:
                    res.output_tokens = int(ct)
                pt = usage.get("prompt_tokens")
                if pt is not None:
                    res.prompt_tokens = int(pt)
            elif "error" in obj and not choices:
                return self._fail("stream_error")
        return False

    def finish(self) -> None:
        res = self.res
        res.t_last = self.t_last
        if not self.done and not self.finished:
            res.error = "truncated_stream"
        elif res.output_tokens is None:
            res.output_tokens = res.n_content
