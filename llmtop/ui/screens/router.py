"""Router detail (Enter on a router's row): its own numbers, its backends as it sees them
beside their engine numbers, its P/D pools and the TTFT path split along the stack
(router → prefill queue → prefill → transfer / pending → decode → first token); also the
stack section of a backend's engine detail (``stack_section``)."""

from __future__ import annotations

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Static

from llmtop.model import EngineRow, Quantiles, Snapshot
from llmtop.model.stack import RouterRow
from llmtop.topology.path import STAGES, ttft_path
from llmtop.topology.pools import build_pools
from llmtop.ui import fmt
from llmtop.ui.view import LiveView
from llmtop.ui.widgets.footer import FitFooter

__all__ = ["STAGE_LABELS", "RouterDetailScreen", "path_table", "router_renderable",
           "stack_section"]

STAGE_LABELS = {"router": "router", "prefill_queue": "prefill queue", "prefill": "prefill",
                "transfer": "transfer / pending", "decode_queue": "decode",
                "first_token": "first token"}
"""Each TTFT path stage (``topology.path.STAGES``) as the detail view names it."""


def _yn(v: bool | None, yes: str, no: str) -> str:
    return fmt.DASH if v is None else yes if v else no


def _q(q: Quantiles | None, name: str) -> str:
    return fmt.quantile_text(q, name) if q is not None else fmt.DASH


def path_table(router: RouterRow, engines: list[EngineRow]) -> Table:
    """The TTFT path, one line per stage: its mean and where the number comes from; ``–``
    where nothing reports it."""
    t = Table(box=None, padding=(0, 1), header_style="bold")
    for c, j in (("stage", "left"), ("mean", "right"), ("share", "right"), ("from", "left")):
        t.add_column(c, justify=j, no_wrap=True)  # type: ignore[arg-type]
    stages = {s.name: s for s in ttft_path(router, engines)}
    total = sum(s.seconds for s in stages.values())
    for name in STAGES:
        s = stages.get(name)
        if s is None:
            t.add_row(STAGE_LABELS[name], fmt.DASH, fmt.DASH, Text("not reported", style="dim"))
            continue
        share = fmt.fmt_pct(s.seconds / total) if total > 0 else fmt.DASH
        t.add_row(STAGE_LABELS[name], fmt.fmt_s(s.seconds), share, Text(s.source, style="dim"))
    return t


def _title(text: str) -> Text:
    return Text(text, style="table.title")


def router_renderable(router: RouterRow, engines: list[EngineRow]) -> Group:
    """The router detail's body."""
    head = Text(f"{router.target}  {router.engine or ''} {router.engine_version or ''}".rstrip(),
                style="bold")
    head.append(f"  policy {router.policy or fmt.DASH}  ")
    head.append(router.state.upper() if router.state != "ok" else "ok",
                style=fmt.S("gauge-ok" if router.state == "ok" else "gauge-crit bold"))
    if router.error:
        head.append(f"  {router.error}", style=fmt.S("gauge-crit"))
    f = Table(box=None, show_header=False, padding=(0, 1))
    f.add_column(style="bold", no_wrap=True)
    f.add_column()
    h, n = router.healthy_backends, router.total_backends
    for label, value in (
        ("requests/s", fmt.fmt_rate(router.requests_per_s)),
        ("retries/s", fmt.fmt_rate(router.retries_per_s)),
        ("errors/s", fmt.fmt_rate(router.errors_per_s)),
        ("healthy backends", f"{fmt.DASH if h is None else h}/{fmt.DASH if n is None else n}"),
        ("open breakers", fmt.DASH if router.open_breakers is None
         else str(router.open_breakers)),
        ("request p50 / p95", f"{_q(router.request_s, 'p50')} / {_q(router.request_s, 'p95')}"),
        ("TTFT p50 / p95", f"{_q(router.ttft_s, 'p50')} / {_q(router.ttft_s, 'p95')}"),
        ("decode pending p95", _q(router.decode_pending_s, "p95")),
    ):
        f.add_row(label, value)
    if router.decode_pending_p95_router_window_s is not None:  # a summary: the router's own window
        f.add_row("decode pending p95 (router's window)",
                  fmt.fmt_s(router.decode_pending_p95_router_window_s))
    rows = {e.target: e for e in engines if e.rank is None}
    b = Table(box=None, padding=(0, 1), header_style="bold")
    for c in ("backend", "role", "health", "breaker", "req%", "cap%", "req/s", "run",
              "wait", "KV", "TTFT95"):
        b.add_column(c, justify="left" if c in ("backend", "role") else "right", no_wrap=True)
    for be in router.backends:
        e = rows.get(be.target or "")
        run = fmt.DASH if e is None else fmt.fmt_num(e.running) + (
            f"/{fmt.fmt_num(e.max_running)}" if e.max_running is not None else "")
        b.add_row(fmt.compact_target(be.target) if be.target else be.url, be.role or fmt.DASH,
                  _yn(be.healthy, "up", "DOWN"), _yn(be.breaker_open, "OPEN", "closed"),
                  fmt.fmt_pct(be.routed_share), fmt.fmt_pct(be.capacity_share),
                  fmt.fmt_rate(be.requests_per_s), run,
                  fmt.fmt_num(e.waiting) if e else fmt.DASH,
                  fmt.fmt_pct(e.kv_cache_usage) if e else fmt.DASH,
                  _q(e.ttft_s, "p95") if e else fmt.DASH)
    parts: list = [head, Text(""), f, Text(""),
                   _title("Backends (health, breaker and shares as the router sees them; "
                          "run, wait, KV, TTFT their own)"), b]
    mine = [e for e in engines if e.router == router.target and e.rank is None]
    pools = [p for p in build_pools(mine) if p.role in ("prefill", "decode")]
    if pools:
        p = Table(box=None, padding=(0, 1), header_style="bold")
        for c in ("pool", "up", "run", "wait", "KV", "queue", "prefill", "TTFT", "ITL95"):
            p.add_column(c, justify="left" if c == "pool" else "right", no_wrap=True)
        for pool in pools:
            run = fmt.fmt_num(pool.running) + (f"/{fmt.fmt_num(pool.max_running)}"
                                               if pool.max_running is not None else "")
            p.add_row(pool.role, f"{pool.up}/{len(pool.targets)}", run, fmt.fmt_num(pool.waiting),
                      fmt.fmt_pct(pool.kv_usage), fmt.fmt_s(pool.queue_mean_s),
                      fmt.fmt_s(pool.prefill_mean_s), fmt.fmt_s(pool.ttft_mean_s),
                      fmt.fmt_s(pool.itl_p95_s))
        parts += [Text(""), _title("Pools (means over the window)"), p]
    parts += [Text(""), _title("TTFT path (means over the window)"), path_table(router, engines),
              Text(""), Text("esc: back", style="dim")]
    return Group(*parts)


def stack_section(row: EngineRow, snap: Snapshot | None) -> list:
    """An engine detail's lines on its router (none when it has none): its role, what the
    router says of it, its shares, and the TTFT path of its router."""
    routers = snap.routers if snap is not None else []
    router = next((r for r in routers if r.target == row.router), None)
    if router is None:
        return []
    be = next((b for b in router.backends if b.target == row.target), None)
    line = Text(f"Router: {router.target}  role {row.role or fmt.DASH}", style="bold")
    if be is not None:
        line.append(f"  health {_yn(be.healthy, 'up', 'DOWN')}  breaker "
                    f"{_yn(be.breaker_open, 'OPEN', 'closed')}  requests "
                    f"{fmt.fmt_pct(be.routed_share)} of the router's, capacity "
                    f"{fmt.fmt_pct(be.capacity_share)} of the pool's")
    return [line, _title("TTFT path of its router (means over the window)"),
            path_table(router, list(snap.engines) if snap is not None else []), Text("")]


class RouterDetailScreen(Screen):
    """Everything about one router (``target``), read from ``view``."""

    BINDINGS = [Binding("escape", "back", "Back", id="router_back")]

    def __init__(self, view: LiveView, target: str) -> None:
        super().__init__()
        self.view = view
        self.target = target

    def compose(self) -> ComposeResult:
        yield Static(f"Router detail: {self.target}", classes="title")
        with VerticalScroll(classes="detail-body"):
            yield Static(id="router-body")
        yield FitFooter()

    def on_mount(self) -> None:
        self.refresh_data()
        self.query_one(VerticalScroll).focus()

    def refresh_data(self, *, force: bool = False) -> None:
        snap = self.view.snapshot
        routers = snap.routers if snap is not None else []
        router = next((r for r in routers if r.target == self.target), None)
        body = self.query_one("#router-body", Static)
        if router is None or snap is None:
            body.update(Text(f"{self.target}: not in the latest snapshot", style="dim"))
            return
        body.update(router_renderable(router, list(snap.engines)))

    def action_back(self) -> None:
        self.app.pop_screen()
