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
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import repeat
from operator import getitem, itemgetter

__all__ = ["Family", "ParseError", "Sample", "parse"]


class ParseError(ValueError):
    """The payload is not Prometheus text (HTML, garbage, truncated mid-line...)."""


@dataclass(slots=True)
class Sample:
    """One sample line."""

    name: str
    labels: dict[str, str]
    value: float


@dataclass(slots=True)
class Family:
    """One metric family."""

    name: str
    type: str
    help: str = ""
    samples: list[Sample] = field(default_factory=list)


_NAME_RE = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*\Z")
# prometheus_client checks unescaped (possibly quoted) names with "$", which also accepts one
# trailing newline (an escaped "\n"); the general path mirrors that.
_LEGACY_NAME_RE = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*$")
_LABEL_NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
_LABEL_VALUE = r'"[^"\\]*(?:\\.[^"\\]*)*"'
# Fast path: ``name{l="v",...} value [timestamp]`` with single spaces and no oddities.
_FAST_RE = re.compile(
    r"([a-zA-Z_:][a-zA-Z0-9_:]*)"
    r"(?:\{((?:"
    + _LABEL_NAME
    + "="
    + _LABEL_VALUE
    + r"(?:, *"
    + _LABEL_NAME
    + "="
    + _LABEL_VALUE
    + r")*,?)?)\})?"
    r'[ \t]+([^\s{"]+)(?:[ \t]+([^\s{"]+))?\Z',
    re.DOTALL,
)
_PAIR_RE = re.compile("(" + _LABEL_NAME + ')="([^"\\\\]*(?:\\\\.[^"\\\\]*)*)"', re.DOTALL)
_ESCAPE_RE = re.compile(r'\\[\\n"]')
_HELP_ESCAPE_RE = re.compile(r"\\[\\n]")
_ESCAPES = {"\\\\": "\\", "\\n": "\n", '\\"': '"'}
_WS = " \t\n\r\x0b\x0c"

_TYPES = frozenset(
    ("counter", "gauge", "summary", "histogram", "gaugehistogram", "unknown", "info", "stateset")
)
_ALLOWED_SUFFIXES = {
    "counter": ("",),
    "gauge": ("",),
    "summary": ("_count", "_sum", ""),
    "histogram": ("_count", "_sum", "_bucket"),
}


def _unescape(s: str) -> str:
    return _ESCAPE_RE.sub(lambda m: _ESCAPES[m.group(0)], s)


def _value(tok: str) -> float:
    if "_" in tok or tok != tok.strip():
        raise ValueError(f"invalid value {tok[:40]!r}")
    try:
        return float(tok)
    except ValueError:
        raise ValueError(f"invalid value {tok[:40]!r}") from None


# --- general (slow) path, for lines the fast regex does not take -------------------------


def _escaped(s: str, pos: int) -> bool:
    n = 0
    while pos - 1 - n >= 0 and s[pos - 1 - n] == "\\":
        n += 1
    return n % 2 == 1


def _next_unquoted(text: str, chars: str, start: int = 0) -> int:
    in_q = False
    for i in range(start, len(text)):
        c = text[i]
        if c == '"' and not _escaped(text, i):
            in_q = not in_q
        if not in_q and c in chars:
            return i
    return -1


def _unquote(text: str) -> tuple[str, bool]:
    if not text:
        return text, False
    text = text.strip()
    quoted = False
    if text[:1] == '"':
        if len(text) == 1 or text[-1] != '"':
            raise ValueError("missing close quote")
        text, quoted = text[1:-1], True
    if "\\" in text:
        text = _unescape(text)
    return text, quoted


def _split_quoted(text: str, maxsplit: int) -> list[str]:
    """Whitespace split that ignores separators inside quotes (HELP/TYPE lines)."""
    tokens = [""]
    x = 0
    while x < len(text):
        pos = _next_unquoted(text, _WS, x)
        if pos == -1:
            tokens[-1] = text[x:]
            break
        if pos == x:
            x += 1
            continue
        if maxsplit > 0 and len(tokens) > maxsplit:
            tokens[-1] = text[x:]
            break
        tokens[-1] = text[x:pos]
        x = pos + 1
        tokens.append("")
    return tokens


def _parse_labels_slow(text: str) -> dict[str, str]:
    labels: dict[str, str] = {}
    rest = text.strip()
    while rest:
        if rest[0] == ",":
            rest = rest[1:]
            if not rest:
                break
            if rest[0] == ",":
                raise ValueError("multiple commas in labels")
        pos = _next_unquoted(rest, "=,}")
        if pos >= 0 and rest[pos] == "=":
            lname = rest[:pos]
            rest = rest[pos + 1 :]
            pos = _next_unquoted(rest, ",}")
        else:
            lname = "__name__"
        if pos == -1:
            pos = len(rest)
        term = rest[:pos].strip()
        rest = rest[pos:].strip()
        if not term:
            continue
        name, quoted = _unquote(lname)
        if not quoted and not _LEGACY_NAME_RE.match(name):
            raise ValueError(f"invalid label name {name[:40]!r}")
        if term[0] != '"':
            raise ValueError("label value not quoted")
        i = 1
        while i < len(term):
            i = term.index('"', i)
            if not _escaped(term, i):
                break
            i += 1
        if i + 1 != len(term):
            raise ValueError("text after a label value")
        value, _ = _unquote(term)
        if name != "__name__" and name.startswith("__"):
            raise ValueError(f"reserved label name {name[:40]!r}")
        if not name:
            raise ValueError("empty label name")
        if name in labels:
            raise ValueError(f"duplicate label {name[:40]!r}")
        labels[name] = value
    return labels


def _value_and_ts(text: str) -> float:
    s = text.lstrip()
    sep = " " if " " in s else "\t"
    parts = [p.strip() for p in s.split(sep) if p.strip()]
    if not parts:
        return _value(s)
    v = _value(parts[0])
    if len(parts) > 1:
        _value(parts[-1])
    return v


def _parse_sample_slow(text: str) -> tuple[str, dict[str, str], float]:
    lb = _next_unquoted(text, "{")
    if lb == -1 or " # " in text[:lb]:
        end = _next_unquoted(text, " \t")
        name = text[:end].strip()
        if not _NAME_RE.match(name):
            raise ValueError(f"invalid metric name {name[:40]!r}")
        return name, {}, _value_and_ts(text[end + 1 :])
    name = text[:lb].strip()
    rb = _next_unquoted(text[lb:], "}")
    if rb == -1:
        raise ValueError("unclosed '{'")
    rb += lb
    labels = _parse_labels_slow(text[lb + 1 : rb])
    if not name:
        if "__name__" not in labels:
            raise ValueError("sample without a name")
        name = labels.pop("__name__")
    elif "__name__" in labels:
        raise ValueError("metric name given twice")
    return name, labels, _value_and_ts(text[rb + 1 :])


# --- fast path ---------------------------------------------------------------------------


def _parse_sample(line: str) -> tuple[str, dict[str, str], float]:
    m = _FAST_RE.match(line)
    if m is None:
        return _parse_sample_slow(line)
    name, inner, val, ts = m.groups()
    labels: dict[str, str] = {}
    if inner:
        for k, v in _PAIR_RE.findall(inner):
            if k in labels or k[:2] == "__":
                return _parse_sample_slow(line)
            labels[k] = _unescape(v) if "\\" in v else v
    value = _value(val)
    if ts is not None:
        _value(ts)
    return name, labels, value


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


# --- templates: a text whose only change since an earlier scrape is its values ------------


class _Recorder(_Parser):
    """A ``_Parser`` that also notes what ``_learn`` needs: the lines of the chunks it skipped,
    the sample each other line made, and every answer ``want`` gave. It reads every chunk
    line by line, without the chunk cache, so each sample is known to come from its line."""

    __slots__ = ("answers", "last", "lineno", "made", "plain", "pos", "skipped")

    def __init__(self, want: Callable[[str], bool] | None) -> None:
        super().__init__(want)
        self.answers: dict[str, bool] = {}
        if want is not None:
            answers = self.answers

            def ask(name: str) -> bool:
                got = answers[name] = bool(want(name))
                return got

            self.want = ask
        self.made: dict[int, tuple[str, dict[str, str], float]] = {}
        self.skipped: list[range] = []
        self.plain = True  # no skip decision counted names that are not plain
        self.pos = self.lineno = 0  # a text offset and its line number
        self.last: tuple[str, dict[str, str], float] | None = None

    def skippable(self, chunk: str) -> bool:
        if self.want is not None and self.name and _starts(self.allowed) is None:
            self.plain = False
        return super().skippable(chunk)

    def chunk(self, text: str, start: int, end: int) -> None:
        first = self.lineno = self.lineno + text.count("\n", self.pos, start)
        self.pos = start
        chunk = text[start:end]
        if self.skippable(chunk):
            self.skipped.append(range(first, first + chunk.count("\n")))
            return
        off = start
        for i, line in enumerate(chunk.split("\n"), first):
            samples, n0, self.last = self.samples, len(self.samples), None
            self._chunk(line, off)
            if self.last is not None:
                self.made[i] = self.last
            elif self.samples is samples and len(samples) == n0 + 1:
                s = samples[-1]
                self.made[i] = (s.name, s.labels, s.value)
            off += len(line) + 1

    def emit(self, sname: str, labels: dict[str, str], value: float) -> None:
        self.last = (sname, labels, value)
        super().emit(sname, labels, value)


_Pick = slice | itemgetter


def _picker(idx: list[int]) -> _Pick:
    """What takes the items at ``idx`` out of a list (see ``_take``): a slice when they
    follow each other, else an itemgetter."""
    if not idx:
        return slice(0, 0)
    if idx == list(range(idx[0], idx[0] + len(idx))):
        return slice(idx[0], idx[0] + len(idx))
    return itemgetter(*idx)  # two or more items: it returns a tuple


def _take(seq: list, pick: _Pick) -> list | tuple:
    return seq[pick] if isinstance(pick, slice) else pick(seq)


@dataclass(slots=True, eq=False)
class _Template:
    """How the lines of one text became its families, for texts that differ from it only in
    values: the same number of lines, the same "fixed" lines (comments, blank lines, samples
    read the slow way), each "value" line (a known series, read by ``_Parser._chunk`` as
    ``name{labels}`` + one space + a float) the same up to that space, each line of a skipped
    chunk the same up to its last space, and ``want`` giving the same answers. Such a text
    goes through ``_Parser`` exactly as the learned one did, so its families are the learned
    ones with each value line's new float: ``apply`` builds them with a few C-level passes.
    A value line that no family keeps still has its value checked, as ``_Parser`` does."""

    nlines: int
    chars: int  # the length of the learned text (what the template holds is about as much)
    want_none: bool
    asked: tuple[str, ...]  # the names want was asked about, and its answers
    answers: list[bool]
    fixed_at: _Pick  # the fixed lines, as they were
    fixed: list[str] | tuple[str, ...]
    val_at: _Pick  # the value lines, those of kept samples first (in their order)
    val_heads: tuple[str, ...]  # each one's text up to its value
    val_cuts: tuple[slice, ...]  # where each one's value starts
    skip_at: _Pick  # the lines of skipped chunks with a space, and each one's text up to
    skip_heads: tuple[str, ...]  # its last space
    names: tuple[str, ...]  # name and labels of the samples of value lines
    labels: tuple[dict[str, str], ...]
    consts: list[Sample]  # the samples of fixed lines (reused: Samples are never mutated)
    fams: list[tuple[str, str, str, _Pick]]  # name, type, help, which of value + consts

    def apply(
        self, lines: list[str], want: Callable[[str], bool] | None
    ) -> dict[str, Family] | None:
        """The families of ``lines``, or None when they do not fit this template."""
        if len(lines) != self.nlines or (want is None) != self.want_none:
            return None
        if _take(lines, self.fixed_at) != self.fixed:
            return None
        if want is not None and list(map(bool, map(want, self.asked))) != self.answers:
            return None
        vals = _take(lines, self.val_at)
        if not all(map(str.startswith, vals, self.val_heads)):
            return None
        if not all(map(str.startswith, _take(lines, self.skip_at), self.skip_heads)):
            return None
        toks: list[str] = list(map(getitem, vals, self.val_cuts))
        joined = "!".join(toks)  # _Parser._chunk's test of a known series' value, at once
        if "_" in joined or " " in joined or not joined.isprintable():
            return None
        try:
            values = list(map(float, toks))
        except ValueError:
            return None
        pool = list(map(Sample, self.names, self.labels, values))  # the kept value lines
        pool += self.consts
        return {
            name: Family(name, typ, doc, list(_take(pool, pick)))
            for name, typ, doc, pick in self.fams
        }


def _learn(lines: list[str], p: _Recorder, want: Callable[[str], bool] | None) -> _Template | None:
    """The template of a text (split into ``lines``) that ``p`` has just parsed; None when
    it has none."""
    if not p.plain:
        return None
    made = p.made
    if len({id(m[1]) for m in made.values()}) != len(made):
        return None  # one labels dict, two lines (a series repeated): no telling which
    series = _SERIES
    line_of: dict[int, tuple[int, int]] = {}  # id(labels) -> (value line, value offset)
    for i, (name, labels, value) in made.items():
        ln = lines[i]
        sp = ln.rfind(" ")
        tok = ln[sp + 1 :]
        if sp > 0 and "_" not in tok and tok.isprintable():  # as _Parser._chunk reads it
            hit = series.get(ln[:sp])
            if hit is not None and hit[0] == name and hit[1] == labels:
                try:
                    same = float(tok) == value or value != value
                except ValueError:
                    same = False
                if same:
                    line_of[id(labels)] = (i, sp + 1)
    skips = [i for r in p.skipped for i in r if lines[i].rfind(" ") > 0]
    order: list[int] = []  # value lines in the order of the samples they make
    cuts: list[int] = []
    names: list[str] = []
    labels_of: list[dict[str, str]] = []
    consts: list[Sample] = []
    picks = []
    for fam in p.out.values():
        at = []
        for s in fam.samples:
            value_line = line_of.pop(id(s.labels), None)
            if value_line is None:  # from a fixed line: the same Sample every time
                at.append(-1 - len(consts))
                consts.append(s)
            else:
                at.append(len(order))
                order.append(value_line[0])
                cuts.append(value_line[1])
                names.append(s.name)
                labels_of.append(s.labels)
        picks.append(at)
    for i, cut in sorted(line_of.values()):  # value lines no family keeps: checked only
        order.append(i)
        cuts.append(cut)
    nout = len(names)
    fixed_at = _picker(sorted(set(range(len(lines))).difference(order, skips)))
    t = _Template(
        nlines=len(lines),
        chars=sum(map(len, lines)) + len(lines),
        want_none=want is None,
        asked=tuple(p.answers),
        answers=list(p.answers.values()),
        fixed_at=fixed_at,
        fixed=_take(lines, fixed_at),
        val_at=_picker(order),
        val_heads=tuple(lines[i][:c] for i, c in zip(order, cuts, strict=True)),
        val_cuts=tuple(slice(c, None) for c in cuts),
        skip_at=_picker(skips),
        skip_heads=tuple(lines[i][: lines[i].rfind(" ") + 1] for i in skips),
        names=tuple(names),
        labels=tuple(labels_of),
        consts=consts,
        fams=[
            (f.name, f.type, f.help, _picker([k if k >= 0 else nout - 1 - k for k in at]))
            for f, at in zip(p.out.values(), picks, strict=True)
        ],
    )
    got = t.apply(lines, want)  # a safety net: it must give what p gave
    return t if got is not None and _same(got, p.out) else None


def _same(a: dict[str, Family], b: dict[str, Family]) -> bool:
    """Equal families, a NaN value equal to a NaN."""
    if list(a) != list(b):
        return False
    for fa, fb in zip(a.values(), b.values(), strict=True):
        if (fa.name, fa.type, fa.help, len(fa.samples)) != (
            fb.name, fb.type, fb.help, len(fb.samples)
        ):  # fmt: skip
            return False
        for x, y in zip(fa.samples, fb.samples, strict=True):
            if x.name != y.name or x.labels != y.labels:
                return False
            if x.value != y.value and (x.value == x.value or y.value == y.value):
                return False
    return True


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
