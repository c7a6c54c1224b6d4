"""Formatting at the edge: numbers, units, bars, badges and sparklines as Rich ``Text``.

- ``None`` (not reported) always renders as a dash (``DASH``); nothing here substitutes zero.
- Numbers with units are ``llmtop/units.py``'s cell style, under the TUI's names
  (``fmt_s`` is ``units.secs``, ``fmt_pct`` is ``units.pct``…).
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence

from rich.text import Text

from llmtop import units
from llmtop.capacity.annotate import capacity_text
from llmtop.model import Container, EngineRow, Quantiles
from llmtop.units import DASH
from llmtop.units import age as fmt_age
from llmtop.units import byte_rate as fmt_byte_rate
from llmtop.units import count as fmt_num
from llmtop.units import pct as fmt_pct
from llmtop.units import rate as fmt_rate
from llmtop.units import secs as fmt_s
from llmtop.units import size as fmt_bytes
from llmtop.units import span as fmt_span
from llmtop.verdict import short_target

__all__ = [
    "BADGE_WIDTH",
    "DASH",
    "SPARK_SPAN_S",
    "S",
    "badge",
    "bar",
    "capacity_cell",
    "capacity_text",
    "clock",
    "compact_target",
    "finite",
    "fit_model",
    "fit_where",
    "flop_rate",
    "fmt_age",
    "fmt_byte_rate",
    "fmt_bytes",
    "fmt_num",
    "fmt_pct",
    "fmt_rate",
    "fmt_s",
    "fmt_span",
    "level_style",
    "model_short",
    "quantile_text",
    "row_name",
    "row_target",
    "set_palette",
    "spark_bounds",
    "spark_cells",
    "spark_per_cell",
    "spark_plan",
    "spark_span_s",
    "sparkline",
    "trend_arrow",
]

BLOCKS = " ▁▂▃▄▅▆▇█"
LEVEL_STYLES = ("gauge-ok", "gauge-warn", "gauge-crit")
"""Style names resolved against the theme's $gauge-* variables (see ``set_palette``)."""

PALETTE: dict[str, str] = {
    "gauge-ok": "green", "gauge-warn": "yellow", "gauge-crit": "red", "accent": "cyan",
    "muted": "dim",
}
"""Concrete colours for the symbolic style names; the app refreshes it on theme change."""


def set_palette(variables: dict[str, str]) -> None:
    """Take the theme's colours (``App.theme_variables``) for the symbolic style names."""
    for name in ("gauge-ok", "gauge-warn", "gauge-crit"):
        if variables.get(name):
            PALETTE[name] = variables[name]
    if variables.get("accent"):
        PALETTE["accent"] = variables["accent"]
    if variables.get("text-muted"):
        PALETTE["muted"] = "dim"


def finite(v: object) -> float | None:
    """``v`` as a float when it is a finite number, else None: NaN, infinities and anything
    that is not a number are "not reported" (shown ``–``), never a traceback."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    return float(v) if math.isfinite(v) else None


def flop_rate(v: float | None) -> str:
    """FLOP a second in a sentence, in powers of 1000: ``412 TFLOP/s``, ``2.6 GFLOP/s``."""
    return units.flop_rate(finite(v), " ")


def S(name: str) -> str:
    """Resolve ``"gauge-crit bold"`` to a Rich style string with the theme's colours."""
    return " ".join(PALETTE.get(tok, tok) for tok in name.split())


def level_style(value: float | None, warn: float, crit: float) -> str:
    """``gauge-ok`` / ``gauge-warn`` / ``gauge-crit`` for a value against two thresholds."""
    if value is None or value < warn:
        return LEVEL_STYLES[0]
    return LEVEL_STYLES[2] if value >= crit else LEVEL_STYLES[1]


def capacity_cell(r: EngineRow) -> Text:
    """The CAP cell: ``capacity_text`` coloured at the ``near_capacity`` thresholds."""
    from llmtop.diagnose.thresholds import CAP_CRIT, CAP_WARN

    v = r.capacity_used
    style = S(level_style(v, CAP_WARN, CAP_CRIT)) if v is not None else ""
    return Text(capacity_text(r), style=style, justify="right")


def quantile_text(q: Quantiles | None, name: str) -> str:
    """One quantile with its ``<``/``>`` bound marker."""
    if q is None:
        return DASH
    v = getattr(q, name, None)
    if v is None:
        return DASH
    mark = "<" if name in q.below else ">" if name in q.above else ""
    return mark + fmt_s(v)


def bar(frac: float | None, width: int, style: str) -> Text:
    """A horizontal gauge of ``width`` cells; ``None`` is an empty dashed bar."""
    if frac is None:
        return Text("·" * width, style="dim")
    frac = min(max(frac, 0.0), 1.0)
    full = max(frac * width, 0.125) if frac > 0 else 0.0  # anything above 0 shows
    n = int(full)
    rest = full - n
    parts = "█" * n
    if n < width:
        parts += " ▏▎▍▌▋▊▉"[int(rest * 8)] if rest > 0 else ""
    t = Text(parts, style=S(style))
    t.append("·" * (width - len(parts)), style="dim")
    return t


TREND_POINTS = 12
"""A trend arrow compares the newest half of this many points with the older half."""


def trend_arrow(values: Sequence[float | None], rel: float = 0.1) -> str:
    """``↑``/``↓``/``→`` comparing the last few points with the few before (gaps skipped)."""
    pts = [v for v in values[-TREND_POINTS:] if v is not None]
    if len(pts) < 4:
        return " "
    half = len(pts) // 2
    a = sum(pts[:half]) / half
    b = sum(pts[half:]) / (len(pts) - half)
    if a == 0:
        return "↑" if b > 0 else "→"
    ch = (b - a) / abs(a)
    return "↑" if ch > rel else "↓" if ch < -rel else "→"


SPARK_SPAN_S = 300.0
"""The history a sparkline's cells are sized for (5 minutes): ``spark_per_cell`` makes each
cell hold enough samples that this much fits the width (a wider sparkline shows more)."""


def spark_per_cell(points: int, width: int) -> int:
    """Samples per cell so that ``points`` samples fit ``width`` cells: ``ceil(points /
    width)``, never less than 1."""
    if width <= 0 or points <= width:
        return 1
    return -(-points // width)


def spark_plan(end: int, width: int, span_points: int) -> tuple[int, int]:
    """``(per_cell, last)`` for ``width`` cells of series that end at absolute position
    ``end`` (a commit count): as many samples a cell as it takes to show all the history
    there is, up to ``span_points`` (``spark_per_cell``), and how many newest points to read
    to fill the cells (whole cells, aligned as ``spark_bounds`` aligns them). A fresh start
    (``end`` <= ``width``) reads everything at one sample a cell."""
    if end <= 0 or width <= 0:
        return 1, 0
    k = spark_per_cell(min(end, max(1, span_points)), width)
    first_b = max(0, (end - 1) // k - width + 1)
    return k, end - first_b * k


def spark_bounds(n: int, width: int, per_cell: int = 1,
                 end: int | None = None) -> list[tuple[int, int]]:
    """The index ranges ``[lo, hi)`` into ``n`` values that make the newest ``width`` cells,
    oldest first, ``per_cell`` samples each.

    Cells are aligned to absolute sample positions, not to the newest end: ``end`` is the
    position just after the newest value (a commit count that only grows; default ``n``:
    the first value is position 0), and cell ``b`` holds positions ``b*per_cell`` up to
    ``(b+1)*per_cell``. So a new sample changes only the newest cell until it is complete;
    then the picture shifts left by one cell. A cell only partly given at the old end
    (older samples exist but were not read) is left out rather than shown short.
    """
    k = max(1, per_cell)
    if n <= 0 or width <= 0:
        return []
    end = n if end is None else max(end, n)
    start = end - n
    last_b = (end - 1) // k
    first_b = -(-start // k)  # the first cell whose samples are all there
    first_b = max(min(first_b, last_b), last_b - width + 1)
    return [(max(b * k, start) - start, min((b + 1) * k, end) - start)
            for b in range(first_b, last_b + 1)]


def spark_cells(values: Sequence[float | None], width: int, per_cell: int = 1,
                end: int | None = None) -> list[float | None]:
    """One value per cell (newest ``width`` cells, see ``spark_bounds``): the **max** of the
    cell's samples, so a latency or queue spike one sample long stays visible however many
    samples a cell holds (an average would flatten it). A cell whose samples are all None
    is None (a gap, drawn blank, never zero); one with some values takes the max of those.
    """
    if per_cell <= 1:
        return list(values[-width:]) if width > 0 else []
    out: list[float | None] = []
    for lo, hi in spark_bounds(len(values), width, per_cell, end):
        top: float | None = None
        for v in values[lo:hi]:
            if v is not None and (top is None or v > top):
                top = v
        out.append(top)
    return out


def sparkline(values: Sequence[float | None], width: int, per_cell: int = 1,
              end: int | None = None) -> str:
    """Block sparkline of the newest ``width`` cells, ``per_cell`` samples each (the max of
    them: ``spark_cells``); gaps (None) stay blank, never zero."""
    vals = spark_cells(values, width, per_cell, end)
    nums = [v for v in vals if v is not None]
    if not nums:
        return " " * len(vals)
    lo, hi = min(nums), max(nums)
    span = hi - lo
    out = []
    for v in vals:
        if v is None:
            out.append(" ")
        elif span <= 0:
            out.append(BLOCKS[4] if hi > 0 else BLOCKS[1])
        else:
            out.append(BLOCKS[1 + int((v - lo) / span * 7.999)])
    return "".join(out)


def spark_span_s(times: Sequence[float], points: int, interval_s: float) -> float:
    """Seconds the newest ``points`` samples cover: from their commit times (``times``,
    aligned to the end of the series) when there are two, else ``points x interval_s``.
    Each sample stands for one interval, so 300 samples a second apart cover 300 s."""
    if points <= 0:
        return 0.0
    if points >= 2 and len(times) >= points:
        first, last = times[-points], times[-1]
        if last > first:
            return (last - first) * points / (points - 1)
    return points * interval_s


_BADGES = {"ok": "ok", "down": "DOWN", "unauthorized": "UNAUTHORIZED",
           "bad_payload": "BAD PAYLOAD", "restarted": "RESTARTED"}
"""The product's badge words (``STALE 12s`` and ``HTTP 503`` are built in ``badge``)."""

_SHORT_BADGES = {"unauthorized": "NO AUTH"}
"""Short forms, for a state column narrower than the full word (64 columns)."""

BADGE_WIDTH = 12
"""Cells the longest badge needs (``UNAUTHORIZED``); every other badge fits in 11."""


def badge(row: EngineRow, *, width: int | None = None) -> Text:
    """The state badge of a row: ok / DOWN / STALE 12s / BAD PAYLOAD / RESTARTED / HTTP 503
    / UNAUTHORIZED. With ``width``, the full form when it fits, else the short one
    (``NO AUTH``); every badge fits 11 cells (``STALE 999s``, then ``STALE 17m``)."""
    st = row.state
    if st == "stale":
        age = f" {fmt_age(row.last_ok_age_s)}" if row.last_ok_age_s is not None else ""
        word, style = f"STALE{age}", "gauge-warn"
    elif st == "http_error":
        word, style = f"HTTP {row.http_status or '?'}", "gauge-crit bold"
    else:
        word = _BADGES.get(st, st.upper())
        if width is not None and len(word) > width:
            word = _SHORT_BADGES.get(st, word)
        style = {"ok": "gauge-ok", "restarted": "gauge-warn"}.get(st, "gauge-crit bold")
    if width is not None and len(word) > width:  # an unknown state: never silently cut
        word = word[: max(width - 1, 0)] + "…"
    return Text(word, style=S(style))


def compact_target(target: str) -> str:
    """``vllm@127.0.0.1:8000`` -> ``vllm :8000``; ``vllm@gpu-3:8000`` -> ``vllm gpu-3:8000``."""
    return short_target(target).replace("@", " ", 1)


def row_target(r: EngineRow) -> str:
    """The row's compact target; an engine discovery found in a container, pod or network
    namespace is named by it: ``vllm pod prod/vllm-0``, ``vllm ctr vllm-a``, ``vllm netns
    blue`` (its address is in the detail view)."""
    if r.container is None:
        return compact_target(r.target)
    eng, at, _ = r.target.partition("@")
    return f"{eng} {r.container.label}" if at else r.container.label


def fit_where(c: Container, width: int) -> str:
    """``c.label`` in ``width`` cells: ``pod prod/vllm-0``, else ``pod vllm-0`` (the pod
    without its namespace), else cut with ``…``."""
    label = c.label
    if len(label) > width:
        kind, _, rest = label.partition(" ")
        label = f"{kind} {rest.rsplit('/', 1)[-1]}"
    return label if len(label) <= width else label[: max(width - 1, 0)] + "…"


def model_short(model: str | None) -> str:
    """The last path component: ``meta-llama/Llama-3.1-8B-Instruct`` -> ``Llama-3.1-8B-Instruct``.
    """
    if not model:
        return ""
    tail = model.rstrip("/").rsplit("/", 1)[-1]
    return tail or model


def fit_model(model: str | None, width: int) -> str:
    """The model name in ``width`` cells: the full name when it fits, else the short name,
    cut with ``…`` only when even that does not fit."""
    if width <= 0 or not model:
        return ""
    if len(model) <= width:
        return model
    short = model_short(model)
    if len(short) <= width:
        return short
    return short[: width - 1] + "…"


def row_name(row: EngineRow) -> str:
    """``vllm :8000 llama-3.1-8b`` or, for a rank row, ``  └ rank 1``."""
    if row.rank is not None:
        return f" └ rank {row.rank}"
    model = row.model or ""
    return f"{compact_target(row.target)} {model}".strip()


def clock(t: float | None = None, *, seconds: bool = True) -> str:
    """Local wall-clock time, ``HH:MM:SS``."""
    return time.strftime("%H:%M:%S" if seconds else "%H:%M", time.localtime(t))

