"""SVG snapshots of the log view and of where the log shows (pytest-textual-snapshot), at
80x24 and 160x48, from ``FakeSource``'s ``logs`` and ``logs_down`` scenarios (fixed data,
frozen clock). Update with ``pytest tests/ui/test_log_snapshots.py --snapshot-update`` and
review the SVG diff."""

from __future__ import annotations

import pytest

from .conftest import make_app
from .test_snapshots import SIZES, _run


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_log_view(snap_compare, size):
    """vLLM's log, following: access lines, the EngineDeadError traceback whole."""
    assert snap_compare(make_app("logs"), terminal_size=size,
                        run_before=_run("down", "down", "L"))


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_log_view_search(snap_compare, size):
    """``/`` search: the match highlighted, ``1 of 1``, errors only."""
    assert snap_compare(make_app("logs"), terminal_size=size,
                        run_before=_run("down", "down", "L", "e", "e", "slash", "D", "e",
                                        "a", "d", "enter"))


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_log_down_detail(snap_compare, size):
    """A DOWN engine's detail with its log's last error (the EngineDeadError line)."""
    assert snap_compare(make_app("logs_down"), terminal_size=size,
                        run_before=_run("down", "down", "enter"))


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_log_marks_overview(snap_compare, size):
    """The overview: vLLM marked (new log errors), its sparklines' log error strip."""
    assert snap_compare(make_app("logs"), terminal_size=size,
                        run_before=_run("down", "down"))
