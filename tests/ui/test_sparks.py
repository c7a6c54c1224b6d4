"""The selected engine's sparklines: compact (two columns, above the event log) wherever the
room under the GPU lines holds them and 3 event lines, full (beside the event log) on a tall,
wide terminal, folded away otherwise; decided from that room, stable across resizes."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from llmtop.model import Event
from llmtop.ui import fmt
from llmtop.ui.fake import FROZEN_TIME, FakeSource, _gpus, _sglang, demo_snapshot
from llmtop.ui.screens.overview import SPARK_POINTS, spark_form
from llmtop.ui.source import SPARK_FIELDS
from llmtop.ui.textshot import screen_lines
from llmtop.ui.widgets.engines import EnginesTable
from llmtop.ui.widgets.panels import SPARK_LABEL_W, EventLog, SparkPanel

from .conftest import first_paint, make_app

LABELS = [label for _, label in SPARK_FIELDS]

LONG_EVENT = "DEGRADED: KV 97% \u00b7 waiting 31 \u00b7 preempt 4/s"
LONG_LINE = f"11:06:35 warn  vllm@:8000 {LONG_EVENT}"
"""About 70 cells: cut in two by a side-by-side panel at 80 columns, whole when full width."""

EVENTS = [
    Event(FROZEN_TIME - 60, "info", "vllm@127.0.0.1:8000", "up: vllm 0.11.0"),
    Event(FROZEN_TIME - 42, "info", "sglang@127.0.0.1:30000", "up: sglang 0.5.3"),
    Event(FROZEN_TIME - 5, "warn", "vllm@127.0.0.1:8000", LONG_EVENT),
]
EVENT_LINES = ["11:05:40 info  vllm@:8000 up: vllm 0.11.0",
               "11:05:58 info  sglang@:30000 up: sglang 0.5.3", LONG_LINE]


def _app(source=None):
    return make_app(source=source or FakeSource(demo_snapshot("ok"), events=list(EVENTS)))


def _crowded(engines: int, gpus: int) -> FakeSource:
    """``engines`` healthy SGLang rows on ports 30000.. and ``gpus`` GPUs."""
    rows = []
    for i in range(engines):
        row = _sglang()
        row.target = f"sglang@127.0.0.1:{30000 + i}"
        row.key = f"{row.target}|{row.model}"
        rows.append(row)
    base = _gpus()
    gpu_list = [replace(base[i % 2], index=i, uuid=f"GPU-demo-{i}") for i in range(gpus)]
    snap = replace(demo_snapshot("ok"), engines=rows, gpus=gpu_list)
    return FakeSource(snap, events=list(EVENTS))


def _stripped(app) -> list[str]:
    return [line.rstrip() for line in screen_lines(app)]


def _selected_name(app) -> str:
    row = app.screen.query_one(EnginesTable).selected_row()
    return f"{row.target.split('@')[0]} :{row.target.rsplit(':', 1)[1]} {row.model}"


def _spark_lines(lines: list[str]) -> list[str]:
    return [line for line in lines if any(line.startswith(f" {lab} ") for lab in LABELS)]


async def _settle(app, pilot) -> None:
    await pilot.pause()
    app.paint()
    await pilot.pause()


@pytest.mark.parametrize(("width", "height", "room", "form"), [
    (80, 24, 13, "compact"),
    (80, 24, 8, "compact"),   # 5 lines of sparklines + 3 event lines
    (80, 24, 7, None),
    (80, 14, 3, None),
    (64, 12, 2, None),
    (80, 48, 37, "compact"),  # tall but narrow: the event log keeps the full width
    (160, 30, 19, "compact"),
    (160, 48, 37, "full"),
    (160, 48, 7, None),
])
def test_spark_form(width, height, room, form):
    assert spark_form(width, height, room) == form


async def test_compact_sparklines_at_80x24():
    app = _app()
    async with app.run_test(size=(80, 24)) as pilot:
        await first_paint(app, pilot)
        lines = _stripped(app)
        name = _selected_name(app)
        assert name == "sglang :30000 Qwen/Qwen2.5-7B-Instruct"
        title = lines.index(f" {name}  last 2m")  # the fake's 120 points, a second apart
        gpus = max(i for i, line in enumerate(lines) if "H100" in line)
        assert title == gpus + 1  # right under the GPU lines
        sparks = _spark_lines(lines)
        assert lines[title + 1:title + 5] == sparks  # 7 sparklines in 4 rows x 2 columns
        assert sparks[0].startswith(" TTFT p50 ") and " running " in sparks[0]
        assert sparks[1].startswith(" TTFT p95 ") and sparks[1].split("  waiting")[0].endswith(
            "220ms")
        assert sparks[3].startswith(" gen tok/s ") and sparks[3].endswith("2.2k")
        assert " KV " in sparks[2] and sparks[2].endswith("75%")
        assert all(any(ch in line for ch in "▁▂▃▄▅▆▇█") for line in sparks)
        # the event log below, each line whole (the full width, not a half)
        assert lines[title + 5:title + 8] == [" " + e for e in EVENT_LINES]
        events = app.screen.query_one(EventLog)
        assert events.region.width == 80 and events.region.y == title + 5
        assert all(len(line) <= 80 for line in lines)


async def test_selection_moves_the_sparklines_at_once():
    app = _app()
    async with app.run_test(size=(80, 24)) as pilot:
        await first_paint(app, pilot)
        await pilot.press("down", "down")
        await pilot.pause()
        name = _selected_name(app)
        assert name.startswith("vllm :8000")
        assert f" {name}  last 2m" in _stripped(app)
        panel = app.screen.query_one(SparkPanel)
        assert panel.title == name and [s[0] for s in panel.series] == LABELS


class CountingSource(FakeSource):
    """Honours ``last`` like the store, records it, and gives gaps and zeros."""

    def __init__(self, *a, **kw) -> None:
        super().__init__(*a, **kw)
        self.lasts: list[object] = []

    def series(self, key, field, last=None):
        self.lasts.append(last)
        if field == "waiting":
            values: list[float | None] = [0.0] * 100
        elif field == "kv":
            # 120 points in all (the fake's count), 6 a cell at 80 columns: the 12 missing
            # points fill two whole cells (points 102..113), so two blanks, never zeros
            values = [0.5] * 82 + [None] * 12 + [0.7] * 6
        else:
            values = super().series(key, field)
        return values[-last:] if last else values


async def test_series_reads_what_is_drawn_and_gaps_stay_blank():
    src = CountingSource(demo_snapshot("ok"), events=list(EVENTS))
    app = _app(src)
    async with app.run_test(size=(80, 24)) as pilot:
        await first_paint(app, pilot)
        src.lasts.clear()
        app.screen._paint_sparks()  # trend arrows and the verdict read their own few points
        await pilot.pause()
        assert len(src.lasts) == len(SPARK_FIELDS)
        assert all(isinstance(n, int) and 22 <= n <= SPARK_POINTS for n in src.lasts)
        sparks = _spark_lines(_stripped(app))
        waiting = sparks[1].split("  waiting ")[1]
        assert waiting.split() == ["▁" * len(waiting.split()[0]), "0"]  # zero is ▁, not blank
        kv = sparks[2].split("  KV ")[1].split()
        assert kv[-1] == "70%" and kv[0].endswith("▁") and kv[1] == "█"  # a gap of 2 cells
        assert f"{kv[0][-1]}  {kv[1]}" in sparks[2]


@pytest.mark.parametrize(("engines", "gpus", "shown"), [(7, 4, True), (8, 4, False)])
async def test_sparklines_fold_when_there_is_no_room(engines, gpus, shown):
    """80x24 with many rows: 7 engines and 4 GPUs leave 8 lines (sparklines + 3 events),
    8 engines leave 7: the sparklines fold away and the event log takes the room."""
    app = _app(_crowded(engines, gpus))
    async with app.run_test(size=(80, 24)) as pilot:
        await first_paint(app, pilot)
        for _ in range(3):  # no oscillation: the decision stays as the screen repaints
            lines = _stripped(app)
            panel = app.screen.query_one(SparkPanel)
            assert panel.display is shown
            assert bool(_spark_lines(lines)) is shown
            assert (f" {_selected_name(app)}  last 2m" in lines) is shown
            for e in EVENT_LINES:
                assert " " + e in lines
            assert lines[-1].startswith(" s Sort")
            await app.poll_once()
            await _settle(app, pilot)


async def test_resize_back_and_forth():
    app = _app()
    async with app.run_test(size=(80, 24)) as pilot:
        await first_paint(app, pilot)
        first = _stripped(app)
        assert _spark_lines(first)

        await pilot.resize_terminal(80, 14)
        await _settle(app, pilot)
        lines = _stripped(app)
        assert not _spark_lines(lines)
        assert lines[-5:-1] == [" " + e for e in EVENT_LINES] + [""]

        await pilot.resize_terminal(80, 24)
        await _settle(app, pilot)
        assert _stripped(app) == first

        await pilot.resize_terminal(64, 12)
        await _settle(app, pilot)
        small = _stripped(app)

        await pilot.resize_terminal(160, 48)
        await _settle(app, pilot)
        lines = _stripped(app)
        title = next(line for line in lines if "  last 2m" in line)
        assert title.startswith(" sglang :30000 Qwen/Qwen2.5-7B-Instruct  last 2m ")
        assert "▕ 11:05:40 info  vllm@:8000 up: vllm 0.11.0" in title  # beside the events
        assert len(_spark_lines(lines)) == len(SPARK_FIELDS)

        await pilot.resize_terminal(80, 24)
        await _settle(app, pilot)
        assert _stripped(app) == first

    fresh = _app()
    async with fresh.run_test(size=(64, 12)) as pilot:
        await first_paint(fresh, pilot)
        assert small == _stripped(fresh)  # no scrollbar left behind by the way there
        assert "TOK/S" in small[2] and small[-1].startswith(" s Sort")


class HistorySource(FakeSource):
    """``n`` points a second apart ending at the snapshot's time, like the store: ``last``
    honoured (and recorded), a commit count, commit times; ``append`` commits one more."""

    def __init__(self, n: int, *a, interval: float = 1.0, **kw) -> None:
        super().__init__(demo_snapshot("ok"), *a, events=list(EVENTS), **kw)
        self.values: dict[str, list[float | None]] = {}
        self.interval = interval
        self.lasts: list[object] = []
        self.gpu_lasts: list[object] = []
        for field, _ in SPARK_FIELDS:
            # between 1 and 3, its lowest and highest points in the oldest cells
            self.values[field] = [2.0 + math.sin(i / 9.0) for i in range(n)]
            self.values[field][:2] = [1.0, 3.0]
        self.values["waiting"] = [0.0] * n
        if n > 100:
            self.values["waiting"][n - 100] = 31.0  # a queue spike one sample long
        self.values["util"] = [0.5] * n

    def append(self, value: float) -> None:
        for vals in self.values.values():
            vals.append(value)

    @property
    def n(self) -> int:
        return len(self.values["kv"])

    def series(self, key, field, last=None):
        self.lasts.append(last)
        vals = self.values[field]
        return vals[-last:] if last else list(vals)

    def gpu_series(self, key, field, last=None):
        self.gpu_lasts.append(last)
        if field in ("sm_active", "dram_active"):  # these GPUs report busy time only
            return [None] * (last or self.n)
        vals = self.values["util"]
        return vals[-last:] if last else list(vals)

    def series_count(self):
        return self.n

    def series_times(self, last=None):
        end = self._snap.time
        times = [end - (self.n - 1 - i) * self.interval for i in range(self.n)]
        return times[-last:] if last else times


def _sparks(app) -> dict[str, str]:
    """Each sparkline's cells as the screen shows them, by label, cut out where the panel
    draws them (the title on the panel's first line, then a line per row)."""
    panel = app.screen.query_one(SparkPanel)
    lines = screen_lines(app)
    x0, y0 = panel.region.x + 1, panel.region.y  # the panel's padding
    spark_w = panel.spark_width()
    if panel.compact:
        label_w = panel._grid_widths(panel.size.width)[0]
        cell_w = (panel.size.width - SparkPanel.GAP) // 2
        rows = -(-len(panel.series) // 2)
        at = [(y0 + 1 + i % rows, x0 + (i // rows) * (cell_w + SparkPanel.GAP) + label_w + 1)
              for i in range(len(panel.series))]
    else:
        at = [(y0 + 1 + i, x0 + SPARK_LABEL_W + 1) for i in range(len(panel.series))]
    return {label: lines[y][x:x + spark_w] for (label, _, _), (y, x) in zip(
        panel.series, at, strict=True)}


@pytest.mark.parametrize(("n", "cells"), [(300, 20), (600, 21), (601, 21)])
async def test_sparklines_cover_five_minutes_at_80x24(n, cells):
    """300 points at 1 s: 15 a cell, all 5 minutes in 20 of the 21 cells (21 x 15 would
    need 315); with more history the cells fill the width. Reads only what it draws."""
    src = HistorySource(n)
    app = _app(src)
    async with app.run_test(size=(80, 24)) as pilot:
        await first_paint(app, pilot)
        src.lasts.clear()
        app.screen._paint_sparks()
        await pilot.pause()
        lines = _stripped(app)
        assert " sglang :30000 Qwen/Qwen2.5-7B-Instruct  last 5m" in lines
        panel = app.screen.query_one(SparkPanel)
        assert panel.spark_width() == 21
        sparks = _sparks(app)
        assert set(sparks) == set(LABELS)
        for label, drawn in sparks.items():
            assert len(drawn) == 21 and drawn.lstrip() == drawn[21 - cells:], label
            assert " " not in drawn[21 - cells:], label  # no gaps in this history
        # the one-sample queue spike, 100 s ago, is the one full block (no averaging)
        assert sparks["waiting"].strip("▁ ") == "█"
        assert 0 < max(src.lasts) <= 21 * 15 + 2 * 15  # never the whole history
        # the value column keeps the newest sample, not a cell's max
        waiting = next(line for line in _spark_lines(lines) if "  waiting " in line)
        assert waiting.endswith(sparks["waiting"] + "      0")


async def test_a_new_sample_redraws_only_the_newest_cell():
    src = HistorySource(601)
    app = _app(src)
    async with app.run_test(size=(80, 24)) as pilot:
        await first_paint(app, pilot)
        before = _sparks(app)["KV"]
        changed = []
        for i in range(30):
            src.append(2.0)
            app.screen._paint_sparks()
            await pilot.pause()
            after = _sparks(app)["KV"]
            if (src.n - 1) % 15 == 0:  # a new cell started: the picture shifted by one
                assert after[:-1] == before[1:], i
            else:
                assert after[:-1] == before[:-1], i
            changed.append(after != before)
            before = after
        assert any(changed)


async def test_full_form_title_says_the_span_shown():
    """160x48: the wider full form holds 6 samples a cell, so 600 points show 6 minutes."""
    src = HistorySource(600)
    app = _app(src)
    async with app.run_test(size=(160, 48)) as pilot:
        await first_paint(app, pilot)
        lines = _stripped(app)
        panel = app.screen.query_one(SparkPanel)
        assert not panel.compact
        spark_w = panel.spark_width()
        k = math.ceil(300 / spark_w)
        shown = min(600, spark_w * k)
        title = lines[panel.region.y]
        assert title.startswith(" sglang :30000 Qwen/Qwen2.5-7B-Instruct  last ")
        assert f"  last {fmt.fmt_span(shown)} " in title and fmt.fmt_span(shown).endswith("m")
        sparks = _sparks(app)
        assert all(len(s) == spark_w and " " not in s for s in sparks.values())
        assert sparks["waiting"].strip("▁") == "█"


async def test_a_short_history_says_seconds():
    src = HistorySource(40)
    app = _app(src)
    async with app.run_test(size=(80, 24)) as pilot:
        await first_paint(app, pilot)
        assert " sglang :30000 Qwen/Qwen2.5-7B-Instruct  last 40s" in _stripped(app)
        assert all(len(s.strip()) == 20 for s in _sparks(app).values())  # 2 a cell


async def test_gpu_history_covers_minutes_too():
    src = HistorySource(600)
    app = _app(src)
    async with app.run_test(size=(80, 90)) as pilot:  # tall enough for every row
        await first_paint(app, pilot)
        await pilot.press("g")
        await pilot.pause()
        lines = _stripped(app)
        hist = [i for i, line in enumerate(lines) if line.lstrip().startswith("history")]
        assert len(hist) == 1  # the selected GPU's
        assert lines[hist[0]].split() == ["history", "last", "5m,", "max", "per", "cell"]
        util = lines[hist[0] + 1].split()
        # NVML's utilization is busy time (any kernel ran), labelled so
        assert util[0] == "busy" and util[1] == "▄" * 50 and util[2] == "50%"
        assert 0 < max(src.gpu_lasts) <= 50 * 6 + 2 * 6  # 50 cells of 6


async def test_a_long_name_gives_way_to_the_span():
    """80 columns: the model loses its path, then is cut with an ellipsis; the span stays."""
    src = HistorySource(600)
    row = next(r for r in src._snap.engines if r.target.startswith("sglang"))
    row.model = "some-org/Meta-Llama-3.1-70B-Instruct-FP8-dynamic-with-a-long-suffix"
    app = _app(src)
    async with app.run_test(size=(80, 24)) as pilot:
        await first_paint(app, pilot)
        panel = app.screen.query_one(SparkPanel)
        title = _stripped(app)[panel.region.y]
        assert title.startswith(" sglang :30000 Meta-Llama-3.1-70B-Instruct-FP8")
        assert title.endswith("\u2026  last 5m") and len(title) == 79


class _Store:
    def __init__(self, n: int) -> None:
        self.n = n

    def series(self, key, field, last=None):
        return [float(self.n)] * (last if last is not None else self.n)

    def gpu_series(self, key, field, last=None):
        return self.series(key, field, last)

    def series_count(self):
        return self.n

    def series_times(self, last=None):
        return [float(i) for i in range(self.n)][-last:] if last else []


class _Monitor:
    def __init__(self, store=None) -> None:
        self.store = store
        self.snap = demo_snapshot("ok")

    async def tick(self):
        return self.snap


async def test_monitor_source_reads_the_current_store():
    """A replay seeking back starts a fresh store: series, counts and times come from it."""
    from llmtop.ui.source import MonitorSource

    mon = _Monitor(_Store(500))
    src = MonitorSource(mon, host="h")
    assert src.series_count() == 500 and src.series("k", "kv", 3) == [500.0] * 3
    assert src.series_times(2) == [498.0, 499.0] and src.gpu_series("0", "util", 1) == [500.0]
    mon.store = _Store(7)
    assert src.series_count() == 7 and src.series("k", "kv", 2) == [7.0, 7.0]

    own = MonitorSource(_Monitor(), host="h")  # no store: its own rings, counted per tick
    for _ in range(3):
        await own.tick()
    key = own.monitor.snap.engines[0].key
    assert own.series_count() == 3 and len(own.series(key, "kv")) == 3
    assert own.series_times(2) == [own.monitor.snap.time] * 2
