"""The selected engine's sparklines: compact (two columns, above the event log) wherever the
room under the GPU lines holds them and 3 event lines, full (beside the event log) on a tall,
wide terminal, folded away otherwise; decided from that room, stable across resizes."""

from __future__ import annotations

from dataclasses import replace

import pytest

from llmtop.model import Event
from llmtop.ui.fake import FROZEN_TIME, FakeSource, _gpus, _sglang, demo_snapshot
from llmtop.ui.screens.overview import SPARK_POINTS, spark_form
from llmtop.ui.source import SPARK_FIELDS
from llmtop.ui.textshot import screen_lines
from llmtop.ui.widgets.engines import EnginesTable
from llmtop.ui.widgets.panels import EventLog, SparkPanel

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
        title = lines.index(" " + name)
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
        assert " " + name in _stripped(app)
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
            values = [0.5] * 90 + [None] * 5 + [0.7] * 5
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
        assert kv[-1] == "70%" and kv[0].endswith("▁") and set(kv[1]) == {"█"}  # a gap of 5
        assert len(kv[1]) == 5 and f"{kv[0][-1]}     {kv[1]}" in sparks[2]


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
            assert (" " + _selected_name(app) in lines) is shown
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
        title = next(line for line in lines if "(last minutes)" in line)
        assert title.startswith(" sglang :30000 Qwen/Qwen2.5-7B-Instruct  (last minutes)")
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
