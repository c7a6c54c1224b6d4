"""``--dataset FILE``: the user's own prompts, parsed and checked before anything is sent.

Accepted files:

- JSONL, one object per line: ``{"prompt": "..."}`` or ``{"messages": [{"role", "content"},
  ...]}``, with an optional ``"max_tokens": N``. Blank lines are skipped.
- ShareGPT-style JSON: a list of ``{"conversations": [{"from": "human", "value": ...},
  {"from": "gpt", "value": ...}, ...]}`` (``"messages"`` / ``role`` / ``content`` also
  read). The first human turn is the prompt; the reply that follows gives the output
  length (its words, priced by the prompt calibration) when no ``max_tokens`` is given.

Any bad line or entry raises ``DatasetError`` naming the line (JSONL) or entry (JSON);
the CLI reads the file before starting the probe, so nothing is sent.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llmtop.errors import ConfigError

__all__ = ["DatasetError", "Record", "load_dataset"]

_HUMAN = ("human", "user")
_BOT = ("gpt", "assistant", "model", "chatgpt", "bard")


class DatasetError(ConfigError):
    """The dataset file cannot be used as written (the message names the line)."""


@dataclass(frozen=True, slots=True)
class Record:
    """One request of a dataset, sent as written."""

    prompt: str | None = None
    messages: tuple[dict[str, str], ...] | None = None
    max_tokens: int | None = None
    reply_words: int | None = None
    """Words of the recorded reply (ShareGPT), for an output length when max_tokens is None."""


def _max_tokens(obj: dict[str, Any], where: str) -> int | None:
    mt = obj.get("max_tokens")
    if mt is None:
        return None
    if isinstance(mt, bool) or not isinstance(mt, int) or mt < 1:
        raise DatasetError(f"{where}: max_tokens must be a positive integer, got {mt!r}")
    return mt


def _messages(msgs: Any, where: str) -> tuple[dict[str, str], ...]:
    if not isinstance(msgs, list) or not msgs:
        raise DatasetError(f"{where}: 'messages' must be a non-empty list")
    out = []
    for m in msgs:
        if not (isinstance(m, dict) and isinstance(m.get("role"), str)
                and isinstance(m.get("content"), str)):
            raise DatasetError(f"{where}: each message needs a string 'role' and 'content'")
        out.append({"role": m["role"], "content": m["content"]})
    return tuple(out)


def _jsonl_record(obj: Any, where: str) -> Record:
    if not isinstance(obj, dict):
        raise DatasetError(f"{where}: expected a JSON object, got {type(obj).__name__}")
    mt = _max_tokens(obj, where)
    if isinstance(obj.get("prompt"), str) and obj["prompt"]:
        return Record(prompt=obj["prompt"], max_tokens=mt)
    if "messages" in obj:
        return Record(messages=_messages(obj["messages"], where), max_tokens=mt)
    if "conversations" in obj:
        return _sharegpt_record(obj, where)
    raise DatasetError(f"{where}: needs a non-empty 'prompt' string or a 'messages' list")


def _turn(t: Any) -> tuple[str, str] | None:
    if not isinstance(t, dict):
        return None
    who = t.get("from", t.get("role"))
    text = t.get("value", t.get("content"))
    if isinstance(who, str) and isinstance(text, str):
        return who.lower(), text
    return None


def _sharegpt_record(obj: Any, where: str) -> Record:
    if not isinstance(obj, dict):
        raise DatasetError(f"{where}: expected an object with 'conversations'")
    conv = obj.get("conversations", obj.get("messages"))
    if not isinstance(conv, list):
        raise DatasetError(f"{where}: 'conversations' must be a list of turns")
    turns = [_turn(t) for t in conv]
    if any(t is None for t in turns):
        raise DatasetError(f"{where}: each turn needs 'from'/'value' (or 'role'/'content')")
    for i, t in enumerate(turns):
        assert t is not None
        if t[0] in _HUMAN and t[1].strip():
            nxt = turns[i + 1] if i + 1 < len(turns) else None
            words = len(nxt[1].split()) if nxt is not None and nxt[0] in _BOT else None
            return Record(prompt=t[1], max_tokens=_max_tokens(obj, where),
                          reply_words=words or None)
    raise DatasetError(f"{where}: no human turn with text")


def load_dataset(path: str) -> list[Record]:
    """Parse ``path`` (JSONL or ShareGPT JSON); raises ``DatasetError`` naming the line."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise DatasetError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise DatasetError(f"{path}: cannot read: {exc}") from None
    head = text.lstrip()[:1]
    records: list[Record] = []
    if head == "[":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise DatasetError(f"{path}: line {exc.lineno}: not valid JSON ({exc.msg})") from None
        for i, obj in enumerate(data):
            records.append(_sharegpt_record(obj, f"{path}: entry {i}")
                           if isinstance(obj, dict) and "prompt" not in obj
                           else _jsonl_record(obj, f"{path}: entry {i}"))
    else:
        for n, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            where = f"{path}: line {n}"
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise DatasetError(f"{where}: not valid JSON ({exc.msg})") from None
            records.append(_jsonl_record(obj, where))
    if not records:
        raise DatasetError(f"{path}: no requests in the file")
    return records
