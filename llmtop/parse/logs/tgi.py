"""Text Generation Inference's log lines (``--json-output``; tracing-subscriber's JSON format).

- The router (``router/src/logging.rs``: ``json().flatten_event(true)``, file and line on):
  ``{"timestamp": "2026-12-07T09:30:00.123456Z", "level": "INFO", "message": "...",
  "target": "text_generation_router::server", "filename": ..., "line_number": ...,
  "span": {...}, "spans": [...]}``.
- The launcher (``launcher/src/main.rs``: ``json()``, not flattened): the message is in
  ``"fields": {"message": ...}``; the Python shards' loguru records are re-logged through it.
- Levels TRACE, DEBUG, INFO, WARN, ERROR; a message with newlines (``Shard complete standard
  error output:`` and a traceback) is one event, its lines split.
- Without ``--json-output`` (tracing's text format: ``<RFC 3339> <LEVEL> <target>: message``):
  the generic parser.
"""

from __future__ import annotations

import json

from llmtop.parse.logs import generic, stamps
from llmtop.parse.logs.parsed import Parsed

__all__ = ["parse"]


def parse(text: str, ref: float) -> Parsed:
    """One line of a TGI log."""
    if not text.startswith("{"):
        return generic.parse(text, ref)
    try:
        obj = json.loads(text)
    except ValueError:
        return generic.parse(text, ref)
    if not isinstance(obj, dict) or "level" not in obj:
        return generic.parse(text, ref)
    fields = obj.get("fields")
    message = obj.get("message")
    if message is None and isinstance(fields, dict):
        message = fields.get("message")
    lines = str(message if message is not None else text).rstrip("\n").split("\n")
    stamp = obj.get("timestamp")
    return Parsed(body=lines[0], severity=generic.level(str(obj.get("level"))),
                  t_wall=stamps.iso(stamp) if isinstance(stamp, str) else None,
                  extra=tuple(lines[1:]))
