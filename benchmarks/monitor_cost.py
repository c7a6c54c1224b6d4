"""What the data layer alone costs: ``Monitor`` ticks at 1 s against the demo, no UI.

Starts the demo engines in a separate process
(``llmtop.demo.launcher.start_demo(engines=[...])``, default vllm,vllm,sglang,triton, with
their demo GPUs), then runs ``Monitor.from_config`` ticks every ``--interval`` seconds for
``--seconds`` in this process, as the TUI's poller does (tick, then sleep the rest of the
interval).

    .venv/bin/python benchmarks/monitor_cost.py [--seconds 60] [--interval 1]

Prints:
  * time of the first tick: Monitor start -> first ``tick()`` returned with data in the store
    (and how many targets had a row with data then);
  * CPU % of one core: this process's CPU time (all threads) / wall time over the measured
    ticks (the first tick excluded, it is reported on its own);
  * per-tick breakdown in ms of CPU time: ``parse`` = ``Store.ingest`` (detect + parse +
    normalize + keep), ``store`` = ``Store.commit`` (10 s snapshot, series, events),
    ``scrape`` = the rest of the tick on the event loop's thread (httpx, asyncio, sink),
    ``threads`` = CPU on other threads (an NVML sampler runs in ``asyncio.to_thread``; the
    demo GPU sampler fetches on the event loop, so its cost is in ``scrape``).
The machine may be shared: numbers are noisy; compare runs made close together.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from llmtop.config import Config  # noqa: E402
from llmtop.demo.launcher import start_demo  # noqa: E402
from llmtop.monitor import Monitor  # noqa: E402


class _Timed:
    """Wraps a store method and adds its thread CPU time to a counter."""

    def __init__(self, fn, acc: list[float]) -> None:
        self.fn, self.acc = fn, acc

    def __call__(self, *a, **kw):
        t0 = time.thread_time()
        try:
            return self.fn(*a, **kw)
        finally:
            self.acc[0] += time.thread_time() - t0


async def run(args: argparse.Namespace, demo) -> None:
    config = demo.apply(Config(interval_s=args.interval, discover=False))
    parse_acc, store_acc = [0.0], [0.0]

    t_start = time.monotonic()
    mon = Monitor.from_config(config, demo=demo)
    mon.store.ingest = _Timed(mon.store.ingest, parse_acc)
    mon.store.commit = _Timed(mon.store.commit, store_acc)
    snap = await mon.tick()
    first = time.monotonic() - t_start
    with_data = sum(1 for r in snap.engines if r.state == "ok" and r.running is not None)
    print(f"first tick: {first * 1000:.0f} ms after Monitor start "
          f"({with_data}/{len(snap.engines)} engine rows with data, "
          f"{len(snap.gpus)} GPUs)")  # fmt: skip

    ticks: list[dict[str, float]] = []
    cpu0, wall0 = time.process_time(), time.monotonic()
    next_at = wall0
    try:
        while time.monotonic() - wall0 < args.seconds:
            next_at += args.interval
            await asyncio.sleep(max(0.0, next_at - time.monotonic()))
            p0, s0 = parse_acc[0], store_acc[0]
            th0, pr0, w0 = time.thread_time(), time.process_time(), time.monotonic()
            await mon.tick()
            th1, pr1, w1 = time.thread_time(), time.process_time(), time.monotonic()
            parse, store = parse_acc[0] - p0, store_acc[0] - s0
            if args.report_every and len(ticks) and len(ticks) % int(args.report_every) == 0:
                last = ticks[-int(args.report_every):]
                print(f"  {w1 - wall0:5.0f} s: last {len(last)} ticks, ms CPU per tick: "
                      + ", ".join(f"{k} {statistics.fmean(t[k] for t in last) * 1000:.2f}"
                                  for k in ("scrape", "parse", "store", "threads")), flush=True)
            ticks.append({
                "wall": w1 - w0,
                "parse": parse,
                "store": store,
                "scrape": (th1 - th0) - parse - store,
                "threads": max(0.0, (pr1 - pr0) - (th1 - th0)),
            })
        cpu1, wall1 = time.process_time(), time.monotonic()
        rows = mon.store.snapshot(10.0).engines
    finally:
        await mon.aclose()
    pct = (cpu1 - cpu0) / (wall1 - wall0) * 100
    print(f"measured {wall1 - wall0:.0f} s, {len(ticks)} ticks at {args.interval:g} s "
          f"({', '.join(args.engines)} + demo GPUs)")  # fmt: skip
    print(f"CPU: {pct:.2f} % of one core   (goal <= 1 %)")
    print("per tick, ms CPU (median / mean):")
    for k in ("scrape", "parse", "store", "threads"):
        vals = [t[k] * 1000 for t in ticks]
        print(f"  {k:7s} {statistics.median(vals):6.2f} / {statistics.fmean(vals):6.2f}")
    tot = [sum(t[k] for k in ("scrape", "parse", "store", "threads")) * 1000 for t in ticks]
    print(f"  {'total':7s} {statistics.median(tot):6.2f} / {statistics.fmean(tot):6.2f}")
    wall = [t["wall"] * 1000 for t in ticks]
    print(f"tick wall time ms: median {statistics.median(wall):.1f}, max {max(wall):.1f}")
    print("engines at the end:", ", ".join(f"{r.engine} {r.engine_version or '?'} {r.state}"
                                           for r in rows))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--interval", type=float, default=1.0)
    ap.add_argument("--engines", default="vllm,vllm,sglang,triton")
    ap.add_argument("--report-every", type=float, default=0, metavar="N",
                    help="also print the mean per-tick breakdown of every N ticks as it goes "
                         "(does the cost grow as history fills?)")
    args = ap.parse_args(argv)
    args.engines = [e for e in args.engines.split(",") if e]
    demo = start_demo(engines=args.engines)
    try:
        asyncio.run(run(args, demo))
    finally:
        demo.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
