"""``--once`` plain text of each engine's KV transfer and KV offload tiers: one compact line
per engine that has either (``EngineRow.kv_transfer`` / ``kv_tiers``). Only the numbers
the engine reports are named; one reported but unknown shows ``–``."""

from __future__ import annotations

from llmtop.model import KvTiers, KvTransfer, Snapshot
from llmtop.units import DASH
from llmtop.units import byte_rate as _bytes
from llmtop.units import pct as _pct
from llmtop.units import secs as _s

__all__ = ["TIERS", "TRANSFER", "kv_lines"]

WIDTH = 80


def _num(v: float) -> str:
    if abs(v) >= 1e3:
        return f"{v / 1e3:.3g}k"
    return f"{v:.0f}" if abs(v) >= 10 else f"{v:.2g}"


def _rate(v: float | None) -> str:
    return DASH if v is None else f"{_num(v)}/s"


def _tok(v: float | None) -> str:
    return DASH if v is None else f"{_num(v)} tok/s"


TRANSFER = (("bytes_per_s", "", _bytes), ("failures_per_s", "fail ", _rate),
            ("expired_per_s", "exp ", _rate))
"""(``KvTransfer`` field, label, formatter) of the transfer's scalar numbers, in order."""
TIERS = (("hit_rate", "hit ", _pct), ("usage", "used ", _pct),
         ("offload_bytes_per_s", "out ", _bytes), ("load_back_bytes_per_s", "back ", _bytes),
         ("offload_tokens_per_s", "out ", _tok), ("load_back_tokens_per_s", "back ", _tok),
         ("failures_per_s", "fail ", _rate))
"""(``KvTiers`` field, label, formatter) of the tiers' scalar numbers, in order."""


def _transfer(kt: KvTransfer) -> list[str]:
    out = []
    if kt.reported("time_s"):
        out.append("p95 " + (_s(kt.time_s.p95) if kt.time_s is not None else DASH))
    for name, label, f in TRANSFER:
        if kt.reported(name):
            out.append(label + f(getattr(kt, name)))
    if kt.queues:
        out.append("queued " + "+".join(f"{v:.0f}" if v is not None else DASH
                                        for v in kt.queues.values()))
    if kt.stages:
        out.append(f"{len(kt.stages)} stages")
    return out


def _tiers(kt: KvTiers) -> list[str]:
    out = [label + f(getattr(kt, name)) for name, label, f in TIERS if kt.reported(name)]
    if kt.tiers:
        n = len(kt.tiers)
        out.append(f"{n} tier" + ("s" if n > 1 else ""))
    return out


def kv_lines(snap: Snapshot) -> list[str]:
    """One line per engine of ``snap`` with a KV transfer or offload tiers ([] if none);
    two (transfer, tiers) where one would pass ``WIDTH`` columns."""
    out = []
    for r in snap.engines:
        parts = []
        if r.kv_transfer is not None:
            parts.append("xfer " + " · ".join(_transfer(r.kv_transfer) or [DASH]))
        if r.kv_tiers is not None:
            parts.append("tiers " + " · ".join(_tiers(r.kv_tiers) or [DASH]))
        if not parts:
            continue
        head = f"  kv {r.target}: "
        one = head + " | ".join(parts)
        out += ([one] if len(one) <= WIDTH or len(parts) < 2 else [head + p for p in parts])
    return out
