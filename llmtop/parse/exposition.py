"""Prometheus text exposition -> families. Pure: no I/O, no clock.

llmtop's own parser: the same families and samples as ``prometheus_client.parser`` (a counter
family drops its ``_total``; a counter declared without ``_total``, as TGI and Triton's C++
exporters do, gets ``_total`` added to its sample names; histogram samples keep their
``_bucket``/``_sum``/``_count`` names; a sample outside the current family becomes a family of
its own; untyped families have type ``unknown``), several times faster on a vLLM scrape.

How: comment lines are found with ``str.find`` and read without splitting in the common
``# HELP name doc`` / ``# TYPE name type`` shape; the sample lines between two comment lines
are one chunk. A chunk of a family ``want`` rejects is skipped whole when a few ``str.count``
calls show every line is one of that family's samples (so none would start a family of its
own); other lines go through one strict regex (the bucket lines of a series reuse its labels,
only ``le`` differs; a series already seen, in this scrape or an earlier one, is looked up by
its ``name{labels}`` text and only its value converted), and anything unusual through a general
path that mirrors ``prometheus_client`` (tests compare both on every fixture, generated and
mutated inputs).
A leading UTF-8 byte-order mark is ignored.

In the steady state (the same target scraped again and again, only values changing) most texts
are read by a *template* instead: learned from an earlier text with the same structure (see
``_Template``), it checks the new text's lines with a few C-level passes (``str.startswith``
over all lines at once) and converts only the values. Anything that does not fit falls back
to the parser above, so results and errors stay the same.

Errors raise ``ParseError`` with a short reason: ``empty body``, ``HTML page, not metrics``,
``JSON, not Prometheus text``, ``truncated body`` (no final newline and the last line cut) or
``line N: ...``.

Where the parts live: ``exposition_types`` (``Family``, ``Sample``, ``ParseError``),
``exposition_lines`` (the grammar of one line), ``exposition_parser`` (the state machine and
its caches), ``exposition_template`` (learning and applying templates); this module keeps
``parse`` and the per-shape template slots, and re-exports the public names.
"""

from __future__ import annotations

from collections.abc import Callable

from llmtop.parse.exposition_lines import _NAME_RE, _WS, _parse_sample
from llmtop.parse.exposition_parser import _CHUNKS as _CHUNKS  # re-exported: tests, benchmarks
from llmtop.parse.exposition_parser import (
    _HEADS,
    _SERIES_MAX,
    _LineError,
    _looks_like_json,
    _Parser,
)
from llmtop.parse.exposition_parser import _SERIES as _SERIES
from llmtop.parse.exposition_parser import _ChunkCache as _ChunkCache
from llmtop.parse.exposition_template import _learn, _Recorder
from llmtop.parse.exposition_template import _Template as _Template
from llmtop.parse.exposition_types import Family, ParseError, Sample

__all__ = ["Family", "ParseError", "Sample", "parse"]


class _Slot:
    """The templates of texts with one (line count, first line), the last used first. One is
    learned the second time a key is seen (a one-off text costs nothing), then on a miss
    after ``wait`` parses: a wait that grows while learned templates go unused (a text
    whose fixed lines change every scrape)."""

    __slots__ = ("backoff", "templates", "used", "wait")

    def __init__(self) -> None:
        self.templates: list[_Template] = []
        self.wait, self.backoff, self.used = 1, 0, True


_SLOTS: dict[tuple[int, str], _Slot] = {}
"""(line count, first line) -> its ``_Slot``, kept across scrapes."""
_SLOTS_MAX = 64  # 0 turns templates off
_SLOT_TEMPLATES = 4
_BACKOFF_MAX = 16
_TEMPLATE_CHARS = 1 << 23
"""The most text (in characters) the templates together stand for; about as much memory."""


def _slot(key: tuple[int, str]) -> _Slot:
    slot = _SLOTS.get(key)
    if slot is None:
        if len(_SLOTS) >= _SLOTS_MAX:  # drop the keys without templates, else all
            for k, v in list(_SLOTS.items()):  # a copy: a parse in a thread may add keys
                if not v.templates:
                    _SLOTS.pop(k, None)
            if len(_SLOTS) >= _SLOTS_MAX:
                _SLOTS.clear()
        slot = _SLOTS[key] = _Slot()
    return slot


def _keep(slot: _Slot, t: _Template | None) -> None:
    """Note a learning attempt in ``slot`` (``t``: what it learned)."""
    slot.backoff = 0 if slot.used else min(2 * slot.backoff + 1, _BACKOFF_MAX)
    slot.wait, slot.used = slot.backoff, False
    if t is None or t.chars > _TEMPLATE_CHARS // 4:
        return
    slots = list(_SLOTS.values())  # a copy: a parse in a thread may add keys
    if sum(u.chars for v in slots for u in v.templates) + t.chars > _TEMPLATE_CHARS:
        for v in slots:
            v.templates = []
    slot.templates = [t, *slot.templates[: _SLOT_TEMPLATES - 1]]


def parse(text: str, want: Callable[[str], bool] | None = None) -> dict[str, Family]:
    """Parse exposition text. ``want(family_name)`` may skip families (None keeps all).

    ``family_name`` is the name the family will have in the result (a counter without its
    ``_total``). Lines of skipped families are matched by name only, not validated.
    """
    if text[:1] == "\ufeff":  # a UTF-8 byte-order mark is not content
        text = text[1:]
    if not text or text.isspace():
        raise ParseError("empty body")
    if text.lstrip()[:1] == "<":
        raise ParseError("HTML page, not metrics")
    ends_nl = text.endswith("\n")
    slot = None
    if ends_nl and _SLOTS_MAX:  # a text learned before, values aside: read by its template
        lines = text.split("\n")
        slot = _slot((len(lines), lines[0]))
        templates = slot.templates
        for t in templates:
            out = t.apply(lines, want)
            if out is not None:
                slot.used = True
                if t is not templates[0]:  # the one used last goes first
                    slot.templates = [t, *(u for u in templates if u is not t)]
                return out
        if slot.wait > 0:
            slot.wait -= 1
            slot = None
    last_start = text.rfind("\n") + 1
    p = _Parser(want) if slot is None else _Recorder(want)
    n = len(text)
    pos = 0
    heads = _HEADS
    try:
        if not ends_nl:
            tail = text[last_start:].strip()
            if tail and tail[0] != "#":
                try:
                    _parse_sample(tail)  # a cut last line, even in a skipped family
                except (ValueError, IndexError) as exc:
                    raise _LineError(last_start, str(exc)) from None
        # Comment lines start at column 0 with "#"; the text between them is sample lines.
        c = 0 if text[0] == "#" else (text.find("\n#") + 1 or -1)  # -1: no more
        while c >= 0:
            if c > pos:
                p.chunk(text, pos, c)
            e = text.find("\n", c)
            if e < 0:
                e = n
            line = text[c:e]
            try:
                known = heads.get(line)
                if known is not None:
                    p.help_type(*known)
                elif line[:7] in ("# HELP ", "# TYPE "):
                    rest = line[7:]
                    sp = rest.find(" ")
                    name = rest if sp < 0 else rest[:sp]
                    if name and "\r" not in line and (name == p.name or _NAME_RE.match(name)):
                        doc = "" if sp < 0 else rest[sp + 1 :].lstrip(_WS).rstrip()
                        p.help_type(line[2:6], name, doc)
                        if _NAME_RE.match(name):  # the same line reads the same next time
                            if len(heads) >= _SERIES_MAX:
                                heads.clear()
                            heads[line] = (line[2:6], name, doc)
                    else:
                        p.comment(line.strip())
                else:
                    p.comment(line.strip())
            except (ValueError, IndexError) as exc:
                raise _LineError(c, str(exc)) from None
            pos = e + 1
            c = (text.find("\n#", e) + 1 or -1) if e < n else -1
        if pos < n:
            p.chunk(text, pos, n)
    except _LineError as exc:
        lineno = text.count("\n", 0, exc.offset) + 1
        if (lineno == 1 or not p.out) and _looks_like_json(text):
            raise ParseError("JSON, not Prometheus text") from None
        if exc.offset >= last_start and not ends_nl:
            raise ParseError("truncated body") from None
        raise ParseError(f"line {lineno}: {str(exc)[:120] or 'invalid line'}") from None
    p.flush()
    if isinstance(p, _Recorder) and slot is not None:
        _keep(slot, _learn(lines, p, want))
    return p.out
