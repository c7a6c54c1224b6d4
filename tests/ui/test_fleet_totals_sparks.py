"""Fleet mode's per-model total row and the sparkline pane under it must agree: the pane
showed ``–`` for running, waiting, KV and tok/s where the total row showed numbers."""

from __future__ import annotations

from dataclasses import replace

from llmtop.model import EngineRow
from llmtop.ui.fake import FakeSource, demo_snapshot
from llmtop.ui.screens.overview import OverviewScreen
from llmtop.ui.source import FleetSource
from llmtop.ui.widgets.panels import SparkPanel

from .conftest import first_paint, make_app

TOTAL = EngineRow(key="total|m", target="total (2)", engine="vllm", model="m", running=24,
                  waiting=3, kv_cache_usage=0.5, generation_tokens_per_s=228.0)


class _Diagnoser:
    def take_events(self) -> list:
        return []


class _FleetMonitor:
    """The shape FleetSource reads (``ui.source.FleetMonitorLike``): a refresh per tick,
    its totals, no findings, no other windows or history."""

    refresh_s = 10.0

    def __init__(self) -> None:
        self.snap = demo_snapshot("ok")
        self.totals = [TOTAL]
        self.error = None
        self.diagnoser = _Diagnoser()

    async def tick(self):
        self.snap = replace(self.snap, time=self.snap.time + 1)
        return self.snap

    async def aclose(self) -> None:
        return None

    def snapshot(self, window_s):
        return None

    def header_text(self) -> str:
        return "prometheus http://127.0.0.1:9"

    def window_note(self, window_s):
        return None

    def travel(self, at) -> None:
        return None

    async def history(self, key, points=90):
        return []

    async def row_windows(self, key, windows):
        return {}


async def test_fleet_source_keeps_series_for_the_total_rows():
    src = FleetSource(_FleetMonitor())
    for _ in range(3):
        await src.tick()
    assert src.series("total|m", "running") == [24, 24, 24]
    assert src.series("total|m", "gen_tps", 2) == [228.0, 228.0]
    assert src.series("total|m", "kv", 1) == [0.5]


class _NoHistory(FakeSource):
    """A source with no series for any row (a row's first refresh)."""

    def series(self, key, field, last=None):
        return []


async def test_the_pane_shows_the_rows_value_when_there_is_no_history():
    app = make_app(source=_NoHistory.demo("ok"))
    async with app.run_test(size=(120, 40)) as pilot:
        await first_paint(app, pilot)
        screen = app.screen
        assert isinstance(screen, OverviewScreen)
        screen._paint_sparks()
        captions = {label: cap for label, _, cap in screen.query_one(SparkPanel).series}
        row = screen.query_one("#engines").selected_row()
    assert row.running is not None and row.generation_tokens_per_s is not None
    assert captions["running"] == f"{row.running:g}"
    assert captions["gen tok/s"] != "\u2013" and captions["KV"] != "\u2013"


async def test_fleet_source_keeps_gpu_history_without_a_store():
    """Fleet mode's GPU screen showed ``–`` history beside a GPU table with values."""
    from llmtop.ui.source import gpu_key

    src = FleetSource(_FleetMonitor())
    for _ in range(3):
        await src.tick()
    g = src.monitor.snap.gpus[0]
    assert g.util is not None and g.temp_c is not None
    assert src.gpu_series(gpu_key(g), "util") == [g.util] * 3
    assert src.gpu_series(gpu_key(g), "temp", 1) == [float(g.temp_c)]
    assert len(src.series_times()) == 3


async def test_no_total_row_without_its_models_rows():
    """Time travel to before the data: the refresh failed (EMPTY) and the table kept the
    old per-model total rows, with numbers, over no instance row."""
    from llmtop.model import Snapshot

    mon = _FleetMonitor()
    mon.totals = [replace(TOTAL, model=mon.snap.engines[0].model)]
    src = FleetSource(mon)
    app = make_app(source=src)
    async with app.run_test(size=(120, 40)) as pilot:
        await first_paint(app, pilot)
        keys = app.screen.query_one("#engines").row_keys
        assert keys[0].startswith("total|")
        mon.snap = Snapshot(time=mon.snap.time + 10, window_s=60.0)  # the failed refresh
        await first_paint(app, pilot)
        assert not [k for k in app.screen.query_one("#engines").row_keys
                    if k.startswith("total|")]
