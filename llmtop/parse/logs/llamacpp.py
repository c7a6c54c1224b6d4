"""llama.cpp's ``llama-server`` log lines (``common/log.cpp``, as the real build 11434 writes).

- ``0.00.508.667 I slot launch_slot_: id  1 | task 0 | processing task``: the time since the
  server started (minutes.seconds.milliseconds.microseconds: not a wall time, so the event
  takes the envelope's or the read time), a level letter (I, W, E, D), then the message.
- ``--log-jsonl``: ``{"type": "log", "time": <µs since start>, "level": "info", "msg": ...}``.
- Lines without the prefix (older builds, ``--log-prefix`` off): the generic parser.
- Task and slot ids are not request ids a client sees, so ``request_id`` stays None.
"""

from __future__ import annotations

import json
import re

from llmtop.parse.logs import generic
from llmtop.parse.logs.parsed import Parsed

__all__ = ["parse"]

_PREFIX = re.compile(r"(?:\d+\.\d\d\.\d{3}\.\d{3} )?([IWED]) (?=\S)")
_TAGGED = re.compile(r"[a-z]{3,4} +[\w:~<>()]+: ")


def parse(text: str, ref: float) -> Parsed:
    """One line of a llama-server log."""
    if text.startswith("{"):
        try:
            obj = json.loads(text)
        except ValueError:
            obj = None
        if isinstance(obj, dict) and obj.get("type") == "log" and "msg" in obj:
            lines = str(obj.get("msg")).rstrip("\n").split("\n")
            return Parsed(body=lines[0], severity=generic.level(str(obj.get("level", ""))),
                          extra=tuple(lines[1:]))
    m = _PREFIX.match(text)
    if m is not None and (text[0].isdigit() or _TAGGED.match(text, m.end())):
        return Parsed(body=text[m.end():], severity=generic.LEVELS[m.group(1)])
    return generic.parse(text, ref)
