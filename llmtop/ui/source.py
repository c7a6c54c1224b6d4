"""What the UI needs from a data source: the ``Source`` protocol, and the live adapter.

The app never imports ``llmtop.monitor`` directly; ``MonitorSource`` adapts a Monitor (or a
replay source with the same shape) and tests drive the app with ``ui.fake.FakeSource``.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from llmtop.history.series import tail
from llmtop.history.store import gpu_series_values
from llmtop.model import EngineRow, Event, GpuRecord, Snapshot

if TYPE_CHECKING:
    from llmtop.history.request_window import RequestWindow
    from llmtop.history.store import Store

__all__ = [
    "SPARK_FIELDS",
    "FleetMonitorLike",
    "FleetSource",
    "MonitorSource",
    "ReplayControl",
    "Source",
    "StoreMonitor",
    "gpu_key",
    "replay_control",
    "row_value",
]

SPARK_FIELDS = (
    ("ttft_p50", "TTFT p50"),
    ("ttft_p95", "TTFT p95"),
    ("itl_p95", "ITL p95"),
    ("gen_tps", "gen tok/s"),
    ("running", "running"),
    ("waiting", "waiting"),
    ("kv", "KV"),
)
"""Sparkline series of the selected engine: (field asked of ``Source.series``, label)."""


def gpu_key(g: GpuRecord) -> str:
    """Stable key of one GPU: ``host:index`` (host empty for local GPUs), as the store keys
    its GPU series."""
    return f"{g.host}:{g.index}"


@runtime_checkable
class ReplayControl(Protocol):
    """Playback controls a replay source offers."""

    is_replay: bool
    position_wall: float | None
    playing: bool
    speed: float

    def toggle_play(self) -> None: ...
    def set_speed(self, x: float) -> None: ...
    def step(self, n: int) -> None: ...
    def jump(self, seconds: float) -> None: ...
    def seek(self, text: str) -> str | None: ...


class Source(Protocol):
    """The data the app renders. All methods but ``tick``/``aclose`` are cheap and sync."""

    host: str
    """Shown in the header."""

    async def tick(self) -> Snapshot: ...
    def snapshot(self, window_s: float) -> Snapshot | None: ...
    def series(self, key: str, field: str, last: int | None = None) -> list[float | None]: ...
    def gpu_series(self, key: str, field: str, last: int | None = None
                   ) -> list[float | None]: ...
    def series_count(self) -> int | None:
        """Points committed so far (only grows): series end at this absolute position."""
    def series_times(self, last: int | None = None) -> list[float]:
        """Wall-clock time of each point, aligned to the end of every series."""
    def events(self) -> list[Event]: ...
    def event(self, level: str, target: str | None, text: str) -> None: ...
    def raw_families(self, target: str) -> tuple[dict, dict, float]: ...
    def request_window(self) -> RequestWindow | None:
        """The single requests, or None without them."""
    async def aclose(self) -> None: ...


def replay_control(source: Any) -> ReplayControl | None:
    """The source's replay control, or None for a live source."""
    ctl = getattr(source, "replay", None)
    if ctl is not None and getattr(ctl, "is_replay", False):
        return ctl
    if getattr(source, "is_replay", False) and hasattr(source, "toggle_play"):
        return source
    return None


_ROW_FIELD = {
    "ttft_p50": ("ttft_s", "p50"),
    "ttft_p95": ("ttft_s", "p95"),
    "itl_p95": ("itl_s", "p95"),
    "gen_tps": ("generation_tokens_per_s", None),
    "running": ("running", None),
    "waiting": ("waiting", None),
    "kv": ("kv_cache_usage", None),
    "preempt_s": ("preemptions_per_s", None),
}


def row_value(row: EngineRow, field: str) -> float | None:
    """A row's current value of sparkline ``field`` (``SPARK_FIELDS``); None when the row
    does not report it."""
    attr, q = _ROW_FIELD[field]
    v = getattr(row, attr)
    return getattr(v, q) if q is not None and v is not None else v


class StoreMonitor(Protocol):
    """What ``MonitorSource`` needs of a monitor: ``llmtop.monitor.Monitor``, a recording
    one (``record.live``) or a replay (``record.replay.ReplaySource``)."""

    store: Store | None
    """Looked up on each use: a replay seeking back starts a fresh store. None: the
    source keeps its own sparkline rings."""

    async def tick(self) -> Snapshot: ...
    async def aclose(self) -> None: ...


class FleetMonitorLike(Protocol):
    """What ``FleetSource`` needs of a fleet monitor: ``fleet.monitor.FleetMonitor``, or
    ``fleet.replay.FleetReplay`` playing a fleet recording."""

    totals: list[EngineRow]
    """The per-model total rows of the latest refresh."""
    error: Any
    """The server's failure (``kind``, ``message``), or None while it answers."""
    diagnoser: Any
    """The fleet diagnosis: ``take_events()`` gives its finding lines since the last call."""

    @property
    def refresh_s(self) -> float: ...
    async def tick(self) -> Snapshot: ...
    async def aclose(self) -> None: ...
    def snapshot(self, window_s: float) -> Snapshot | None: ...
    def header_text(self) -> str: ...
    def window_note(self, window_s: float) -> str | None: ...
    def travel(self, at: float | None) -> None: ...
    async def history(self, key: str, points: int = 90) -> Any: ...
    async def row_windows(self, key: str, windows: Any) -> Any: ...


class MonitorSource:
    """Adapts ``llmtop.monitor.Monitor`` (or a replay source) to ``Source``.

    The store's own ``series`` answers sparklines; a source without one gets a small ring
    per row, filled from each tick's snapshot.
    """

    def __init__(self, monitor: StoreMonitor, *, host: str, history: int = 600) -> None:
        self.monitor = monitor
        self.host = host
        self.replay = replay_control(monitor)
        self._rings: dict[tuple[str, str], deque[float | None]] = {}
        self._gpu_rings: dict[tuple[str, str], deque[float | None]] = {}
        self._history = history
        self._local_events: deque[Event] = deque(maxlen=500)
        self._own_series = self.store is None
        self._count = 0
        self._times: deque[float] = deque(maxlen=history)

    @property
    def store(self) -> Store | None:
        """The monitor's store (``StoreMonitor.store``)."""
        return self.monitor.store

    async def tick(self) -> Snapshot:
        snap = await self.monitor.tick()
        if self._own_series:
            self._remember(snap)
        return snap

    def _remember(self, snap: Snapshot, extra: Sequence[EngineRow] = ()) -> None:
        """One point per row (``extra``: rows outside ``snap.engines``, fleet mode's totals)
        and field; a row gone from this tick gets a gap."""
        self._count += 1
        self._times.append(snap.time)
        seen = set()
        for row in (*snap.engines, *extra):
            for r in (row, *row.ranks):
                for field in _ROW_FIELD:
                    v = row_value(r, field)
                    ring = self._rings.get((r.key, field))
                    if ring is None:
                        ring = self._rings[(r.key, field)] = deque(maxlen=self._history)
                    ring.append(v)
                    seen.add((r.key, field))
        for k, ring in self._rings.items():
            if k not in seen:
                ring.append(None)
        gseen = set()
        for g in snap.gpus:  # the GPU screen's history, as the store keeps it
            for field, v in gpu_series_values(g).items():
                key = (gpu_key(g), field)
                ring = self._gpu_rings.get(key)
                if ring is None:
                    ring = self._gpu_rings[key] = deque(maxlen=self._history)
                ring.append(None if v is None else float(v))
                gseen.add(key)
        for k, ring in self._gpu_rings.items():
            if k not in gseen:
                ring.append(None)

    def snapshot(self, window_s: float) -> Snapshot | None:
        store = self.store
        return store.snapshot(window_s) if store is not None else None

    def series(self, key: str, field: str, last: int | None = None) -> list[float | None]:
        store = self.store  # looked up each time: a replay seeking back starts a fresh store
        if store is not None:
            try:
                return store.series(key, field, last)
            except (KeyError, ValueError):
                return []
        ring = self._rings.get((key, field))
        return tail(ring, last) if ring is not None else []

    def gpu_series(self, key: str, field: str, last: int | None = None
                   ) -> list[float | None]:
        store = self.store
        if store is None:  # no store (fleet mode): the rings filled each tick
            ring = self._gpu_rings.get((key, field))
            return tail(ring, last) if ring is not None else []
        try:
            return list(store.gpu_series(key, field, last))
        except (KeyError, ValueError):
            return []

    def series_count(self) -> int | None:
        store = self.store
        return store.series_count() if store is not None else self._count

    def series_times(self, last: int | None = None) -> list[float]:
        store = self.store
        return store.series_times(last) if store is not None else tail(self._times, last)

    def events(self) -> list[Event]:
        store = self.store
        merged = list(store.events) if store is not None else []
        if self._local_events:
            merged = sorted([*merged, *self._local_events], key=lambda e: e.t_wall)
        return merged

    def event(self, level: str, target: str | None, text: str) -> None:
        store = self.store
        if store is not None:
            store.event(level, target, text)
        else:
            self._local_events.append(Event(time.time(), level, target, text))

    def raw_families(self, target: str) -> tuple[dict, dict, float]:
        store = self.store
        return store.raw_families(target) if store is not None else ({}, {}, 0.0)

    def request_window(self) -> RequestWindow | None:
        """The store's request window (looked up each time: a replay seeking back starts a
        fresh store); None where there is no store (fleet mode)."""
        store = self.store
        return store.requests if store is not None else None

    async def aclose(self) -> None:
        await self.monitor.aclose()


def _first_warnings(warns: list[str]) -> str:
    """A backend's warnings on one line: the first 3, then how many more."""
    more = f" (and {len(warns) - 3} more)" if len(warns) > 3 else ""
    return "; ".join(warns[:3]) + more


class FleetSource(MonitorSource):
    """``MonitorSource`` over a fleet monitor (``llmtop.fleet.monitor.FleetMonitor``): the
    header names the server, the rate window, ``LIVE`` or ``AT <time>``, ``PARTIAL`` and the
    error state, from ``monitor.header_text()``; sparklines fill from each refresh.

    While a detail screen is open on a row (``focus``), each refresh also asks the monitor
    for that one row at the detail screen's other windows (``row_windows``: a few instant
    queries pinned to the row), and ``snapshot(window_s)`` answers them.

    ``monitor`` is a ``FleetMonitorLike``: ``fleet.monitor.FleetMonitor`` or
    ``fleet.replay.FleetReplay``."""

    BACKFILL_POINTS = 90
    """Refreshes of history fetched for a row's sparklines (15 min at the 10 s default)."""

    def __init__(self, monitor: FleetMonitorLike, *, history: int = 600) -> None:
        super().__init__(monitor, host="", history=history)  # type: ignore[arg-type]
        self._backfilled: set[str] = set()
        self._backfill_task: asyncio.Task[None] | None = None
        self._last_snap: Snapshot | None = None
        self._epoch = 0
        """Bumped by ``travel``: a history fetched before it is dropped."""
        self._focus: str | None = None
        self._focus_windows: tuple[float, ...] = ()
        self._windows: tuple[str, float, dict[float, Any]] | None = None
        """(key, evaluation time, window -> row) of the focused row."""

    async def tick(self) -> Snapshot:
        snap = await self.monitor.tick()
        # the fleet diagnosis' finding lines (start, worse, end)
        self._local_events.extend(self.monitor.diagnoser.take_events())
        if snap is not self._last_snap:  # the monitor answers a refresh asked too soon
            self._last_snap = snap         # with the same snapshot: one point, not two
            # the per-model total rows too: their sparklines and captions, like any row's
            self._remember(snap, self.monitor.totals)
            if self._focus is not None:
                await self._fetch_windows(snap)
        return snap

    def focus(self, key: str | None, windows: tuple[float, ...] = (10.0, 60.0, 300.0)
              ) -> asyncio.Task[None] | None:
        """The detail screen opened on ``key`` (None: closed). Until it closes, every refresh
        fetches that row at ``windows``; the task fetching them now is returned (None when
        nothing is fetched)."""
        self._focus, self._focus_windows = key, tuple(windows)
        self._windows = None
        snap = self._last_snap
        if key is None or snap is None:
            return None
        try:
            return asyncio.get_running_loop().create_task(self._fetch_windows(snap))
        except RuntimeError:  # no loop (sync callers): fetched with the next refresh
            return None

    async def _fetch_windows(self, snap: Snapshot) -> None:
        key = self._focus
        if key is None:
            return
        try:
            got = await self.monitor.row_windows(key, self._focus_windows)
        except Exception:  # the other windows are a nicety: a failure shows them as -
            got = {}
        if self._focus == key and self._last_snap is snap:  # not closed or overtaken
            self._windows = (key, snap.time, got)

    @property
    def store(self) -> Store | None:
        """None: a fleet monitor keeps no store; sparklines fill the source's own rings."""
        return None

    def snapshot(self, window_s: float) -> Snapshot | None:
        """The focused row alone at a window fetched for it at the latest refresh's time;
        else the fleet snapshot at its own window (None for any other)."""
        cur, got = self._last_snap, self._windows
        if (cur is not None and got is not None and got[0] == self._focus
                and abs(got[1] - cur.time) <= 1e-6 and float(window_s) in got[2]):
            row = got[2][float(window_s)]
            return Snapshot(time=cur.time, window_s=window_s, engines=[row] if row else [])
        return self.monitor.snapshot(window_s)

    def problem(self) -> str | None:
        """The server's failure (``UNREACHABLE: cannot reach ...``, ``EMPTY: no
        inference-engine metrics ...``), or None while it answers."""
        err = self.monitor.error
        return f"{err.kind.upper()}: {err.message}" if err is not None else None

    def window_note(self, window_s: float) -> str | None:
        """Why ``window_s`` gives no row (too short for the scrape interval...), or None."""
        return self.monitor.window_note(window_s)

    def window_partial(self, window_s: float) -> str | None:
        """The backend's warnings (joined) when the focused row at ``window_s``, as
        ``snapshot(window_s)`` answers it, came from a partial answer; None when complete."""
        cur, got = self._last_snap, self._windows
        if (cur is None or got is None or got[0] != self._focus
                or abs(got[1] - cur.time) > 1e-6):
            return None
        warns = getattr(got[2], "partial", {}).get(float(window_s))
        return _first_warnings(warns) if warns else None

    def series(self, key: str, field: str, last: int | None = None) -> list[float | None]:
        """As ``MonitorSource.series``; the first sparkline-panel read of a row (its first
        field, which trend arrows never ask) fetches that row's history with one range query
        per role."""
        if (field == SPARK_FIELDS[0][0] and key not in self._backfilled and self._times
                and (self._backfill_task is None or self._backfill_task.done())):
            self._backfilled.add(key)
            try:
                self._backfill_task = asyncio.get_running_loop().create_task(
                    self._backfill(key))
            except RuntimeError:  # no loop (sync callers): no history, only live points
                pass
        return super().series(key, field, last)

    async def _backfill(self, key: str) -> None:
        """Put the row's past values into its rings, aligned with the refresh times; times
        older than the first refresh are added for every row (None for the others)."""
        epoch = self._epoch
        try:
            past = await self.monitor.history(key, self.BACKFILL_POINTS)
        except Exception:  # history is a nicety: a failure leaves the live points
            return
        if not past or epoch != self._epoch:  # none, or around a time travelled away from
            return
        if getattr(past, "partial", False):  # said, never shown as a complete history
            self.event("warn", key.split("|")[0], "sparkline history from a PARTIAL answer, "
                       "values may be incomplete: "
                       + _first_warnings(list(getattr(past, "warnings", None) or ())))
        older = [t for t, _ in past if not self._times or t < self._times[0] - 1e-6]
        room = self._history - len(self._times)
        older = older[-room:] if room > 0 else []
        if older:
            n = len(self._times)
            for rings in (self._rings, self._gpu_rings):  # aligned with the older times
                for k, ring in rings.items():
                    pad = len(older) + n - len(ring)
                    rings[k] = deque([None] * pad + list(ring), maxlen=self._history)
            self._times = deque([*older, *self._times], maxlen=self._history)
            self._count += len(older)
        step = max(1.0, float(self.monitor.refresh_s))
        exact = dict(past)  # a replay's history is at the recorded times themselves
        near = {round(t / step): (t, r) for t, r in past}
        found = {}
        for t in self._times:
            hit = near.get(round(t / step))
            found[t] = exact[t] if t in exact else (
                hit[1] if hit is not None and abs(hit[0] - t) <= step / 2 + 1e-6 else None)
        times = list(self._times)
        for field in _ROW_FIELD:
            ring = self._rings.get((key, field))
            cur = list(ring) if ring is not None else []
            cur = [None] * (len(times) - len(cur)) + cur
            for i, t in enumerate(times):
                r = found.get(t)
                if r is None or cur[i] is not None:
                    continue
                cur[i] = row_value(r, field)
            self._rings[(key, field)] = deque(cur, maxlen=self._history)

    @property  # type: ignore[override]
    def host(self) -> str:
        return str(self.monitor.header_text())

    @host.setter
    def host(self, _value: str) -> None:
        pass

    def travel(self, text: str) -> str | None:
        """Evaluate at ``text`` (``03:12``, ``-2h``, RFC 3339, unix seconds; ``now``/``live``
        goes back to live) from the next refresh on; an error line, or None. Sparklines
        restart: they never mix two times."""
        from llmtop.errors import ConfigError
        from llmtop.fleet.config import parse_time

        word = text.strip().lower()
        try:
            at = None if word in ("now", "live", "") else parse_time(text)
        except ConfigError as exc:
            return str(exc).replace("--at: ", "")
        self.monitor.travel(at)
        self._rings.clear()
        self._gpu_rings.clear()
        self._times.clear()
        self._backfilled.clear()  # each row's history is fetched again, around the new time
        self._epoch += 1
        self._windows = None
        return None
