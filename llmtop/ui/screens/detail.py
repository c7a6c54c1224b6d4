"""Engine detail (Enter); ``m`` there opens the raw metrics browser (``screens/raw.py``)."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Sequence

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Static

from llmtop.model import LATENCY_KINDS, EngineRow, GpuRecord, Quantiles
from llmtop.ui import fmt
from llmtop.ui.screens.gpu_work import engine_gpus, gpu_work_lines, headroom_line
from llmtop.ui.screens.kv import kv_section
from llmtop.ui.screens.logs import LogScreen, log_section
from llmtop.ui.screens.raw import RawMetricsScreen
from llmtop.ui.view import LiveView
from llmtop.ui.widgets.footer import FitFooter

__all__ = ["WINDOWS", "EngineDetailScreen"]

WINDOWS = (("10s", 10.0), ("1m", 60.0), ("5m", 300.0))
"""Latency windows of the detail table; lifetime is added (and labelled) after them."""

SCALARS = ("target", "engine", "engine_version", "model", "state", "error", "http_status",
           "last_ok_age_s", "running", "waiting", "waiting_deferred", "max_running",
           "kv_cache_usage", "kv_capacity_tokens", "prefix_hit_rate", "spec_accept_rate",
           "prompt_tokens_per_s", "generation_tokens_per_s", "requests_per_s",
           "preemptions_per_s", "errors_per_s")
PCT = {"kv_cache_usage", "prefix_hit_rate", "spec_accept_rate"}
PHASES = (("QUEUE", "queue_s"), ("PREFILL", "prefill_s"), ("DECODE", "decode_s"),
          ("INFER", "inference_s"))
"""Per-request phase times (row field = lifetime key), shown as p50 / p95 per window."""
LENGTHS = (("prompt", "prompt_len"), ("generated", "gen_len"), ("step", "iteration_tokens"))
"""Token counts per request (and per engine step), shown as p50 / p90 per window."""


def _find(rows: list[EngineRow], key: str) -> EngineRow | None:
    for r in rows:
        if r.key == key:
            return r
        for rr in r.ranks:
            if rr.key == key:
                return rr
    return None


def _scalar(name: str, v: object) -> str:
    if v is None:
        return fmt.DASH
    if name in PCT and isinstance(v, float):
        return fmt.fmt_pct(v)
    if name.endswith("_per_s") and isinstance(v, float):
        return fmt.fmt_rate(v)
    if name == "last_ok_age_s" and isinstance(v, float):
        return f"{v:.1f}s ago"
    if isinstance(v, float):
        return f"{v:g}"
    return str(v)


def _qrow(label: str, q: Quantiles | None, unit_s: bool = True) -> list[str]:
    def f(name: str) -> str:
        if q is None:
            return fmt.DASH
        if unit_s:
            return fmt.quantile_text(q, name)
        v = getattr(q, name)
        return fmt.DASH if v is None else fmt.fmt_num(v)
    n = fmt.DASH if q is None else fmt.fmt_num(q.count)
    return [label, f("p50"), f("p90"), f("p95"), f("p99"), f("mean"), n]


def latency_table(row: EngineRow, windows: dict[str, EngineRow | None]) -> Table:
    t = Table(title="Latency by window (lifetime = since process start)",
              title_justify="left", box=None, padding=(0, 1), header_style="bold")
    for c in ("kind / window", "p50", "p90", "p95", "p99", "mean", "n"):
        t.add_column(c, justify="left" if c.startswith("kind") else "right", no_wrap=True)
    for kind in LATENCY_KINDS:
        attr = f"{kind}_s"
        for wname, wrow in windows.items():
            q = getattr(wrow, attr) if wrow is not None else None
            t.add_row(*_qrow(f"{kind.upper():<5} {wname}", q))
        life = row.lifetime.get(attr)
        t.add_row(*_qrow(f"{kind.upper():<5} lifetime", life if isinstance(life, Quantiles)
                         else None), end_section=True)
    return t


def _pair(q: Quantiles | None, names: tuple[str, str], unit_s: bool) -> str:
    """Two quantiles as ``a / b`` (``<``/``>`` for bounds); ``–`` when neither is known."""
    if q is None:
        return fmt.DASH
    out = []
    for n in names:
        if unit_s:
            out.append(fmt.quantile_text(q, n))
            continue
        v = getattr(q, n)
        mark = "<" if n in q.below else ">" if n in q.above else ""
        out.append(fmt.DASH if v is None else mark + fmt.fmt_num(v))
    return fmt.DASH if all(x == fmt.DASH for x in out) else " / ".join(out)


def window_table(title: str, kinds: tuple[tuple[str, str], ...], names: tuple[str, str],
                 row: EngineRow, windows: dict[str, EngineRow | None], *,
                 unit_s: bool = True) -> Table:
    """One line per kind, one column per window and lifetime: ``p50 / p95`` (or ``p90``)."""
    t = Table(title=title, title_justify="left", box=None, padding=(0, 1),
              header_style="bold")
    t.add_column("", no_wrap=True)
    for c in (*windows, "lifetime"):
        t.add_column(c, justify="right", no_wrap=True)
    for label, attr in kinds:
        cells = [_pair(getattr(w, attr) if w is not None else None, names, unit_s)
                 for w in windows.values()]
        life = row.lifetime.get(attr)
        cells.append(_pair(life if isinstance(life, Quantiles) else None, names, unit_s))
        t.add_row(label, *cells)
    return t


def _titled(table: Table) -> Group:
    """The table under its title as a line of its own: a Rich title wraps at the table's
    width, which put "Finish reasons (window)" on three lines above a narrow table."""
    title, table.title = table.title, None
    return Group(Text(str(title or ""), style=table.title_style or "table.title"), table)


def capacity_lines(row: EngineRow) -> list[Text]:
    """The capacity section: load over the profile's capacity, when and how it was
    measured, and the drift with what to do (``docs/capacity.md``)."""
    p = row.capacity
    if p is None:
        return [Text("Capacity: – (no profile: llmtop probe URL --sweep --ttft-slo S saves one)",
                     style="dim")]
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(p.get("measured_unix") or 0))
    age = p.get("age_s")
    slo = ", ".join(f"{k.upper()} p95 ≤ {fmt.fmt_s(v)}" for k, v in (p.get("slo") or {}).items()
                    if v is not None) or "no SLO"
    tok = p.get("output_tokens_per_s")
    head = Text("Capacity: ", style="bold")
    head.append_text(fmt.capacity_cell(row))
    head.append(f" of {p['requests_per_s']:.2f} req/s"
                + (f" ({tok:,.0f} output tok/s)" if tok is not None else "")
                + f" within {slo}")
    sh = p.get("shape") or {}
    hit = sh.get("prefix_hit_rate")
    out = [head]
    headroom = headroom_line(row)
    if headroom is not None:
        out.append(headroom)
    out += [
           Text(f"  measured {when}" + (f" ({fmt.fmt_age(age)} ago)" if age is not None else "")
                + f" by {p.get('source') or 'probe'}"
                + ("  STALE: re-measure" if p.get("stale") else ""),
                style=fmt.S("gauge-warn") if p.get("stale") else "dim"),
           Text(f"  shape: prompt {fmt.fmt_num(sh.get('prompt_mean'))} / output "
                f"{fmt.fmt_num(sh.get('output_mean'))} tokens (mean), prefix hits "
                f"{fmt.fmt_pct(hit)}", style="dim")]
    for d in row.capacity_drift:
        out.append(Text(f"  ~ {d['text']}", style=fmt.S("gauge-warn")))
    if row.capacity_drift:
        out.append(Text(f"  re-measure on this traffic: llmtop probe {p.get('url')} "
                        f"--lengths-from {row.target} --sweep", style="dim"))
    return out


def detail_renderable(row: EngineRow, windows: dict[str, EngineRow | None],
                      notes: dict[str, str] | None = None,
                      partial: dict[str, str] | None = None, *, raw: bool = True,
                      stack: list | None = None, gpus: Sequence[GpuRecord] = ()) -> Group:
    """The detail body; ``notes``: window name -> why that window shows ``–``;
    ``partial``: window name -> the backend's warnings when that window's row came from a
    partial answer (fleet mode): its rows and columns say ``PARTIAL``, a line says why.
    ``raw``: the raw metrics browser (``m``) is offered (not in fleet mode); ``stack``: the
    lines on its router and TTFT path (``screens.router.stack_section``); the KV transfer
    and offload tier sections follow them (``screens.kv``). ``gpus``: the snapshot's GPUs;
    the GPU work section (``screens.gpu_work``) shows the engine's own and its GPUs' numbers
    when it has either (its counters, a hint to turn them on, or a GPU of its own)."""
    partial = {n: w for n, w in (partial or {}).items() if n in windows}
    windows = {f"{n} PARTIAL" if n in partial else n: w for n, w in windows.items()}
    head = Text(f"{row.target}  {row.model or ''}", style="bold")
    head.append("  ")
    head.append_text(fmt.badge(row))
    if row.error:
        head.append(f"  {row.error}", style=fmt.S("gauge-crit"))
    if row.container is not None:  # where discovery found it: container, pod or namespace
        c = row.container
        where = "  ".join(f"{k} {v}" for k, v in (
            ("runtime", c.runtime), ("pod", f"{c.namespace}/{c.pod}" if c.pod else None),
            ("container", c.name), ("id", c.id[:12] if c.id else None),
            ("netns", c.netns)) if v)
        head.append(f"\n{c.label}  ·  {where or 'netns ? (needs root)'}", style="")
    fields_t = Table(title="Fields (window of the overview)", title_justify="left", box=None,
                     show_header=False, padding=(0, 1))
    fields_t.add_column(style="bold", no_wrap=True)
    fields_t.add_column()
    for name in SCALARS:
        fields_t.add_row(name, _scalar(name, getattr(row, name)))
    life_scalars = {k: v for k, v in row.lifetime.items() if not isinstance(v, Quantiles)}
    for k, v in sorted(life_scalars.items()):
        fields_t.add_row(f"lifetime {k}", _scalar(k, v))
    fin = Table(title="Finish reasons (window)", title_justify="left", box=None,
                show_header=False, padding=(0, 1))
    fin.add_column(style="bold")
    fin.add_column(justify="right")
    for reason, n in sorted((row.finished or {}).items(), key=lambda kv: -kv[1]):
        fin.add_row(reason, fmt.fmt_num(n))
    if not row.finished:
        fin.add_row("none reported", "")
    phases = window_table("Request phases, p50 / p95", PHASES, ("p50", "p95"), row, windows)
    tok = window_table("Token lengths, p50 / p90 (step = tokens per engine step)", LENGTHS,
                       ("p50", "p90"), row, windows, unit_s=False)
    cache = Table(title="Cache configuration", title_justify="left", box=None,
                  show_header=False, padding=(0, 1))
    cache.add_column(style="bold")
    cache.add_column()
    for k, v in sorted(row.info.items()):
        cache.add_row(k, v)
    if not row.info:
        cache.add_row("not reported", "")
    gpu_part: list = []
    if (row.mfu_hint or engine_gpus(row, gpus) or row.achieved_bytes_per_s is not None
            or row.achieved_flops_per_s is not None):
        gpu_part = [*gpu_work_lines(row, gpus), Text("")]
    parts: list = [head, *log_section(row), *capacity_lines(row), Text(""), *gpu_part,
                   *(stack or ()), *kv_section(row), _titled(latency_table(row, windows))]
    parts += [Text(f"{name}: {why}", style="dim") for name, why in (notes or {}).items()]
    parts += [Text(f"{name} PARTIAL: the server's answer was partial, values may be "
                   f"incomplete: {why}", style=fmt.S("gauge-warn"))
              for name, why in partial.items()]
    parts += [Text(""), _titled(phases), Text(""), _titled(tok), Text(""),
                   _titled(fields_t), Text(""), _titled(fin), Text(""), _titled(cache)]
    if row.ranks:
        ranks = Table(title="Data-parallel ranks", title_justify="left", box=None,
                      padding=(0, 1), header_style="bold")
        for c in ("rank", "run", "wait", "KV", "TTFT95", "ITL95", "tok/s"):
            ranks.add_column(c, justify="right")
        for r in row.ranks:
            ranks.add_row(r.rank or "?", fmt.fmt_num(r.running), fmt.fmt_num(r.waiting),
                          fmt.fmt_pct(r.kv_cache_usage), fmt.quantile_text(r.ttft_s, "p95"),
                          fmt.quantile_text(r.itl_s, "p95"), fmt.fmt_num(
                              r.generation_tokens_per_s))
        parts += [Text(""), _titled(ranks)]
    hint = "m: raw metrics browser \u00b7 esc: back" if raw else "esc: back"
    parts += [Text(""), Text(hint, style="dim")]
    return Group(*parts)


class EngineDetailScreen(Screen):
    """Everything about one row (``key``), read from ``view``."""

    BINDINGS = [
        Binding("escape", "back", "Back", id="detail_back"),
        Binding("m", "raw", "Raw metrics", id="raw"),
        Binding("L", "logs", "Log", tooltip="this engine's log", id="detail_logs"),
    ]

    def __init__(self, view: LiveView, key: str) -> None:
        super().__init__()
        self.view = view
        self.key = key

    def compose(self) -> ComposeResult:
        yield Static(f"Engine detail: {self.key.replace('|', '  ')}", classes="title")
        with VerticalScroll(classes="detail-body"):
            yield Static(id="detail-body")
        yield FitFooter()

    def on_mount(self) -> None:
        # a fleet source fetches this row at the other windows while the screen is open
        focus = getattr(self.view.source, "focus", None)
        task = focus(self.key, tuple(secs for _, secs in WINDOWS)) if focus else None
        if task is not None:
            self.run_worker(self._when_fetched(task), exit_on_error=False)
        self.refresh_data()
        self.query_one(VerticalScroll).focus()

    async def _when_fetched(self, task: Awaitable[None]) -> None:
        await task
        self.refresh_data()

    def on_unmount(self) -> None:
        focus = getattr(self.view.source, "focus", None)
        if focus is not None:
            focus(None)

    def current_row(self) -> EngineRow | None:
        snap = self.view.snapshot
        return _find(snap.engines, self.key) if snap is not None else None

    def refresh_data(self, *, force: bool = False) -> None:
        row = self.current_row()
        body = self.query_one("#detail-body", Static)
        if row is None:
            body.update(Text(f"{self.key}: not in the latest snapshot", style="dim"))
            return
        windows: dict[str, EngineRow | None] = {}
        notes: dict[str, str] = {}
        partial: dict[str, str] = {}
        note = getattr(self.view.source, "window_note", None)
        part = getattr(self.view.source, "window_partial", None)
        for name, secs in WINDOWS:
            try:
                snap = self.view.source.snapshot(secs)
            except Exception:
                snap = None
            windows[name] = _find(snap.engines, self.key) if snap is not None else None
            why = note(secs) if note is not None and windows[name] is None else None
            if why:
                notes[name] = why
            warns = part(secs) if part is not None else None
            if warns:
                partial[name] = warns
        from llmtop.ui.screens.router import stack_section

        body.update(detail_renderable(row, windows, notes, partial,
                                      raw=self.check_action("raw", ()) is not False,
                                      stack=stack_section(row, self.view.snapshot),
                                      gpus=self.view.snapshot.gpus if self.view.snapshot
                                      else ()))

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """``m`` only where raw scrapes are kept (not fleet mode: Prometheus gives series);
        ``L`` where logs are followed."""
        allows = getattr(self.app, "mode_allows", None)
        return allows(action) if allows is not None else True

    def action_back(self) -> None:
        self.app.pop_screen()

    def action_logs(self) -> None:
        row = self.current_row()
        self.app.push_screen(LogScreen(self.view, row.target if row is not None
                                       else self.key.split("|")[0]))

    def action_raw(self) -> None:
        row = self.current_row()
        target = row.target if row is not None else self.key.split("|")[0]
        self.app.push_screen(RawMetricsScreen(self.view, target))
