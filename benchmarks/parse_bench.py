"""Parse + normalize cost of one large vLLM scrape: llmtop's path vs prometheus_client.

The scrape is the generated vLLM 0.33.0 exposition (tests/fixtures/metrics), without its
comment header, with the ``vllm:*`` series of a second data-parallel rank (``engine="1"``)
added family by family until the text reaches ~55 KB: real format, real names and buckets.

Run: ``.venv/bin/python benchmarks/parse_bench.py [--target-kb 55] [--number 50]``.
Prints ms per scrape (best of 7 repeats, and the median), measured as this process's CPU
time (``time.process_time``) so that other load on a shared machine does not count; pass
``--wall`` for wall-clock time. Rows:
  llmtop  = exposition.parse(text, want=vllm.want) + vllm.normalize_families (vllm.normalize)
  llmtop (parse only, all families) and prometheus_client.parser (all families, consumed).
  llmtop first scrape (cold) = the first row with the parser's caches (known series, HELP/TYPE
  lines, parsed chunks, templates) emptied before each run, as on a target's first scrape.
  "every value changed" = each call parses a new variant of the scrape in which every sample
  value differs from every other variant: no chunk of sample lines can come from the chunk
  cache (a busy server where everything moves; the worst steady state, and the headline).
  "unchanged scrape" = the same text again (an idle server): unchanged chunks are reused.
  Steady-state rows share known series and comment lines with earlier scrapes, as in a run.
Timings are noisy on a shared machine; compare numbers from the same run.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import timeit
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

from llmtop.parse import exposition, vllm  # noqa: E402

FIXTURE = ROOT / "tests" / "fixtures" / "metrics" / "vllm-generated-v0.33.0-loggers.txt"


def build_scrape(target_bytes: int) -> str:
    """The fixture body, grown with engine="1" copies of vllm:* series up to target_bytes."""
    lines = FIXTURE.read_text(encoding="utf-8").split("\n")
    while lines and lines[0].startswith(("# source:", "# note:", "#   ")):
        lines.pop(0)
    size = sum(len(ln) + 1 for ln in lines)
    out: list[str] = []
    block: list[str] = []

    def close_block() -> None:
        nonlocal size
        out.extend(block)
        for ln in block:
            if size >= target_bytes:
                break
            if ln.startswith("vllm:") and 'engine="0"' in ln:
                extra = ln.replace('engine="0"', 'engine="1"')
                out.append(extra)
                size += len(extra) + 1
        block.clear()

    for ln in lines:
        if ln.startswith("# HELP") and block:
            close_block()
        block.append(ln)
    close_block()
    return "\n".join(out)


def bench(fn, number: int, timer=time.process_time, setup=None) -> tuple[float, float]:
    runs = [t / number * 1000 for t in timeit.repeat(fn, setup or "pass", number=number,
                                                      repeat=7, timer=timer)]
    return min(runs), statistics.median(runs)


def variants(text: str, k: int) -> list[str]:
    """``k`` copies of ``text`` whose sample values all differ (value + copy number)."""
    out = []
    for i in range(1, k + 1):
        lines = []
        for ln in text.split("\n"):
            head, sep, val = ln.rpartition(" ")
            if sep and not ln.startswith("#") and val not in ("NaN", "+Inf", "-Inf"):
                ln = f"{head} {float(val) + i}"
            lines.append(ln)
        out.append("\n".join(lines))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--target-kb", type=float, default=55.0)
    ap.add_argument("--number", type=int, default=50)
    ap.add_argument("--wall", action="store_true", help="wall-clock instead of CPU time")
    args = ap.parse_args(argv)
    timer = time.perf_counter if args.wall else time.process_time
    text = build_scrape(int(args.target_kb * 1000))
    sample = vllm.normalize(text)
    nlines = text.count("\n") + 1
    print(f"scrape: {len(text.encode()) / 1000:.1f} KB, {nlines} lines, "
          f"{len(sample.models)} model(s), {len(sample.ranks)} rank(s)")  # fmt: skip
    n = args.number
    moving = variants(text, n)
    vllm.normalize(moving[0])  # series and comment lines known, as after the first scrape
    nxt = iter(())

    def restart() -> None:
        nonlocal nxt
        exposition._CHUNKS.clear()
        nxt = iter(moving)

    ours = bench(lambda: vllm.normalize(next(nxt)), n, timer, restart)
    ours_all = bench(lambda: exposition.parse(next(nxt)), n, timer, restart)
    same = bench(lambda: vllm.normalize(text), n, timer)

    def cold() -> None:
        exposition._SERIES.clear()  # as on the first scrape: every line read in full
        exposition._HEADS.clear()
        exposition._CHUNKS.clear()
        exposition._SLOTS.clear()
        vllm.normalize(text)

    ours_cold = bench(cold, n, timer)
    ref = bench(lambda: list(text_string_to_metric_families(text)), max(1, n // 5), timer)
    print("timer:", "wall clock" if args.wall else "process CPU time")
    print(f"llmtop parse(want)+normalize  {ours[0]:7.2f} ms  (median {ours[1]:.2f})"
          "  every value changed")
    print(f"llmtop parse (all families)   {ours_all[0]:7.2f} ms  (median {ours_all[1]:.2f})"
          "  every value changed")
    print(f"llmtop unchanged scrape       {same[0]:7.2f} ms  (median {same[1]:.2f})"
          "  parse(want)+normalize, chunks reused")
    print(f"llmtop first scrape (cold)    {ours_cold[0]:7.2f} ms  (median {ours_cold[1]:.2f})")
    print(f"prometheus_client.parser      {ref[0]:7.2f} ms  (median {ref[1]:.2f})")
    print(f"speed-up (best of 7)          {ref[0] / ours[0]:7.1f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
