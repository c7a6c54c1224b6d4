"""An engine found in a pod, container or network namespace is named by it in the engines
table at 80x24, and the detail view says where it runs (headless TUI)."""

from __future__ import annotations

from dataclasses import replace

from llmtop.model import Container
from llmtop.ui import fmt
from llmtop.ui.fake import FakeSource, demo_snapshot
from llmtop.ui.screens.detail import detail_renderable
from llmtop.ui.textshot import screen_lines

from .conftest import first_paint, make_app

POD = Container("containerd", "1207db63eaeb133a", "vllm", "vllm-0", "prod", "4026532178")
BARE = Container(netns="blue")


def _snap():
    snap = demo_snapshot()
    snap.engines[0] = replace(snap.engines[0], container=BARE, ranks=[])
    snap.engines[1] = replace(snap.engines[1], container=POD)  # sglang: the first row
    return snap


def test_row_target_words():
    row = _snap().engines[1]
    assert fmt.row_target(row) == f"{row.target.split('@')[0]} pod prod/vllm-0"
    assert fmt.row_target(replace(row, container=None)) == fmt.compact_target(row.target)
    assert Container(runtime="docker", name="vllm-a").label == "ctr vllm-a"
    assert Container(netns=None).label == "netns ?"
    assert fmt.fit_where(POD, 20) == "pod prod/vllm-0"
    assert fmt.fit_where(POD, 12) == "pod vllm-0" and fmt.fit_where(POD, 6) == "pod v…"


async def test_rows_say_where_the_engine_runs():
    app = make_app(source=FakeSource(_snap()))
    async with app.run_test(size=(80, 24)) as pilot:
        await first_paint(app, pilot)
        text = "\n".join(screen_lines(app))
        # at 80 columns the name column is narrow: the pod without its namespace
        assert "pod vllm-0" in text and "netns blue" in text


def test_detail_says_where_the_engine_runs():
    import io

    from rich.console import Console

    row = _snap().engines[1]
    out = io.StringIO()
    Console(file=out, width=80, color_system=None).print(detail_renderable(row, {"10s": row}))
    text = out.getvalue()
    assert "pod prod/vllm-0" in text and "runtime containerd" in text
    assert "container vllm" in text and "netns 4026532178" in text
