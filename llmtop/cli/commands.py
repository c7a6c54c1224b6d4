"""Every ``llmtop`` subcommand, in one list: the entry point dispatches on its first words
and ``llmtop --help`` names all of it (``tests/test_cli_commands.py`` keeps it equal to the
parsers the subcommands really have)."""

from __future__ import annotations

__all__ = ["COMMANDS", "SUBCOMMANDS", "listing"]

COMMANDS = ("demo serve", "demo fleet", "probe", "probe compare", "tune", "capacity list",
            "record", "replay", "export")
"""Each command line a user can start, in the order of the README's path."""

SUBCOMMANDS = tuple(dict.fromkeys(c.split()[0] for c in COMMANDS))
"""The first words ``cli/main.py`` dispatches on."""


def listing() -> str:
    """``demo serve, demo fleet, probe, ...``: the list ``llmtop --help`` prints."""
    return ", ".join(COMMANDS)
