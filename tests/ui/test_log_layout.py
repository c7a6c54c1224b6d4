"""The log view's pure parts: wrapping, what is drawn for bad text, the headline, the
sparklines' error strip, the detail's log lines. Hand-made events (``LogEvent`` values)."""

from __future__ import annotations

from rich.cells import cell_len

from llmtop.model import EngineRow
from llmtop.model.logs import LogEvent, LogLocation, LogSummary
from llmtop.ui.screens.logs import error_marks, log_events, log_section, matches_request
from llmtop.ui.widgets.logview import (
    MAX_WRAP,
    display_text,
    headline_index,
    wrap_spans,
)

T = 1_795_000_000.0


def _ev(t: float, sev: str = "info", *lines: str, head: str | None = None,
        rid: str | None = None) -> LogEvent:
    lines = lines or ("x",)
    return LogEvent(t_wall=t, severity=sev, lines=tuple(lines), headline=head or lines[0],
                    request_id=rid)


def test_wrap_breaks_at_a_space_and_loses_nothing():
    text = "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. " \
           "See stack trace (above) for the root cause."
    spans, cut = wrap_spans(text, 67)
    assert not cut and len(spans) == 2
    assert "".join(text[s:e] for s, e in spans) == text
    assert text[spans[0][0]:spans[0][1]].endswith("encountered ")  # at a word boundary
    assert all(e - s <= 67 for s, e in spans)


def test_wrap_of_a_word_longer_than_the_row_cuts_it():
    spans, cut = wrap_spans("a" * 25, 10)
    assert spans == [(0, 10), (10, 20), (20, 25)] and not cut


def test_a_huge_line_takes_at_most_max_wrap_rows_and_says_it_was_cut():
    spans, cut = wrap_spans("x" * 8192, 67)
    assert len(spans) == MAX_WRAP and cut
    spans, cut = wrap_spans("y" * (67 * MAX_WRAP), 67)  # exactly fills them: not cut
    assert len(spans) == MAX_WRAP and not cut


def test_wide_characters_wrap_by_cells():
    text = "日本語のログ" * 5  # 30 characters, 60 cells
    spans, cut = wrap_spans(text, 15)
    assert not cut
    assert all(cell_len(text[s:e]) <= 15 for s, e in spans)
    assert "".join(text[s:e] for s, e in spans) == text


def test_an_empty_line_is_one_empty_row():
    assert wrap_spans("", 40) == ([(0, 0)], False)


def test_control_characters_and_tabs_are_drawn_safely():
    shown = display_text("a\x1b[31mred\x00\tz\x7f")
    assert "\x1b" not in shown and "\x00" not in shown and "\x7f" not in shown
    assert shown == "a\ufffd[31mred\ufffd  z\ufffd"  # the tab to the next stop of 4
    assert shown.isprintable()
    assert display_text("plain") == "plain"


def test_the_headline_of_a_traceback_is_its_exception_line():
    tb = _ev(T, "error", "AsyncLLM output_handler failed.", "Traceback (most recent call last):",
             "  File \"x.py\", line 1, in f", "ValueError: boom", head="ValueError: boom")
    assert headline_index(tb) == 3
    assert headline_index(_ev(T, "info", "one", "two", head="nothing like it")) == 0
    assert headline_index(_ev(T, "info", "a prefix: boom!", head="boom")) == 0


def test_error_marks_put_each_error_in_its_sample():
    times = [T - 4, T - 3, T - 2, T - 1, T]
    evs = [_ev(T - 10, "error"),        # before the first sample's interval: not shown
           _ev(T - 2.5, "error"),       # in (T-3, T-2]
           _ev(T - 2.5, "warning"),     # warnings are not marked
           _ev(T - 0.2, "critical"),    # in (T-1, T]
           _ev(T + 0.4, "error")]       # after the newest sample: counts in it
    marks, n = error_marks(evs, times, 1.0)
    assert marks == [None, None, 1.0, None, 1.0]
    assert n == 3
    assert error_marks([], [], 1.0) == ([], 0)
    assert error_marks(evs, times[:1], 1.0)[0] == [1.0]


def test_log_events_reads_the_snapshots_events_by_target():
    from llmtop.ui.fake import demo_snapshot
    from llmtop.ui.fake_logs import with_log_events

    snap = demo_snapshot()
    assert log_events(snap, "vllm@127.0.0.1:8000") == ()  # no log_events: nothing, no error
    assert log_events(None, "x") == ()
    ev = _ev(T)
    snap = with_log_events(snap, {"vllm@127.0.0.1:8000": [ev]})
    assert list(log_events(snap, "vllm@127.0.0.1:8000")) == [ev]
    assert log_events(snap, "sglang@127.0.0.1:30000") == ()


def test_a_request_is_matched_by_its_id_or_its_text():
    assert matches_request(_ev(T, "info", "whatever", rid="cmpl-1"), "cmpl-1")
    assert matches_request(_ev(T, "info", "Added request cmpl-1."), "cmpl-1")
    assert not matches_request(_ev(T, "info", "Added request cmpl-2.", rid="cmpl-2"), "cmpl-1")


def _row(log: LogSummary | None, state: str = "ok") -> EngineRow:
    return EngineRow(key="vllm@127.0.0.1:8000|m", target="vllm@127.0.0.1:8000", engine="vllm",
                     model="m", state=state, log=log)


def test_the_detail_of_a_down_engine_carries_its_last_error():
    dead = _ev(T - 40, "error", "Traceback (most recent call last):",
               "EngineDeadError: EngineCore encountered an issue.",
               head="EngineDeadError: EngineCore encountered an issue.")
    log = LogSummary(location=LogLocation(kind="file", label="/var/log/vllm.log"),
                     counts={"error": 1, "warning": 2, "info": 40}, last_error=dead,
                     new_errors=1, dropped=7)
    text = "\n".join(t.plain for t in log_section(_row(log, "down")))
    assert "Log: /var/log/vllm.log  1 error · 2 warning in the window  1 new" in text
    assert "last error 11:06:00  EngineDeadError: EngineCore encountered an issue." in text
    assert "7 events dropped" in text
    assert "L: the log" in text


def test_the_detail_says_why_a_log_cannot_be_read_and_nothing_without_one():
    log = LogSummary(location=LogLocation(kind=None, label="vllm :8000",
                                          error="/proc/4711/fd/1 is a terminal"))
    text = "\n".join(t.plain for t in log_section(_row(log)))
    assert "Log: cannot be read: /proc/4711/fd/1 is a terminal" in text
    assert "last error" not in text
    quiet = LogSummary(location=LogLocation(kind="file", label="/x.log"), counts={"info": 3})
    assert "no warning or error in the window" in log_section(_row(quiet))[0].plain
    assert log_section(_row(None)) == []


def test_the_row_index_finds_each_row_of_each_event():
    from llmtop.ui.widgets.logview import RowIndex

    rel = [[(0, 0, 5, False)], [(0, 0, 67, False), (0, 67, 90, False), (1, 0, 3, False)],
           [(0, 0, 2, True)]]
    rows = RowIndex(rel, [0, 1, 4])
    assert len(rows) == 5
    assert list(rows) == [(0, 0, 0, 5, False), (1, 0, 0, 67, False), (1, 0, 67, 90, False),
                          (1, 1, 0, 3, False), (2, 0, 0, 2, True)]
    assert rows[-1] == (2, 0, 0, 2, True) and rows[1:3] == list(rows)[1:3]
    assert len(RowIndex([], [])) == 0 and not RowIndex([], [])
    for bad in (5, -6):
        try:
            rows[bad]
        except IndexError:
            continue
        raise AssertionError(f"row {bad} should not exist")


def test_the_detail_does_not_repeat_a_last_error_the_state_already_cites():
    dead = _ev(T - 40, "error", "X: boom", head="X: boom")
    log = LogSummary(location=LogLocation(kind="file", label="/x.log"), last_error=dead)
    row = _row(log, "down")
    row.error = "log: X: boom (connection refused)"
    text = "\n".join(t.plain for t in log_section(row))
    assert "last error 11:06:00  (the line in the state above)" in text
    assert "X: boom" not in text
