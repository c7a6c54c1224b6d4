"""Exact, compact deltas between two scrape bodies of the same target.

Most of a Prometheus scrape does not change from one second to the next: the same lines
in the same order, with a few values changed. ``encode`` returns only the changed value
tokens, ``decode`` rebuilds the new body byte for byte. When the line structure changed
(a new series, a restart, a JSON body) ``encode`` returns None and the caller stores the
full body instead.

Delta grammar: entries separated by spaces; each entry is ``<gap><op><text>[*<n>]`` where
``gap`` is the line-index distance from the previous entry, ``op`` is ``+`` (an integral
numeric delta, rendered in the old token's style) or ``=`` (the literal new token), and
``*<n>`` applies the same numeric delta to the ``n`` lines right after it as well (the
buckets of a cumulative histogram above an observation all move by the same amount).
"""

from __future__ import annotations

import re

__all__ = ["decode", "encode", "split_body"]

_INT = re.compile(r"-?\d+\Z")


def split_body(body: str) -> list[str]:
    """Lines of a body; ``"\\n".join(split_body(b)) == b``."""
    return body.split("\n")


def _key_value(line: str) -> tuple[str, str | None]:
    """(structure key, value token) of one line; comments have no value token."""
    if not line or line[0] == "#":
        return line, None
    head, sep, tail = line.rpartition(" ")
    if not sep:
        return line, None
    return head, tail


def _render(value: float, like: str) -> str:
    """Render ``value`` in the style of the token ``like`` (int or Python float repr)."""
    if _INT.match(like):
        return str(int(value))
    return repr(value)


def _numeric_delta(old: str, new: str) -> int | None:
    """An integral delta that renders ``new`` exactly from ``old``, or None."""
    try:
        a, b = float(old), float(new)
    except ValueError:
        return None
    d = b - a
    if d != d or d in (float("inf"), float("-inf")) or d != int(d) or abs(d) > 2**53:
        return None
    di = int(d)
    try:
        return di if _render(a + di, old) == new else None
    except (ValueError, OverflowError):
        return None


def encode(prev: list[str], new: list[str]) -> str | None:
    """Delta from ``prev`` lines to ``new`` lines, or None when the structure differs."""
    if len(prev) != len(new):
        return None
    out: list[str] = []
    last = 0
    run_d: int | None = None
    run_end = -2
    run_n = 0
    for i, (a, b) in enumerate(zip(prev, new, strict=True)):
        if a == b:
            continue
        ka, va = _key_value(a)
        kb, vb = _key_value(b)
        if ka != kb or va is None or vb is None:
            return None
        d = _numeric_delta(va, vb)
        if d is not None and d == run_d and i == run_end + 1:
            run_n += 1
            run_end = i
            out[-1] = f"{out[-1].split('*')[0]}*{run_n}"
            last = i
            continue
        gap = i - last
        last = i
        if d is not None:
            out.append(f"{gap}+{d}")
            run_d, run_end, run_n = d, i, 0
        else:
            run_d = None
            if " " in vb:
                return None
            out.append(f"{gap}={vb}")
    return " ".join(out)


def decode(prev: list[str], delta: str) -> list[str]:
    """Apply a delta produced by ``encode`` to ``prev`` lines (returns a new list)."""
    lines = list(prev)
    if not delta:
        return lines
    idx = 0
    for entry in delta.split(" "):
        j = 0
        while entry[j].isdigit():
            j += 1
        idx += int(entry[:j])
        op, text = entry[j], entry[j + 1 :]
        repeat = 0
        if op == "+" and "*" in text:
            text, n = text.split("*")
            repeat = int(n)
        for k in range(idx, idx + repeat + 1):
            head, _, old = lines[k].rpartition(" ")
            new = _render(float(old) + int(text), old) if op == "+" else text
            lines[k] = f"{head} {new}"
        idx += repeat
    return lines
