"""One line of Prometheus text: names, label sets, escapes and values.

The fast path is one strict regex (``_FAST_RE``) for ``name{l="v",...} value [timestamp]``;
anything unusual goes through a general path that mirrors ``prometheus_client.parser``
(quoted names, odd spacing, escapes). Pure functions and constants; ``exposition`` uses them.
"""

from __future__ import annotations

import re

__all__ = [
    "_ALLOWED_SUFFIXES", "_ESCAPES", "_FAST_RE", "_HELP_ESCAPE_RE", "_LEGACY_NAME_RE", "_NAME_RE",
    "_PAIR_RE", "_TYPES", "_WS", "_parse_sample", "_split_quoted", "_unescape", "_unquote",
    "_value",
]


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
