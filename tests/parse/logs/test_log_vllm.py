"""vLLM's real log lines (0.32, CPU): times, severities, the EngineDeadError burst, ids, JSON."""

from __future__ import annotations

from logfixtures import READ, events, local, raw_lines

from llmtop.model.logs import SEVERITIES
from llmtop.parse.logs import assembler

DEAD = ("vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. "
        "See stack trace (above) for the root cause.")


def test_the_engine_dead_burst_is_one_error_event_headed_by_its_exception_line():
    evs = events("vllm-0.32-text-enginedead.log", "vllm")
    errors = [e for e in evs if e.severity in ("error", "critical")]
    assert len(errors) == 1
    burst = errors[0]
    assert burst.headline == DEAD
    assert burst.lines[0] == "AsyncLLM output_handler failed."
    assert burst.lines[1] == "Traceback (most recent call last):"
    assert burst.lines[-1] == DEAD
    assert len(burst.lines) == 8
    assert burst.t_wall == local(2026, 12, 7, 9, 22, 1) and burst.stamped


def test_the_lines_after_the_burst_explain_nothing_and_are_not_errors():
    evs = events("vllm-0.32-text-enginedead.log", "vllm")
    at = next(i for i, e in enumerate(evs) if e.headline == DEAD)
    after = evs[at + 1:]
    assert {e.severity for e in after} == {"info"}
    heads = [e.headline for e in after]
    assert "Shutting down" in heads and "Finished server process [21418]" in heads
    leaks = [e for e in after if e.headline.startswith("nanobind: leaked")]
    assert [len(e.lines) for e in leaks] == [5, 12, 12]  # the indented "- leaked" lines joined
    assert evs[-1].severity == "info"


def test_severities_and_times_come_from_the_prefix():
    evs = events("vllm-0.32-text-enginedead.log", "vllm")
    by_head = {e.headline: e for e in evs}
    w = by_head["[shutdown] MPClient: engine core exited unexpectedly; starting cleanup"]
    assert w.severity == "warning" and w.t_wall == local(2026, 12, 7, 9, 22, 1)
    r = by_head["Resolved architecture: LlamaForCausalLM"]
    assert r.severity == "info" and r.t_wall == local(2026, 12, 7, 9, 21, 31)
    # Uvicorn's lines have no stamp: the read time, marked unstamped
    u = by_head['127.0.0.1:44300 - "POST /v1/completions HTTP/1.1" 401 Unauthorized']
    assert u.severity == "info" and u.t_wall == READ and not u.stamped
    # a multi-line info record (the banner, every line but the last ending in \r) is one
    # event, its blank first and last lines dropped
    banner = next(e for e in evs if any("version 0.32.0" in x for x in e.lines))
    assert len(banner.lines) == 4 and banner.severity == "info"
    assert banner.headline == banner.lines[0] and banner.headline.strip()
    assert all(e.severity in SEVERITIES for e in evs)


def test_request_ids_from_enable_log_requests():
    evs = events("vllm-0.32-text-enginedead.log", "vllm")
    ids = [e.request_id for e in evs if e.request_id]
    assert ids[:4] == ["cmpl-a46f500b46c44433-0", "cmpl-a46f500b46c44433-0-bef5e440",
                       "chatcmpl-873f000557affe60", "chatcmpl-873f000557affe60-a02a7ec6"]
    failed = next(e for e in evs if e.headline.endswith("failed (engine dead)."))
    assert failed.request_id == "cmpl-bd72e61e6bf7d5d8-0"


def test_a_multi_line_event_stays_open_across_feeds_until_the_next_line_or_quiet():
    lines = raw_lines("vllm-0.32-text-enginedead.log")
    start = next(i for i, x in enumerate(lines) if b"output_handler failed" in x)
    a = assembler("vllm")
    t = READ
    assert a.feed(lines[start - 1], t) == []  # the line before: open until the next
    done = a.feed(lines[start], t)
    assert [e.severity for e in done] == ["info"]
    for line in lines[start + 1:start + 4]:
        assert a.feed(line, t + 0.1) == []
    assert a.flush(t + 0.3) == []  # not quiet long enough
    for line in lines[start + 4:start + 8]:
        assert a.feed(line, t + 0.4) == []
    (burst,) = a.flush(t + 1.0)
    assert burst.headline == DEAD and len(burst.lines) == 8
    assert a.flush(t + 5.0) == []


def test_a_gap_of_quiet_read_time_closes_an_event_before_the_next_line():
    lines = raw_lines("vllm-0.32-text-enginedead.log")
    start = next(i for i, x in enumerate(lines) if b"output_handler failed" in x)
    a = assembler("vllm")
    assert a.feed(lines[start], READ) == []
    # the record said it goes on (\r), but nothing came for 2 s: closed as it is
    (first,) = a.feed(lines[start + 1], READ + 2.0)
    assert first.lines == ("AsyncLLM output_handler failed.",)


def test_the_year_is_the_one_nearest_the_read_time_across_new_year():
    a = assembler("vllm")
    new_year = local(2027, 1, 1, 0, 0, 5)
    a.feed("(APIServer pid=1) ERROR 12-31 23:59:59 [x.py:1] late in the old year", new_year)
    (old,) = a.flush(new_year + 1)
    assert old.t_wall == local(2026, 12, 31, 23, 59, 59)
    eve = local(2026, 12, 31, 23, 59, 58)
    a.feed("(APIServer pid=1) INFO 01-01 00:00:01 [x.py:1] a clock a little ahead", eve)
    (ahead,) = a.flush(eve + 1)
    assert ahead.t_wall == local(2027, 1, 1, 0, 0, 1)


def test_colour_codes_are_stripped_and_debug_is_debug():
    evs = events("vllm-0.32-debug-color.log", "vllm")
    assert not any("\x1b" in x for e in evs for x in e.lines)
    sev = {e.severity for e in evs}
    assert {"debug", "info", "warning"} <= sev
    start = next(e for e in evs if e.headline.startswith("Starting vLLM server on"))
    assert start.severity == "info" and start.stamped


def test_the_json_formatter_lines_and_their_traceback():
    evs = events("vllm-0.32-json.log", "vllm")
    (err,) = [e for e in evs if e.severity == "error"]
    assert err.headline == DEAD
    assert err.lines[0] == "AsyncLLM output_handler failed."
    assert err.t_wall == local(2026, 12, 7, 9, 22, 58, 0.148)
    access = [e for e in evs if e.headline.startswith("127.0.0.1:") and "POST" in e.headline]
    assert [e.headline[-3:] for e in access] == ["200", "400"]
    assert all(e.stamped for e in access)
    # the unprefixed lines between the JSON ones still parse
    assert any(e.headline.startswith("nanobind: leaked") for e in evs)


def test_a_logging_prefix_before_the_process_is_kept_out_of_the_text():
    # VLLM_LOGGING_PREFIX goes first on every line (vllm/logger.py's _FORMAT)
    a = assembler("vllm")
    evs = []
    for line in ("[node-1] (APIServer pid=7) ERROR 12-07 09:00:00 [a.py:1] first\r",
                 "[node-1] (APIServer pid=7) ERROR 12-07 09:00:00 [a.py:1] second",
                 "[node-1] (APIServer pid=7) INFO 12-07 09:00:00 [a.py:1] next"):
        evs += a.feed(line, READ)
    evs += a.flush(READ + 1)
    assert [(e.severity, e.lines) for e in evs] == [("error", ("first", "second")),
                                                    ("info", ("next",))]


def test_without_its_carriage_returns_the_burst_is_still_one_event():
    # a reader that drops each line's trailing \r (as journald does): the traceback under one
    # prefix still makes one event; only a multi-line record without a traceback splits
    a = assembler("vllm")
    evs = []
    for line in raw_lines("vllm-0.32-text-enginedead.log"):
        evs += a.feed(line.rstrip(b"\r"), READ)
    evs += a.flush(READ + 1)
    (burst,) = [e for e in evs if e.severity == "error"]
    assert burst.headline == DEAD and len(burst.lines) == 8
    at = evs.index(burst)
    assert {e.severity for e in evs[at + 1:]} == {"info"}
