"""``llmtop probe URL1 URL2 ...`` / ``llmtop probe --plan FILE``: the bake-off's face.

Options come from the command line, then the plan's ``[probe]`` table for any option not
given there. Asks once per non-loopback host (``--yes`` skips). Ctrl-C stops the engine in
progress (and the engine llmtop started), skips the rest and still writes the partial
report; a second Ctrl-C kills the probe worker. SIGTERM / SIGHUP stop every engine llmtop
started (``llmtop.children``), and so does llmtop's own death.
"""

from __future__ import annotations

import argparse
import signal
import sys
from collections.abc import Sequence
from typing import Any

from llmtop.errors import ConfigError

__all__ = ["apply_plan_options", "given_on_command_line", "load_plan", "new_monitor", "run_plan",
           "write_outputs"]

_NOT_IN_PLAN = {"url", "plan", "yes", "api_key", "json", "csv", "html", "svg", "md"}


def given_on_command_line(parser: argparse.ArgumentParser, argv: Sequence[str]) -> set[str]:
    """Destinations of the options that ``argv`` sets (``--x V`` or ``--x=V``)."""
    opts = {s: a.dest for a in parser._actions for s in a.option_strings}
    out = set()
    for tok in argv:
        if tok == "--":
            break
        name = tok.split("=", 1)[0]
        if name in opts:
            out.add(opts[name])
    return out


def apply_plan_options(ns: argparse.Namespace, parser: argparse.ArgumentParser,
                       probe: dict[str, Any], given: set[str]) -> None:
    """Fill ``ns`` from the plan's ``[probe]`` table where the command line said nothing."""
    known = {a.dest: a for a in parser._actions if a.option_strings}
    for key, value in probe.items():
        if key in _NOT_IN_PLAN or key not in known:
            raise ConfigError(f"plan [probe]: unknown or not allowed option {key!r} "
                              "(use the command-line names with _ for -, e.g. output_tokens)")
        if key in given:
            continue
        act = known.get(key)
        if key in ("levels", "cpu_pin") and isinstance(value, list):
            value = ",".join(str(v) for v in value)
        elif key == "cpu_pin" and isinstance(value, int) and not isinstance(value, bool):
            value = str(value)  # cpu_pin = 1, = [1] or = "1" (the load generator's CPUs)
        elif act is not None and act.type is not None and value is not None:
            try:
                value = act.type(value)
            except (TypeError, ValueError):
                raise ConfigError(f"plan [probe]: {key} = {value!r} is not valid") from None
        elif act is not None and act.const is True and not isinstance(value, bool):
            raise ConfigError(f"plan [probe]: {key} must be true or false")
        setattr(ns, key, value)


def _check_writers(ns: argparse.Namespace) -> None:
    """Fail before any load when an output cannot be written."""
    if ns.svg or ns.md:
        raise ConfigError("a bake-off writes --json, --csv and --html (--md and --svg are "
                          "for a single probe)")
    if ns.html:
        from llmtop.report import charts_available

        if (why := charts_available()) is not None:
            raise ConfigError(why)


def _live_drive(spec: Any, options: Any, handle: Any, stop: Any) -> None:
    """The probe's own live display, one engine at a time."""
    import time

    from llmtop.console.probe_view import ProbeLiveView

    view = ProbeLiveView(options)
    t_stop = None
    with view.live():
        view.note(f"bake-off engine {spec.name}")
        while not handle.finished:
            if stop.count >= 1 and t_stop is None:
                t_stop = time.monotonic()
                handle.stop()
                view.note("stopping: cancelling requests in flight…")
            if stop.count >= 2 or (t_stop is not None and time.monotonic() - t_stop > 10):
                handle.kill()
                break
            for ev in handle.wait(0.1):
                view.update(ev)


def new_monitor(config: Any) -> Any:
    """The monitor that reads an engine's own metrics (and the GPUs) during its run."""
    from llmtop.monitor import Monitor

    return Monitor.from_config(config)


def _say(text: str) -> None:
    print(f"llmtop probe: {text}", file=sys.stderr, flush=True)


def load_plan(ns: argparse.Namespace, parser: argparse.ArgumentParser,
              argv: Sequence[str]) -> Any:
    """The engines (``--plan`` or the URLs), with ``[probe]`` applied to ``ns``; checks the
    outputs and the bake-off's limits before anything is sent."""
    from llmtop.loadgen.plan import Plan, engines_from_urls, read_plan

    if ns.plan and ns.url:
        raise ConfigError("give several URLs or --plan FILE, not both")
    plan = read_plan(ns.plan) if ns.plan else Plan(engines_from_urls(list(ns.url)))
    apply_plan_options(ns, parser, plan.probe, given_on_command_line(parser, argv))
    _check_writers(ns)
    if ns.rate is not None:
        raise ConfigError("a bake-off runs closed-loop concurrency steps: use --levels, "
                          "--sweep or --concurrency, not --rate")
    return plan


def run_plan(plan: Any, options: Any, ns: argparse.Namespace) -> int:
    """Run the bake-off (options already checked and confirmed); returns the exit status."""
    from llmtop.children import install_exit_handlers
    from llmtop.loadgen.bakeoff import StopFlag, run_bakeoff

    install_exit_handlers()
    stop = StopFlag()

    def on_sigint(_sig: int, _frm: Any) -> None:
        stop.count += 1

    old = signal.signal(signal.SIGINT, on_sigint)
    try:
        report = run_bakeoff(plan.engines, options, gpu_hour_price=ns.gpu_hour_price,
                             say=_say, drive=_live_drive if sys.stderr.isatty() else None,
                             stop=stop, new_monitor=new_monitor)
    finally:
        signal.signal(signal.SIGINT, old)
    return _finish(report, ns, stop)


def _finish(report: dict[str, Any], ns: argparse.Namespace, stop: Any) -> int:
    from llmtop.capacity import profiles_from_bakeoff
    from llmtop.cli.capacity import save_capacity
    from llmtop.console.bakeoff_view import print_bakeoff
    from llmtop.report import bakeoff

    print_bakeoff(report)
    write_outputs(report, ns, bakeoff)
    save_capacity(profiles_from_bakeoff(report))
    if stop.requested:
        return 130
    return 0 if any(e["error"] is None for e in report["endpoints"]) else 1


def write_outputs(report: dict[str, Any], ns: argparse.Namespace, out: Any) -> list[str]:
    """``--json``, then ``--csv`` / ``--html`` through ``out`` (a ``llmtop.report`` module
    with ``write_csv`` and ``write_html``); says each path written on stderr."""
    from pathlib import Path

    from llmtop.loadgen.report import to_json

    written = []
    if ns.json:
        Path(ns.json).write_text(to_json(report), encoding="utf-8")
        written.append(ns.json)
    if ns.csv:
        out.write_csv(report, ns.csv)
        written.append(ns.csv)
    if ns.html:
        out.write_html(report, ns.html)
        written.append(ns.html)
    for path in written:
        print(f"wrote {path}", file=sys.stderr)
    return written
