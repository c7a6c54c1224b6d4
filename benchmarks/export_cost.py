"""Exporter cost: CPU per 1 s refresh with 4 targets, and the size of one /metrics answer.

Runs what ``llmtop export`` runs (a ``Monitor`` whose diagnosis judges every refresh, the
scrapes teed to the exporter's counts, ``publish_direct``) over 4 demo targets (vllm, vllm,
sglang, triton, background traffic on) and their simulated GPUs at a 1 s interval, and
renders ``/metrics`` once per refresh, as a Prometheus scraping every second would:

    .venv/bin/python benchmarks/export_cost.py --seconds 60

Prints, as % of one core: the exporter's own work (publishing the refresh, rendering one
answer and gzipping it, counting the scrapes), the diagnosis run at every refresh (the TUI
runs it every 5 s), and the whole process (scrapes, parsing, rows, diagnosis, export; the
demo runs in another process). Budget: the recorder's, <= 1 % of a core for 4 targets + GPUs at 1 s
(docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import time

from llmtop.config import Config
from llmtop.demo.launcher import start_demo
from llmtop.export.run import direct_store, publish_direct
from llmtop.export.state import ExportState
from llmtop.monitor import Monitor


async def run(seconds: float, window_s: float) -> None:
    demo = start_demo(engines=["vllm", "vllm", "sglang", "triton"])
    try:
        config = demo.apply(Config())
        state = ExportState("direct")
        store = direct_store(config)
        hook = store.commit_hooks[0]
        cost = {"export": 0.0, "diag": 0.0}

        def timed_hook(*a: object) -> None:
            t = time.thread_time()
            hook(*a)  # type: ignore[arg-type]
            cost["diag"] += time.thread_time() - t

        store.commit_hooks[0] = timed_hook

        def observe(item: object) -> None:
            t = time.thread_time()
            state.observe(item)
            cost["export"] += time.thread_time() - t

        mon = Monitor.from_config(config, demo, store=store, sink=observe)
        for _ in range(3):  # warm up: first contact, identity
            await mon.tick()
        cost.update(export=0.0, diag=0.0)
        sizes: list[int] = []
        samples = 0
        start, cpu0 = time.monotonic(), time.process_time()
        ticks = 0
        while time.monotonic() - start < seconds:
            t0 = time.monotonic()
            snap = await mon.tick()
            t = time.thread_time()
            publish_direct(state, mon, snap, window_s, t0)
            body = state.render()
            gz = len(gzip.compress(body, 6))  # Prometheus asks for gzip
            cost["export"] += time.thread_time() - t
            sizes.append(len(body))
            samples = sum(1 for ln in body.splitlines() if ln and not ln.startswith(b"#"))
            ticks += 1
            await asyncio.sleep(max(0.0, config.interval_s - (time.monotonic() - t0)))
        elapsed = time.monotonic() - start
        cpu = time.process_time() - cpu0
        await mon.aclose()
        gpus = len(snap.gpus)
    finally:
        demo.stop()
    per = 100.0 / elapsed
    print(f"targets=4 gpus={gpus} interval=1s window={window_s:g}s ticks={ticks} "
          f"elapsed={elapsed:.0f}s")
    print(f"/metrics answer: {sum(sizes) / len(sizes) / 1e3:.1f} kB mean, "
          f"{max(sizes) / 1e3:.1f} kB max, {samples} samples, {gz / 1e3:.1f} kB gzipped")
    print(f"export (publish + render + gzip + scrape counts): "
          f"{cost['export'] * per:.2f} % of a core, "
          f"{cost['export'] / ticks * 1e3:.2f} ms per refresh")
    print(f"diagnosis at every refresh: {cost['diag'] * per:.2f} % of a core, "
          f"{cost['diag'] / ticks * 1e3:.2f} ms per refresh")
    print(f"whole exporter process: {cpu * per:.2f} % of a core, "
          f"{cpu / ticks * 1e3:.2f} ms per refresh")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seconds", type=float, default=60.0)
    p.add_argument("--window", type=float, default=10.0)
    a = p.parse_args()
    asyncio.run(run(a.seconds, a.window))


if __name__ == "__main__":
    main()
