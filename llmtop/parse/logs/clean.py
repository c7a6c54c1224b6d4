"""One raw log line made safe to keep and show: decoded, control characters out, bounded.

- Invalid UTF-8 (bytes, or a str decoded with ``surrogateescape``) becomes U+FFFD.
- Terminal escape sequences (colours, cursor moves) and control characters other than tab are
  removed; a trailing carriage return is reported (vLLM ends every line but the last of a
  multi-line record with one); a carriage return inside a line keeps what a terminal would
  show (the text after the last one: progress bars).
- A line longer than ``LINE_MAX`` characters is cut at a separator before the bound (so no
  half secret is kept) and marked.
"""

from __future__ import annotations

import re

__all__ = ["LINE_MAX", "clean", "cut", "decode"]

LINE_MAX = 8192
"""Characters kept of one line; the rest is cut with a marker."""

_ESCAPES = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[@-Z\\-_])")
_CONTROLS = re.compile(r"[\x00-\x08\x0a-\x1f\x7f-\x9f]")
_SEPARATORS = " \t,;:=&\"'()[]{}<>"
_SEPARATOR_BACKOFF = 256


def decode(raw: str | bytes) -> str:
    """Text of one raw line: invalid UTF-8 (or escaped surrogates) replaced by U+FFFD."""
    if isinstance(raw, bytes):
        return raw.decode("utf-8", "replace")
    try:
        raw.encode("utf-8")
    except UnicodeEncodeError:
        return raw.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    return raw


def cut(text: str, limit: int = LINE_MAX, total: int | None = None) -> str:
    """``text`` bounded to about ``limit`` characters, cut at a separator and marked
    (``total``: the length of the line ``text`` was taken from, when longer)."""
    total = max(total or 0, len(text))
    if total <= limit:
        return text
    head = text[:limit]
    floor = max(0, limit - _SEPARATOR_BACKOFF)
    at = max(head.rfind(c, floor) for c in _SEPARATORS)
    head = head[: at + 1] if at >= 0 else head[:floor]
    return f"{head} [… {total - len(head)} characters cut]"


def clean(raw: str | bytes, limit: int = LINE_MAX, total: int | None = None) -> tuple[str, bool]:
    """``(text, more)``: the line cleaned and bounded; ``more`` when it ended in ``\\r``
    (``total``: the length of the line ``raw`` was taken from, when it was cut before)."""
    text = decode(raw).rstrip("\n")
    more = text.endswith("\r")
    if more:
        text = text.rstrip("\r")
    unseen = max(0, (total or 0) - len(text))  # cut off before this call
    if len(text) > 2 * limit:  # a huge line: only its head is cleaned (and then kept)
        unseen += len(text) - 2 * limit
        text = text[: 2 * limit]
    if "\x1b" in text:
        text = _ESCAPES.sub("", text)
    if "\r" in text:
        parts = [p for p in text.split("\r") if p.strip()]
        text = parts[-1] if parts else ""
    if _CONTROLS.search(text):
        text = _CONTROLS.sub("", text)
    return cut(text, limit, len(text) + unseen if unseen else None), more
