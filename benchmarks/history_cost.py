"""Does a tick cost more as history fills? The monitor's per-tick CPU over an hour of it.

Starts the demo engines (``start_demo``, 4 targets + their demo GPUs, a separate process),
then runs ``Monitor`` ticks back to back with a fast-forwarded clock: each tick's scrapes
are real but stamped 1 s after the previous tick's, so ``--ticks 3600`` fills an hour of
history in a minute or two. Every ``--every`` ticks it prints, per tick: CPU of the tick
(scrape + ingest + commit on this thread), ingest and commit alone, what the overview reads
(sparklines, trends, GPU series, events), time in the cyclic GC, and the objects the GC
tracks. ``--freeze`` freezes start-up objects first, as the TUI does after its first polls.

    .venv/bin/python benchmarks/history_cost.py [--ticks 3600] [--every 300] [--freeze]

Back-to-back ticks run with warm caches: absolute numbers are lower than at 1 s; look at
how they move from the first lines to the last. The machine may be shared: numbers are noisy.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from fastforward import fast_forward_monitor  # noqa: E402

from llmtop.demo.launcher import start_demo  # noqa: E402
from llmtop.ui.source import SPARK_FIELDS  # noqa: E402
from llmtop.verdict import growth_points  # noqa: E402


def _timed(fn, acc: dict[str, float], key: str):
    def wrapped(*a, **kw):
        t0 = time.thread_time()
        try:
            return fn(*a, **kw)
        finally:
            acc[key] += time.thread_time() - t0
    return wrapped


def _read_like_the_overview(store, snap) -> None:
    for r in snap.engines:
        store.series(r.key, "waiting", growth_points(1.0))
        store.series(r.key, "ttft_p95", 8)
    if snap.engines:
        for field, _ in SPARK_FIELDS:
            store.series(snap.engines[0].key, field, 300)
    store.series_times(300)
    for g in snap.gpus:
        for f in ("util", "mem_used", "power", "temp"):
            store.gpu_series(f"{g.host}:{g.index}", f, 300)
    list(store.events)


def _rss_mb() -> float:
    """This process's resident memory (the monitor, its history and the parser's caches)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


async def run(args: argparse.Namespace) -> None:
    demo = start_demo(engines=["vllm", "vllm", "sglang", "triton"])
    clock = [1_000_000.0, 1.7e9]
    try:
        mon = fast_forward_monitor(demo, clock)
        acc = dict.fromkeys(("tick", "ingest", "commit", "read", "gc"), 0.0)
        mon.store.ingest = _timed(mon.store.ingest, acc, "ingest")
        mon.store.commit = _timed(mon.store.commit, acc, "commit")
        gc_start = [0.0]

        def on_gc(phase, _info):
            if phase == "start":
                gc_start[0] = time.thread_time()
            else:
                acc["gc"] += time.thread_time() - gc_start[0]

        gc.callbacks.append(on_gc)
        if args.freeze:
            gc.collect()
            gc.freeze()
        print(f"{'ticks':>6} {'tick':>6} {'ingest':>6} {'commit':>6} {'read':>5} {'gc':>5} "
              "  ms CPU per tick   GC-tracked objects   RSS MB")
        for i in range(1, args.ticks + 1):
            clock[0] += 1.0
            clock[1] += 1.0
            t0 = time.thread_time()
            snap = await mon.tick()
            t1 = time.thread_time()
            _read_like_the_overview(mon.store, snap)
            acc["tick"] += t1 - t0
            acc["read"] += time.thread_time() - t1
            if i % args.every == 0:
                n = args.every
                print(f"{i:6d} " + " ".join(f"{acc[k] / n * 1000:6.2f}" for k in
                                            ("tick", "ingest", "commit", "read", "gc"))
                      + f"   {len(gc.get_objects()):>8d}   {_rss_mb():7.1f}", flush=True)
                acc.update(dict.fromkeys(acc, 0.0))
        await mon.aclose()
    finally:
        demo.stop()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ticks", type=int, default=3600)
    ap.add_argument("--every", type=int, default=300)
    ap.add_argument("--freeze", action="store_true",
                    help="gc.freeze() start-up objects first (the TUI does after 3 polls)")
    asyncio.run(run(ap.parse_args(argv)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
