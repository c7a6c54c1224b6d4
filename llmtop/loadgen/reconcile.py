"""Counts that add up: every request sent is finished, failed or cancelled, and the tokens
received are checked against the server's own generation-token counter.

``Tally`` is fed by the runner (one call per request that ended). The counter is read from
the server's ``/metrics`` before the load and after it (once it has counted what was
received, at most ``SETTLE_S`` later), under the names in ``GENERATION_COUNTERS``; a
server exporting none gives ``server_generation_tokens: null`` and only the request counts
are checked.

The counter is read before the load once the server has nothing in flight (its running and
waiting gauges, ``IN_FLIGHT_GAUGES``, at 0), for at most ``IDLE_WAIT_S``: SGLang runs a warm-up
request of its own just after it starts listening, counted when it ends, and a run that read
the counter before then found 8 tokens too many. A server still busy after the wait (other
traffic) is named in the warning as the likely cause of a mismatch.

Token check: the server may generate more than the client received, but only for requests
cut off (cancelled at the end of a run or by Ctrl-C, or failed mid-stream): at most what
each of them still had to generate. So ``0 <= server - received <= owed``; anything else is
a mismatch, reported as a warning.
"""

from __future__ import annotations

import asyncio
import math
from typing import Any

import httpx

from llmtop.errors import LlmtopError
from llmtop.loadgen.client import Result
from llmtop.loadgen.options import split_url
from llmtop.parse.exposition import parse

__all__ = ["GENERATION_COUNTERS", "IN_FLIGHT_GAUGES", "Tally", "idle_generation_tokens",
           "read_generation_tokens", "settled_generation_tokens"]

GENERATION_COUNTERS = ("vllm:generation_tokens_total", "sglang:generation_tokens_total",
                       "llamacpp:tokens_predicted_total", "generation_tokens_total")
"""The first of these the server exports is read (summed over its label sets)."""
IN_FLIGHT_GAUGES = ("vllm:num_requests_running", "vllm:num_requests_waiting",
                    "sglang:num_running_reqs", "sglang:num_queue_reqs",
                    "llamacpp:requests_processing", "llamacpp:requests_deferred")
"""Requests a server has in flight (summed); none exported: it is taken as idle."""
SETTLE_S = 3.0
IDLE_WAIT_S = 5.0


class Tally:
    """What became of every request sent."""

    def __init__(self) -> None:
        self.due = 0
        """With ``--rate``: intended send times that came due while sending was allowed."""
        self.finished = self.failed = self.n_cancelled = 0
        self.output_tokens = 0
        self.failed_tokens = 0
        self.cancelled_tokens = 0
        self.owed = 0
        """Tokens requests cut off or failed had still to generate (``max_tokens`` - got)."""
        self.server: int | None = None
        self.busy_at_start = 0.0
        """Requests the server had in flight when the counter was first read (after waiting
        up to ``IDLE_WAIT_S`` for none)."""

    def done(self, res: Result, asked: float) -> None:
        if res.error is None:
            self.finished += 1
            self.output_tokens += res.tokens
        else:
            self.failed += 1
            self.failed_tokens += res.n_content
            self.owed += max(0, math.ceil(asked) - res.n_content)

    def cancelled(self, res: Result, asked: float) -> None:
        self.n_cancelled += 1
        self.cancelled_tokens += res.n_content
        self.owed += max(0, math.ceil(asked) - res.n_content)

    @property
    def received(self) -> int:
        return self.output_tokens + self.failed_tokens + self.cancelled_tokens

    def server_delta(self, before: float, after: float | None) -> None:
        self.server = None if after is None or after < before else round(after - before)

    def to_json(self, sent: int, max_requests: int | None) -> dict[str, Any]:
        planned = max_requests if max_requests is not None else (self.due or sent)
        received = self.received
        warnings = []
        if self.finished + self.failed + self.n_cancelled != sent:
            warnings.append(f"{sent} requests sent but {self.finished} finished, "
                            f"{self.failed} failed and {self.n_cancelled} cancelled")
        if self.server is not None:
            extra = self.server - received
            if extra < 0 or extra > self.owed:
                warnings.append(
                    f"the server counted {self.server:,} generated tokens, the probe received "
                    f"{received:,}" + (f" (at most {self.owed:,} more were owed to requests "
                                       "cut off)" if self.owed else "")
                    + (f"; the server already had {self.busy_at_start:g} request(s) of its "
                       "own or others' in flight when the run began, and their tokens count too"
                       if self.busy_at_start else ""))
        return {"planned": planned, "sent": sent, "finished": self.finished,
                "failed": self.failed, "cancelled": self.n_cancelled,
                "output_tokens": self.output_tokens, "failed_tokens": self.failed_tokens,
                "cancelled_tokens": self.cancelled_tokens, "server_generation_tokens": self.server,
                "server_busy_at_start": self.busy_at_start,
                "ok": not warnings, "warnings": warnings}


async def _read(endpoint_url: str, api_key: str | None,
                insecure: bool) -> tuple[float | None, float | None]:
    """(the generation-token counter, the requests in flight) now; None for what the server
    does not export (or when it does not answer)."""
    base = split_url(endpoint_url)[0]
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    wanted = {*GENERATION_COUNTERS, *(f"{g}_total" for g in IN_FLIGHT_GAUGES)}
    try:
        async with httpx.AsyncClient(timeout=5.0, verify=not insecure) as c:
            r = await c.get(f"{base}/metrics", headers=headers)
        if r.status_code != 200:
            return None, None
        fams = parse(r.text, lambda name: f"{name}_total" in wanted)
    except (httpx.HTTPError, LlmtopError, ValueError):
        return None, None
    counter = None
    for name in GENERATION_COUNTERS:
        fam = fams.get(name.removesuffix("_total"))
        if fam is not None and fam.samples:
            counter = math.fsum(s.value for s in fam.samples)
            break
    busy = [s.value for g in IN_FLIGHT_GAUGES if (fam := fams.get(g)) is not None
            for s in fam.samples if math.isfinite(s.value)]
    return counter, (math.fsum(busy) if busy else None)


async def read_generation_tokens(endpoint_url: str, api_key: str | None = None,
                                 insecure: bool = False) -> float | None:
    """The server's generation-token counter now; None when it exports none (or no answer)."""
    return (await _read(endpoint_url, api_key, insecure))[0]


async def idle_generation_tokens(endpoint_url: str, api_key: str | None = None,
                                 insecure: bool = False,
                                 wait_s: float = IDLE_WAIT_S) -> tuple[float | None, float]:
    """The counter once the server has no request in flight, waiting at most ``wait_s``;
    with the requests still in flight then (0 when idle or not exported)."""
    counter, busy = await _read(endpoint_url, api_key, insecure)
    for _ in range(int(wait_s / 0.25)):
        if counter is None or not busy:
            break
        await asyncio.sleep(0.25)
        counter, busy = await _read(endpoint_url, api_key, insecure)
    return counter, (busy or 0.0) if counter is not None else 0.0


async def settled_generation_tokens(endpoint_url: str, before: float, received: int,
                                    api_key: str | None = None,
                                    insecure: bool = False) -> float | None:
    """The counter once it has counted at least the ``received`` tokens since ``before`` (a
    server updates it a moment after the last token was sent): at most ``SETTLE_S``."""
    cur = await read_generation_tokens(endpoint_url, api_key, insecure)
    for _ in range(int(SETTLE_S / 0.25)):
        if cur is None or cur - before >= received:
            break
        await asyncio.sleep(0.25)
        cur = await read_generation_tokens(endpoint_url, api_key, insecure)
    return cur
