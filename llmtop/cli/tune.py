"""``llmtop tune --plan tune.toml``: search one engine's settings for the traffic and SLOs of
the plan's ``[probe]`` table (docs/tune.md).

Prints the state file's path first; one line per level and per trial on stderr (on a
terminal under a redrawn progress panel, ``console.tune_live``); then the
ranked table and the recommended start command. Ctrl-C stops the trial in progress and its
server, keeps what is done and still writes the report (exit 130); ``--resume FILE`` runs
only what the state file lacks. Every engine runs through ``llmtop.children``.
"""

from __future__ import annotations

import argparse
import signal
import sys
from collections.abc import Sequence
from typing import Any

from llmtop.errors import ConfigError

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    """The ``llmtop tune`` argument parser."""
    p = argparse.ArgumentParser(
        prog="llmtop tune",
        description="Find the settings of one engine that serve the plan's traffic best: "
        "each configuration started once, its SLA boundary measured, its limiter named from "
        "the engine's own metrics (see docs/tune.md).")
    p.add_argument("--plan", required=True, metavar="FILE",
                   help="the tune plan: [probe] (traffic, SLOs), [tune] and [tune.space]")
    p.add_argument("--state", default=None, metavar="FILE",
                   help="state file, one line per finished trial (default: in the log folder)")
    p.add_argument("--resume", default=None, metavar="FILE",
                   help="a state file of an earlier run: run only what it lacks")
    p.add_argument("--log-dir", default=None, metavar="DIR",
                   help="where each trial's engine log goes (default "
                   "~/.local/state/llmtop/tune/<time>-<pid>)")
    p.add_argument("--json", default=None, metavar="FILE", help="write the JSON report")
    p.add_argument("--csv", default=None, metavar="FILE", help="write the table as CSV")
    p.add_argument("--html", default=None, metavar="FILE",
                   help="write one offline HTML page (table, Pareto fronts, levels)")
    p.add_argument("--api-key", default=None, help="bearer token (else $OPENAI_API_KEY ...)")
    p.add_argument("--yes", action="store_true", help="do not ask before loading a non-"
                   "loopback host")
    return p


def _options(plan: Any, api_key_flag: str | None) -> Any:
    """The probe options of the plan's ``[probe]`` table (the bake-off's reader)."""
    from llmtop.cli.bakeoff import apply_plan_options
    from llmtop.cli.probe import build_parser as probe_parser
    from llmtop.cli.probe import options_from_args, resolve_api_key
    from llmtop.loadgen.options import split_url
    from llmtop.tune.space import expand, render

    parser = probe_parser()
    ns = parser.parse_args([])
    apply_plan_options(ns, parser, plan.probe, set())
    if ns.rate is not None and ns.rate <= 0:
        raise ConfigError("plan [probe]: rate must be > 0 (the first rate level, req/s)")
    ns.url = render(plan.url, expand(plan.space)[0], 0)
    base, _host, _ep = split_url(ns.url)
    return options_from_args(ns, resolve_api_key(api_key_flag, base_url=base))


def _say(text: str) -> None:
    print(f"llmtop tune: {text}", file=sys.stderr, flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``llmtop tune``."""
    from llmtop.children import install_exit_handlers
    from llmtop.cli.bakeoff import new_monitor
    from llmtop.cli.probe import confirm_target
    from llmtop.loadgen.bakeoff import StopFlag
    from llmtop.loadgen.options import split_url
    from llmtop.tune.progress import TuneProgress
    from llmtop.tune.search import run_tune
    from llmtop.tune.space import read_tune_plan

    ns = build_parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    plan = read_tune_plan(ns.plan)
    options = _options(plan, ns.api_key)
    if ns.html:
        from llmtop.report import charts_available

        if (why := charts_available()) is not None:
            raise ConfigError(why)
    ok, msg = confirm_target(split_url(options.url)[1], yes=ns.yes,
                             interactive=sys.stdin.isatty())
    if not ok:
        raise ConfigError(msg or "aborted")
    install_exit_handlers()
    stop = StopFlag()

    def on_sigint(_sig: int, _frm: Any) -> None:
        stop.count += 1
        if stop.count == 1:
            _say("stopping the trial in progress and its server (Ctrl-C again: kill)")

    old = signal.signal(signal.SIGINT, on_sigint)
    progress = TuneProgress()
    live = None
    if sys.stderr.isatty():  # a redrawn panel; on a pipe one line a step
        from llmtop.console.tune_live import LiveTune

        live = LiveTune(progress).__enter__()
    try:
        report = run_tune(plan, options, log_dir=ns.log_dir, state_path=ns.state,
                          resume_path=ns.resume, say=_say if live is None else live.say,
                          stop=stop, new_monitor=new_monitor, progress=progress)
    finally:
        if live is not None:
            live.__exit__(None, None, None)
        signal.signal(signal.SIGINT, old)
    return _finish(report, ns, stop)


def _finish(report: dict[str, Any], ns: argparse.Namespace, stop: Any) -> int:
    from llmtop.cli.bakeoff import write_outputs
    from llmtop.cli.capacity import save_capacity
    from llmtop.console.tune_view import print_tune
    from llmtop.report import tune
    from llmtop.tune.profile import best_profile

    print_tune(report)
    write_outputs(report, ns, tune)
    save_capacity([best_profile(report)])
    print(f"state file: {report['state_file']} (resume with --resume)", file=sys.stderr)
    if stop.requested:
        return 130
    return 0 if report.get("best") else 1
