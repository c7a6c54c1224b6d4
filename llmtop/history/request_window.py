"""The window of single requests beside the rows.

- What it holds: finished requests from the engines' spans, in-flight ones from engines
  that show them live, and the cold starts.
- ``RequestWindow`` keeps at most ``max_requests`` finished requests and none that ended
  more than ``keep_s`` ago on llmtop's clock (see "placed" below).
- It answers "the slowest by TTFT or end-to-end" over any window ending at any time (live
  and replay share it), and sums a window up (``RequestSummary``).
- A request is placed at its end time, unless the body that brought it says the engine's
  clock is off by more than ``REORDER_S`` (that engine's latest end in the body that far
  from when the body came): then that engine's requests in the body are moved together so
  the latest is placed when the body came.
  One engine's clock never moves the window; each request keeps the times its engine said.
- A request without an end time is placed when it came.
- The store owns one (``Store.requests``) and matches each request to its row
  (``match_target``).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from llmtop.history.request_rank import SORT_KEYS, median, nearest_rank, ranked, values
from llmtop.model.request_records import ColdStart, InflightRequest, RequestRecord
from llmtop.urls import is_local_peer

__all__ = ["KEEP_S", "MAX_REQUESTS", "REORDER_S", "SORT_KEYS", "RequestSummary",
           "RequestWindow", "clock_offsets", "ingest_body", "match_target"]

KEEP_S = 600.0
"""Finished requests older than this (by end time) are dropped."""
MAX_REQUESTS = 20_000
"""At most this many finished requests are kept (the oldest go first)."""
SLOW_SHARE = 0.1
"""The slowest tenth of a window (at least one request) is compared with the rest."""
SNAPSHOT_LIMIT = 1000
"""A snapshot (``--once --json``, each TUI refresh) lists at most this many, the slowest."""
REORDER_S = 60.0
"""Spans come in batches (vLLM's default: every 5 s), so end times arrive out of order by
up to this much; a body whose latest end is further than this from when it came was sent
by an engine whose clock is off."""


def _summary(reqs: list[RequestRecord], window_s: float, by: str) -> RequestSummary:
    s = RequestSummary(window_s=window_s, by=by, count=len(reqs))
    s.probe = sum(1 for r in reqs if r.source == "probe")
    s.traffic = s.count - s.probe
    ttft, e2e = values(reqs, "ttft_s"), values(reqs, "e2e_s")
    s.ttft_p50_s, s.ttft_p95_s = nearest_rank(ttft, 0.5), nearest_rank(ttft, 0.95)
    s.e2e_p50_s, s.e2e_p95_s = nearest_rank(e2e, 0.5), nearest_rank(e2e, 0.95)
    have = [r for r in ranked(reqs, by) if getattr(r, by) is not None]
    if not have:
        return s
    k = max(1, math.ceil(len(have) * SLOW_SHARE))
    slow, rest = have[:k], have[k:]
    s.slow_count, s.slow_min_s = k, float(getattr(slow[-1], by))
    s.slow_prompt_median = median(values(slow, "prompt_tokens"))
    s.rest_prompt_median = median(values(rest, "prompt_tokens"))
    s.slow_queue_median_s = median(values(slow, "queue_s"))
    s.rest_queue_median_s = median(values(rest, "queue_s"))
    both = [(r.queue_s, r.ttft_s) for r in slow if r.queue_s is not None and r.ttft_s is not None]
    total = sum(t for _q, t in both)
    if both and total > 0:
        s.slow_queue_share = min(1.0, sum(q for q, _t in both) / total)
    for group, into in ((slow, s.slow_targets), (rest, s.rest_targets)):
        for r in group:
            into[r.target or "?"] = into.get(r.target or "?", 0) + 1
    return s


def _same_host(a: str | None, b: str | None) -> bool:
    return a == b or (is_local_peer(a) and is_local_peer(b))


def match_target(engine: str, service: str | None, peer: str | None,
                 targets: Sequence[tuple[str, str, str | None]]) -> str | None:
    """The target (name) a request of ``engine`` from ``service`` at ``peer`` belongs to:
    the target named like the service (``OTEL_SERVICE_NAME=<target name>``); else the one
    target of that engine on the sender's host; else the one target of that engine. None
    when it stays ambiguous. ``targets``: (name, host, engine or None) per target."""
    for name, _host, _eng in targets:
        if service and name == service:
            return name
    same = [t for t in targets if t[2] in (engine, None)]
    if peer is not None:
        on_host = [t for t in same if _same_host(t[1], peer)]
        if len(on_host) == 1:
            return on_host[0][0]
        if on_host:
            same = on_host
    exact = [t for t in same if t[2] == engine]
    if len(exact) == 1:
        return exact[0][0]
    return same[0][0] if len(same) == 1 else None


@dataclass(slots=True)
class _Kept:
    """One finished request in the window, with where it is placed on llmtop's clock."""

    req: RequestRecord
    at: float | None
    """Its end on llmtop's clock (see the module docstring); None until a trim places it
    (added without an end time, a receive time or anything before it)."""
    came: float | None
    """When its body came (``at`` when that is not known)."""


def clock_offsets(reqs: Sequence[RequestRecord], t_came: float
                  ) -> dict[tuple[str, str | None], float]:
    """How far each sender's clock is ahead of llmtop's, judged from one body's requests
    that came at ``t_came``, per sender (engine and service: a collector may forward
    several in one body): their latest end minus ``t_came`` where that is more than
    ``REORDER_S`` either way; else 0 (the engine's times are used as they are)."""
    latest: dict[tuple[str, str | None], float] = {}
    for r in reqs:
        if r.t_end is not None:
            key = (r.engine, r.service)
            latest[key] = max(latest.get(key, r.t_end), r.t_end)
    offs = {k: end - t_came for k, end in latest.items()}
    return {k: off if abs(off) > REORDER_S else 0.0 for k, off in offs.items()}


@dataclass(slots=True)
class RequestSummary:
    """One window of requests summed up: counts, quantiles, and the slowest against the rest
    (by ``by``). ``None`` where no request in that group said the value."""

    window_s: float
    by: str
    count: int = 0
    probe: int = 0
    traffic: int = 0
    ttft_p50_s: float | None = None
    ttft_p95_s: float | None = None
    e2e_p50_s: float | None = None
    e2e_p95_s: float | None = None
    slow_count: int = 0
    """The slowest tenth by ``by`` (at least one) among requests that have it."""
    slow_min_s: float | None = None
    """The fastest of the slow ones: the line between slow and the rest."""
    slow_prompt_median: float | None = None
    rest_prompt_median: float | None = None
    slow_queue_median_s: float | None = None
    rest_queue_median_s: float | None = None
    slow_queue_share: float | None = None
    """Of the slow requests' summed TTFT, the part spent queued (0..1)."""
    slow_targets: dict[str, int] = field(default_factory=dict)
    """Target -> how many of the slow requests it served (``?`` when unmatched)."""
    rest_targets: dict[str, int] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__slots__}  # type: ignore[attr-defined]


class RequestWindow:
    """Finished and in-flight requests and cold starts; see the module docstring."""

    def __init__(self, keep_s: float = KEEP_S, max_requests: int = MAX_REQUESTS) -> None:
        self.keep_s = keep_s
        self._done: deque[_Kept] = deque(maxlen=max_requests)
        self._ids: set[tuple[str | None, str, str]] = set()
        self.inflight: dict[str, list[InflightRequest]] = {}
        """Target -> its requests running now (replaced at each poll of that target)."""
        self.cold_starts: dict[str, ColdStart] = {}
        """Target (or ``engine:service`` when unmatched) -> its latest cold start."""
        self.receiver: dict[str, Any] | None = None
        """The receiver's counters (``OtlpReceiver.stats()``) when one runs; None in replay."""
        self.spans_seen = 0
        self.unknown_spans = 0
        self.bad_bodies = 0
        """Recorded bodies that did not decode (replay of a damaged recording)."""
        self.last_error: str | None = None
        self.slots_errors = 0
        """``/slots`` answers that were not a slot list."""
        self._slot_seen: dict[str, dict[tuple[Any, Any], float]] = {}
        self._newest: float | None = None
        """The latest placement so far: where a request with neither end nor receive time
        goes (it came after those)."""

    @property
    def active(self) -> bool:
        """True once there is anything to show (a receiver runs, or requests came)."""
        return bool(self.receiver is not None or self._done or self.inflight
                    or self.cold_starts or self.spans_seen)

    def __len__(self) -> int:
        return len(self._done)

    def add(self, reqs: Iterable[RequestRecord], t_came: float | None = None) -> None:
        """Keep finished requests (a request already kept, by target, engine and id, once).
        ``t_came``: when the body holding them came (llmtop's clock); it places them where
        the sender's clock is off, and those without an end time."""
        reqs = list(reqs)
        offs = clock_offsets(reqs, t_came) if t_came is not None else {}
        for r in reqs:
            key = (r.target, r.engine, r.id)
            if key in self._ids:
                continue
            if r.t_end is not None:
                at: float | None = r.t_end - offs.get((r.engine, r.service), 0.0)
            else:
                at = t_came if t_came is not None else self._newest
            if at is not None:
                self._newest = at if self._newest is None else max(self._newest, at)
            if len(self._done) == self._done.maxlen:
                old = self._done[0].req
                self._ids.discard((old.target, old.engine, old.id))
            self._done.append(_Kept(r, at, t_came if t_came is not None else at))
            self._ids.add(key)

    def add_cold_start(self, cs: ColdStart) -> None:
        key = cs.target or f"{cs.engine}:?"
        prev = self.cold_starts.get(key)
        if prev is not None and prev.t_wall is not None and cs.t_wall is not None \
                and cs.t_wall - prev.t_wall < 600:  # stages of one start, in several bodies
            prev.stages.update(cs.stages)
            prev.t_wall = max(prev.t_wall, cs.t_wall)
            return
        self.cold_starts[key] = cs

    def set_inflight(self, target: str, reqs: list[InflightRequest]) -> None:
        self.inflight[target] = reqs

    def set_slots(self, target: str, t_wall: float, body: str | None) -> None:
        """llama-server's reduced ``/slots`` (``sources.slots``) -> the target's in-flight
        requests; a task's age counts from the first poll that saw it. A body that is
        not a slot list clears nothing and is counted."""
        import json

        try:
            slots = json.loads(body or "")
            busy = [s for s in slots if s.get("is_processing") and s.get("id_task") is not None]
        except (ValueError, TypeError, AttributeError):
            self.slots_errors += 1
            return
        seen = self._slot_seen.setdefault(target, {})
        now = {}
        reqs = []
        for s in busy:
            key = (s.get("id"), s["id_task"])
            first = now[key] = seen.get(key, t_wall)
            reqs.append(InflightRequest(
                target=target, engine="llamacpp", id=str(s["id_task"]), slot=s.get("id"),
                age_s=max(0.0, t_wall - first), prompt_tokens=s.get("n_prompt_tokens"),
                output_tokens=s.get("n_decoded"),
                remaining_tokens=s.get("n_remain") if (s.get("n_remain") or 0) >= 0 else None))
        self._slot_seen[target] = now
        self.inflight[target] = reqs

    def trim(self, t_wall: float) -> None:
        """Drop what is placed more than ``keep_s`` before ``t_wall`` (oldest first, in the
        order they came). A request not placed yet is placed at ``t_wall``."""
        while self._done:
            first = self._done[0]
            if first.at is None:
                first.at = first.came = t_wall
            if first.at >= t_wall - self.keep_s:
                break
            self._done.popleft()
            old = first.req
            self._ids.discard((old.target, old.engine, old.id))

    def window(self, window_s: float, t_wall: float) -> list[RequestRecord]:
        """Requests placed in ``(t_wall - window_s, t_wall]`` (their end, or see the module
        docstring), oldest first (in the order they came: exporters batch, so that is end
        order give or take ``REORDER_S``). Those without an end time are not listed."""
        lo, hi = t_wall - window_s, t_wall + 1e-6
        out = []
        for k in reversed(self._done):  # newest first: stop well before the window opens
            if k.came is not None and k.came < lo - REORDER_S:
                break
            if k.req.t_end is not None and k.at is not None and lo < k.at <= hi:
                out.append(k.req)
        out.reverse()
        return out

    def slowest(self, window_s: float, t_wall: float, *, by: str = "ttft_s",
                n: int | None = None, source: str | None = None,
                target: str | None = None) -> list[RequestRecord]:
        """The window's requests, slowest first by ``by`` (``SORT_KEYS``); those without
        that value last (in end order). ``source``/``target`` filter."""
        reqs = [r for r in self.window(window_s, t_wall)
                if (source is None or r.source == source)
                and (target is None or r.target == target)]
        return ranked(reqs, by, n)

    def summary(self, window_s: float, t_wall: float, by: str = "ttft_s") -> RequestSummary:
        """The window summed up (see ``RequestSummary``)."""
        return _summary(self.window(window_s, t_wall), window_s, by)

    def snapshot(self, window_s: float, t_wall: float, limit: int = SNAPSHOT_LIMIT
                 ) -> tuple[list[RequestRecord], dict[str, Any]]:
        """What a ``Snapshot`` carries: the window's ``limit`` slowest requests by TTFT, and
        the rest (``requests_window`` in ``docs/json-schema.md``)."""
        reqs = self.window(window_s, t_wall)
        extra = {
            "summary": _summary(reqs, window_s, "ttft_s").to_json(),
            "inflight": [r.to_json() for r in self.inflight_list()],
            "cold_starts": [c.to_json() for c in self.cold_starts.values()],
            "spans": self.spans_seen, "unknown_spans": self.unknown_spans,
            "bad_bodies": self.bad_bodies, "slots_errors": self.slots_errors,
            "receiver": self.receiver,
        }
        return ranked(reqs, "ttft_s", limit), extra

    def inflight_list(self) -> list[InflightRequest]:
        """Every in-flight request, oldest first (unknown ages last)."""
        out = [r for reqs in self.inflight.values() for r in reqs]
        return sorted(out, key=lambda r: -(r.age_s if r.age_s is not None else -1.0))


def ingest_body(window: RequestWindow, raw: Any,
                targets: Sequence[tuple[str, str, str | None]]) -> None:
    """One ``RawSpans`` (live, or from a recording) into ``window``: decoded (unless the
    receiver did), parsed per engine shape, each request matched to its target. Never
    raises: a body that does not decode is counted."""
    from llmtop.parse.spans import parse_spans
    from llmtop.sources.otlp_decode import SpanDecodeError, decode

    spans = raw.spans
    if spans is None:
        try:
            spans = decode(raw.body, raw.kind)
        except SpanDecodeError as exc:
            window.bad_bodies += 1
            window.last_error = str(exc)
            return
    parsed = parse_spans(spans)
    window.spans_seen += len(spans)
    window.unknown_spans += parsed.unknown
    for r in parsed.requests:
        r.target = match_target(r.engine, r.service, raw.peer, targets)
    window.add(parsed.requests, t_came=raw.t_wall)
    for cs in parsed.cold_starts:
        cs.target = match_target(cs.engine, None, raw.peer, targets)
        window.add_cold_start(cs)
