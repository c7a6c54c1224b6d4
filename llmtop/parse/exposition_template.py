"""Templates: a text whose only change since an earlier scrape is its values is read by
a template learned from that scrape (a few C-level passes over all lines, only the values
converted). ``_Recorder`` notes what learning needs while the parser reads a text; ``_learn``
builds the ``_Template``; ``_same`` is the safety net that compares its result.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from operator import getitem, itemgetter

from llmtop.parse.exposition_parser import _SERIES, _Parser, _starts
from llmtop.parse.exposition_types import Family, Sample

__all__ = ["_Recorder", "_Template", "_learn", "_same"]


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
