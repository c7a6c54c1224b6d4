"""Counts that add up: every request sent is finished, failed or cancelled, and the tokens
received are checked against the server's own generation-token counter.

``Tally`` is fed by the runner (one call per request that ended). The counter is read from
the server's ``/metrics`` before the load and after it (once it has counted what was
received, at most ``SETTLE_S`` later), under the names in ``GENERATION_COUNTERS``; a
server exporting none gives ``server_generation_tokens: null`` and only the request counts
are checked.

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

__all__ = ["GENERATION_COUNTERS", "Tally", "read_generation_tokens",
           "settled_generation_tokens"]

GENERATION_COUNTERS = ("vllm:generation_tokens_total", "sglang:generation_tokens_total",
                       "llamacpp:tokens_predicted_total", "generation_tokens_total")
"""The first of these the server exports is read (summed over its label sets)."""
SETTLE_S = 3.0


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
                                       "cut off)" if self.owed else ""))
        return {"planned": planned, "sent": sent, "finished": self.finished,
                "failed": self.failed, "cancelled": self.n_cancelled,
                "output_tokens": self.output_tokens, "failed_tokens": self.failed_tokens,
                "cancelled_tokens": self.cancelled_tokens, "server_generation_tokens": self.server,
                "ok": not warnings, "warnings": warnings}


async def read_generation_tokens(endpoint_url: str, api_key: str | None = None,
                                 insecure: bool = False) -> float | None:
    """The server's generation-token counter now; None when it exports none (or no answer)."""
    base = split_url(endpoint_url)[0]
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        async with httpx.AsyncClient(timeout=5.0, verify=not insecure) as c:
            r = await c.get(f"{base}/metrics", headers=headers)
        if r.status_code != 200:
            return None
        fams = parse(r.text, lambda name: f"{name}_total" in GENERATION_COUNTERS)
    except (httpx.HTTPError, LlmtopError, ValueError):
        return None
    for name in GENERATION_COUNTERS:
        fam = fams.get(name.removesuffix("_total"))
        if fam is not None and fam.samples:
            return math.fsum(s.value for s in fam.samples)
    return None


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
