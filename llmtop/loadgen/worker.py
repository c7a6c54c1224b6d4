"""The probe's own process: prepare, run, report; events go to the parent over a pipe.

Started by ``api.start_probe`` (multiprocessing, spawn). It ignores SIGINT (the parent turns
Ctrl-C into a ``{"cmd": "stop"}`` message, so the partial report is still built) and stops by
itself when the parent goes away. Uses uvloop when importable. Events are sent from a
separate thread, so a slow reader never stalls the event loop. ``--cpu-pin`` / ``--nice``
protect it from a CPU-hungry neighbour (``protect``); what was applied goes in the report.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import queue
import signal
import threading
import time
from multiprocessing.connection import Connection
from typing import Any

from llmtop.loadgen.options import ProbeOptions

__all__ = ["main", "protect", "run_probe", "worker_main"]


def protect(options: ProbeOptions) -> dict[str, Any]:
    """Apply ``cpu_pin`` / ``nice`` to this process; says what held and what was refused."""
    out: dict[str, Any] = {"cpu_pin": None, "nice": None, "refused": []}
    if options.cpu_pin:
        try:
            os.sched_setaffinity(0, set(options.cpu_pin))
            out["cpu_pin"] = sorted(os.sched_getaffinity(0))
        except (AttributeError, OSError, ValueError) as exc:
            out["refused"].append(f"--cpu-pin {','.join(map(str, options.cpu_pin))}: {exc}")
    if options.nice is not None:
        try:
            os.setpriority(os.PRIO_PROCESS, 0, options.nice)
            out["nice"] = os.getpriority(os.PRIO_PROCESS, 0)
        except (AttributeError, OSError) as exc:
            out["refused"].append(f"--nice {options.nice}: {exc}")
    return out


def _new_loop() -> asyncio.AbstractEventLoop:
    try:
        import uvloop

        return uvloop.new_event_loop()
    except ImportError:  # pragma: no cover - uvloop is optional
        return asyncio.new_event_loop()


async def run_probe(options: ProbeOptions, emit: Any, stop_hook: Any = None,
                    protection: dict[str, Any] | None = None) -> dict | None:
    """Prepare and run one probe in the running loop; returns the report (None on setup
    failure, after an ``error`` event). ``stop_hook(runner_stop)`` registers the stop call;
    ``protection``: what ``protect`` applied, for the report."""
    from llmtop.loadgen.prepare import ProbeSetupError, prepare
    from llmtop.loadgen.runner import Runner

    stopped = False

    def early_stop(reason: str = "stopped") -> None:
        nonlocal stopped
        stopped = True

    if stop_hook is not None:
        stop_hook(early_stop)
    emit({"type": "preparing", "t": time.time()})
    try:
        prepared = await prepare(options)
    except ProbeSetupError as exc:
        emit({"type": "error", "t": time.time(), "message": str(exc)})
        return None
    runner = Runner(options, prepared, emit)
    runner.protection = protection
    if stop_hook is not None:
        stop_hook(runner.stop)
    if stopped:
        runner.stop()
    emit({"type": "prepared", "t": time.time(), "model": prepared.model,
          "endpoint": prepared.endpoint, "calibration": prepared.calibration.to_json(),
          "ignore_eos": prepared.ignore_eos})
    return await runner.run()


def worker_main(opts: dict[str, Any], conn: Connection) -> None:
    """Process entry point."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    options = ProbeOptions.from_dict(opts)
    protection = protect(options) if options.cpu_pin or options.nice is not None else None
    out: queue.Queue[dict[str, Any] | None] = queue.Queue()

    def sender() -> None:
        while (ev := out.get()) is not None:
            try:
                conn.send(ev)
            except (OSError, EOFError, BrokenPipeError):
                return

    th = threading.Thread(target=sender, name="probe-events", daemon=True)
    th.start()
    loop = _new_loop()
    asyncio.set_event_loop(loop)
    stop_fn: list[Any] = []

    def on_cmd() -> None:
        try:
            msg = conn.recv() if conn.poll() else None
        except (EOFError, OSError):
            msg = {"cmd": "stop"}
            loop.remove_reader(conn.fileno())
        if isinstance(msg, dict) and msg.get("cmd") == "stop" and stop_fn:
            stop_fn[-1]("stopped")

    loop.add_reader(conn.fileno(), on_cmd)
    report = None
    try:
        report = loop.run_until_complete(run_probe(options, out.put, stop_fn.append,
                                                     protection))
    except Exception as exc:  # report, never a silent death
        out.put({"type": "error", "t": time.time(),
                 "message": f"internal error: {type(exc).__name__}: {exc}"})
    finally:
        with contextlib.suppress(Exception):
            loop.remove_reader(conn.fileno())
        loop.close()
        out.put({"type": "finished", "t": time.time(), "report": report})
        out.put(None)
        th.join(10)
        conn.close()


def main(argv: list[str] | None = None) -> None:
    """``python -m llmtop.loadgen.worker FD``: the options arrive as the first message."""
    import sys

    args = sys.argv[1:] if argv is None else argv
    conn = Connection(int(args[0]))
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        opts = conn.recv()
    except (EOFError, OSError):
        return
    worker_main(opts, conn)


if __name__ == "__main__":
    main()
