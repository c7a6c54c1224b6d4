"""The envelopes: Docker json-file, CRI (partial lines), the journal (byte arrays), plain."""

from __future__ import annotations

import calendar
import json

import pytest
from logfixtures import READ, events, local, raw_lines

from llmtop.parse.logs import assembler

DEAD = ("vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. "
        "See stack trace (above) for the root cause.")


def _shape(evs):
    return [(e.severity, e.headline, e.lines) for e in evs]


def test_docker_and_cri_give_the_events_of_the_plain_file():
    plain = events("vllm-0.32-text-enginedead.log", "vllm")
    docker = events("vllm-0.32-enginedead.docker-json.log", "vllm", "docker")
    cri = events("vllm-0.32-enginedead.cri.log", "vllm", "cri")
    assert _shape(docker) == _shape(plain)
    assert _shape(cri) == _shape(plain)
    assert {e.stream for e in docker} == {"stdout"} == {e.stream for e in cri}


def test_an_unstamped_line_takes_the_envelope_time():
    for name, envelope in (("vllm-0.32-enginedead.docker-json.log", "docker"),
                           ("vllm-0.32-enginedead.cri.log", "cri")):
        evs = events(name, "vllm", envelope)
        shutting = next(e for e in evs if e.headline == "Shutting down")
        assert shutting.stamped
        assert local(2026, 12, 7, 9, 22, 1) - 1 < shutting.t_wall < local(2026, 12, 7, 9, 22, 2)
        # the runtime's zoned stamp wins over vLLM's zone-less one (same moment here)
        (burst,) = [e for e in evs if e.severity == "error"]
        assert burst.headline == DEAD
        assert burst.t_wall == pytest.approx(calendar.timegm((2026, 12, 7, 9, 22, 1)) + 0.00013)


def test_the_envelopes_zoned_time_wins_over_an_engine_stamp_in_another_zone():
    """A container whose clock zone differs from llmtop's: vLLM stamps its lines in the
    container's local time with no zone; Docker's and CRI's stamps are UTC. The event's time is
    the runtime's, so the line that explains a DOWN is found by its real moment."""
    line = ("(APIServer pid=7) ERROR 12-07 04:22:01 [async_llm.py:906] "
            "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue.")
    at = calendar.timegm((2026, 12, 7, 9, 22, 1))
    docker = json.dumps({"log": line + "\n", "stream": "stdout",
                         "time": "2026-12-07T09:22:01.5Z"})
    cri = "2026-12-07T09:22:01.5Z stdout F " + line
    for raw, envelope in ((docker, "docker"), (cri, "cri")):
        a = assembler("vllm", envelope)
        evs = a.feed(raw, at + 2) + a.flush(at + 10)
        (ev,) = evs
        assert ev.severity == "error" and ev.t_wall == pytest.approx(at + 0.5), envelope


def test_cri_partial_lines_are_joined_across_feeds():
    lines = raw_lines("vllm-0.32-enginedead.cri.log")
    at = next(i for i, x in enumerate(lines) if b" stdout P " in x)
    a = assembler("vllm", "cri")
    for line in lines[:at]:
        a.feed(line, READ)
    a.flush(READ + 5)
    parts = []
    i = at
    while b" stdout P " in lines[i]:
        assert a.feed(lines[i], READ + 10) == []  # a partial line completes nothing
        parts.append(lines[i].split(b" ", 3)[3])
        i += 1
    parts.append(lines[i].split(b" ", 3)[3])
    a.feed(lines[i], READ + 10)
    (ev,) = a.flush(READ + 20)
    whole = b"".join(parts).decode()
    assert whole.endswith(ev.lines[-1][-40:])
    assert len(ev.lines[0]) > 256  # longer than any one part


def test_a_partial_line_never_finished_is_flushed_after_quiet():
    a = assembler(None, "cri")
    assert a.feed("2026-12-07T09:00:00.000000001Z stderr P half a li", READ) == []
    assert a.flush(READ + 0.1) == []
    (ev,) = a.flush(READ + 1.0)
    assert ev.lines == ("half a li",) and ev.stream == "stderr"
    # the stamp is UTC (Z), nanoseconds kept as far as a float does
    assert abs(ev.t_wall - (calendar.timegm((2026, 12, 7, 9, 0, 0)) + 1e-9)) < 1e-6


def test_docker_parts_of_a_long_line_are_joined():
    a = assembler(None, "docker")
    t = "2026-12-07T09:00:00.5Z"
    assert a.feed(json.dumps({"log": "x" * 100, "stream": "stdout", "time": t}), READ) == []
    a.feed(json.dumps({"log": "y" * 10 + "\n", "stream": "stdout", "time": t}), READ)
    (ev,) = a.flush(READ + 1)
    assert ev.lines == ("x" * 100 + "y" * 10,)


def test_the_real_journal_output():
    evs = events("journal-vllm-lines.json", "vllm", "journal")
    first = evs[0]
    stamp = json.loads(raw_lines("journal-vllm-lines.json")[0])["__REALTIME_TIMESTAMP"]
    assert first.t_wall == int(stamp) / 1e6 and first.stamped
    # journald drops vLLM's \r: the burst is still one event, by its traceback
    (burst,) = [e for e in evs if e.headline == DEAD]
    assert burst.severity == "error" and len(burst.lines) == 8
    # MESSAGE as a byte array (not UTF-8): decoded with replacement, PRIORITY 4 -> warning
    bad = next(e for e in evs if e.headline.startswith("bad bytes"))
    assert bad.headline == "bad bytes: \ufffd\ufffd end" and bad.severity == "warning"
    # no level in the text: PRIORITY 3 (systemd-cat read the <3> prefix)
    pref = next(e for e in evs if e.headline == "with a syslog prefix")
    assert pref.severity == "error"
    # a Python warning at PRIORITY 6: the text's own level wins
    warn = next(e for e in evs if "DeprecationWarning" in e.headline)
    assert warn.severity == "warning" and warn.lines[-1].strip() == "warnings.warn("


def test_journal_message_kinds():
    a = assembler(None, "journal")
    evs = a.feed('{"MESSAGE": [104, 105], "PRIORITY": "2", "__REALTIME_TIMESTAMP": "1"}', READ)
    evs += a.feed('{"MESSAGE": null, "PRIORITY": "6"}', READ)
    evs += a.feed('{"MESSAGE": {"odd": 1}}', READ)  # not a message: kept as the line it is
    evs += a.feed('{"MESSAGE": "two\\nlines"}', READ)
    evs += a.feed('not json at all', READ)
    evs += a.flush(READ + 1)
    assert [(e.severity, e.lines) for e in evs] == [
        ("critical", ("hi",)),
        ("info", ("[message over 4096 bytes: journalctl -o json --all shows it]",)),
        ("info", ('{"MESSAGE": {"odd": 1}}',)),
        ("info", ("two",)), ("info", ("lines",)),
        ("info", ("not json at all",)),
    ]
    assert evs[0].t_wall == 1e-6


def test_damaged_envelope_lines_are_kept_as_text():
    for envelope in ("docker", "cri", "journal"):
        a = assembler(None, envelope)
        evs = a.feed('{"log": 3}', READ)
        evs += a.feed("2026-13-99T00:00:00Z stdout F bad date", READ)
        evs += a.feed("", READ)
        evs += a.flush(READ + 1)
        assert [e.lines for e in evs] == [('{"log": 3}',),
                                          ("2026-13-99T00:00:00Z stdout F bad date",)], envelope
        assert all(not e.stamped and e.t_wall == READ for e in evs)
