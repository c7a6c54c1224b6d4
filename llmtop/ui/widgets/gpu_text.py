"""GPU activity in words, shared by the overview's GPU lines and the GPU screen.

- ``has_activity``: the GPU reports real activity (SM, tensor, DRAM: GPM or DCGM
  profiling) besides NVML's busy time.
- ``act``: one activity fraction, NaN and garbage as None (shown ``–``).
- ``throttle_time_text``: the share of the interval each clock limit held the clocks down.
- ``activity_items``: the selected GPU's activity readings as (label, value), or why there
  are none.

NVML's ``util`` is the share of time at least one kernel ran ("busy"): one kernel on one SM
reads 100 %. Wherever it is shown it is labelled ``busy``; SM activity is labelled ``SM``.
"""

from __future__ import annotations

from llmtop.model import GpuRecord
from llmtop.ui import fmt
from llmtop.ui.fmt import DASH

__all__ = ["BUSY_MEANS", "THROTTLE_SHOWN", "act", "activity_items", "has_activity",
           "throttle_time_text"]

BUSY_MEANS = "time any kernel ran, not SM activity"
"""What ``busy`` (NVML's utilization) is, said where only it exists."""

THROTTLE_SHOWN = 0.005
"""Clock limits that held the clocks down less than this share of the interval are left out
(they round to 0 %)."""


def act(v: object) -> float | None:
    """An activity fraction (0..1) as read, or None when missing, NaN or not a number."""
    return fmt.finite(v)


def has_activity(g: GpuRecord) -> bool:
    """The GPU reports at least one real activity field (SM, occupancy, tensor, DRAM, FP16)."""
    return any(act(v) is not None for v in (g.sm_active, g.sm_occupancy, g.tensor_active,
                                             g.dram_active, g.fp16_active))


def throttle_time_text(g: GpuRecord) -> str | None:
    """``power 35% · thermal 2%``: each limit's share of the last interval, largest first;
    ``none`` when every limit read 0; None when the source does not report it."""
    if not isinstance(g.throttle_time, dict):
        return None
    shares = [(str(k), v) for k, raw in g.throttle_time.items()
              if (v := act(raw)) is not None and v >= THROTTLE_SHOWN]
    if not shares:
        return "none"
    shares.sort(key=lambda kv: -kv[1])
    return " \u00b7 ".join(f"{k} {fmt.fmt_pct(v)}" for k, v in shares)


def _rate_pair(tx: float | None, rx: float | None) -> str | None:
    tx, rx = fmt.finite(tx), fmt.finite(rx)
    if tx is None and rx is None:
        return None
    return f"{fmt.fmt_byte_rate(tx)} / {fmt.fmt_byte_rate(rx)}"


def activity_items(g: GpuRecord) -> list[tuple[str, str]]:
    """The selected GPU's activity readings beyond the table's columns, as (label, value):
    where the activity came from, occupancy, the FP16 pipe, NVLink, the time each clock
    limit held the clocks down. Without activity: why (``activity_note``), or what busy is."""
    items: list[tuple[str, str | None]] = []
    if has_activity(g):
        items += [("activity from", g.activity_source or DASH),
                  ("SM occupancy", fmt.fmt_pct(act(g.sm_occupancy))),
                  ("FP16 pipe", fmt.fmt_pct(act(g.fp16_active))),
                  ("activity note", g.activity_note)]  # e.g. a metric the GPU refused
    elif g.activity_note:
        items.append(("SM activity", f"{DASH} ({g.activity_note})"))
    elif act(g.util) is not None:
        items.append(("busy =", BUSY_MEANS))
    items.append(("NVLink TX/RX", _rate_pair(g.nvlink_tx_bytes_s, g.nvlink_rx_bytes_s)))
    items.append(("clocks held by", throttle_time_text(g)))
    return [(k, v) for k, v in items if v is not None]
