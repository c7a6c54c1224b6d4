"""The engine detail's KV sections: the P/D KV transfer (``EngineRow.kv_transfer``) and the
KV offload tiers (``EngineRow.kv_tiers``), both over the window (``history.kv_rows``).

Only the fields the engine reports are shown; one reported but unknown shows ``–`` (missing
is not zero); no section when the row has neither."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rich.console import Group
from rich.table import Table
from rich.text import Text

from llmtop.model import EngineRow, KvTiers, KvTransfer, Quantiles
from llmtop.ui import fmt

__all__ = ["kv_section", "tiers_table", "transfer_table"]


def _bps(v: float | None) -> str:
    return fmt.DASH if v is None else f"{fmt.fmt_bytes(v)}/s"


def _per_s(v: float | None) -> str:
    return fmt.DASH if v is None else f"{fmt.fmt_rate(v)}/s"


def _n(v: float | None) -> str:
    return fmt.fmt_num(v)


def _q3(q: Quantiles | None) -> str:
    """``p50 / p95 / mean`` of a window's quantiles (``<``/``>`` for bounds)."""
    out = [fmt.quantile_text(q, n) for n in ("p50", "p95", "mean")] if q else []
    return fmt.DASH if all(x == fmt.DASH for x in out) else " / ".join(out)


Fmt = Callable[[Any], str]

TRANSFER = (("latency_now_s", "latency now", fmt.fmt_s), ("bytes_per_s", "bytes", _bps),
            ("failures_per_s", "failures", _per_s), ("expired_per_s", "expired", _per_s))
"""(``KvTransfer`` field, label, formatter) of its scalar lines, in order."""
TIERS: tuple[tuple[str, str, Fmt], ...] = (
    ("hit_rate", "hit rate", fmt.fmt_pct), ("usage", "usage", fmt.fmt_pct),
    ("used_bytes", "used", fmt.fmt_bytes), ("used_tokens", "used tokens", _n),
    ("pinned", "pinned", fmt.fmt_pct),
    ("offload_bytes_per_s", "offload", _bps), ("load_back_bytes_per_s", "load back", _bps),
    ("offload_tokens_per_s", "offload tokens", _per_s),
    ("load_back_tokens_per_s", "load-back tokens", _per_s),
    ("evicted_tokens_per_s", "evicted tokens", _per_s),
    ("offload_blocks_per_s", "offload blocks", _per_s),
    ("load_back_blocks_per_s", "load-back blocks", _per_s),
    ("dropped_blocks_per_s", "dropped blocks", _per_s),
    ("failures_per_s", "failures", _per_s))
"""(``KvTiers`` field, label, formatter) of its scalar lines, in order."""
TIER_COLS: tuple[tuple[str, str, Fmt], ...] = (
    ("hit_rate", "hit", fmt.fmt_pct), ("offload_bytes_per_s", "offload", _bps),
    ("load_back_bytes_per_s", "load back", _bps), ("failures_per_s", "fail", _per_s))
"""Per secondary tier (``KvTier`` field, label, formatter)."""


def _table() -> Table:
    t = Table(box=None, show_header=False, padding=(0, 1))
    t.add_column(style="bold", no_wrap=True)
    t.add_column(overflow="fold")
    return t


def transfer_table(kt: KvTransfer) -> Table:
    """The KV transfer lines of one row's ``kv_transfer``."""
    t = _table()
    if kt.reported("time_s"):
        t.add_row("time p50 / p95 / mean", _q3(kt.time_s))
    for name, label, f in TRANSFER:
        if kt.reported(name):
            t.add_row(label, f(getattr(kt, name)))
    for queue, n in sorted((kt.queues or {}).items()):
        t.add_row(f"queue {queue}", _n(n))
    for src, v in sorted((kt.prompt_tokens_by_source or {}).items()):
        t.add_row(f"prompt tokens {src}", _per_s(v))
    for stage, q in sorted((kt.stages or {}).items()):
        t.add_row(f"stage {stage}", _q3(q))
    return t


def tiers_table(kt: KvTiers) -> Table:
    """The KV offload tier lines of one row's ``kv_tiers``."""
    t = _table()
    for name, label, f in TIERS:
        if kt.reported(name):
            t.add_row(label, f(getattr(kt, name)))
    for tier, v in sorted((kt.cached_tokens_per_s or {}).items()):
        t.add_row(f"cache hits {tier}", f"{_per_s(v)} tokens")
    for tier, d in sorted((kt.tiers or {}).items()):
        t.add_row(f"tier {tier}", " · ".join(f"{label} {f(getattr(d, name))}"
                                             for name, label, f in TIER_COLS
                                             if d.reported(name)) or fmt.DASH)
    return t


def kv_section(row: EngineRow) -> list:
    """The detail's KV transfer and KV offload tiers sections ([] when the row has
    neither), each a title and its lines."""
    out: list = []
    if row.kv_transfer is not None:
        out += [Group(Text("KV transfer (window; P/D prefill → decode)", style="table.title"),
                      transfer_table(row.kv_transfer)), Text("")]
    if row.kv_tiers is not None:
        out += [Group(Text("KV offload tiers (window)", style="table.title"),
                      tiers_table(row.kv_tiers)), Text("")]
    return out
