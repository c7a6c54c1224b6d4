"""``--once`` when no target was given and none was found: one valid JSON object with no
engines and a ``message`` (exit 1, ``docs/json-schema.md``); the table form says what to do."""

from __future__ import annotations

import io
import json

import llmtop.once as once
from llmtop.config import Config
from llmtop.once import NO_TARGETS_MESSAGE, run_once


async def _same(config, err=None):
    return config


def test_json_with_nothing_found_is_one_object_with_a_message(monkeypatch):
    monkeypatch.setattr(once, "_targets", _same)
    out, err = io.StringIO(), io.StringIO()
    assert run_once(Config(), as_json=True, out=out, err=err) == 1
    doc = json.loads(out.getvalue())
    assert doc["engines"] == [] and doc["gpus"] == []
    assert doc["message"] == NO_TARGETS_MESSAGE
    assert doc["window_s"] is None
    assert list(doc)[:3] == ["llmtop", "time", "window_s"]
    assert NO_TARGETS_MESSAGE in err.getvalue()


def test_table_with_nothing_found_says_what_to_do(monkeypatch):
    monkeypatch.setattr(once, "_targets", _same)
    out, err = io.StringIO(), io.StringIO()
    assert run_once(Config(), out=out, err=err) == 1
    assert out.getvalue() == ""
    text = err.getvalue()
    for cmd in ("llmtop 127.0.0.1:8000", "llmtop --demo", "llmtop --prometheus URL"):
        assert cmd in text
