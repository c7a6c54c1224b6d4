"""Options anywhere: a subcommand word may follow options (``llmtop --api-key K record F``).

Also the options every watching face shares: ``add_log_options`` (``--log``, ``--no-logs``).

``argparse`` wants the subcommand word first; these helpers move it there so that every
command accepts its options before, between and after its positionals (the positionals
themselves are parsed with ``parse_intermixed_args``).
"""

from __future__ import annotations

import argparse
from collections.abc import Collection, Iterable

__all__ = ["DASH_VALUE_OPTIONS", "add_log_options", "glue_dash_values", "subcommand_first",
           "value_options"]

DASH_VALUE_OPTIONS = ("--at",)
"""Options whose value may start with a dash (``--at -2h``: two hours ago)."""


def add_log_options(p: argparse.ArgumentParser) -> None:
    """``--log TARGET=PATH`` (repeatable) and ``--no-logs``: the engines' logs (docs/logs.md)."""
    p.add_argument("--log", action="append", default=None, metavar="TARGET=PATH",
                   help="follow this file as TARGET's log (or TARGET=cmd:COMMAND: its "
                   "output); TARGET: a name, host:port or :port; repeat")
    p.add_argument("--no-logs", action="store_true",
                   help="do not find or follow the engines' logs")


def glue_dash_values(argv: list[str], options: Collection[str] = DASH_VALUE_OPTIONS) -> list[str]:
    """``--at -2h`` -> ``--at=-2h``: argparse reads ``-2h`` as an option, not as a value.

    Only a value that is a dash and a digit is glued (``-2h``, ``-90``, ``-5m``), so a
    forgotten value (``--at --once``) is still reported as missing. ``--`` ends the search.
    """
    out: list[str] = []
    i = 0
    while i < len(argv):
        tok = argv[i]
        if tok == "--":
            return out + argv[i:]
        nxt = argv[i + 1] if i + 1 < len(argv) else ""
        if tok in options and len(nxt) > 1 and nxt[0] == "-" and nxt[1].isdigit():
            out.append(f"{tok}={nxt}")
            i += 2
            continue
        out.append(tok)
        i += 1
    return out


def value_options(parsers: Iterable[argparse.ArgumentParser]) -> set[str]:
    """The option strings of ``parsers`` that take a value (``--config FILE``)."""
    return {opt for p in parsers for act in p._actions
            if act.nargs != 0 and act.option_strings for opt in act.option_strings}


def subcommand_first(argv: list[str], names: Collection[str],
                     takes_value: Collection[str]) -> list[str]:
    """``argv`` with the first positional moved to the front when it is one of ``names``.

    A token right after an option in ``takes_value`` is that option's value, never the
    subcommand; ``--`` ends the search. Anything else comes back unchanged.
    """
    if not argv or argv[0] in names or not argv[0].startswith("-"):
        return argv
    i = 0
    while i < len(argv):
        tok = argv[i]
        if tok == "--":
            break
        if not tok.startswith("-") or tok == "-":
            return [tok, *argv[:i], *argv[i + 1:]] if tok in names else argv
        i += 2 if tok in takes_value else 1
    return argv
