"""Formatting at the edge: numbers, units, bars, badges and sparklines as Rich ``Text``.

``None`` (not reported) always renders as a dash (``DASH``); nothing here substitutes zero.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from rich.text import Text

from llmtop.config import Thresholds
from llmtop.model import EngineRow, Quantiles
from llmtop.verdict import short_target

__all__ = [
    "BADGE_WIDTH",
    "DASH",
    "S",
    "badge",
    "bar",
    "clock",
    "compact_target",
    "fit_model",
    "fmt_age",
    "fmt_bytes",
    "fmt_num",
    "fmt_pct",
    "fmt_rate",
    "fmt_s",
    "level_style",
    "model_short",
    "quantile_text",
    "row_name",
    "set_palette",
    "sparkline",
    "trend_arrow",
]

DASH = "\u2013"  # en dash
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


def S(name: str) -> str:
    """Resolve ``"gauge-crit bold"`` to a Rich style string with the theme's colours."""
    return " ".join(PALETTE.get(tok, tok) for tok in name.split())


def level_style(value: float | None, warn: float, crit: float) -> str:
    """``gauge-ok`` / ``gauge-warn`` / ``gauge-crit`` for a value against two thresholds."""
    if value is None or value < warn:
        return LEVEL_STYLES[0]
    return LEVEL_STYLES[2] if value >= crit else LEVEL_STYLES[1]


def fmt_num(v: float | None, digits: int = 0) -> str:
    if v is None:
        return DASH
    a = abs(v)
    if a >= 1e6:
        return f"{v / 1e6:.1f}M"
    if a >= 1e4:
        return f"{v / 1e3:.0f}k"
    if a >= 1e3 and digits == 0:
        return f"{v / 1e3:.1f}k"
    return f"{v:.{digits}f}"


def fmt_rate(v: float | None) -> str:
    if v is None:
        return DASH
    if v == 0:
        return "0"
    if abs(v) < 10:
        return f"{v:.1f}"
    return fmt_num(v)


def fmt_pct(v: float | None) -> str:
    return DASH if v is None else f"{v * 100:.0f}%"


def fmt_s(v: float | None) -> str:
    """Seconds, compact: ``420ms``, ``1.8s``, ``35µs``."""
    if v is None:
        return DASH
    if v < 1e-3:
        return f"{v * 1e6:.0f}µs"
    if v < 1:
        return f"{v * 1e3:.0f}ms"
    if v < 100:
        return f"{v:.1f}s"
    return f"{v:.0f}s"


def fmt_bytes(v: float | None) -> str:
    if v is None:
        return DASH
    for unit, div in (("T", 1024**4), ("G", 1024**3), ("M", 1024**2), ("K", 1024)):
        if abs(v) >= div:
            return f"{v / div:.1f}{unit}" if v / div < 100 else f"{v / div:.0f}{unit}"
    return f"{v:.0f}B"


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


def sparkline(values: Sequence[float | None], width: int) -> str:
    """Block sparkline of the last ``width`` values; gaps (None) stay blank, never zero."""
    vals = list(values[-width:]) if width > 0 else []
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


_BADGES = {"ok": "ok", "down": "DOWN", "unauthorized": "UNAUTHORIZED",
           "bad_payload": "BAD PAYLOAD", "restarted": "RESTARTED"}
"""The product's badge words (``STALE 12s`` and ``HTTP 503`` are built in ``badge``)."""

_SHORT_BADGES = {"unauthorized": "NO AUTH"}
"""Short forms, for a state column narrower than the full word (64 columns)."""

BADGE_WIDTH = 12
"""Cells the longest badge needs (``UNAUTHORIZED``); every other badge fits in 11."""


def fmt_age(v: float) -> str:
    """A compact age of at most 4 cells: ``12s``, ``999s``, ``17m``, ``5h``, ``3d``."""
    for unit, div in (("s", 1), ("m", 60), ("h", 3600)):
        n = round(v / div)
        if n < 1000:
            return f"{n}{unit}"
    return f"{round(v / 86400)}d"


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


def thresholds_or_default(th: Thresholds | None) -> Thresholds:
    return th or Thresholds()
