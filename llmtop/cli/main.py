"""Command line: ``llmtop [TARGET ...]`` (TUI), ``--once``, ``--demo`` and the subcommands
``demo serve``, ``demo fleet``, ``probe``, ``tune``, ``record``, ``replay``, ``export`` and
``capacity``.

The entry point only dispatches: the monitor's options live in ``cli/monitor.py``, each
subcommand in its own module; every one of them looks down, none back here. No textual or
rich at import time; each mode imports its own layer lazily, so ``llmtop --once --json``
stays light.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from llmtop.cli.commands import SUBCOMMANDS
from llmtop.cli.monitor import build_parser
from llmtop.cli.monitor import run_monitor as _run_monitor
from llmtop.errors import LlmtopError

__all__ = ["build_parser", "main"]


def _subcommand_first(argv: list[str]) -> list[str]:
    """``llmtop --api-key K record F`` -> ``llmtop record --api-key K F``."""
    if not argv or not argv[0].startswith("-") or not any(a in SUBCOMMANDS for a in argv):
        return argv
    from llmtop.cli import demo, export, probe, record, tune
    from llmtop.cli.argv import subcommand_first, value_options

    demo_parser = demo.build_parser()
    demo_sub = next(a for a in demo_parser._actions
                    if isinstance(a, argparse._SubParsersAction))
    parsers = [build_parser(), probe.build_parser(), tune.build_parser(),
               record._record_parser(),
               record._replay_parser(), export.build_parser(build_parser()),
               *demo_sub.choices.values()]
    return subcommand_first(argv, SUBCOMMANDS, value_options(parsers))


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``llmtop`` command."""
    from llmtop.children import install_exit_handlers

    install_exit_handlers()  # SIGHUP / SIGTERM end every child process and temp folder
    from llmtop.cli.argv import glue_dash_values

    argv = glue_dash_values(_subcommand_first(list(sys.argv[1:] if argv is None else argv)))
    try:
        if argv and argv[0] in SUBCOMMANDS:
            cmd, rest = argv[0], argv[1:]
            if cmd == "demo":
                from llmtop.cli.demo import main as demo_main

                return demo_main(rest)
            if cmd == "probe":
                from llmtop.cli.probe import main as probe_main

                return probe_main(rest)
            if cmd == "capacity":
                from llmtop.cli.capacity import main as capacity_main

                return capacity_main(rest)
            if cmd == "tune":
                from llmtop.cli.tune import main as tune_main

                return tune_main(rest)
            if cmd == "export":
                from llmtop.cli.export import build_parser as export_parser
                from llmtop.cli.export import main as export_main

                return export_main(rest, export_parser(build_parser()))
            from llmtop.cli.record import record_main, replay_main

            return record_main(rest) if cmd == "record" else replay_main(rest)
        return _run_monitor(build_parser().parse_intermixed_args(argv))
    except LlmtopError as exc:
        print(f"llmtop: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except OSError as exc:  # a file that cannot be read or written: say which, no traceback
        if os.environ.get("LLMTOP_DEBUG"):
            raise
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"llmtop: {where}{exc.strerror or exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # never show a traceback unless asked
        if os.environ.get("LLMTOP_DEBUG"):
            raise
        print(f"llmtop: internal error: {type(exc).__name__}: {exc} "
              "(set LLMTOP_DEBUG=1 for a traceback)", file=sys.stderr)
        return 1
