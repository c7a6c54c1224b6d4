"""GPU activity beyond "util" where GPM is absent: per-process SM time, NVLink, throttle time.

``Fallbacks`` keeps one GPU's state between ticks; the sampler calls it on its own schedule
(a worker thread, never the UI loop):

- ``process_sm``: ``nvmlDeviceGetProcessUtilization`` from the last seen timestamp (``now - 1
  s`` the first time) -> pid -> SM share 0..1. ``NOT_FOUND`` means no sample newer than the
  stamp: the last answer is held (``HOLD_S``), not an error. Not asked under MIG.
- ``nvlink``: ``nvmlDeviceGetFieldValues`` 138/139 per link (KiB counters, link count from
  field 91) summed and differenced into bytes/s; a counter going back is a reset (no rate
  this tick), never a negative rate. Read at most every ``every`` seconds (36 fields of an
  18-link GPU cost ~60 us of pynvml's Python per read); the rate is held between.
- ``throttle_time``: ``nvmlDeviceGetViolationStatus`` per policy (cumulative ns) differenced
  into the share of the interval each limit held the clocks down, 0..1.

A lost GPU raises ``GpuLost``; NotSupported is remembered and not asked again; any other
error leaves that value None.
"""

from __future__ import annotations

from typing import Any

from llmtop.gpu.errors import GpuLost, is_error, never_answers

__all__ = ["HOLD_S", "POLICIES", "Fallbacks"]

HOLD_S = 5.0
"""How long a per-process answer is held while NVML has no newer sample."""
POLICIES: tuple[tuple[str, int], ...] = (  # NVML_PERF_POLICY_* (nvml.h, nvmlPerfPolicyType_t)
    ("power", 0),
    ("thermal", 1),
    ("sync boost", 2),
    ("board limit", 3),
    ("low utilization", 4),
    ("reliability", 5),
)
_LINK_COUNT, _TX, _RX = 91, 138, 139  # NVML_FI_DEV_NVLINK_LINK_COUNT, ..._THROUGHPUT_DATA_TX/RX
_KIB = 1024.0


_UNION = {0: "dVal", 1: "uiVal", 2: "ulVal", 3: "ullVal", 4: "sllVal", 5: "siVal", 6: "usVal"}
"""``nvmlValueType_t`` -> the member of ``c_nvmlValue_t`` holding the value."""


def _field_value(v: Any) -> float | None:
    """A ``c_nvmlFieldValue_t``'s value by its ``valueType`` (None when its return is not 0)."""
    if getattr(v, "nvmlReturn", 1) != 0:
        return None
    try:
        return float(getattr(v.value, _UNION.get(v.valueType, "ullVal")))
    except (AttributeError, TypeError, ValueError):
        return None


class Fallbacks:
    """One GPU's per-process SM time, NVLink counters and violation times between ticks."""

    def __init__(self, nvml: Any):
        self._nvml = nvml
        self.unsupported: set[str] = set()
        self._proc_stamp: int | None = None
        self._proc_util: dict[int, float] = {}
        self._proc_at = float("-inf")
        self._links: int | None = None
        self._link_prev: tuple[float, float | None, float | None] | None = None
        self._link_rates: tuple[float | None, float | None] = (None, None)
        self._viol_prev: dict[str, tuple[float, int]] = {}

    def _call(self, key: str, fn: str, *args: Any) -> Any:
        """``nvml.<fn>(*args)``; raises GpuLost; NotSupported is remembered under ``key``."""
        if key in self.unsupported:
            return None
        func = getattr(self._nvml, fn, None)
        if func is None:
            self.unsupported.add(key)
            return None
        try:
            return func(*args)
        except Exception as e:
            if is_error(self._nvml, e, "NVMLError_GpuIsLost"):
                raise GpuLost(fn) from e
            if never_answers(self._nvml, e):
                self.unsupported.add(key)
            if is_error(self._nvml, e, "NVMLError_NotFound"):
                raise LookupError(fn) from e
            return None

    # -- per-process SM time ------------------------------------------------------------------

    def process_sm(self, handle: Any, wall: float, now: float) -> dict[int, float] | None:
        """pid -> share of the interval with a kernel of that process on the SMs, 0..1."""
        stamp = self._proc_stamp if self._proc_stamp is not None else int((wall - 1.0) * 1e6)
        try:
            got = self._call("proc_util", "nvmlDeviceGetProcessUtilization", handle, stamp)
        except LookupError:  # NOT_FOUND: nothing newer than the stamp
            return self._proc_util if now - self._proc_at <= HOLD_S else None
        if got is None:
            return None
        newest: dict[int, tuple[int, float]] = {}
        latest = stamp
        for s in got:
            try:
                pid, ts, sm = int(s.pid), int(s.timeStamp), float(s.smUtil)
            except (AttributeError, TypeError, ValueError):
                continue
            latest = max(latest, ts)
            if 0 <= sm <= 100 and (pid not in newest or ts > newest[pid][0]):
                newest[pid] = (ts, sm / 100.0)
        self._proc_stamp = latest
        self._proc_util = {pid: v for pid, (_, v) in newest.items()}
        self._proc_at = now
        return self._proc_util

    # -- NVLink -------------------------------------------------------------------------------

    def nvlink(
        self, handle: Any, now: float, every: float = 0.0
    ) -> tuple[float | None, float | None]:
        """(tx, rx) bytes/s over all links since the last read; (None, None) the first time,
        after a reset, or where NVLink is absent. Within ``every`` s of a read: its rates."""
        if self._link_prev is not None and now - self._link_prev[0] < every:
            return self._link_rates
        if self._links is None:
            try:
                got = self._call("nvlink_count", "nvmlDeviceGetFieldValues", handle, [_LINK_COUNT])
            except LookupError:
                got = None
            count = _field_value(got[0]) if got else None
            if count is None and "nvlink_count" not in self.unsupported:
                return None, None  # not known yet: ask again next tick
            self._links = int(count or 0)
        if self._links <= 0:
            return None, None
        ids = [(f, link) for link in range(self._links) for f in (_TX, _RX)]
        try:
            got = self._call("nvlink", "nvmlDeviceGetFieldValues", handle, ids)
        except LookupError:
            got = None
        tx = rx = None
        if got is not None:
            vals = [_field_value(v) for v in got]
            txs = [v for v, (f, _) in zip(vals, ids, strict=False) if f == _TX and v is not None]
            rxs = [v for v, (f, _) in zip(vals, ids, strict=False) if f == _RX and v is not None]
            tx = sum(txs) if txs else None
            rx = sum(rxs) if rxs else None
        prev, self._link_prev = self._link_prev, (now, tx, rx)
        if prev is None or now <= prev[0]:
            self._link_rates = (None, None)
        else:
            dt = now - prev[0]
            self._link_rates = (_rate(prev[1], tx, dt), _rate(prev[2], rx, dt))
        return self._link_rates

    # -- throttle time ------------------------------------------------------------------------

    def throttle_time(self, handle: Any, now: float) -> dict[str, float] | None:
        """Share of the interval since the last call each limit held the clocks down."""
        out: dict[str, float] = {}
        for name, policy in POLICIES:
            try:
                got = self._call(f"viol {name}", "nvmlDeviceGetViolationStatus", handle, policy)
            except LookupError:
                got = None
            ns = getattr(got, "violationTime", None)
            if ns is None:
                self._viol_prev.pop(name, None)
                continue
            prev = self._viol_prev.get(name)
            self._viol_prev[name] = (now, int(ns))
            if prev is None or now <= prev[0] or int(ns) < prev[1]:
                continue  # first read, or the counter was reset
            out[name] = min((int(ns) - prev[1]) / ((now - prev[0]) * 1e9), 1.0)
        return out or None


def _rate(before: float | None, after: float | None, dt: float) -> float | None:
    if before is None or after is None or after < before:
        return None  # missing, or a counter reset: no rate this tick
    return (after - before) * _KIB / dt
