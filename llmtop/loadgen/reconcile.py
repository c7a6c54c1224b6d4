"""Counts that add up: every request sent is finished, failed or cancelled, and the tokens
received are checked against the server's own generation-token counter.

``Tally`` is fed by the runner (one call per request that ended). The counter is read from
the server's ``/metrics`` before the load and after it (once it has counted what was
received, at most ``SETTLE_S`` later), under the names in ``GENERATION_COUNTERS``; a
server exporting none gives ``server_generation_tokens: null`` and only the request counts
are checked.

The counters are read before the probe's own preflight requests (``prepare``: endpoint
detection and prompt calibration, one token each), so the books hold the preflight and the
run together: ``preflight`` is reported on its own and added to what the run received.

Token check: the server may generate more than the client received, but only for requests
cut off (cancelled at the end of a run or by Ctrl-C, or failed mid-stream): at most what
each of them still had to generate. So ``0 <= server - received <= owed``; anything else is
a mismatch, reported as a warning. Request check (where the server exports a finished-request
counter, ``REQUEST_COUNTERS``): it counted at least the requests that finished and at most
all that were sent.
"""

from __future__ import annotations

import asyncio
import math
from dataclasses import dataclass
from typing import Any

import httpx

from llmtop.errors import LlmtopError
from llmtop.loadgen.client import Result
from llmtop.loadgen.options import split_url
from llmtop.parse.exposition import parse

__all__ = ["GENERATION_COUNTERS", "REQUEST_COUNTERS", "Preflight", "Tally", "read_counters",
           "read_generation_tokens", "settled_counters", "settled_generation_tokens"]

GENERATION_COUNTERS = ("vllm:generation_tokens_total", "sglang:generation_tokens_total",
                       "llamacpp:tokens_predicted_total", "generation_tokens_total")
"""The first of these the server exports is read (summed over its label sets)."""
REQUEST_COUNTERS = ("vllm:request_success_total", "sglang:num_requests_total")
"""Requests the server finished (vLLM counts every finish reason, abort included)."""
SETTLE_S = 3.0
Counters = dict[str, float | None]
"""``{"tokens": generation tokens, "requests": finished requests}``, None where not exported."""


@dataclass(slots=True)
class Preflight:
    """Requests llmtop sent to the server outside the measured run (endpoint detection,
    prompt calibration, a cold start's first token): counted so the books close."""

    requests: int = 0
    ok: int = 0
    output_tokens: int = 0
    prompt_tokens: int = 0

    def add(self, other: Preflight) -> Preflight:
        return Preflight(self.requests + other.requests, self.ok + other.ok,
                         self.output_tokens + other.output_tokens,
                         self.prompt_tokens + other.prompt_tokens)

    def to_json(self) -> dict[str, int]:
        return {"requests": self.requests, "output_tokens": self.output_tokens,
                "prompt_tokens": self.prompt_tokens}

    @staticmethod
    def from_json(d: dict[str, Any] | None) -> Preflight:
        d = d or {}
        n = int(d.get("requests") or 0)
        return Preflight(n, int(d.get("ok", n)), int(d.get("output_tokens") or 0),
                         int(d.get("prompt_tokens") or 0))


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
        self.server_requests: int | None = None
        self.preflight = Preflight()
        """Sent before the run: on the server's counters too (read before it)."""

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

    def server_delta(self, before: float | Counters, after: float | Counters | None) -> None:
        """The server's counts over the preflight and the run (a reset: unknown)."""
        b = before if isinstance(before, dict) else {"tokens": before}
        a = after if isinstance(after, dict) or after is None else {"tokens": after}
        self.server, self.server_requests = (_delta(b, a, "tokens"), _delta(b, a, "requests"))

    def to_json(self, sent: int, max_requests: int | None) -> dict[str, Any]:
        planned = max_requests if max_requests is not None else (self.due or sent)
        pf = self.preflight
        received = self.received + pf.output_tokens
        owed = self.owed + (pf.requests - pf.ok)  # a failed one-token preflight: 1 at most
        warnings = []
        if self.finished + self.failed + self.n_cancelled != sent:
            warnings.append(f"{sent} requests sent but {self.finished} finished, "
                            f"{self.failed} failed and {self.n_cancelled} cancelled")
        pre = f" (with {pf.requests} preflight)" if pf.requests else ""
        if self.server is not None:
            extra = self.server - received
            if extra < 0 or extra > owed:
                warnings.append(
                    f"the server counted {self.server:,} generated tokens, llmtop received "
                    f"{received:,}{pre}" + (f" (at most {owed:,} more were owed to requests "
                                            "cut off)" if owed else ""))
        if self.server_requests is not None:
            low, high = self.finished + pf.ok, sent + pf.requests
            if not low <= self.server_requests <= high:
                warnings.append(
                    f"the server counted {self.server_requests:,} finished requests, llmtop "
                    f"sent {high:,}{pre} of which {low:,} finished")
        return {"planned": planned, "sent": sent, "finished": self.finished,
                "failed": self.failed, "cancelled": self.n_cancelled,
                "output_tokens": self.output_tokens, "failed_tokens": self.failed_tokens,
                "cancelled_tokens": self.cancelled_tokens,
                "preflight_requests": pf.requests, "preflight_output_tokens": pf.output_tokens,
                "server_generation_tokens": self.server,
                "server_requests": self.server_requests,
                "ok": not warnings, "warnings": warnings}


def _delta(before: Counters, after: Counters | None, key: str) -> int | None:
    b, a = before.get(key), (after or {}).get(key)
    return None if a is None or b is None or a < b else round(a - b)


def _first(fams: dict[str, Any], names: tuple[str, ...]) -> float | None:
    for name in names:
        fam = fams.get(name.removesuffix("_total"))
        if fam is not None and fam.samples:
            return math.fsum(s.value for s in fam.samples)
    return None


async def read_counters(endpoint_url: str, api_key: str | None = None,
                        insecure: bool = False) -> Counters | None:
    """The server's generation-token and finished-request counters now (None each where
    not exported); None when ``/metrics`` does not answer."""
    base = split_url(endpoint_url)[0]
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    want = {*GENERATION_COUNTERS, *REQUEST_COUNTERS}
    try:
        async with httpx.AsyncClient(timeout=5.0, verify=not insecure) as c:
            r = await c.get(f"{base}/metrics", headers=headers)
        if r.status_code != 200:
            return None
        fams = parse(r.text, lambda name: f"{name}_total" in want)
    except (httpx.HTTPError, LlmtopError, ValueError):
        return None
    out = {"tokens": _first(fams, GENERATION_COUNTERS),
           "requests": _first(fams, REQUEST_COUNTERS)}
    return out if any(v is not None for v in out.values()) else None


async def read_generation_tokens(endpoint_url: str, api_key: str | None = None,
                                 insecure: bool = False) -> float | None:
    """The server's generation-token counter now; None when it exports none (or no answer)."""
    c = await read_counters(endpoint_url, api_key, insecure)
    return None if c is None else c["tokens"]


def _settled(before: Counters, cur: Counters | None, received: int, finished: int) -> bool:
    if cur is None:
        return True
    tok, req = _delta(before, cur, "tokens"), _delta(before, cur, "requests")
    return (tok is None or tok >= received) and (req is None or req >= finished)


async def settled_counters(endpoint_url: str, before: Counters, received: int,
                           finished: int, api_key: str | None = None,
                           insecure: bool = False, settle_s: float = SETTLE_S
                           ) -> Counters | None:
    """The counters once they have counted at least the ``received`` tokens and ``finished``
    requests since ``before`` (a server updates them a moment after the last token was
    sent): at most ``settle_s``."""
    cur = await read_counters(endpoint_url, api_key, insecure)
    for _ in range(int(settle_s / 0.25)):
        if _settled(before, cur, received, finished):
            break
        await asyncio.sleep(0.25)
        cur = await read_counters(endpoint_url, api_key, insecure)
    return cur


async def settled_generation_tokens(endpoint_url: str, before: float, received: int,
                                    api_key: str | None = None,
                                    insecure: bool = False) -> float | None:
    """``settled_counters`` for the generation-token counter alone."""
    cur = await settled_counters(endpoint_url, {"tokens": before}, received, 0, api_key,
                                 insecure)
    return None if cur is None else cur["tokens"]
