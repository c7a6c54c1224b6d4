"""The load probe screen (``l``): a form, then live client-side curves beside the target's
server-side metrics. The probe runs in its own process via ``llmtop.loadgen.api``."""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable
from typing import Any, cast

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.timer import Timer
from textual.widgets import Checkbox, Input, Label, Select, Static

from llmtop.ui import fmt
from llmtop.ui.screens import probe_shape as shape
from llmtop.ui.view import LiveView
from llmtop.ui.widgets.footer import FitFooter
from llmtop.urls import is_loopback, split_url

__all__ = ["POLL_S", "ProbeScreen", "StateCheckbox", "bounds_text", "build_options",
           "ladder_text", "step_chart"]

POLL_S = 0.5
"""How often the screen reads the probe's progress queue."""


FIELDS = (
    ("concurrency", "concurrency", "4"),
    ("duration", "duration s", ""),
    ("max_requests", "max requests", "0"),
    ("prompt_tokens", "prompt tok", "512"),
    ("output_tokens", "output tok", "128"),
    ("ttft_slo", "TTFT SLO s", ""),
)


FIXED_CONCURRENCY = "4"
"""The concurrency field's default for a fixed load."""
SWEEP_MAX_CONCURRENCY = "256"
"""With sweep on, the same field is the top of the ladder 1, 2, 4, ... (the probe's default)."""
FIXED_DURATION_S = 60.0
SWEEP_BUDGET_S = 600.0
STEP_S, WARMUP_S = 10.0, 3.0
"""The probe's own defaults (``llmtop.loadgen.options``), shown in the form's bounds line."""


def ladder_text(top: int) -> tuple[str, int]:
    """``1,2,4,…,256`` and the number of steps."""
    steps, c = [], 1
    while c < top:
        steps.append(c)
        c *= 2
    steps.append(top)
    shown = steps if len(steps) <= 4 else [*steps[:3], "…", steps[-1]]
    return ",".join(str(x) for x in shown), len(steps)


def _tokens_text(values: dict[str, Any]) -> str:
    """The lengths the load will have, in a few words."""
    load = values.get("load", "synthetic")
    if load == "dataset":
        return "prompts from the dataset file, as written"
    lengths, prefix = shape.ENGINE_MODES.get(load, (False, False))
    out = ("lengths like the engine" if lengths else
           f"prompt {values.get('prompt_tokens', '?')} / output "
           f"{values.get('output_tokens', '?')} tok")
    return out + ("; prefix hit like the engine" if prefix else "")


def bounds_text(values: dict[str, Any]) -> str:
    """What the probe will do with these form values, in one or two lines."""
    sweep = bool(values.get("sweep"))
    dur = values.get("duration")
    maxreq = values.get("max_requests")
    tokens = _tokens_text(values)
    if sweep:
        top = int(values.get("max_concurrency") or values.get("concurrency") or 1)
        lad, n = ladder_text(max(1, top))
        budget = dur if dur is not None else SWEEP_BUDGET_S
        need = n * (STEP_S + WARMUP_S)
        out = (f"sweep: concurrency {lad}, {n} steps \u00d7 ({STEP_S:g} s + {WARMUP_S:g} s "
               f"warm-up) \u2248 {need:.0f} s; stops at the knee or the TTFT SLO; budget "
               f"{budget:g} s")
        if dur is None:
            out += " (probe default)"
        elif budget < need:
            out += f": short, at most {max(1, int(budget // (STEP_S + WARMUP_S)))} steps"
    else:
        c = values.get("concurrency") or 1
        if dur is None and maxreq is not None:
            budget = f"until {maxreq} requests"
        else:
            budget = f"for {dur if dur is not None else FIXED_DURATION_S:g} s"
            if maxreq is not None:
                budget += f" or {maxreq} requests"
        out = f"fixed: {c} in flight {budget}"
    if values.get("ttft_slo"):
        out += f"; TTFT SLO {values['ttft_slo']:g} s"
    return f"{out}; {tokens}"


def _get(obj: Any, name: str, default: Any = None) -> Any:
    if isinstance(obj, dict):
        return obj.get(name, default)
    return getattr(obj, name, default)


def build_options(values: dict[str, Any], options_cls: Any) -> Any:
    """Map the form onto ``ProbeOptions``, passing only the fields it accepts (both the
    ``duration`` and ``duration_s`` spellings are offered)."""
    aliases = {"duration": "duration_s", "ttft_slo": "ttft_slo_s", "url": "target"}
    offered = dict(values)
    for a, b in aliases.items():
        if a in values:
            offered.setdefault(b, values[a])
    if dataclasses.is_dataclass(options_cls):
        accepted = {f.name for f in dataclasses.fields(options_cls)}
    else:
        accepted = set(inspect.signature(options_cls).parameters)
    return options_cls(**{k: v for k, v in offered.items() if k in accepted})


STEP_COLUMNS = ("load", "actual", "tok/s", "TTFT95", "err")
"""Headers of the per-step table: short, but whole at 80x24 (about 33 columns)."""
BARS_MIN_WIDTH = 60
"""Below this width the table drops its bars rather than cutting its headers."""


def _load_cell(s: dict) -> str:
    conc, rate = _get(s, "concurrency"), _get(s, "rate")
    mark = "*" if _get(s, "partial") else ""
    if conc:
        return f"c={conc}{mark}"
    return f"{rate:g} req/s{mark}" if rate else fmt.DASH


def step_chart(steps: list[dict], width: int) -> Table:
    """Throughput and TTFT p95 against load, one row per finished step.

    ``actual`` is the achieved concurrency (or rate); ``!`` after the errors marks a
    client-bound step. Bars are drawn only where the width leaves room for them.
    """
    bars = width >= BARS_MIN_WIDTH
    notes = ["! = client-bound"] if steps else []
    if any(_get(s, "partial") for s in steps):
        notes.append("* = partial")
    t = Table(box=None, padding=(0, 1), header_style="bold", title="Client side (per step)",
              title_justify="left", caption=", ".join(notes) or None, caption_justify="left")
    cols = ["load", "actual", "tok/s", *([""] if bars else []), "TTFT95",
            *([""] if bars else []), "err"]
    for c in cols:
        t.add_column(c, justify="left" if c in ("", "load") else "right", no_wrap=True)
    if not steps:
        t.add_row(fmt.DASH, *[""] * (len(cols) - 1))
        return t
    bw = max(3, (width - 46) // 2)
    tps_max = max((_get(s, "output_tokens_per_s") or 0) for s in steps) or 1.0
    ttfts = [(_get(s, "ttft_s") or {}).get("p95") for s in steps]
    ttft_max = max((v or 0) for v in ttfts) or 1.0
    for s, ttft in zip(steps, ttfts, strict=True):
        tps = _get(s, "output_tokens_per_s")
        errs = sum((_get(s, "errors") or {}).values())
        actual = _get(s, "achieved_concurrency") if _get(s, "concurrency") \
            else _get(s, "achieved_rate")
        cells: list[Any] = [_load_cell(s), fmt.fmt_num(actual, 1), fmt.fmt_num(tps)]
        if bars:
            cells.append(fmt.bar(None if tps is None else tps / tps_max, bw, "gauge-ok"))
        cells.append(fmt.fmt_s(ttft))
        if bars:
            cells.append(fmt.bar(None if ttft is None else ttft / ttft_max, bw, "gauge-warn"))
        cells.append(f"{errs}{'!' if _get(s, 'client_bound') else ''}")
        t.add_row(*cells)
    return t


class StateCheckbox(Checkbox):
    """A checkbox whose mark is the state itself: ``X`` when on, blank when off (Textual's
    own draws ``X`` either way and tells them apart only by colour)."""

    @property
    def BUTTON_INNER(self) -> str:  # type: ignore[override]
        return "X" if self.value else " "


def _chart_widget() -> Any:
    """The live chart, or None where textual-plotext is not installed (table only)."""
    try:
        from llmtop.ui.widgets.probe_chart import ProbeChart
    except ImportError:
        return None
    return ProbeChart(id="probe-chart")


def live_marks(steps: list[dict], slo_s: float | None) -> tuple[float | None, float | None]:
    """Knee and SLA boundary loads of the steps so far (the probe's own analysis)."""
    from llmtop.loadgen import knee

    done = [s for s in steps if isinstance(s, dict) and s.get("requests") is not None]
    sat = sla = None
    try:
        sat = knee.saturation(done) if len(done) >= knee.MIN_POINTS else None
    except (KeyError, TypeError, ValueError):  # a step without the fields: no mark
        pass
    try:
        sla = knee.sla_boundary(done, {"ttft": slo_s, "itl": None, "tpot": None}) \
            if slo_s else None
    except (KeyError, TypeError, ValueError):
        pass
    k = (sat or {}).get("concurrency") or (sat or {}).get("rate")
    b = (sla or {}).get("concurrency") or (sla or {}).get("rate") if (sla or {}).get("met") \
        else None
    return k, b


class ProbeScreen(shape.ShapeForm, Screen):
    """Form -> run -> curves. Esc stops a running probe (results stay), else goes back."""

    DEFAULT_CSS = """
    #probe-left { width: 1fr; }
    #probe-left #probe-steps { width: 1fr; height: auto; }
    """
    BINDINGS = [
        Binding("escape", "stop_or_back", "Stop/Back", id="probe_stop"),
        Binding("ctrl+r", "start", "Start", id="probe_start"),
        Binding("v", "next_chart", "Chart", id="probe_chart", priority=True),
        Binding("f", "toggle_form", "Form", id="probe_form", priority=True),
    ]

    def __init__(self, target: str | None, *, starter: Callable[[Any], Any] | None = None,
                 options_cls: Any = None, view: LiveView | None = None) -> None:
        super().__init__()
        self._view = view
        self.target = target
        self.starter = starter
        self.options_cls = options_cls
        self.handle: Any = None
        self.steps: list[dict] = []
        self.progress: Any = None
        self.status = "ready: fill the form, Enter or ctrl+r starts"
        self.report: dict | None = None
        self.errors: list[str] = []
        self.stopping = False
        self._confirm_url: str | None = None
        self._timer: Timer | None = None
        self.traffic: dict[str, Any] | None = None
        """The engine's shape read for the chosen load (``ProbeOptions.traffic``)."""
        self.shape_error: str | None = None
        """Why the chosen load cannot be used (engine unreadable, bad dataset), else None."""
        self.shape_pending = False
        """The engine is being read or the dataset checked."""

    @property
    def view(self) -> LiveView:
        """The app's data: the ``view`` given when made, else the running app (a LiveView)."""
        return self._view if self._view is not None else cast(LiveView, self.app)

    def compose(self) -> ComposeResult:
        yield Static(f"Load probe: {self.target or 'no target selected'}", classes="title")
        with Vertical(id="probe-form"):
            with Horizontal():
                for key, label, default in FIELDS[:3]:
                    yield Label(label, id=f"pl-{key}")
                    yield Input(default, id=f"pf-{key}", restrict=r"[0-9.]*",
                                placeholder="auto" if key == "duration" else "")
            with Horizontal():
                for key, label, default in FIELDS[3:]:
                    yield Label(label)
                    yield Input(default, id=f"pf-{key}", restrict=r"[0-9.]*")
            with Horizontal():
                yield StateCheckbox("sweep 1,2,4,8\u2026", value=False, id="pf-sweep")
                yield Select([("completions", "completions"), ("chat", "chat")],
                             value="completions", allow_blank=False, id="pf-endpoint")
                yield Select(shape.LOAD_MODES, value="synthetic", allow_blank=False,
                             id="pf-load")
            with Horizontal(id="pf-dataset-row"):
                yield Label("dataset file")
                yield Input("", id="pf-dataset", placeholder="prompts.jsonl or ShareGPT .json")
            yield Static(id="probe-shape")
            yield Static(id="probe-bounds")
        yield Static(id="probe-status")
        with Horizontal(id="probe-results"):
            with Vertical(id="probe-left"):
                chart = _chart_widget()
                if chart is not None:
                    yield chart
                yield Static(id="probe-steps")
            yield Static(id="probe-server")
        yield FitFooter()

    def on_mount(self) -> None:
        self.query_one("#pf-concurrency", Input).focus()
        self.query_one("#pf-dataset-row").display = False
        self.query_one("#probe-shape").display = False
        self._show_bounds()
        self.refresh_data()

    def on_checkbox_changed(self, event: Checkbox.Changed) -> None:
        """Sweep on: the concurrency field becomes the top of the ladder (its default too)."""
        box = self.query_one("#pf-concurrency", Input)
        if event.value and box.value in ("", FIXED_CONCURRENCY):
            box.value = SWEEP_MAX_CONCURRENCY
        elif not event.value and box.value in ("", SWEEP_MAX_CONCURRENCY):
            box.value = FIXED_CONCURRENCY
        self.query_one("#pl-concurrency", Label).update(
            "max conc." if event.value else "concurrency")
        self._show_bounds()

    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input.id == "pf-dataset":
            self.check_shape()
        if (event.input.id or "").startswith("pf-"):
            self._show_bounds()

    def _show_bounds(self) -> None:
        try:
            text = bounds_text(self.form_values(with_target=False))
        except ValueError:
            text = "not a number in the form"
        self.query_one("#probe-bounds", Static).update(Text(text, style="dim"))

    # -- form -> probe ------------------------------------------------------------------------
    def form_values(self, *, with_target: bool = True) -> dict[str, Any]:
        vals: dict[str, Any] = {}
        for key, _, _ in FIELDS:
            raw = self.query_one(f"#pf-{key}", Input).value.strip()
            if not raw:
                continue
            num = float(raw)
            vals[key] = int(num) if key not in ("duration", "ttft_slo") else num
        if vals.get("max_requests") == 0:
            vals.pop("max_requests")
        vals["sweep"] = self.query_one("#pf-sweep", Checkbox).value
        if vals["sweep"] and "concurrency" in vals:  # the ladder's top: 1, 2, 4, ... N
            vals["max_concurrency"] = vals.pop("concurrency")
        vals["endpoint"] = self.query_one("#pf-endpoint", Select).value
        vals["load"] = self.load_mode()
        if vals["load"] == "dataset":
            vals["dataset"] = shape.dataset_path(self.query_one("#pf-dataset", Input).value)
        elif self.traffic is not None and vals["load"] in shape.ENGINE_MODES:
            vals["traffic"] = self.traffic
        if not with_target:
            return vals
        vals["url"] = self._url()
        vals["yes"] = True
        key = self.view.config.api_key
        if key:
            vals["api_key"] = key
        return vals

    def _url(self) -> str | None:
        """The target's base URL: a configured target, else one the monitor discovered."""
        found = getattr(getattr(self.view.source, "monitor", None), "targets", None) or ()
        for t in (*self.view.config.targets, *found):
            if getattr(t, "name", None) == self.target and getattr(t, "base_url", None):
                return t.base_url
        return None

    def on_input_submitted(self) -> None:
        self.action_start()

    def action_start(self) -> None:
        if self.handle is not None:
            return
        if self.target is None:
            self._set_status("select a target on the overview first", error=True)
            return
        if (why := self.shape_not_ready()) is not None:
            self._set_status(why, error=True)
            return
        try:
            values = self.form_values()
            if not values.get("url"):
                self._set_status(f"no URL known for {self.target}: run "
                                 f"`llmtop probe URL` from a shell", error=True)
                return
            if not self._confirmed(values.get("url")):
                return
            starter, opts_cls = self.starter, self.options_cls
            if starter is None or opts_cls is None:
                from llmtop.loadgen import api

                starter = starter or api.start_probe
                opts_cls = opts_cls or api.ProbeOptions
            self.handle = starter(build_options(values, opts_cls))
        except ImportError:
            self._set_status("the load probe is not available in this build", error=True)
            return
        except Exception as exc:
            self._set_status(f"could not start: {type(exc).__name__}: {exc}", error=True)
            return
        self.steps, self.report, self.progress, self.stopping = [], None, None, False
        self.query_one("#probe-form").display = False  # room for the curves (f: form)
        self._set_status(f"running against {values.get('url')} \u2026 (esc stops)")
        self.view.source.event("info", self.target, "probe started")
        self._timer = self.set_interval(POLL_S, self.poll_probe)

    def _confirmed(self, url: str | None) -> bool:
        """Load goes to a non-loopback host only after a second start (the probe's rule)."""
        got = split_url(url or "")
        host = got[1] if got is not None else (url or "")
        if is_loopback(host) or self._confirm_url == url:
            return True
        self._confirm_url = url
        self._set_status(f"{host} is not this machine: start again (Enter / ctrl+r) to send "
                         "load to it", error=True)
        return False

    def poll_probe(self) -> None:
        if self.handle is None:
            return
        try:
            events = self.handle.poll()
        except Exception as exc:
            events = [{"type": "error", "message": f"{type(exc).__name__}: {exc}"},
                      {"type": "finished", "report": None}]
        for ev in events:
            kind = _get(ev, "type", _get(ev, "kind", ""))
            step = _get(ev, "step")
            if kind in ("step_done", "step") and isinstance(step, dict):
                self.steps.append(step)
            elif kind == "progress":
                self.progress = ev
            elif kind == "prepared":
                self.status = (f"running: model {_get(ev, 'model')}, endpoint "
                               f"{_get(ev, 'endpoint')} \u2026 (esc stops)")
            elif kind == "error":
                self.errors.append(str(_get(ev, "message", _get(ev, "text", "?"))))
            elif kind == "finished":
                self._finish(_get(ev, "report"))
                break
        self.refresh_data()

    def _finish(self, report: dict | None) -> None:
        if self._timer is not None:
            self._timer.stop()
            self._timer = None
        self.report = report
        if report and report.get("steps"):
            self.steps = list(report["steps"])
        self.handle = None
        how = "stopped" if self.stopping else "finished"
        extra = ""
        if report:
            from llmtop.loadgen.report import capacity, honesty_lines

            extra = f": {capacity(report)['sentence']}"
            warn = [ln for ln in honesty_lines(report)
                    if "client-bound" in ln or ln.startswith("WARNING")]
            extra += "".join(f" {ln}." for ln in warn[:2])
        err = f"; {self.errors[-1]}" if self.errors else ""
        self._set_status(f"probe {how}{extra}{err} (esc: back)",
                         error=bool(self.errors) and not self.steps)
        self.view.source.event("info", self.target, f"probe {how}")

    def action_stop_or_back(self) -> None:
        if self.handle is not None and not self.stopping:
            self.stopping = True
            try:
                self.handle.stop()
            except Exception:
                pass
            self._set_status("stopping: waiting for the partial report \u2026 (esc again: leave)")
            return
        if self.handle is not None:  # second esc while stopping: leave, no report
            kill = getattr(self.handle, "kill", None)
            if kill is not None:
                kill()
            self._finish(None)
        self.app.pop_screen()

    def _set_status(self, text: str, *, error: bool = False) -> None:
        self.status = text
        style = fmt.S("gauge-crit") if error else ""
        self.query_one("#probe-status", Static).update(Text(text, style=style))

    # -- painting -----------------------------------------------------------------------------
    def action_next_chart(self) -> None:
        """Cycle the live chart: tok/s vs load, TTFT vs load, TTFT p95 vs tok/s."""
        charts = self.query("#probe-chart")
        if charts:  # (absent where textual-plotext is not installed)
            from llmtop.ui.widgets.probe_chart import CHART_KINDS

            c = charts.first()
            c.kind = CHART_KINDS[(CHART_KINDS.index(c.kind) + 1) % len(CHART_KINDS)]
            self.refresh_data()

    def action_toggle_form(self) -> None:
        """Show or hide the form (hidden while a probe runs, to give the curves room)."""
        form = self.query_one("#probe-form")
        form.display = not form.display

    def _chart_slo(self) -> float | None:
        try:
            return self.form_values(with_target=False).get("ttft_slo")
        except ValueError:
            return None

    def refresh_data(self, *, force: bool = False) -> None:
        half = max(30, self.app.size.width // 2 - 2)
        charts = self.query("#probe-chart")
        if charts:
            slo = self._chart_slo()
            knee_at, sla_at = live_marks(self.steps, slo)
            charts.first().show(self.steps, slo_s=slo, knee=knee_at, sla=sla_at)
        self.query_one("#probe-status", Static).update(self._status_text())
        self.query_one("#probe-steps", Static).update(step_chart(self.steps, half))
        self.query_one("#probe-server", Static).update(self._server_side(half))

    def _status_text(self) -> Text:
        t = Text(self.status)
        p = self.progress
        if p is not None and self.handle is not None:
            n = _get(p, "step")
            t.append(f"\nstep {n + 1 if isinstance(n, int) else '?'} {_get(p, 'phase', '')}  conc "
                     f"{fmt.fmt_num(_get(p, 'achieved_concurrency'), 1)}/"
                     f"{fmt.fmt_num(_get(p, 'concurrency'))}  done "
                     f"{_get(p, 'requests_total', 0)}  "
                     f"tok/s {fmt.fmt_num(_get(p, 'output_tokens_per_s'))}  "
                     f"TTFT p95 {fmt.fmt_s(_get(p, 'ttft_p95_s'))}", style="dim")
        return t

    def _server_side(self, width: int) -> Text:
        t = Text("Server side (llmtop's own metrics)\n", style="bold")
        snap = self.view.snapshot
        rows = [r for r in (snap.engines if snap else []) if r.target == self.target]
        if not rows:
            t.append("no data for this target", style="dim")
            return t
        spark_w = max(8, width - 22)
        for r in rows:
            for field, label, f in (("running", "running", fmt.fmt_num),
                                    ("waiting", "waiting", fmt.fmt_num),
                                    ("kv", "KV", fmt.fmt_pct), ("preempt_s", "preempt/s",
                                                                fmt.fmt_rate)):
                values = self.view.source.series(r.key, field, spark_w)
                last = next((v for v in reversed(values) if v is not None), None)
                t.append(f"{label:<10}")
                t.append(fmt.sparkline(values, spark_w), style=fmt.S("accent"))
                t.append(f" {f(last)}\n")
        return t
