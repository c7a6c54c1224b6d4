"""The engines table: stable rows keyed by ``EngineRow.key``, each row one cached line."""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass

from rich.text import Text

from llmtop.config import Thresholds
from llmtop.model import GOOD_STATES, EngineRow
from llmtop.ui import fmt
from llmtop.ui.fmt import DASH, S
from llmtop.ui.groups import Groups, RowKind, grouped, head_rows
from llmtop.ui.stack_cells import head_name, member_name, member_state, router_state
from llmtop.ui.widgets.rowtable import RowTable, TableColumn

__all__ = ["CAP_MIN_WIDTH", "COLUMNS", "LOG_MARK", "SORT_KEYS", "WIDE_MIN_WIDTH", "Column",
           "EnginesTable",
           "name_width", "row_matches", "state_width"]

_STACK_HEADS = (RowKind.ROUTER, RowKind.POOL)


WIDE_MIN_WIDTH = 130
"""Terminal width from which the lesser columns are shown."""
CAP_MIN_WIDTH = 69
"""Terminal width from which CAP (load over measured capacity) is shown: 80×24 has it; the
64-column minimum keeps every state badge whole instead."""

STATE_ORDER = {"down": 0, "unauthorized": 1, "http_error": 2, "bad_payload": 3, "stale": 4,
               "restarted": 5, "ok": 6}


@dataclass(frozen=True, slots=True)
class Column:
    key: str
    label: str
    narrow: int | None
    """Content width below ``WIDE_MIN_WIDTH``; None = folded away."""
    wide: int


COLUMNS = (
    Column("name", "ENGINE  MODEL", 12, 28),
    Column("state", "STATE", 11, fmt.BADGE_WIDTH),
    Column("run", "RUN", 6, 8),
    Column("wait", "WAIT", 4, 5),
    Column("kv", "KV", 4, 11),
    Column("pfx", "PFX%", None, 4),
    Column("ttft", "TTFT95", 7, 7),
    Column("itl", "ITL95", 6, 7),
    Column("gen", "TOK/S", 5, 6),
    Column("cap", "CAP", 4, 5),
    Column("rps", "REQ/S", None, 5),
    Column("pre", "PRE/S", None, 5),
    Column("err", "ERR/S", None, 5),
)
"""``name`` has a minimum width and takes whatever the terminal has left (the model name);
the cells are drawn without padding: one space separates the columns. ``state``
always has room for the full badges (``BAD PAYLOAD``, ``RESTARTED``, ``STALE 125s``) and for
``UNAUTHORIZED`` too unless the name would go below its minimum (64 columns: ``NO AUTH``)."""

WHY_BADGES = {
    "kv_pressure": "KV PRESSURE", "queueing": "QUEUEING", "prefix_cache_miss": "PREFIX MISS",
    "long_prompts": "LONG PROMPT", "decode_slowdown": "SLOW DECODE", "gpu_throttle": "GPU THROTTLE",
    "errors": "ERRORS", "imbalance": "IMBALANCE", "spec_decode_drop": "SPEC DROP",
    "ttft_rise": "TTFT RISE", "warming_up": "WARMING UP", "aborts": "ABORTS",
    "gpu_bound": "GPU BOUND", "gpu_idle": "GPU IDLE",
}
"""STATE-column words for a row's top warn/critical finding (``w`` explains it), at most
``fmt.BADGE_WIDTH`` cells (cut to the column at the narrowest layout)."""

LOG_MARK = "L"
"""Drawn in the cell before an engine's name when its log has errors the operator has not
read yet (``L`` opens it): one cell that every layout has, so no column moves."""
LOG_MARK_STYLE = "gauge-crit bold reverse"

SCROLLBAR_RESERVE = 1
"""Kept free at the right so a vertical scrollbar never forces a horizontal one."""


def _widths(width: int, wide: bool) -> tuple[int, int]:
    """(name, state) content widths on a terminal ``width`` cells wide."""
    fixed = 2  # the leading space and the gap after the name
    for c in COLUMNS[1:]:
        w = c.wide if wide else c.narrow
        if c.key == "cap" and width < CAP_MIN_WIDTH:
            continue
        if w is not None:
            fixed += w + (0 if c.key == "state" else 1)
    floor = (COLUMNS[0].wide if wide else COLUMNS[0].narrow) or 8
    name = width - SCROLLBAR_RESERVE - fixed
    state = COLUMNS[1].wide if wide else COLUMNS[1].narrow or fmt.BADGE_WIDTH
    if state < fmt.BADGE_WIDTH and name > floor:  # the full UNAUTHORIZED when it costs
        name -= 1                                  # only a model-name cell
        state += 1
    return max(floor, name), state


def name_width(width: int, wide: bool) -> int:
    """Content width of the ``name`` column on a terminal ``width`` cells wide."""
    return _widths(width, wide)[0]


def state_width(width: int, wide: bool) -> int:
    """Content width of the ``state`` column: 12 (``UNAUTHORIZED``), 11 only at the minimum
    width (``NO AUTH``)."""
    return _widths(width, wide)[1]


def _none_last(v: float | None) -> tuple[int, float]:
    return (1, 0.0) if v is None else (0, -v)


SORT_KEYS: dict[str, Callable[[EngineRow], object]] = {
    "name": lambda r: fmt.row_name(r),
    "state": lambda r: STATE_ORDER.get(r.state, 0),
    "run": lambda r: _none_last(r.running),
    "wait": lambda r: _none_last(r.waiting),
    "kv": lambda r: _none_last(r.kv_cache_usage),
    "pfx": lambda r: _none_last(r.prefix_hit_rate),
    "ttft": lambda r: _none_last(r.ttft_s.p95 if r.ttft_s else None),
    "itl": lambda r: _none_last(r.itl_s.p95 if r.itl_s else None),
    "gen": lambda r: _none_last(r.generation_tokens_per_s),
    "rps": lambda r: _none_last(r.requests_per_s),
    "cap": lambda r: _none_last(r.capacity_used),
    "pre": lambda r: _none_last(r.preemptions_per_s),
    "err": lambda r: _none_last(r.errors_per_s),
}
"""Sort key per column: the worst/largest first (state: broken first), None last."""


def row_matches(row: EngineRow, text: str) -> bool:
    """The ``/`` filter: a case-insensitive substring of target, engine, model or state."""
    if not text:
        return True
    where = row.container.label if row.container is not None else None
    hay = " ".join(x or "" for x in (row.target, row.engine, row.model, row.state,
                                      where)).lower()
    return text.lower() in hay


class EnginesTable(RowTable):
    """One row per target and model (plus fold-out rank rows), keyed by ``EngineRow.key``."""

    DEFAULT_CSS = """
    EnginesTable {
        height: auto;
        max-height: 60%;
    }
    """

    def __init__(self, **kw) -> None:
        super().__init__(**kw)
        self.order_dirty = True
        self._why: Mapping[str, tuple[str, str]] = {}
        self._wide: bool | None = None
        self._cap = True
        self._state_w = fmt.BADGE_WIDTH
        self._name_w = 20
        self._avail_w = 20
        self._need_w = 0
        self._target_w = 0
        self._layout_dirty = True
        self._rows: dict[str, EngineRow] = {}
        self._top: set[str] = set()
        self._rank_keys: set[str] = set()
        self._painted: dict[str, tuple] = {}
        """Row key -> (row, trend marks) its cells were made from."""
        self._groups = Groups()


    # -- layout -----------------------------------------------------------------------------
    def visible_columns(self) -> list[Column]:
        return [c for c in COLUMNS if (self._wide or c.narrow is not None)
                and (c.key != "cap" or self._cap)]

    def set_layout(self, width: int) -> bool:
        """Fit the columns to a terminal ``width`` cells wide: the lesser columns from
        ``WIDE_MIN_WIDTH``, the rest of the width to the model name. Returns True when the
        columns were rebuilt (rows keep their keys and the cursor its row; every cell is
        made again on the next ``update_rows``)."""
        wide, cap = width >= WIDE_MIN_WIDTH, width >= CAP_MIN_WIDTH
        self._avail_w, state_w = _widths(width, wide)
        self._layout_dirty = True
        nw = self._fit_width(wide)
        if wide == self._wide and state_w == self._state_w and cap == self._cap:
            if nw != self._name_w:
                self._name_w = nw
                self._fit_name_column()
            return False
        self._wide, self._name_w, self._state_w, self._cap = wide, nw, state_w, cap
        columns: dict[str, TableColumn] = {}
        for c in self.visible_columns():
            if c.key == "name":
                label, width_ = self._name_label(), nw + 2
            elif c.key == "state":
                label, width_ = Text(c.label), state_w
            else:
                label = Text(c.label, justify="right")
                width_ = (c.wide if wide else c.narrow or 0) + 1
            columns[c.key] = TableColumn(c.key, label, width_)
        self.columns = columns
        self._cells.clear()
        self._painted.clear()
        self.order_dirty = True
        self._columns_changed()
        return True

    def _fit_width(self, wide: bool | None = None) -> int:
        """The name column: what the rows need (full model names), at most what is left;
        any remaining width stays at the right of the table."""
        wide = self._wide if wide is None else wide
        floor = (COLUMNS[0].wide if wide else COLUMNS[0].narrow) or 8
        return min(self._avail_w, max(floor, self._need_w))

    def _name_label(self) -> Text:
        """``ENGINE`` over the targets and ``MODEL`` over the models, in whole words only:
        the first that fits the column (an empty table's column is 12 wide: "MODE" was
        shown there)."""
        tw = self._target_w
        tries = ["ENGINE".ljust(tw) + " MODEL"] if tw else ["ENGINE  MODEL", "ENGINE MODEL"]
        label = next((t for t in tries if len(t) <= self._name_w), "ENGINE")
        return Text(" " + label[: self._name_w])

    def _fit_name_column(self) -> None:
        """New name width or target width: resize the name column in place; every row's
        cells are made again (and compared) on the next update."""
        col = self.columns.get("name")
        if col is None:
            return
        col.width = self._name_w + 2
        col.label = self._name_label()
        self._painted.clear()
        self._columns_changed()

    # -- data -------------------------------------------------------------------------------
    def update_rows(
        self,
        rows: list[EngineRow],
        *,
        sort_column: str,
        sort_reverse: bool,
        filter_text: str,
        show_ranks: bool,
        th: Thresholds,
        trend: Callable[[str, str], str],
        why: Mapping[str, tuple[str, str]] | None = None,
        groups: Groups | None = None,
        collapsed: Collection[str] = (),
    ) -> None:
        """Reconcile with a snapshot: a new row order only on a change of the row set or
        order; otherwise new cells (and a redrawn line) only for rows whose data changed.
        ``why`` maps a row key to its top finding's (rule, severity): the STATE cell of a
        healthy-state row then names the finding (``KV PRESSURE``) instead of ``ok``.
        ``groups`` (fleet mode's model totals, the stack's routers and pools) puts each
        group's rows under its head row, sorted within the group; the heads in ``collapsed``
        show their own row only."""
        self._why = why or {}
        self._groups = groups or Groups()
        if groups and groups.heads:
            rows = [*head_rows(groups, collapsed), *rows]
        if self._wide is None:
            self.set_layout(80)
        flat: list[EngineRow] = []
        for r in rows:
            if not row_matches(r, filter_text):
                continue
            flat.append(r)
        top = {r.key for r in flat}
        if groups and groups.heads:
            top |= {f"\0{m}" for m in collapsed}  # a fold changes the order
        ranks = {rr.key for r in flat for rr in r.ranks} if show_ranks else set()
        if self.order_dirty or top != self._top or ranks != self._rank_keys:
            self._top, self._rank_keys = top, ranks
            keyf = SORT_KEYS.get(sort_column, SORT_KEYS["name"])
            flat.sort(key=keyf, reverse=sort_reverse)  # type: ignore[arg-type]
            if groups and groups.heads:
                flat = grouped(flat, collapsed, groups)
            order: list[str] = []
            for r in flat:
                order.append(r.key)
                if show_ranks:
                    order.extend(rr.key for rr in r.ranks)
            self._fit_names(flat)
            self._rebuild(order)
            self.order_dirty = False
        elif self._layout_dirty:
            self._fit_names(flat)
        self._rows = {}
        for r in rows:
            self._rows[r.key] = r
            for rr in r.ranks:
                self._rows[rr.key] = rr
        for key in self._order:
            row = self._rows.get(key)
            if row is None:
                continue
            q1, q2 = row.ttft_s, row.itl_s
            tt = trend(key, "ttft_p95") if q1 is not None and q1.p95 is not None else " "
            ti = trend(key, "itl_p95") if q2 is not None and q2.p95 is not None else " "
            sig = (row, tt, ti, self._why.get(key), self._groups.backends.get(key),
                   self._groups.routers.get(key))
            if self._painted.get(key) == sig:  # nothing new for this row: build no cells
                continue
            self._painted[key] = sig
            self._paint_row(row, th, lambda _k, f, tt=tt, ti=ti: tt if f == "ttft_p95" else ti)

    def _paint_row(self, row: EngineRow, th: Thresholds, trend: Callable[[str, str], str]) -> None:
        """The row's new cells, made when the row is first drawn (rows out of view cost
        nothing until scrolled to; ``set_cells_later``)."""
        wide = bool(self._wide)
        self.set_cells_later(row.key, lambda: [self._cell(row, k, wide, th, trend)
                                               for k in self.columns])

    def _fit_names(self, flat: list[EngineRow]) -> None:
        """Target width (the widest compact target, at most half the name column but 13 at
        least: ``sglang :30000`` whole at 80 columns) and the name column's width (what the
        full names need, at most what the terminal leaves)."""
        self._layout_dirty = False
        targets = [len(fmt.row_target(r)) for r in flat
                   if self._groups.kind(r.key) not in _STACK_HEADS]
        tw = min(max(targets, default=0), max(13, self._avail_w // 2))
        self._need_w = tw + 1 + max((len(r.model or "") for r in flat), default=0)
        stack = [len(n) for r in flat if (n := self._stack_name(r, 99)) is not None]
        self._need_w = max(self._need_w, *stack) if stack else self._need_w
        nw = self._fit_width()
        if (tw, nw) != (self._target_w, self._name_w):
            self._target_w, self._name_w = tw, nw
            self._fit_name_column()

    def _rebuild(self, order: list[str]) -> None:
        """A new row order (rows that stay keep their cells and the cursor its row key)."""
        keep = set(order)
        for k in [k for k in self._painted if k not in keep]:
            del self._painted[k]
        self.set_order(order)

    def selected_row(self) -> EngineRow | None:
        key = self.selected_key
        return self._rows.get(key) if key else None

    def _cell(self, r: EngineRow, col: str, wide: bool, th: Thresholds,
              trend: Callable[[str, str], str]) -> Text:
        stale = r.state not in GOOD_STATES
        t = self._raw_cell(r, col, wide, th, trend)
        if stale and col not in ("name", "state"):
            t.stylize("dim")
        return t

    def _raw_cell(self, r: EngineRow, col: str, wide: bool, th: Thresholds,
                  trend: Callable[[str, str], str]) -> Text:
        R = "right"
        if col == "name":
            if r.log is not None and r.log.new_errors > 0:  # its log has errors not yet read
                t = Text(no_wrap=True, overflow="crop")
                t.append(LOG_MARK, style=S(LOG_MARK_STYLE))
                return t.append(self._name_text(r))
            return Text(" " + self._name_text(r), no_wrap=True, overflow="crop")
        if col == "state":
            if r.rank is not None:
                return Text("")
            router = self._groups.routers.get(r.key)
            if router is not None:
                return router_state(router, r, self._state_w)
            backend = self._groups.backends.get(r.key)
            if backend is not None and r.state == "ok":
                word = member_state(backend, self._state_w)
                if word is not None:
                    return word
            why = self._why.get(r.key)
            if why is not None and r.state == "ok":
                word = WHY_BADGES.get(why[0], why[0].upper())[: self._state_w]
                return Text(word, style=S("gauge-crit bold" if why[1] == "critical"
                                          else "gauge-warn"))
            return fmt.badge(r, width=self._state_w)
        if col == "run":
            if r.running is None:
                return Text(DASH, justify=R)
            s = fmt.fmt_num(r.running)
            if r.max_running is not None:
                s += f"/{fmt.fmt_num(r.max_running)}"
            return Text(s, justify=R)
        if col == "wait":
            style = S("gauge-warn") if (r.waiting or 0) > 0 else ""
            return Text(fmt.fmt_num(r.waiting), style=style, justify=R)
        if col == "kv":
            kv = r.kv_cache_usage
            style = fmt.level_style(kv, th.kv_warn, th.kv_crit)
            pct_style = S(style) if kv is not None else ""
            if not wide:  # 80 columns: the coloured percentage, the name gets the room
                return Text(fmt.fmt_pct(kv), style=pct_style, justify=R)
            t = fmt.bar(kv, 6, style)
            t.append(f" {fmt.fmt_pct(kv):>4}", style=pct_style)
            return Text(" ") + t
        if col == "pfx":
            return Text(fmt.fmt_pct(r.prefix_hit_rate), justify=R)
        if col in ("ttft", "itl"):
            q = r.ttft_s if col == "ttft" else r.itl_s
            slo = th.ttft_slo_s if col == "ttft" else th.itl_slo_s
            v = q.p95 if q is not None else None
            style = S("gauge-crit") if (v is not None and slo and v > slo) else ""
            t = Text(fmt.quantile_text(q, "p95"), style=style, justify=R)
            if v is not None:
                t.append(trend(r.key, "ttft_p95" if col == "ttft" else "itl_p95"), style="dim")
            else:
                t.append(" ")
            return t
        if col == "gen":
            return Text(fmt.fmt_num(r.generation_tokens_per_s), justify=R)
        if col == "cap":
            return fmt.capacity_cell(r)
        if col == "rps":
            return Text(fmt.fmt_rate(r.requests_per_s), justify=R)
        if col == "pre":
            v = r.preemptions_per_s
            return Text(fmt.fmt_rate(v), style=S("gauge-warn") if v else "", justify=R)
        if col == "err":
            v = r.errors_per_s
            return Text(fmt.fmt_rate(v), style=S("gauge-crit") if v else "", justify=R)
        return Text(DASH)

    def _stack_name(self, r: EngineRow, w: int) -> str | None:
        """A router's, a pool's or a backend's name (``ui.stack_cells``), else None."""
        if self._groups.kind(r.key) in _STACK_HEADS:
            return head_name(r, self._groups.depth(r.key), w)
        backend = self._groups.backends.get(r.key)
        if backend is not None:
            return member_name(r, backend, self._groups.depth(r.key), w)
        return None

    def _name_text(self, r: EngineRow) -> str:
        """Compact target padded to the widest one, then the model: as much as fits."""
        if r.rank is not None:
            return fmt.row_name(r)
        tw, w = self._target_w, self._name_w
        stack = self._stack_name(r, w)
        if stack is not None:
            return stack
        target = fmt.row_target(r)
        if r.container is not None and len(target) > tw:  # where it runs names the row:
            target = fmt.fit_where(r.container, tw)  # the engine is in its detail
        if len(target) > tw:  # keep the port: "sg… :30000"
            eng, _, rest = target.rpartition(" ")
            room = tw - len(rest) - 1
            target = f"{eng[: room - 1]}… {rest}" if eng and room >= 2 else "…" + rest[1 - tw:]
        return f"{target:<{tw}} {fmt.fit_model(r.model, w - tw - 1)}".rstrip()

    def repaint_all(self) -> None:
        """Forget the cells and lines (theme change): the next update remakes every cell."""
        self._cells.clear()
        self._painted.clear()
        self._strips.clear()
        self._header = None
        self.refresh()
