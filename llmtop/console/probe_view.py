"""Rich output of ``llmtop probe``: a live progress display and the final summary table.

Fed only with probe events and report dicts (``docs/probe.md``); never sees the API key.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from rich import box
from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from llmtop.loadgen.options import ProbeOptions, redact_url
from llmtop.loadgen.report import (
    capacity,
    honesty_lines,
    knee_text,
    lengths_lines,
    load_text,
    slo_text,
    unmet_sla_text,
)
from llmtop.units import DASH, fixed, pct_change

__all__ = ["ProbeLiveView", "comparison_table", "print_comparison", "print_summary",
           "summary_table"]

WIDE = 10_000
"""Width of a non-terminal console: wide enough that no table or line is ever cut."""


def _ms(v: float | None) -> str:
    return DASH if v is None else f"{v * 1000:.0f}"


def _load(d: dict[str, Any]) -> str:
    return load_text(d)


def _errors(errs: dict[str, int] | None) -> str:
    if not errs:
        return "0"
    return " ".join(f"{k}:{v}" for k, v in sorted(errs.items()))


COLUMNS = ("step", "load", "actual\nload", "req/s", "out\ntok/s", "goodput\nreq/s",
           "TTFT\np50", "TTFT\np95", "ITL\np50", "E2E\np95", "errors", "client")
"""The summary table's headers: whole words on two lines, so the table fits 80 columns on a
terminal and is never cut on a pipe or in a file."""


def summary_table(report: dict[str, Any], title: str | None = None) -> Table:
    """One row per step; latencies in ms except E2E (s). ``*`` marks a partial step."""
    t = Table(title=title, title_justify="left", header_style="bold", box=box.SIMPLE_HEAD,
              caption="latencies in ms (E2E in s); * = partial step", caption_justify="left",
              padding=(0, 0), collapse_padding=True, pad_edge=False)
    for col in COLUMNS:
        t.add_column(col, justify="right", no_wrap=True)
    for s in report.get("steps", []):
        t.add_row(
            f"{s['index'] + 1}{'*' if s.get('partial') else ''}", _load(s),
            fixed(s.get("achieved_concurrency"), 1), fixed(s.get("requests_per_s"), 2),
            fixed(s.get("output_tokens_per_s"), 0), fixed(s.get("goodput_per_s"), 2),
            _ms(s["ttft_s"]["p50"]), _ms(s["ttft_s"]["p95"]), _ms(s["itl_s"]["p50"]),
            fixed(s["e2e_s"]["p95"], 2), str(sum((s.get("errors") or {}).values())),
            Text("BOUND", style="red") if s.get("client_bound") else Text("ok"))
    return t


def _verdicts(report: dict[str, Any]) -> list[Text]:
    out = []
    sat, mx, sla = (report.get("saturation"), report.get("max_throughput"),
                    report.get("sla_boundary"))
    if sat:
        out.append(Text(f"Saturation point: {_load(sat)} (knee {knee_text(sat)}), "
                        f"{sat['output_tokens_per_s']:.0f} out tok/s", style="bold"))
    elif report.get("options", {}).get("sweep"):
        out.append(Text("Saturation point: not found (no accepted knee)"))
    if mx:
        out.append(Text(f"Max throughput: {mx['output_tokens_per_s']:.0f} out tok/s, "
                        f"{mx['requests_per_s']:.2f} req/s at {_load(mx)}"))
    if sla and sla.get("met"):
        out.append(Text(f"SLA boundary: {_load(sla)}, goodput {sla['goodput_per_s']:.2f} req/s "
                        f"(SLO: {slo_text(sla.get('slo'))})"))
    elif sla:
        out.append(Text(f"SLA boundary: {unmet_sla_text(report)} ({slo_text(sla.get('slo'))})",
                        style="yellow"))
    if any(s.get("client_bound") for s in report.get("steps", [])):
        out.append(Text("Some steps were client-bound: the client, not the server, was the "
                        "limit there.", style="red"))
    for s in report.get("steps", []):
        if s.get("errors"):
            out.append(Text(f"step {s['index'] + 1} errors: {_errors(s['errors'])}",
                            style="yellow"))
    for line in honesty_lines(report):
        bad = "client-bound" in line or line.startswith("WARNING")
        out.append(Text(line, style="red" if bad else "dim"))
    out.append(Text(f"stop reason: {report.get('stop_reason')}", style="dim"))
    return out


def _uncut(console: Console) -> Console:
    """On a pipe or a file nothing is cut at 80 columns: the same file, no width limit."""
    if console.is_terminal:
        return console
    return Console(file=console.file, width=WIDE, color_system=None, highlight=False,
                   soft_wrap=True)


def print_summary(report: dict[str, Any], console: Console | None = None) -> None:
    """The capacity sentence first, then the table, the verdict lines and the load's
    lengths, then a blank line (before any ``wrote FILE``)."""
    console = _uncut(console or Console())
    title = f"llmtop probe · {report.get('target')} · {report.get('model')}"
    console.print(Text(capacity(report)["sentence"], style="bold"))
    console.print(summary_table(report, title))
    for line in _verdicts(report):
        console.print(line)
    for line in lengths_lines(report):
        console.print(Text(line, style="dim" if line.startswith("  ") else ""))
    console.print()


def _pct(v: float | None) -> Text:
    return Text(pct_change(v))


def comparison_table(c: dict[str, Any], base: str) -> Table:
    """One row per baseline load: both reports' tok/s and TTFT p95 and the change (``~``:
    interpolated between the other report's neighbouring steps)."""
    t = Table(title=f"{c['name']} vs {base}", title_justify="left", header_style="bold",
              box=box.SIMPLE_HEAD, padding=(0, 1), collapse_padding=True, pad_edge=False,
              caption="~ = interpolated between the other report's steps",
              caption_justify="left")
    for col in ("load", "out tok/s A", "out tok/s B", "change", "TTFT p95 A", "TTFT p95 B",
                "change "):
        t.add_column(col, justify="right", no_wrap=True)
    key = c["load_key"]
    for r in c["rows"]:
        (ta, tb), (la, lb) = r["tokens_per_s"], r["ttft_p95_s"]
        mark = "~" if r["interpolated"] else ""
        t.add_row(load_text({key: r[key]}), fixed(ta, 0), fixed(tb, 0) + mark,
                  _pct(r["tokens_change"]), _ms(la) + " ms" if la is not None else DASH,
                  (_ms(lb) + " ms" + mark) if lb is not None else DASH, _pct(r["ttft_change"]))
    return t


def print_comparison(result: dict[str, Any], console: Console | None = None) -> None:
    """``llmtop probe compare``: per comparison a table and the one-line verdict."""
    console = _uncut(console or Console())
    for c in result["comparisons"]:
        console.print(Text(f"A = {result['baseline']} (baseline), B = {c['name']}", style="dim"))
        console.print(comparison_table(c, result["baseline"]))
        console.print(Text(c["sentence"], style="bold"))
    console.print()


class ProbeLiveView:
    """Live display: step, achieved/target load, requests, tok/s, TTFT p50/p95, errors."""

    def __init__(self, options: ProbeOptions, console: Console | None = None) -> None:
        self.options = options
        self.console = console or Console(stderr=True)
        self.target = redact_url(options.url)
        self.model: str | None = options.model
        self.state = "preparing"
        self.step: dict[str, Any] = {}
        self.progress: dict[str, Any] = {}
        self.done: list[dict[str, Any]] = []
        self.notes: list[str] = []
        self._live: Live | None = None

    @contextlib.contextmanager
    def live(self) -> Iterator[ProbeLiveView]:
        with Live(self.render(), console=self.console, refresh_per_second=4,
                  transient=True) as lv:
            self._live = lv
            try:
                yield self
            finally:
                self._live = None

    def note(self, text: str) -> None:
        self.notes.append(text)
        self._refresh()

    def update(self, ev: dict[str, Any]) -> None:
        kind = ev.get("type")
        if kind == "prepared":
            self.model = ev.get("model")
            self.state = f"running ({ev.get('endpoint')}, prompts by {ev['calibration']['method']})"
        elif kind == "step_started":
            self.step = ev
            self.progress = {}
        elif kind == "progress":
            self.progress = ev
        elif kind == "step_done":
            self.done.append(ev["step"])
        elif kind == "error":
            self.notes.append(f"error: {ev.get('message')}")
        elif kind == "finished":
            self.state = "finished"
        self._refresh()

    def _refresh(self) -> None:
        if self._live is not None:
            self._live.update(self.render())

    def render(self) -> Group:
        p = self.progress
        head = Text(f"llmtop probe → {self.target}  model {self.model or '?'}  · {self.state}",
                    style="bold")
        o = self.options
        if o.traffic:
            head.append(f"\nload shaped like {o.traffic.get('source')}, "
                        f"{o.traffic.get('window')}", style="dim")
        elif o.dataset:
            head.append(f"\nprompts from {o.dataset} (seed {o.seed})", style="dim")
        g = Table.grid(padding=(0, 2))
        for _ in range(8):
            g.add_column()
        if self.step:
            n = self.step.get("steps_planned")
            step = f"{self.step['step'] + 1}/{n}" if n else str(self.step["step"] + 1)
            target = _load(self.step)
            g.add_row("step", step, "phase", p.get("phase", "warmup"), "target", target,
                      "achieved", fixed(p.get("achieved_concurrency"), 1))
            g.add_row("in flight", str(p.get("in_flight", DASH)), "requests",
                      f"{p.get('requests_done', 0)} ({p.get('requests_total', 0)} total)",
                      "out tok/s", fixed(p.get("output_tokens_per_s"), 0), "TTFT p50/p95",
                      f"{_ms(p.get('ttft_p50_s'))}/{_ms(p.get('ttft_p95_s'))} ms")
            g.add_row("errors", _errors(p.get("errors")), "", "", "", "", "", "")
        parts: list[Any] = [head, g]
        if self.done:
            parts.append(summary_table({"steps": self.done[-12:]}))
        parts.extend(Text(n, style="yellow") for n in self.notes[-3:])
        return Group(*parts)
