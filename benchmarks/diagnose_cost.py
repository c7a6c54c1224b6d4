"""What the diagnosis adds per engine per refresh (target: at most 0.1 ms).

Two measurements:

1. **In the monitor**: the demo engines (4 targets + demo GPUs), ``Monitor`` ticks back to
   back with a fast-forwarded clock (each tick stamped 1 s after the previous, as
   ``history_cost.py`` does), so ``--ticks 1200`` fills 20 minutes of history (15 of them
   baseline) in a minute or two. The store's diagnosis hook (baseline point every 10 s, rules
   over the 30 s rows every 5 s, hysteresis, event lines) is timed on its own: CPU per tick,
   divided by the engine rows.
2. **The rules alone**: ``diagnose`` over N rows with baselines (healthy and in trouble).

    .venv/bin/python benchmarks/diagnose_cost.py [--ticks 1200] [--every 300]

The machine may be shared: numbers are noisy (thread CPU time, not wall time).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from fastforward import fast_forward_monitor  # noqa: E402

from llmtop.demo.launcher import start_demo  # noqa: E402
from llmtop.diagnose import BaselineTracker, diagnose  # noqa: E402
from llmtop.diagnose.signals import SIGNALS  # noqa: E402
from tests.diagnose.rows import base, gpu, healthy, q  # noqa: E402


async def in_monitor(args: argparse.Namespace) -> None:
    demo = start_demo(engines=["vllm", "vllm", "sglang", "triton"])
    clock = [1_000_000.0, 1.7e9]
    try:
        mon = fast_forward_monitor(demo, clock)
        hooks = mon.store.commit_hooks
        acc = {"diag": 0.0, "tick": 0.0, "rows": 0}
        hook = hooks[0]

        def timed(snap, t, tw):
            t0 = time.thread_time()
            hook(snap, t, tw)
            acc["diag"] += time.thread_time() - t0
            acc["rows"] += len(snap.engines)

        hooks[0] = timed
        print(f"{'ticks':>6} {'tick ms':>8} {'diag ms':>8} {'per engine ms':>14}  findings")
        for i in range(1, args.ticks + 1):
            clock[0] += 1.0
            clock[1] += 1.0
            t0 = time.thread_time()
            await mon.tick()
            acc["tick"] += time.thread_time() - t0
            if i % args.every == 0:
                n = args.every
                per_engine = acc["diag"] / max(1, acc["rows"]) * 1000
                found = [f"{f.target.split('@')[0]}:{f.rule}/{f.severity}"
                         for f in mon.store.diagnoser.findings]
                print(f"{i:6d} {acc['tick'] / n * 1000:8.2f} {acc['diag'] / n * 1000:8.3f} "
                      f"{per_engine:14.4f}  {', '.join(found) or '-'}", flush=True)
                acc.update(diag=0.0, tick=0.0, rows=0)
        await mon.aclose()
    finally:
        demo.stop()


def rules_alone(n_rows: int, reps: int) -> None:
    rows = []
    for i in range(n_rows):
        t = f"vllm@10.0.0.{i}:8000"
        if i % 4 == 3:  # one in four in trouble: findings get built
            rows.append(healthy(t, kv_cache_usage=0.99, waiting=20.0, preemptions_per_s=2.0,
                                itl_s=q(0.09, 0.12, 6000)))
        else:
            rows.append(healthy(t))
    baselines = {r.key: base() for r in rows}
    gpus = [gpu(i, target=r.target) for i, r in enumerate(rows)]
    diagnose(rows, baselines=baselines, gpus=gpus)
    t0 = time.thread_time()
    for _ in range(reps):
        diagnose(rows, baselines=baselines, gpus=gpus)
    per = (time.thread_time() - t0) / reps / n_rows * 1000
    print(f"rules alone: {n_rows} rows, {per:.4f} ms per engine per run")


def tracker_alone(n_rows: int) -> None:
    """The baseline tracker: one point per row per 10 s, medians once per 10 s step."""
    rows = [healthy(f"vllm@10.0.0.{i}:8000") for i in range(n_rows)]
    tr = BaselineTracker()
    t0 = time.thread_time()
    for k in range(91):  # 15 min of points
        tr.observe(k * 10.0, rows)
    observe = (time.thread_time() - t0) / 91 / n_rows * 1000
    t0 = time.thread_time()
    reps = 50
    for k in range(reps):  # each at a new step: the medians are worked out every time
        tr.observe(910.0 + k * 10.0, rows)
        tr.baselines([r.key for r in rows], 910.0 + k * 10.0, 30.0)
    median = (time.thread_time() - t0) / reps / n_rows * 1000
    print(f"baseline tracker: a point {observe:.4f} ms per row (every 10 s), the medians "
          f"{median:.4f} ms per row (once per 10 s step); per 1 s refresh "
          f"{(observe + median) / 10:.4f} ms per row; kept: 92 points x "
          f"{len(SIGNALS)} floats per row")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ticks", type=int, default=1200)
    ap.add_argument("--every", type=int, default=300)
    ap.add_argument("--rows", type=int, default=8)
    ap.add_argument("--reps", type=int, default=2000)
    args = ap.parse_args(argv)
    rules_alone(args.rows, args.reps)
    tracker_alone(args.rows)
    if args.ticks > 0:
        asyncio.run(in_monitor(args))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
