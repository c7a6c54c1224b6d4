"""Rich rendering of one ``Snapshot`` for ``llmtop --once`` (no Textual).

``DASH`` (an en dash) stands for a value the engine does not report (None); ``<x``/``>x``
mark latency quantiles that are only bounds (lowest bucket / +Inf bucket).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any, TextIO

from rich.console import Console
from rich.table import Table
from rich.text import Text

from llmtop.capacity.annotate import capacity_text
from llmtop.gpu.reasons import unavailable_line
from llmtop.model import GOOD_STATES, EngineRow, GpuRecord, Quantiles, Snapshot
from llmtop.units import DASH, fixed, pct, rate_fine, secs_fine

__all__ = ["build_table", "diagnosis_lines", "fmt_latency", "print_once",
           "state_badge"]


_BADGES = {
    "ok": ("ok", "green"),
    "down": ("DOWN", "bold red"),
    "http_error": ("HTTP", "bold red"),
    "unauthorized": ("UNAUTHORIZED", "bold red"),
    "bad_payload": ("BAD PAYLOAD", "bold red"),
    "stale": ("STALE", "yellow"),
    "restarted": ("RESTARTED", "yellow"),
}


def state_badge(row: EngineRow) -> Text:
    """ok / DOWN / STALE 12s / BAD PAYLOAD / RESTARTED / HTTP 503 / UNAUTHORIZED."""
    word, style = _BADGES.get(row.state, (row.state.upper(), "bold"))
    if row.state == "http_error" and row.http_status:
        word = f"HTTP {row.http_status}"
    if row.state == "stale" and row.last_ok_age_s is not None:
        word = f"STALE {row.last_ok_age_s:.0f}s"
    return Text(word, style=style)


def fmt_latency(q: Quantiles | None, name: str) -> str:
    """One quantile (``p50``...) of a ``Quantiles`` as text; ``DASH`` when unknown."""
    if q is None:
        return DASH
    v = getattr(q, name)
    if v is None:
        return DASH
    prefix = "<" if name in q.below else ">" if name in q.above else ""
    return prefix + secs_fine(v)


def _running(row: EngineRow) -> str:
    if row.running is None and row.waiting is None:
        return DASH
    run = fixed(row.running)
    if row.running is not None and row.max_running is not None:
        run = f"{run}/{row.max_running:.0f}"
    return f"{run} · {fixed(row.waiting)}"


def build_table(snap: Snapshot) -> Table:
    """The engines table: one row per target x model."""
    t = Table(title=None, box=None, header_style="bold", pad_edge=False, expand=False)
    for name, justify in (
        ("target", "left"), ("engine", "left"), ("model", "left"), ("state", "left"),
        ("run · wait", "right"), ("KV", "right"), ("prefix", "right"), ("TTFT p50", "right"),
        ("TTFT p95", "right"), ("ITL p95", "right"), ("gen tok/s", "right"),
        ("req/s", "right"), ("CAP", "right"), ("preempt/s", "right"), ("err/s", "right"),
    ):
        t.add_column(name, justify=justify, no_wrap=name != "model")  # type: ignore[arg-type]
    for row in snap.engines:
        engine = row.engine or "?"
        if row.engine_version:
            engine = f"{engine} {row.engine_version}"
        dim = "dim" if row.state not in GOOD_STATES else ""
        cells = [
            _running(row), pct(row.kv_cache_usage), pct(row.prefix_hit_rate),
            fmt_latency(row.ttft_s, "p50"), fmt_latency(row.ttft_s, "p95"),
            fmt_latency(row.itl_s, "p95"), rate_fine(row.generation_tokens_per_s),
            rate_fine(row.requests_per_s), capacity_text(row), rate_fine(row.preemptions_per_s),
            rate_fine(row.errors_per_s),
        ]
        # an engine found in a container, pod or network namespace: its name under the target
        where = f"{row.target}\n{row.container.label}" if row.container else row.target
        t.add_row(where, engine, row.model or DASH, state_badge(row),
                  *(Text(c, style=dim) for c in cells))
    return t


def _gpu_line(g: GpuRecord) -> str:
    parts = [f"GPU {g.host or 'local'}:{g.index}"]
    if g.name:
        parts.append(g.name)
    if g.error:
        return " · ".join([*parts, f"error: {g.error}"])
    parts.append(f"util {pct(g.util)}")
    activity = [f"{label} {pct(v)}" for label, v in (
        ("SM active", g.sm_active), ("occupancy", g.sm_occupancy),
        ("tensor", g.tensor_active), ("DRAM", g.dram_active)) if v is not None]
    if activity:  # real activity beside the busy-time "util" (GPM or DCGM profiling)
        parts.append(" ".join(activity) + (f" ({g.activity_source})"
                                           if g.activity_source else ""))
    elif g.activity_note:
        parts.append(g.activity_note)
    if g.mem_used_bytes is not None and g.mem_total_bytes:
        parts.append(f"mem {g.mem_used_bytes / 2**30:.1f}/{g.mem_total_bytes / 2**30:.1f} GiB")
    elif g.mem_used_bytes is not None:
        parts.append(f"mem {g.mem_used_bytes / 2**30:.1f} GiB")
    if g.power_w is not None:
        lim = f"/{g.power_limit_w:.0f}" if g.power_limit_w else ""
        parts.append(f"{g.power_w:.0f}{lim} W")
    if g.temp_c is not None:
        parts.append(f"{g.temp_c:.0f}°C")
    if g.throttle:
        parts.append("throttle: " + ", ".join(g.throttle))
    owners = sorted({p.engine_target for p in g.processes if p.engine_target})
    if owners:
        parts.append("used by " + ", ".join(owners))
    parts.append(f"({g.source})")
    return " · ".join(parts)


_SEVERITY_STYLE = {"critical": "bold red", "warn": "yellow", "info": "cyan"}


def diagnosis_lines(diagnosis: Sequence[Any]) -> list[Text]:
    """The top finding per engine (``diagnose.Finding``, ordered root cause first), its
    action, and how many more findings that engine has."""
    out: list[Text] = []
    tops: dict[str, Any] = {}
    more: dict[str, int] = {}
    for f in diagnosis:
        if f.target in tops:
            more[f.target] = more.get(f.target, 0) + 1
        else:
            tops[f.target] = f
    for target, f in tops.items():
        model = f" [{f.model}]" if f.model else ""
        n = more.get(target, 0)
        extra = f" (+{n} more)" if n else ""
        line = Text(f"  {target}{model}: ")
        line.append(f"{f.rule} ({f.severity})", style=_SEVERITY_STYLE.get(f.severity, ""))
        line.append(f" {f.summary}{extra}")
        out.append(line)
        if f.action:
            out.append(Text(f"    \u2192 {f.action}", style="dim"))
    return out


def print_once(snap: Snapshot, *, file: TextIO | None = None,
               diagnosis: Sequence[Any] | None = None) -> None:
    """Print the table, problem notes, the top finding per engine (``diagnosis``), GPU
    lines and the GPU error line."""
    interactive = bool(file is not None and getattr(file, "isatty", lambda: False)())
    console = Console(file=file, highlight=False, width=None if interactive else 200,
                      no_color=not interactive)
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(snap.time)) if snap.time else ""
    console.print(Text(f"llmtop --once · window {snap.window_s:.2f} s · {when}", style="bold"))
    if snap.engines:
        console.print(build_table(snap))
    elif not snap.routers:
        console.print("no targets")
    from llmtop.console.once_stack import stack_lines

    for line in stack_lines(snap):
        console.print(Text(line))
    from llmtop.console.once_kv import kv_lines

    for line in kv_lines(snap):
        console.print(Text(line))
    from llmtop.console.once_mfu import mfu_lines

    for line in mfu_lines(snap):
        console.print(Text(line))
    for row in snap.engines:
        if row.error and row.state != "ok":
            badge = state_badge(row).plain
            # the reason often starts with the badge's own words ("HTTP 500: ...")
            text = (row.error if row.error.lower().startswith(badge.lower())
                    else f"{badge} — {row.error}")
            console.print(Text(f"  {row.target}: {text}",
                               style="red" if row.state != "stale" else "yellow"))
    from llmtop.console.once_logs import log_lines

    for line in log_lines(snap):
        console.print(Text(line, style="red"))
    if diagnosis:
        console.print(Text("why:", style="bold"))
        for line in diagnosis_lines(diagnosis):
            console.print(line)
    for g in snap.gpus:
        console.print(_gpu_line(g))
    if snap.gpu_error:
        console.print(Text(unavailable_line(snap.gpu_error), style="yellow"))
