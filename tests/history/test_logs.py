"""Kept log events: the bound, counts in the window and since start, the last error past
the window and a restart, new errors after ``seen``, the row's ``log``, ``log_events``, and
the line that explains DOWN / RESTARTED (never a later info line; nothing without an error)."""

from __future__ import annotations

import dataclasses

import pytest

from llmtop.config import Config, Target
from llmtop.history.logs import LogBook, state_text
from llmtop.history.store import Store
from llmtop.model.logs import LogLocation
from tests.log_fakes import DEAD_HEADLINE, LOCATION, burst, event, raw_log

from .fakes import body, fake_detect, fake_normalize, raw

W0 = 1_700_000_000.0


def make_store(*names, **kw):
    targets = tuple(Target(name=n, base_url=f"http://127.0.0.1:{i + 1}", host="127.0.0.1")
                    for i, n in enumerate(names))
    return Store(Config(targets=targets, interval_s=1.0, **kw), normalize=fake_normalize,
                 detect=fake_detect)


def good(store, target, t0, t1, start=100.0):
    for t in range(t0, t1 + 1):
        store.ingest(raw(target, float(t), body(start=start, counters={
            "generation_tokens": 10.0 * t}, gauges={"running": 1.0})))
        store.commit(float(t), W0 + t)


def down(store, target, t0, t1):
    for t in range(t0, t1 + 1):
        store.ingest(raw(target, float(t), status="down", error="connection refused"))
        store.commit(float(t), W0 + t)


def add(store, target, t, events, **kw):
    store.add_log(raw_log(target, W0 + t, events, t_mono=float(t), **kw))


def row(store, target="a", window=10.0):
    return next(r for r in store.snapshot(window).engines if r.target == target)


def test_kept_events_are_bounded_by_log_lines():
    book = LogBook(50)
    book.add(raw_log("a", W0, [event(W0 + i / 100, "info", f"l{i}") for i in range(500)]))
    kept = book.events()["a"]
    assert len(kept) == 50
    assert [e.lines[0] for e in kept] == [f"l{i}" for i in range(450, 500)]  # the newest
    assert book.counts()["a"] == {"info": 500}  # the counter counts every event read


@pytest.mark.skipif("log_lines" not in {f.name for f in dataclasses.fields(Config)},
                    reason="Config.log_lines comes with the log follower's options")
def test_store_bound_comes_from_config_log_lines():
    assert make_store("a").logs.max_events == 2000
    small = Store(Config(targets=(), interval_s=1.0, log_lines=7), normalize=fake_normalize,
                  detect=fake_detect)
    small.add_log(raw_log("a", W0, [event(W0, "info", str(i)) for i in range(30)]))
    assert len(small.snapshot(10.0).log_events["a"]) == 7


def test_summary_counts_window_totals_dropped_and_location_error():
    s = make_store("a")
    good(s, "a", 0, 100)
    add(s, "a", 20, [event(W0 + 20, "error", "old boom")], dropped=3)
    add(s, "a", 95, [event(W0 + 95, "warning", "w"), event(W0 + 96, "info", "i"),
                     event(W0 + 97, "info", "i2")], dropped=2)
    log = row(s).log
    assert log.counts == {"debug": 0, "info": 2, "warning": 1, "error": 0, "critical": 0}
    assert log.lines_total == {"error": 1, "warning": 1, "info": 2}
    assert log.dropped == 5
    assert log.last_error is not None and log.last_error.headline == "old boom"  # past window
    assert log.location == LOCATION
    add(s, "a", 100, [], error="permission denied")
    log = row(s).log
    assert log.location.error == "permission denied" and log.location.label == LOCATION.label
    assert log.to_json()["source"]["error"] == "permission denied"


def test_no_log_followed_gives_none_not_zero():
    s = make_store("a")
    good(s, "a", 0, 5)
    assert row(s).log is None
    assert s.snapshot(10.0).log_events == {}


def test_new_errors_count_until_seen():
    s = make_store("a")
    good(s, "a", 0, 30)
    add(s, "a", 10, [event(W0 + 10, "error", "e1"), event(W0 + 11, "critical", "e2"),
                     event(W0 + 12, "warning", "w")])
    assert row(s).log.new_errors == 2
    s.seen("a", W0 + 11)
    assert row(s).log.new_errors == 0
    add(s, "a", 25, [event(W0 + 25, "error", "e3")])
    assert row(s).log.new_errors == 1
    s.seen("a", W0 + 5)  # an older look changes nothing
    assert row(s).log.new_errors == 1


def test_log_events_on_snapshot_read_only_and_oldest_first():
    s = make_store("a")
    good(s, "a", 0, 3)
    add(s, "a", 3, [event(W0 + 1, "info", "x"), event(W0 + 2, "info", "y")])
    ev = s.snapshot(10.0).log_events["a"]
    assert isinstance(ev, tuple) and [e.lines[0] for e in ev] == ["x", "y"]
    assert "log_events" not in s.snapshot(10.0).to_json("v")
    assert s.snapshot(10.0).to_json("v")["engines"][0]["log"]["counts"]["info"] == 2


def test_down_carries_the_error_not_the_info_lines_after_it():
    s = make_store("a")
    good(s, "a", 0, 30)
    add(s, "a", 31, burst(W0 + 30.4))  # the burst, then the shutdown and nanobind lines
    down(s, "a", 31, 35)
    r = row(s)
    assert r.state == "down"
    assert r.error == f"log: {DEAD_HEADLINE} (connection refused)"
    assert "Shutting down" not in r.error and "leaked" not in r.error
    assert r.log.cause is not None and r.log.cause.headline == DEAD_HEADLINE  # the verdict's
    downs = [e for e in s.events if e.target == "a" and e.text.startswith("DOWN")]
    assert [e.text for e in downs] == [f"DOWN: log: {DEAD_HEADLINE} (connection refused)"]


def test_burst_read_after_the_state_change_gets_a_line_of_its_own_once():
    s = make_store("a")
    good(s, "a", 0, 30)
    down(s, "a", 31, 32)  # the follower read nothing yet
    assert [e.text for e in s.events if e.text.startswith("DOWN")] == [
        "DOWN: connection refused"]
    add(s, "a", 33, burst(W0 + 30.4))
    down(s, "a", 33, 40)
    texts = [e.text for e in s.events if e.target == "a" and "log:" in e.text]
    assert texts == [f"DOWN — log: {DEAD_HEADLINE}"]
    assert row(s).error.startswith(f"log: {DEAD_HEADLINE}")


def test_a_log_without_an_error_says_nothing():
    s = make_store("a")
    good(s, "a", 0, 30)
    add(s, "a", 30, [event(W0 + 30, "info", "INFO:     Shutting down"),
                     event(W0 + 30, "warning", "something odd")])
    down(s, "a", 31, 35)
    assert row(s).error == "connection refused" and row(s).log.cause is None
    assert not any("log:" in e.text for e in s.events)


def test_an_old_error_does_not_explain_a_new_down():
    s = make_store("a")
    add(s, "a", 0, [event(W0 + 1, "error", "an error long ago")])
    good(s, "a", 0, 200)
    down(s, "a", 201, 205)
    assert row(s).error == "connection refused"


def test_never_good_engine_cites_its_newest_error():
    s = make_store("a")
    oom = event(W0 + 1, "error", lines=("Traceback (most recent call last):",
                                        "torch.OutOfMemoryError: CUDA out of memory."))
    add(s, "a", 1, [oom, event(W0 + 2, "info", "INFO: exiting")])
    down(s, "a", 0, 3)
    assert row(s).error == "log: torch.OutOfMemoryError: CUDA out of memory. (connection refused)"


def test_restarted_carries_the_last_error_before_the_restart():
    s = make_store("a")
    good(s, "a", 0, 30, start=100.0)
    add(s, "a", 30, [*burst(W0 + 30.2), event(W0 + 33, "info", "starting again")])
    good(s, "a", 31, 33, start=200.0)  # a new process (start time moved)
    add(s, "a", 34, [event(W0 + 34, "error", "a later error of the new process")])
    r = row(s)
    assert r.state == "restarted"
    assert r.error == f"log: {DEAD_HEADLINE}"
    assert r.log.last_error.headline == "a later error of the new process"
    said = [e.text for e in s.events if "log:" in e.text]
    assert said == [f"RESTARTED — log: {DEAD_HEADLINE}"]
    good(s, "a", 34, 60, start=200.0)
    assert row(s).state == "ok" and row(s).error is None
    # the last error is kept past the window and past the restart
    assert row(s).log.last_error.headline == "a later error of the new process"


def test_last_error_kept_when_evicted_from_the_bound():
    s = make_store("a")
    s.logs = LogBook(5)
    good(s, "a", 0, 10)
    add(s, "a", 10, [event(W0 + 10, "error", "boom")] + [
        event(W0 + 10.5, "info", f"i{i}") for i in range(20)])
    down(s, "a", 11, 12)
    assert row(s).log.last_error.headline == "boom"
    assert row(s).error == "log: boom (connection refused)"


def test_state_text_cuts_a_long_headline():
    e = event(W0, "error", "x" * 500)
    text = state_text("refused", e)
    assert text.startswith("log: xxx") and text.endswith("\u2026 (refused)")
    assert len(text) < 230


def test_forget_drops_the_log():
    s = make_store("a")
    add(s, "a", 0, [event(W0, "error", "e")])
    s.forget("a")
    assert "a" not in s.logs
    assert s.snapshot(10.0).log_events == {}


def test_unreadable_location_only():
    s = make_store("a")
    good(s, "a", 0, 3)
    loc = LogLocation(kind="file", label="/proc/4711/fd/1", error="/proc/4711/fd/1 is a terminal")
    add(s, "a", 3, [], location=loc)
    log = row(s).log
    assert log.location.error == "/proc/4711/fd/1 is a terminal"
    assert log.last_error is None and log.counts["error"] == 0


def test_bad_event_times_are_a_clear_state_not_a_traceback():
    from llmtop.console.once_logs import log_lines
    from llmtop.history.logs import clock_text

    assert clock_text(float("nan")) == "--:--:--" and clock_text(float("inf")) == "--:--:--"
    s = make_store("a")
    good(s, "a", 0, 10)
    add(s, "a", 10, [event(float("nan"), "error", "no time"),
                     event(W0 + 10, "error", "boom")])
    snap = s.snapshot(10.0)
    assert row(s).log.last_error.headline == "boom"
    assert row(s).log.counts["error"] == 1  # the one with no usable time is not in a window
    assert log_lines(snap)[0].endswith("boom")
    add(s, "a", 10, [event(float("inf"), "critical", "far future")])
    assert "--:--:-- far future" in log_lines(s.snapshot(10.0))[0]


def test_unknown_severity_counts_as_info_and_bad_drops_are_ignored():
    s = make_store("a")
    good(s, "a", 0, 5)
    add(s, "a", 5, [event(W0 + 5, "fatal?", "odd")], dropped=-4)
    log = row(s).log
    assert log.counts["info"] == 1 and log.lines_total == {"info": 1}
    assert log.dropped == 0 and log.last_error is None
