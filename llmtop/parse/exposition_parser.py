"""The parser proper: a state machine fed by comment lines and chunks of sample lines,
with the caches that make a repeated scrape cheap (known series, HELP/TYPE lines, unchanged
chunks). ``exposition.parse`` drives it.
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import repeat

from llmtop.parse.exposition_lines import (
    _ALLOWED_SUFFIXES,
    _ESCAPES,
    _FAST_RE,
    _HELP_ESCAPE_RE,
    _LEGACY_NAME_RE,
    _NAME_RE,
    _PAIR_RE,
    _TYPES,
    _WS,
    _parse_sample,
    _split_quoted,
    _unquote,
    _value,
)
from llmtop.parse.exposition_types import Family, Sample

__all__ = [
    "_CHUNKS", "_HEADS", "_SERIES", "_SERIES_MAX", "_ChunkCache", "_LineError", "_Parser",
    "_looks_like_json",
]


_SERIES: dict[str, tuple[str, dict[str, str]]] = {}
"""``name{labels}`` text of a sample line -> (name, labels), kept across scrapes: a series
is read with the regex once, later lines only convert the value. The labels dict is shared
by every sample of that series (never mutated). Cleared when it reaches ``_SERIES_MAX``."""
_SERIES_MAX = 50_000


class _ChunkCache:
    """Samples of chunks parsed before, by (family, type, chunk text): from one scrape to
    the next most families do not change at all, and an unchanged chunk costs one hash.

    Two generations bounded by the text they hold: when the newer one passes ``half``
    characters it becomes the older one (a hit there moves up), so chunks that keep
    changing age out and memory stays below about twice ``half``."""

    __slots__ = ("half", "new", "new_chars", "old")

    def __init__(self, half: int) -> None:
        self.half = half
        self.new: dict[tuple[str, str, str], tuple[Sample, ...]] = {}
        self.old: dict[tuple[str, str, str], tuple[Sample, ...]] = {}
        self.new_chars = 0

    def clear(self) -> None:
        self.new, self.old, self.new_chars = {}, {}, 0

    def get(self, key: tuple[str, str, str]) -> tuple[Sample, ...] | None:
        hit = self.new.get(key)
        if hit is None:
            hit = self.old.get(key)
            if hit is not None:
                self.put(key, hit)
        return hit

    def put(self, key: tuple[str, str, str], samples: tuple[Sample, ...]) -> None:
        if self.new_chars >= self.half:
            self.old, self.new, self.new_chars = self.new, {}, 0
        self.new[key] = samples
        self.new_chars += len(key[2])


_CHUNKS = _ChunkCache(1 << 20)
"""Parsed chunks of recent scrapes (Samples are never mutated once made)."""
_HEADS: dict[str, tuple[str, str, str]] = {}
"""A plain ``# HELP``/``# TYPE`` line -> its (kind, name, rest), kept across scrapes."""
_ALLOWED: dict[tuple[str, str], tuple[str, ...]] = {}
"""(family, type) -> the sample names it owns."""


def _allowed(cand: str, typ: str) -> tuple[str, ...]:
    got = _ALLOWED.get((cand, typ))
    if got is None:
        if len(_ALLOWED) >= _SERIES_MAX:
            _ALLOWED.clear()
        got = _ALLOWED[(cand, typ)] = tuple(cand + s for s in _ALLOWED_SUFFIXES.get(typ, ("",)))
    return got


_STARTS: dict[tuple[str, ...], tuple[str, ...] | None] = {}
"""Sample names -> how their lines start (``name{``, ``name ``); None when a name is not a
plain metric name (a quoted HELP/TYPE name may hold anything)."""


def _starts(allowed: tuple[str, ...]) -> tuple[str, ...] | None:
    if allowed not in _STARTS:
        if len(_STARTS) >= _SERIES_MAX:
            _STARTS.clear()
        plain = bool(allowed) and all(_NAME_RE.match(a) for a in allowed)
        _STARTS[allowed] = tuple(a + c for a in allowed for c in "{ ") if plain else None
    return _STARTS[allowed]


def _looks_like_json(text: str) -> bool:
    return text.lstrip()[:1] in ("[", "{")


class _LineError(ValueError):
    def __init__(self, offset: int, msg: str) -> None:
        super().__init__(msg)
        self.offset = offset


class _Parser:
    """The state machine of ``prometheus_client.parser``, fed by comment lines and by chunks
    of sample lines (the text between two comment lines)."""

    __slots__ = ("allowed", "doc", "name", "out", "samples", "typ", "want", "wanted")

    def __init__(self, want: Callable[[str], bool] | None) -> None:
        self.want = want
        self.out: dict[str, Family] = {}
        self.name = ""  # current family as declared by HELP/TYPE ("" = none)
        self.doc = ""
        self.typ = "unknown"
        self.samples: list[Sample] = []
        self.allowed: tuple[str, ...] = ()
        self.wanted: bool | None = None  # decision for the current family, made lazily

    def flush(self) -> None:
        fname, samples = self.name, self.samples
        if not fname:
            return
        counter = self.typ == "counter"
        if counter and fname.endswith("_total"):
            fname, counter = fname[:-6], False
        if self.want is not None and not (
            self.want(fname) if self.wanted is None else self.wanted  # decided by skippable
        ):
            return
        if counter:  # new Samples: the old ones may be shared through the chunk cache
            samples = [Sample(s.name + "_total", s.labels, s.value) for s in samples]
        fam = self.out.get(fname)
        if fam is None:
            self.out[fname] = Family(fname, self.typ, self.doc, samples)
        else:
            fam.samples.extend(samples)

    def comment(self, line: str) -> None:
        if line.isascii() and '"' not in line:
            parts = line.split(None, 3)
        else:
            parts = _split_quoted(line, 3)
        if len(parts) < 2:
            return
        kind = parts[1]
        cand = ""
        if len(parts) > 2:
            if kind != "TYPE" and kind != "HELP":
                return
            cand, quoted = _unquote(parts[2])
            if not quoted and not _LEGACY_NAME_RE.match(cand):
                raise ValueError(f"invalid metric name {cand[:40]!r}")
        if kind == "HELP":
            if cand != self.name:
                self.flush()
                self.name, self.typ, self.samples, self.allowed = cand, "unknown", [], (cand,)
                self.wanted = None
            self.doc = (
                _HELP_ESCAPE_RE.sub(lambda m: _ESCAPES[m.group(0)], parts[3])
                if len(parts) == 4
                else ""
            )
        elif kind == "TYPE":
            if len(parts) < 4:
                raise ValueError("TYPE line without a type")
            if cand != self.name:
                self.flush()
                self.name, self.doc, self.samples = cand, "", []
            typ = "unknown" if parts[3] == "untyped" else parts[3]
            if typ not in _TYPES:
                raise ValueError(f"invalid metric type {typ[:40]!r}")
            self.typ = typ
            self.allowed = _allowed(cand, typ)
            self.wanted = None

    def help_type(self, kind: str, cand: str, rest: str) -> None:
        """``# HELP cand rest`` or ``# TYPE cand rest`` with a plain name (the common case)."""
        if kind == "HELP":
            if cand != self.name:
                self.flush()
                self.name, self.typ, self.samples, self.allowed = cand, "unknown", [], (cand,)
                self.wanted = None
            if "\\" in rest:
                rest = _HELP_ESCAPE_RE.sub(lambda m: _ESCAPES[m.group(0)], rest)
            self.doc = rest
            return
        if not rest:
            raise ValueError("TYPE line without a type")
        if cand != self.name:
            self.flush()
            self.name, self.doc, self.samples = cand, "", []
        typ = "unknown" if rest == "untyped" else rest
        if typ not in _TYPES:
            raise ValueError(f"invalid metric type {typ[:40]!r}")
        self.typ = typ
        self.allowed = _allowed(cand, typ)
        self.wanted = None

    def skippable(self, chunk: str) -> bool:
        """True when the current family is not wanted and every line of ``chunk`` is one of
        its samples (so no line would start a family of its own)."""
        if self.want is None or not self.name:
            return False
        if self.wanted is None:
            fname = self.name
            if self.typ == "counter" and fname.endswith("_total"):
                fname = fname[:-6]
            self.wanted = self.want(fname)
        if self.wanted:
            return False
        starts = _starts(self.allowed)
        if starts is not None:  # plain names: one line cannot start two ways
            lines = chunk.split("\n")
            if not lines[-1]:
                lines.pop()
            return all(map(str.startswith, lines, repeat(starts)))
        nlines = chunk.count("\n") + (chunk[-1:] != "\n")
        c = "\n" + chunk
        hits = 0
        for a in self.allowed:
            hits += c.count("\n" + a + "{") + c.count("\n" + a + " ")
        return hits == nlines

    def chunk(self, text: str, start: int, end: int) -> None:
        chunk = text[start:end]
        if self.skippable(chunk):
            return
        key = (self.name, self.typ, chunk)
        hit = _CHUNKS.get(key)
        if hit is not None:
            self.samples.extend(hit)
            return
        family, n0 = self.samples, len(self.samples)
        self._chunk(chunk, start)
        if self.samples is family and self.name == key[0]:  # every line went to this family
            _CHUNKS.put(key, tuple(family[n0:]))

    def _chunk(self, chunk: str, start: int) -> None:
        lines = chunk.split("\n")
        fast = _FAST_RE.match
        pairs_of = _PAIR_RE.findall
        le_cache: dict[str, dict[str, str]] = {}
        seen = _SERIES
        allowed = self.allowed
        samples = self.samples
        i = 0
        try:
            for i, raw in enumerate(lines):  # noqa: B007 (i is read on error)
                # A series seen before (this scrape or an earlier one): ``name{labels}``, one
                # space, then a value token without whitespace; no regex needed.
                sp = raw.rfind(" ")
                if sp > 0:
                    hit = seen.get(raw[:sp])
                    if hit is not None:
                        val = raw[sp + 1 :]
                        if "_" not in val and val.isprintable():
                            try:
                                value = float(val)
                            except ValueError:
                                pass
                            else:
                                name = hit[0]
                                if name in allowed:
                                    samples.append(Sample(name, hit[1], value))
                                else:
                                    self.emit(name, hit[1], value)
                                    allowed, samples = self.allowed, self.samples
                                continue
                m = fast(raw)
                if m is None:
                    line = raw.strip()
                    if line:
                        if line[0] == "#":
                            self.comment(line)
                        else:
                            self.emit(*_parse_sample(line))
                        allowed, samples = self.allowed, self.samples
                    continue
                name, inner, val, ts = m.groups()
                if inner:
                    if "\\" in inner or "__" in inner:
                        self.emit(*_parse_sample(raw))
                        allowed, samples = self.allowed, self.samples
                        continue
                    # Bucket lines of one series differ only in ``le``: reuse their labels.
                    j = inner.find('le="')
                    # a label of its own (not ``quantile="``), outside any value
                    if (
                        j >= 0
                        and (j == 0 or inner[j - 1] in ", ")
                        and not inner.count('"', 0, j) % 2
                    ):
                        q = inner.find('"', j + 4)
                        base = inner[:j] + inner[q + 1 :]
                        cached = le_cache.get(base)
                        if cached is not None:
                            labels = cached.copy()
                            labels["le"] = inner[j + 4 : q]
                        else:
                            pairs = pairs_of(inner)
                            labels = dict(pairs)
                            if len(labels) != len(pairs):
                                raise ValueError("duplicate label name")
                            le_cache[base] = labels
                    else:
                        pairs = pairs_of(inner)
                        labels = dict(pairs)
                        if len(labels) != len(pairs):
                            raise ValueError("duplicate label name")
                else:
                    labels = {}
                if "_" in val:
                    raise ValueError(f"invalid value {val[:40]!r}")
                value = float(val)
                if ts is None:
                    v0 = m.start(3)
                    if raw[v0 - 1] == " " and raw[v0 - 2] not in _WS:
                        if len(seen) >= _SERIES_MAX:
                            seen.clear()
                        seen[raw[: v0 - 1]] = (name, labels)
                else:
                    _value(ts)
                if name in allowed:
                    samples.append(Sample(name, labels, value))
                else:
                    self.emit(name, labels, value)
                    allowed, samples = self.allowed, self.samples
        except (ValueError, IndexError) as exc:
            off = start + sum(len(x) + 1 for x in lines[:i])
            raise _LineError(off, str(exc)) from None

    def emit(self, sname: str, labels: dict[str, str], value: float) -> None:
        if sname in self.allowed:
            self.samples.append(Sample(sname, labels, value))
            return
        self.flush()
        self.name, self.doc, self.typ, self.samples, self.allowed = "", "", "unknown", [], ()
        self.wanted = None
        if self.want is None or self.want(sname):
            fam = self.out.get(sname)
            if fam is None:
                self.out[sname] = Family(sname, "unknown", "", [Sample(sname, labels, value)])
            else:
                fam.samples.append(Sample(sname, labels, value))
