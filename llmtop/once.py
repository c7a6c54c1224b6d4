"""``llmtop --once``: scrape, wait ``window_s``, scrape again, print one table or one JSON object.

The JSON schema is ``docs/json-schema.md`` (``Snapshot.to_json``); scripts depend on it.
Exit status: 0 when at least one target could be read, 1 when none could (or none was
found: ``--json`` then still prints one object, with no engines and a ``message``).
``--gpu-required`` with unreadable GPUs raises ``GpuRequiredError``. Never a traceback:
unexpected errors are left to ``cli.main``, which prints one line.
"""

from __future__ import annotations

import asyncio
import json
import math
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TextIO

from llmtop import __version__, clock
from llmtop.config import Config
from llmtop.errors import GpuRequiredError
from llmtop.model import GOOD_STATES, Snapshot
from llmtop.targets import NO_TARGETS_HINTS, NO_TARGETS_MESSAGE

if TYPE_CHECKING:
    from llmtop.monitor import Monitor

__all__ = ["NO_TARGETS_HINTS", "NO_TARGETS_MESSAGE", "empty_json", "run_once", "snapshot_json"]

def run_once(
    config: Config,
    *,
    window_s: float = 1.0,
    as_json: bool = False,
    demo: Any = None,
    monitor: Monitor | None = None,
    out: TextIO | None = None,
    err: TextIO | None = None,
    make_monitor: Callable[[Config], Any] | None = None,
) -> int:
    """Run ``--once`` and return the exit status (see the module docstring).

    ``monitor`` replaces the real one (tests); ``make_monitor(config)`` builds it for the
    targets found (``--record``, ``--otlp-listen``: a ``Monitor``, or a recording one that
    hands everything else to its ``Monitor``); ``out``/``err`` default to stdout/stderr.
    """
    return asyncio.run(_run(config, window_s=window_s, as_json=as_json, demo=demo,
                            monitor=monitor, out=out or sys.stdout, err=err or sys.stderr,
                            make_monitor=make_monitor))


async def _targets(config: Config, err: TextIO | None = None) -> Config:
    """The targets to read: given, else found (``discovery.find_targets``), its notes said
    on ``err``."""
    from llmtop.discovery import find_targets
    from llmtop.discovery.notes import say

    found = await find_targets(config)
    # what could not be read (other namespaces without root), said once
    say(found.notes, err=err)
    return found.config(config)


async def _run(config: Config, *, window_s: float, as_json: bool, demo: Any,
               monitor: Monitor | None, out: TextIO, err: TextIO,
               make_monitor: Callable[[Config], Any] | None = None) -> int:
    if monitor is None:
        config = await _targets(config, err)
        if not config.targets:
            if as_json:  # still one valid object: scripts read `engines` and `message`
                print(empty_json(NO_TARGETS_MESSAGE), file=out)
            print(f"llmtop: {NO_TARGETS_MESSAGE}", file=err)
            if not as_json:
                for cmd, what in NO_TARGETS_HINTS:
                    print(f"  {cmd:<26}{what}", file=err)
            return 1
        if make_monitor is not None:
            monitor = make_monitor(config)
        else:
            from llmtop.monitor import Monitor

            monitor = Monitor.from_config(config, demo)
    window_s = max(0.0, float(window_s))
    wait = 2 * float(config.timeout_s) + 1.5  # first contact also probes identity
    try:
        first = await monitor.tick(timeout_s=wait)
        if _brings_backends(monitor):
            first = await monitor.tick(timeout_s=wait)  # a router's backends: first contact
        if config.gpu_required and first.gpu_error:
            raise GpuRequiredError(f"cannot read the GPUs: {first.gpu_error}")
        t0 = monitor.store.now_mono
        await clock.sleep(window_s)
        await monitor.tick(timeout_s=wait)
        await monitor.check_health(wait)  # a row that may be stuck: its /health answer
        t1 = monitor.store.now_mono
        # the window actually covered: between the two scrapes of each target (median), else
        # between the two ticks
        ticks = t1 - t0 if t0 is not None and t1 is not None and t1 > t0 else window_s
        snap = monitor.store.once_snapshot(ticks)
    finally:
        await monitor.aclose()
    if config.gpu_required and snap.gpu_error:
        raise GpuRequiredError(f"cannot read the GPUs: {snap.gpu_error}")
    findings = _diagnose(first, snap, window_s)
    if as_json:
        print(snapshot_json(snap, findings), file=out)
    else:
        from llmtop.console.once_table import print_once

        print_once(snap, file=out, diagnosis=findings)
    if not any(r.last_ok_age_s is not None for r in (*snap.engines, *snap.routers)):
        if as_json or not (snap.engines or snap.routers):
            reasons = "; ".join(f"{r.target}: {r.error or r.state}"
                                for r in (*snap.engines, *snap.routers))
            print(f"llmtop: no target could be read ({reasons or 'no targets'})", file=err)
        return 1
    return 0


def _brings_backends(monitor: Monitor) -> bool:
    """True when the first tick's routers named backends: the monitor adds them at its next
    tick (``Monitor._add_backends``), so ``--once`` gives them a first scrape before the
    window starts."""
    urls = monitor.store.backend_urls()
    if not urls:
        return False
    from llmtop.discovery import backend_targets

    return bool(backend_targets(urls, monitor.targets))


def _diagnose(first: Snapshot, snap: Snapshot, window_s: float) -> list[Any]:
    """The findings of one ``--once``. No history of its own: the baseline is each engine's
    lifetime before the window (its first scrape: hit rate and mean prefill only,
    ``diagnose.lifetime``), and "all window long" is the smaller ``waiting`` of the two
    scrapes. The rules with absolute limits need enough events in the window."""
    from llmtop.diagnose import diagnose
    from llmtop.diagnose.lifetime import lifetime_baseline

    before = {r.key: r for r in first.engines if r.state in GOOD_STATES}
    baselines = {k: b for k, r in before.items() if (b := lifetime_baseline(r)) is not None}
    waiting_min = {r.key: min(r.waiting, before[r.key].waiting) for r in snap.engines
                   if r.key in before and r.waiting is not None
                   and before[r.key].waiting is not None}
    return diagnose(snap.engines, gpus=snap.gpus, window_s=snap.window_s or window_s,
                    baselines=baselines, waiting_min=waiting_min, routers=snap.routers,
                    requests=snap.requests or (),  # spans: findings cite requests
                    logs=_log_window(snap))  # the log lines around: errors, stuck cite them


def _log_window(snap: Snapshot) -> dict[str, list[Any]]:
    """Each engine's log events of the last ``DIAG_WINDOW_S`` (the live diagnosis' window:
    the lines around a finding found in the short ``--once`` window)."""
    from llmtop.diagnose.thresholds import DIAG_WINDOW_S
    from llmtop.history.logs import events_between

    start = snap.time - max(snap.window_s, DIAG_WINDOW_S)
    return {t: got for t, ev in snap.log_events.items()
            if (got := events_between(ev, start))}


def empty_json(message: str) -> str:
    """The ``--once --json`` object when no target was found: no engines, no window, and
    ``message`` saying why (``docs/json-schema.md``)."""
    doc = Snapshot(time=clock.time(), window_s=0.0).to_json(__version__)
    doc["window_s"] = None
    doc["message"] = message
    doc["diagnosis"] = []
    return json.dumps(doc, indent=2, allow_nan=False)


def snapshot_json(snap: Snapshot, diagnosis: Sequence[Any] | None = None) -> str:
    """The ``--once --json`` text of a snapshot (NaN/Inf can never leak: null instead), with
    the top-level ``diagnosis`` list (``diagnose.Finding.to_json``; ``[]`` when none)."""
    doc = snap.to_json(__version__)
    doc["diagnosis"] = [f.to_json() for f in diagnosis or ()]
    try:
        return json.dumps(doc, indent=2, allow_nan=False)
    except ValueError:
        return json.dumps(_finite(doc), indent=2, allow_nan=False)


def _finite(v: Any) -> Any:
    if isinstance(v, float) and (math.isnan(v) or math.isinf(v)):
        return None
    if isinstance(v, dict):
        return {k: _finite(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_finite(x) for x in v]
    return v
