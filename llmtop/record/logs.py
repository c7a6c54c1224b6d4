"""Engine log reads in a recording: the ``l`` record, prompts dropped, read back.

- ``log_record``: one ``RawLog`` as a record (``k: "l"``): target, times, location, the
  events (compact lists), the follower's drops plus those over the segment's budget.
- ``drop_prompts``: the text of a request an engine logs (vLLM ``--enable-log-requests``:
  the prompt, the JSON body, the generated output) replaced by ``[dropped]``; the log
  parser already redacts secrets and prompts, this keeps a recording free of them whatever
  the live view was told to keep (``record --keep-prompts`` keeps them).
- ``log_item``: the ``RawLog`` of a recorded ``l`` record (a bad record gives no events,
  never an exception).
"""

from __future__ import annotations

import re
from typing import Any

from llmtop.model.logs import LogEvent, LogLocation, RawLog

__all__ = ["PROMPT_FORMS", "drop_prompts", "log_item", "log_record"]

PROMPT_FORMS: tuple[tuple[re.Pattern[str], str], ...] = (
    # vllm/entrypoints/serve/utils/request_logger.py (0.32), RequestLogger.log_inputs:
    # "Request %s details: prompt: %r, prompt_token_ids: %s, prompt_embeds shape: %s."
    (re.compile(r"(Request \S+ details: prompt: ).*"), r"\1[dropped]"),
    # log_request_body: "Request %s JSON body: %s"
    (re.compile(r"(Request \S+ JSON body: ).*"), r"\1[dropped]"),
    # log_outputs: "Generated response %s%s: output: %r, finish_reason: %s"
    (re.compile(r"(Generated response \S+(?: \(streaming (?:delta|complete)\))?: output: )"
                r".*?(, finish_reason: \S*)?$"), r"\1[dropped]\2"),
    # the same at DEBUG: "Generated response %s%s details: output_token_ids: %s"
    (re.compile(r"(Generated response .*details: output_token_ids: ).*"), r"\1[dropped]"),
    # the log parser's own marker for a prompt it was told to keep
    (re.compile(r"(\bprompt: )'.*"), r"\1[dropped]"),
)
"""(what a logged request's text looks like, what replaces it), each with its source."""


def drop_prompts(text: str) -> str:
    """``text`` with a logged request's prompt or output replaced (``PROMPT_FORMS``)."""
    if "rompt" not in text and "response" not in text and "body" not in text:
        return text
    for pattern, repl in PROMPT_FORMS:
        text = pattern.sub(repl, text)
    return text


def _event(e: LogEvent, keep_prompts: bool) -> list[Any]:
    lines, headline = list(e.lines), e.headline
    if not keep_prompts:
        lines = [drop_prompts(x) for x in lines]
        headline = drop_prompts(headline)
    return [e.t_wall, e.severity, lines, headline, e.stream, e.request_id, e.stamped]


def log_record(raw: RawLog, *, keep_prompts: bool = False, keep_events: int | None = None
               ) -> dict[str, Any]:
    """The ``l`` record of one read; only the first ``keep_events`` events (all when None),
    the rest added to the drops."""
    events = raw.events if keep_events is None else raw.events[:max(0, keep_events)]
    loc = raw.location
    rec: dict[str, Any] = {
        "k": "l", "t": raw.target, "w": raw.t_wall, "m": raw.t_mono,
        "loc": {"kind": loc.kind, "label": loc.label, "path": loc.path, "fmt": loc.fmt,
                "unit": loc.unit, "error": loc.error},
        "ev": [_event(e, keep_prompts) for e in events],
    }
    dropped = int(raw.dropped or 0) + len(raw.events) - len(events)
    if dropped:
        rec["dr"] = dropped
    if raw.rotated:
        rec["rt"] = True
    if raw.error is not None:
        rec["er"] = raw.error
    return rec


def _str(v: Any) -> str | None:
    return v if isinstance(v, str) else None


def _location(obj: Any) -> LogLocation:
    if not isinstance(obj, dict):
        return LogLocation(kind=None, label="?", error="not in the recording")
    return LogLocation(kind=_str(obj.get("kind")), label=_str(obj.get("label")) or "?",
                       path=_str(obj.get("path")), fmt=_str(obj.get("fmt")),
                       unit=_str(obj.get("unit")), error=_str(obj.get("error")))


def _events(items: Any) -> list[LogEvent]:
    out: list[LogEvent] = []
    for it in items if isinstance(items, list) else []:
        try:
            t, sev, lines, headline, stream, rid, stamped = it
            out.append(LogEvent(t_wall=float(t), severity=str(sev),
                                lines=tuple(str(x) for x in lines), headline=str(headline),
                                stream=_str(stream), request_id=_str(rid),
                                stamped=bool(stamped)))
        except (TypeError, ValueError):
            continue  # a damaged event: left out
    return out


def log_item(rec: dict[str, Any]) -> RawLog:
    """The ``RawLog`` of a recorded ``l`` record."""
    dropped = rec.get("dr", 0)
    return RawLog(target=str(rec.get("t", "?")), t_wall=float(rec["w"]),
                  t_mono=float(rec.get("m", rec["w"])), location=_location(rec.get("loc")),
                  events=_events(rec.get("ev")),
                  dropped=dropped if isinstance(dropped, int) else 0,
                  rotated=bool(rec.get("rt")), error=_str(rec.get("er")))
