"""``llmtop --help`` names every subcommand there is (issue 45): the list it prints is
``cli/commands.py``'s, and it must equal the commands the parsers in ``llmtop/cli`` really
define (a parser ``llmtop X`` with no required sub-choice, or each of its sub-choices)."""

from __future__ import annotations

import argparse
import importlib
import inspect
import pkgutil
import re

import pytest

import llmtop.cli
from llmtop.cli.commands import COMMANDS, SUBCOMMANDS, listing
from llmtop.cli.main import main
from llmtop.cli.monitor import build_parser


def _parsers() -> list[argparse.ArgumentParser]:
    """Every parser a ``*_parser`` function of a ``llmtop.cli`` module builds."""
    out = []
    for mod in pkgutil.iter_modules(llmtop.cli.__path__):
        m = importlib.import_module(f"llmtop.cli.{mod.name}")
        for name, fn in vars(m).items():
            if not (name.endswith("_parser") and inspect.isfunction(fn)
                    and fn.__module__ == m.__name__):
                continue
            params = list(inspect.signature(fn).parameters.values())
            if any(p.default is p.empty for p in params[1:]):
                continue  # helpers that add to a parser given to them
            if params and params[0].default is params[0].empty:
                if params[0].annotation not in ("argparse.ArgumentParser",
                                                argparse.ArgumentParser):
                    continue
                p = fn(build_parser())  # export's parser extends the monitor's
            else:
                p = fn()
            if isinstance(p, argparse.ArgumentParser):
                out.append(p)
    return out


def real_commands() -> set[str]:
    """``demo serve``, ``probe``, ...: what a user can run, read from the parsers."""
    found: set[str] = set()
    for p in _parsers():
        subs = [a for a in p._actions if isinstance(a, argparse._SubParsersAction)]
        progs = [c.prog for a in subs for c in a.choices.values()]
        if not any(a.required for a in subs):
            progs.append(p.prog)
        found |= {prog.removeprefix("llmtop").strip() for prog in progs}
    return found - {""}  # "" is the monitor itself


def help_commands() -> list[str]:
    """The subcommands ``llmtop --help`` names, read back from its text."""
    text = " ".join(build_parser().format_help().split())
    m = re.search(r"Subcommands: (.*?) \(see 'llmtop SUBCOMMAND --help'\)", text)
    assert m, text
    return [c.strip() for c in m.group(1).split(",")]


def test_help_names_every_real_subcommand():
    assert real_commands() >= {"demo serve", "demo fleet", "probe", "probe compare", "tune",
                               "capacity list", "record", "replay", "export"}
    assert sorted(help_commands()) == sorted(real_commands())
    assert help_commands() == list(COMMANDS) and listing() == ", ".join(COMMANDS)


@pytest.mark.parametrize("cmd", COMMANDS)
def test_each_listed_command_is_dispatched(cmd, capsys):
    """``llmtop CMD --help`` reaches CMD's own parser (not the monitor's TARGET)."""
    with pytest.raises(SystemExit) as exc:
        main([*cmd.split(), "--help"])
    assert exc.value.code == 0
    assert capsys.readouterr().out.startswith(f"usage: llmtop {cmd}")


def test_dispatch_words_are_the_commands_first_words():
    assert set(SUBCOMMANDS) == {c.split()[0] for c in real_commands()}
