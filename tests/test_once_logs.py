"""``--once``: the text line per engine with log errors in the window, and the JSON ``log``
object (source, counts by severity in the window, the last error with its time and text)."""

from __future__ import annotations

import io
import json
import time

from llmtop.config import Config, Target
from llmtop.console.once_logs import log_lines
from llmtop.console.once_table import print_once
from llmtop.history.store import Store
from llmtop.once import snapshot_json
from tests.history.fakes import body, fake_detect, fake_normalize, raw
from tests.log_fakes import DEAD_HEADLINE, burst, event, raw_log

W0 = 1_700_000_000.0


def store_with(*events_at):
    targets = (Target(name="a", base_url="http://127.0.0.1:1", host="127.0.0.1"),
               Target(name="b", base_url="http://127.0.0.1:2", host="127.0.0.1"))
    s = Store(Config(targets=targets, interval_s=1.0), normalize=fake_normalize,
              detect=fake_detect)
    for t in range(0, 21):
        for name in ("a", "b"):
            s.ingest(raw(name, float(t), body(counters={"generation_tokens": 5.0 * t})))
        s.commit(float(t), W0 + t)
    for target, t, events in events_at:
        s.add_log(raw_log(target, W0 + t, events, t_mono=float(t)))
    return s


def test_text_line_only_for_engines_with_errors_in_the_window():
    s = store_with(("a", 20, [*burst(W0 + 18), event(W0 + 19, "error", "second")]),
                   ("b", 20, [event(W0 + 19, "warning", "just a warning")]))
    lines = log_lines(s.snapshot(10.0))
    assert lines == [f"  a log: 2 errors in the window (/tmp/vllm.log) · last "
                     f"{time.strftime('%H:%M:%S', time.localtime(W0 + 19))} second"]
    out = io.StringIO()
    print_once(s.snapshot(10.0), file=out)
    assert "a log: 2 errors in the window" in out.getvalue()
    assert "b log" not in out.getvalue()


def test_an_error_older_than_the_window_gives_no_line():
    s = store_with(("a", 5, burst(W0 + 2)))
    assert log_lines(s.snapshot(10.0)) == []
    assert s.snapshot(10.0).engines[0].log.last_error.headline == DEAD_HEADLINE


def test_json_log_object():
    s = store_with(("a", 20, [*burst(W0 + 18)]))
    doc = json.loads(snapshot_json(s.snapshot(10.0)))
    a, b = doc["engines"]
    assert b["log"] is None  # no log followed: null, not zeros
    log = a["log"]
    assert log["source"] == {"kind": "file", "label": "/tmp/vllm.log", "path": "/tmp/vllm.log",
                             "error": None}
    assert log["counts"] == {"debug": 0, "info": 12, "warning": 0, "error": 1, "critical": 0}
    assert log["last_error"]["t"] == W0 + 18 and log["last_error"]["severity"] == "error"
    assert log["last_error"]["headline"] == DEAD_HEADLINE
    assert log["last_error"]["lines"][1] == "Traceback (most recent call last):"
    assert log["dropped"] == 0
    assert "log_events" not in doc


def test_documented_log_keys_are_the_json_keys():
    import re
    from pathlib import Path

    from llmtop.model.logs import LogSummary

    text = (Path(__file__).resolve().parent.parent / "docs" / "json-schema.md").read_text()
    section = text.split("### Log\n", 1)[1].split("\n## ", 1)[0]
    keys = [m.group(1) for m in re.finditer(r"^\| `([a-z_]+)`", section, re.M)]
    assert keys == list(LogSummary(location=None).to_json())


def test_text_output_of_a_down_engine_carries_its_log_line():
    s = store_with(("a", 20, burst(W0 + 20)))
    for t in range(21, 24):
        s.ingest(raw("a", float(t), status="down", error="connection refused"))
        s.ingest(raw("b", float(t), body(counters={"generation_tokens": 5.0 * t})))
        s.commit(float(t), W0 + t)
    out = io.StringIO()
    print_once(s.snapshot(10.0), file=out)
    assert f"  a: DOWN — log: {DEAD_HEADLINE} (connection refused)" in out.getvalue()
    assert "Shutting down" not in out.getvalue()


def test_a_log_that_cannot_be_read_says_why_in_the_text():
    """A one-shot user learns why an engine has no log line (the finder's reason)."""
    from llmtop.model import LogLocation

    why = ("/proc/4711/fd/1 is a terminal: start it with its output to a file, or set "
           "log = PATH for it in the config file")
    s = store_with()
    s.add_log(raw_log("b", W0 + 20, [], t_mono=20.0,
                      location=LogLocation(kind=None, label="b", error=why)))
    assert log_lines(s.snapshot(10.0)) == [f"  b log: not read: {why}"]
