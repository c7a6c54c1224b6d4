"""Text panels of the overview: header, GPU lines, sparklines, event log.

Each panel is a ``TextLines``: it redraws only when what it shows changes, and then only
the lines that changed are rendered again.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rich.cells import cell_len
from rich.text import Text

from llmtop.config import Thresholds
from llmtop.gpu.reasons import unavailable_line
from llmtop.model import Event, GpuRecord
from llmtop.ui import fmt
from llmtop.ui.fmt import DASH, S
from llmtop.ui.widgets.gpu_text import THROTTLE_SHOWN, act, has_activity
from llmtop.ui.widgets.textlines import TextLines, same
from llmtop.verdict import CRIT, OK, WARN, Verdict, short_target

__all__ = [
    "EventLog", "GpuPanel", "HeaderBar", "SparkClock", "SparkPanel", "SparkSeries", "gpu_line",
    "header_line", "short_gpu_name", "spark_cell",
]

THROTTLE_ABBREV = {
    "power": "PWR", "thermal": "THM", "hw": "HW", "sync": "SYNC", "display": "DSP",
    "sw": "SW", "slowdown": "SLOW",
}


LOCAL_HOSTS = ("", "127.0.0.1", "localhost", "::1")
"""GPU hosts shown without a prefix."""


class Painted(TextLines):
    """A panel of fixed height (CSS / ``GpuPanel.show``) showing the Text it is given."""

    def paint(self, content: Text | str) -> None:
        """Show ``content``; identical content costs one comparison."""
        text = content if isinstance(content, Text) else Text(content)
        if not same(text, self._text):
            self._text = text
            self.rebuild()  # a fixed height: no layout pass on a new value


class HeaderBar(Painted):
    DEFAULT_CSS = "HeaderBar { height: 2; padding: 0 1; }"

    def show(self, *, host: str, now: float, interval_s: float, paused: bool,
             verdict: Verdict, replay: str | None, window: str) -> None:
        t = header_line(host, fmt.clock(now), f"every {interval_s:g}s", window,
                        [*(["PAUSED"] if paused else []), *([replay] if replay else [])],
                        self.content_size.width)
        t.append("\n")
        style = {OK: "gauge-ok", WARN: "gauge-warn", CRIT: "gauge-crit"}[verdict.level]
        t.append(verdict.text, style=S(style + " bold"))
        t.no_wrap = True
        t.overflow = "ellipsis"
        self.paint(t)


def header_line(host: str, clock: str, every: str, window: str, badges: Sequence[str],
                width: int) -> Text:
    """``llmtop  HOST  CLOCK  every Ns  WINDOW  BADGES`` in ``width`` cells (0: unknown, no
    fitting): the badges (PAUSED, REPLAY) and the clock always whole; the window, then the
    refresh interval go first, then the host is cut (``…``) to what is left."""
    tail = [(f"  {b}", S("gauge-warn bold reverse") if b == "PAUSED" else S("accent bold reverse"))
            for b in badges]
    extras = [(f"  {every}", ""), (f"  {window}", "dim")]
    fixed = cell_len("llmtop") + cell_len(f"  {clock}") + sum(cell_len(x) for x, _ in tail)
    host_part = f"  {host}"
    while width and extras and fixed + cell_len(host_part) + sum(
            cell_len(x) for x, _ in extras) > width:
        extras.pop()  # the window first, then the interval
    if width and fixed + cell_len(host_part) > width:
        host_part = "  " + _cut_host(host, width - fixed - 2) if width - fixed > 5 else ""
    t = Text(no_wrap=True, overflow="ellipsis")
    t.append("llmtop", style="bold")
    t.append(host_part)
    t.append(f"  {clock}")
    for x, style in (*extras, *tail):
        t.append("  ")  # unstyled gaps, as before the fitting (snapshots)
        t.append(x[2:], style=style)
    return t


def _cut_host(host: str, room: int) -> str:
    """``host`` in ``room`` cells: a fleet host (``URL · window 60s · LIVE``) keeps its
    state parts whole and cuts the URL; any other is cut at the end."""
    head, sep, rest = host.partition(" \u00b7 ")
    if sep and cell_len(sep + rest) + 4 <= room:
        return head[:room - cell_len(sep + rest) - 1] + "\u2026" + sep + rest
    return host[:room - 1] + "\u2026"


def short_gpu_name(name: str | None) -> str:
    """``NVIDIA H100 80GB HBM3`` -> ``H100``; ``NVIDIA A100-SXM4-80GB`` -> ``A100``."""
    if not name:
        return "GPU"
    words = [w for w in name.replace("NVIDIA", "").replace("GeForce", "").split() if w]
    return (words[0].split("-")[0] or words[0]) if words else name


def _throttle_flags(g: GpuRecord) -> str:
    """``PWR,THM``: the active clock-event reasons, short; where the source reports how long
    each limit held the clocks down, the largest share beside its tag (``PWR 35%``)."""
    out: list[str] = []
    for r in g.throttle or ():
        low = r.lower()
        if low in ("idle", "gpu idle", "none"):
            continue
        tag = next((v for k, v in THROTTLE_ABBREV.items() if k in low), r[:4].upper())
        if tag not in out:
            out.append(tag)
    held_by = g.throttle_time if isinstance(g.throttle_time, dict) else {}
    shares = [(str(k), v) for k, raw in held_by.items()
              if (v := act(raw)) is not None and v >= THROTTLE_SHOWN]
    if shares:
        key, v = max(shares, key=lambda kv: kv[1])
        tag = next((t for k, t in THROTTLE_ABBREV.items() if k in key.lower()),
                   (key.split() or ["?"])[0][:4].upper())
        held = f"{tag} {fmt.fmt_pct(v)}"
        out = [held if x == tag else x for x in out] if tag in out else [held, *out]
    return ",".join(out)


def _gib(v: float | None) -> str:
    if v is None:
        return DASH
    g = v / 1024**3
    return f"{g:.0f}" if g >= 10 else f"{g:.1f}"


def gpu_line(g: GpuRecord, th: Thresholds, *, wide: bool) -> Text:
    """One GPU: real activity first where the GPU reports it (``SM`` bar, ``TC`` tensor,
    ``DRAM``), then NVML's busy time labelled ``busy`` (with no activity it takes the bar),
    VRAM, power, temperature, clock, throttle, owner. Narrow (80 columns) with activity: no
    VRAM bar, power limit or clock, the temperature only when near its slowdown; 78 cells
    hold every value at 100 % and a ``sglang@:30000`` owner."""
    t = Text(no_wrap=True, overflow="ellipsis")
    host = "" if g.host in LOCAL_HOSTS else f"{g.host}:"
    t.append(f"{host}{g.index} ", style="bold")
    t.append(f"{short_gpu_name(g.name):<5.5} ")
    if g.error:
        t.append(f"error: {g.error}", style=S("gauge-crit"))
        return t
    bw = 10 if wide else 5
    util = act(g.util)
    ustyle = fmt.level_style(util, th.util_warn, th.util_crit)
    activity = has_activity(g)
    if activity:
        sm = act(g.sm_active)
        t.append("SM ")
        t.append_text(fmt.bar(sm, bw, fmt.level_style(sm, th.util_warn, th.util_crit)))
        t.append(f" {fmt.fmt_pct(sm):>4} ")
        t.append(f"TC {fmt.fmt_pct(act(g.tensor_active))} ")
        t.append(f"DRAM {fmt.fmt_pct(act(g.dram_active))} ")
        t.append(f"busy {fmt.fmt_pct(util)} ", style="dim")
    else:
        t.append("busy ")
        t.append_text(fmt.bar(util, bw, ustyle))
        t.append(f" {fmt.fmt_pct(util):>4} ")
    mem = None
    if g.mem_used_bytes is not None and g.mem_total_bytes:
        mem = g.mem_used_bytes / g.mem_total_bytes
    if activity and not wide:  # the activity took the VRAM bar's room
        t.append(f"{_gib(g.mem_used_bytes)}/{_gib(g.mem_total_bytes)}G ")
    else:
        t.append("MEM ")
        t.append_text(fmt.bar(mem, bw, fmt.level_style(mem, th.kv_warn, th.kv_crit)))
        t.append(f" {_gib(g.mem_used_bytes)}/{_gib(g.mem_total_bytes)}G ")
    pw = DASH if g.power_w is None else f"{g.power_w:.0f}"
    pl = "" if g.power_limit_w is None or (activity and not wide) else f"/{g.power_limit_w:.0f}"
    t.append(f"{pw}{pl}W ")
    temp = DASH if g.temp_c is None else f"{g.temp_c:.0f}°C"
    hot = g.temp_c is not None and g.temp_slowdown_c and g.temp_c >= g.temp_slowdown_c - 5
    narrow = activity and not wide  # the activity took the room: temperature when hot
    if hot or not narrow:
        t.append(f"{temp} ", style=S("gauge-crit") if hot else "")
    if wide or not g.processes:
        t.append(DASH if g.sm_clock_mhz is None else f"{g.sm_clock_mhz:.0f}MHz")
    elif narrow:
        t.rstrip()
    flags = _throttle_flags(g)
    if flags:
        t.append(f" {flags}", style=S("gauge-warn bold"))
    owners = sorted({short_target(p.engine_target) for p in g.processes if p.engine_target})
    if owners:
        t.append(" " + ",".join(owners), style=S("accent"))
    return t


class GpuPanel(Painted):
    DEFAULT_CSS = "GpuPanel { height: 1; padding: 0 1; }"

    def __init__(self, *a, **kw) -> None:
        super().__init__(*a, **kw)
        self._lines = 0

    def show(self, gpus: Sequence[GpuRecord], error: str | None, th: Thresholds,
             *, wide: bool) -> None:
        lines = max(1, len(gpus))
        if lines != self._lines:  # a fixed height: a new sample never forces a layout
            self._lines = lines
            self.styles.height = lines
        if not gpus:
            self.paint(Text(unavailable_line(error), style="dim", no_wrap=True,
                            overflow="ellipsis"))
            return
        out = Text(no_wrap=True, overflow="ellipsis")
        for i, g in enumerate(gpus):
            if i:
                out.append("\n")
            out.append_text(gpu_line(g, th, wide=wide))
        self.paint(out)


SparkSeries = tuple[str, list[float | None], str]
"""One sparkline: (label, values, formatted current value)."""

SPARK_LABEL_W = 9
"""Label cells of a sparkline (``gen tok/s``, ``TTFT p95``)."""

SPARK_VALUE_W = 6
"""Value cells of a compact sparkline (``<100ms``): the grid does not move as values do."""

FULL_VALUE_W = 8
"""Value cells of a sparkline in the full form."""


@dataclass(frozen=True, slots=True)
class SparkClock:
    """Where the series end and how much history their cells are sized for.

    ``end``: the source's ``series_count()`` (None: unknown, the values' own length);
    ``span_points``: samples the width is sized for (``SPARK_SPAN_S`` at the interval);
    ``times``: commit wall times aligned to the end of the values (the title's span).
    """

    end: int | None = None
    span_points: int = 300
    interval_s: float = 1.0
    times: tuple[float, ...] = ()

    def per_cell(self, n: int, spark_w: int) -> int:
        """Samples a cell of ``spark_w`` cells holds for series of ``n`` values."""
        end = n if self.end is None else self.end
        return fmt.spark_plan(end, spark_w, self.span_points)[0]

    def span(self, n: int, spark_w: int) -> str:
        """``4m``: the history ``spark_w`` cells show of ``n`` values; "" when none."""
        k = self.per_cell(n, spark_w)
        bounds = fmt.spark_bounds(n, spark_w, k, self.end)
        if not bounds:
            return ""
        shown = bounds[-1][1] - bounds[0][0]
        return fmt.fmt_span(fmt.spark_span_s(self.times, shown, self.interval_s))


def spark_cell(label: str, values: Sequence[float | None], value: str, *, label_w: int,
               spark_w: int, value_w: int, clock: SparkClock | None = None) -> Text:
    """``label spark value`` in exactly ``label_w + spark_w + value_w + 2`` cells; the newest
    cell at the right edge, gaps (and points not yet sampled) blank, never zero. With
    ``clock``, each cell is the max of its samples (``fmt.spark_cells``)."""
    k = clock.per_cell(len(values), spark_w) if clock is not None else 1
    end = clock.end if clock is not None else None
    t = Text(f"{label:<{label_w}.{label_w}} ")
    t.append(fmt.sparkline(values, spark_w, k, end).rjust(spark_w), style=S("accent"))
    t.append(f" {value:>{value_w}}")
    return t


class SparkPanel(TextLines):
    """Sparklines of the selected engine; gaps stay blank. Renders to its own width.

    Two forms: one sparkline a line (``compact`` False: beside the event log on a tall, wide
    terminal), or ``compact``: the title line and the sparklines in two columns, as few
    lines as possible, above the event log (which keeps the full width). Either way a cell
    holds as many samples as it takes to show up to ``SPARK_SPAN_S`` of history (the max of
    them: a spike stays visible), and the title says the span shown (``last 4m``).
    """

    DEFAULT_CSS = "SparkPanel { height: auto; padding: 0 1; }"

    COLUMNS = 2
    """Columns of the compact form."""

    GAP = 2
    """Cells between the compact form's columns."""

    def __init__(self, *a, **kw) -> None:
        super().__init__(*a, **kw)
        self.title = ""
        self.series: list[SparkSeries] = []
        self.clock = SparkClock()
        self.compact = False

    @classmethod
    def lines_needed(cls, n_series: int, *, compact: bool) -> int:
        """Height of the panel (title included) for ``n_series`` sparklines."""
        return 1 + (-(-n_series // cls.COLUMNS) if compact else n_series)

    def set_compact(self, compact: bool) -> None:
        if compact != self.compact:
            self.compact = compact
            self.rebuild(layout=True)

    def set_series(self, title: str, series: list[SparkSeries],
                   clock: SparkClock | None = None) -> None:
        """``series``: (label, values, formatted last value). A fresh list every time."""
        clock = clock or SparkClock()
        if title != self.title or series != self.series or clock != self.clock:
            # a new height (auto) only when the number of lines changes
            layout = len(series) != len(self.series)
            self.title = title
            self.series = series
            self.clock = clock
            self.rebuild(layout=layout)

    def spark_width(self, width: int | None = None, *, compact: bool | None = None) -> int:
        """Cells of each sparkline when the panel is ``width`` cells wide (default: its own
        width) in the compact form or not (default: its current form)."""
        width = self.size.width if width is None else width
        compact = self.compact if compact is None else compact
        if compact:
            return self._grid_widths(max(20, width))[2]
        return max(4, max(10, width - 2) - SPARK_LABEL_W - FULL_VALUE_W - 3)

    def _grid_widths(self, width: int) -> tuple[int, int, int]:
        """``(label_w, value_w, spark_w)`` of a compact cell when the panel is ``width``."""
        series = self.series
        cell_w = (width - self.GAP * (self.COLUMNS - 1)) // self.COLUMNS
        label_w = min(SPARK_LABEL_W, max((len(label) for label, _, _ in series),
                                         default=SPARK_LABEL_W))
        value_w = max([SPARK_VALUE_W, *(len(value) for _, _, value in series)])
        return label_w, value_w, max(3, cell_w - label_w - value_w - 2)

    def _title(self, width: int, spark_w: int) -> Text:
        """The engine's name and the span shown (``last 4m``). Where both do not fit, the
        model loses its path (``meta-llama/``), then the name is cut; the span never is."""
        if not self.title:
            return Text("no engine selected", style="bold")
        n = max((len(values) for _, values, _ in self.series), default=0)
        span = self.clock.span(n, spark_w)
        suffix = f"  last {span}" if span else ""
        name = self.title
        room = width - len(suffix)
        if len(name) > room:
            name = " ".join(fmt.model_short(w) if "/" in w else w for w in name.split(" "))
        if len(name) > room:
            name = name[: max(room - 1, 1)] + "\u2026"
        return Text(name + suffix, style="bold")

    def build(self, width: int, height: int) -> Text:
        t = Text(no_wrap=True, overflow="crop")
        spark_w = self.spark_width(width)
        width = max(20, width) if self.compact else max(10, width - 2)
        t.append_text(self._title(width, spark_w))
        if self.compact:
            self._render_grid(t, width)
            return t
        for label, values, last in self.series:
            t.append("\n")
            t.append_text(spark_cell(label, values, last, label_w=SPARK_LABEL_W,
                                     spark_w=spark_w, value_w=FULL_VALUE_W,
                                     clock=self.clock))
        return t

    def _render_grid(self, t: Text, width: int) -> None:
        """The compact form: column-major (latency on the left, load on the right)."""
        series = self.series
        if not series:
            return
        rows = -(-len(series) // self.COLUMNS)
        label_w, value_w, spark_w = self._grid_widths(width)
        for r in range(rows):
            t.append("\n")
            for c in range(self.COLUMNS):
                i = c * rows + r
                if i >= len(series):
                    break
                if c:
                    t.append(" " * self.GAP)
                label, values, value = series[i]
                t.append_text(spark_cell(label, values, value, label_w=label_w,
                                         spark_w=spark_w, value_w=value_w,
                                         clock=self.clock))


class EventLog(TextLines):
    """The newest events that fit, deduplicated (repeats collapse to a count)."""

    DEFAULT_CSS = "EventLog { height: 1fr; padding: 0 1; }"

    def __init__(self, *a, **kw) -> None:
        super().__init__(*a, **kw)
        self.lines: list[tuple[float, str, str | None, str, int]] = []
        self._mark: tuple[int, object] = (-1, None)

    def set_events(self, events: Sequence[Event]) -> None:
        mark = (len(events), events[-1] if events else None)
        if mark[0] == self._mark[0] and mark[1] is self._mark[1]:
            return  # the same events as last time (the common case): nothing to do
        self._mark = mark
        lines: list[tuple[float, str, str | None, str, int]] = []
        for e in events[-200:]:
            if lines and lines[-1][1:4] == (e.level, e.target, e.text):
                last = lines[-1]
                lines[-1] = (e.t_wall, last[1], last[2], last[3], last[4] + 1)
            else:
                lines.append((e.t_wall, e.level, e.target, e.text, 1))
        if lines != self.lines:
            self.lines = lines
            self.rebuild()

    def build(self, width: int, height: int) -> Text:
        h = max(1, height)
        t = Text(no_wrap=True, overflow="ellipsis")
        shown = self.lines[-h:]
        if not shown:
            t.append("no events yet", style="dim")
        for i, (tw, level, target, text, n) in enumerate(shown):
            if i:
                t.append("\n")
            t.append(fmt.clock(tw) + " ", style="dim")
            style = {"warn": "gauge-warn", "error": "gauge-crit"}.get(level, "")
            t.append(f"{level:<5} ", style=S(style) if style else "dim")
            if target:
                t.append(short_target(target) + " ", style=S("accent"))
            t.append(text)
            if n > 1:
                t.append(f" \u00d7{n}", style="dim")
        return t
