"""Generated garbage through every format and envelope: never a traceback, always a clear event."""

from __future__ import annotations

import json
import math
import re

from hypothesis import given, settings
from hypothesis import strategies as st

from llmtop.model.logs import SEVERITIES
from llmtop.parse.logs import ENVELOPES, FORMATS, assembler
from llmtop.parse.logs.clean import LINE_MAX
from tests.conftest import examples

_UNSAFE = re.compile(r"[\x00-\x08\x0a-\x1f\x7f-\x9f]")
_STAMPS = st.sampled_from(["2026-12-07T09:00:00.123456789Z", "0000-01-01T00:00:00Z",
                           "9999-12-31T23:59:59+99:99", "2026-02-30T00:00:00Z", "", "x"])
_TEXT = st.one_of(
    st.text(max_size=300),
    st.binary(max_size=300),
    st.sampled_from([
        "(APIServer pid=1) ERROR 02-29 23:59:60 [x.py:1] Traceback (most recent call last):",
        "(APIServer pid=1) ERROR 13-45 99:99:99 [x.py:1] bad stamp",
        "E9999 99:99:99.000000 1 x.cc:1] \"unterminated", "[2026-99-99 00:00:00] x",
        "time=garbage level=INFO msg=", "Traceback (most recent call last):", "  File",
        '{"level": 3, "message": null}', "[12/07/0000-99:00:00] [TRT-LLM] [I] x",
        "2026-12-07 09:30:00,123 - lmdeploy - NOPE - a.py:1 - x",
        "prompt: 'unterminated", "Authorization: Bearer", "--api-key", "sk-", "\x1b[",
    ]),
)


def _envelope_line(envelope: str, text: str | bytes, stamp: str, other: object) -> str | bytes:
    if envelope == "plain" or isinstance(text, bytes):
        return text
    if envelope == "docker":
        return json.dumps({"log": text if other is None else other, "stream": "stdout",
                           "time": stamp})
    if envelope == "cri":
        return f"{stamp} {'stdout' if other is None else 'stderr'} {'P' if other else 'F'} {text}"
    return json.dumps({"MESSAGE": text if other is None else other, "PRIORITY": stamp,
                       "__REALTIME_TIMESTAMP": str(other) if other is not None else "1"})


@settings(max_examples=examples(300), deadline=None)
@given(st.sampled_from([*FORMATS, None]), st.sampled_from(ENVELOPES),
       st.lists(st.tuples(_TEXT, _STAMPS,
                          st.one_of(st.none(), st.integers(-10**30, 10**30),
                                    st.lists(st.integers(-5, 300), max_size=5),
                                    st.just([104, 105]))),
                max_size=12),
       st.floats(min_value=0, max_value=4e9))
def test_any_input_gives_clear_events(fmt, envelope, lines, read_time):
    a = assembler(fmt, envelope, max_lines=20)
    out = []
    for text, stamp, other in lines:
        out += a.feed(_envelope_line(envelope, text, stamp, other), read_time)
    out += a.flush(read_time + 10)
    assert a.flush(read_time + 20) == []
    for e in out:
        assert e.severity in SEVERITIES
        assert isinstance(e.t_wall, float) and math.isfinite(e.t_wall)
        assert 1 <= len(e.lines) <= 20
        assert e.headline in e.lines or e.headline == ""
        for x in e.lines:
            assert not _UNSAFE.search(x) and len(x) < LINE_MAX + 40
