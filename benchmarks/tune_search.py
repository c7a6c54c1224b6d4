"""Adaptive search against the full grid, on the same fake (llmtop's demo vLLM, whose
capacity follows ``--max-num-seqs`` and ``--kv-tokens``): the trial time of each and whether
the adaptive search reaches the grid's best configuration. The issue's goal: the same best
with at most half of the grid's trial time.

Run: ``.venv/bin/python benchmarks/tune_search.py`` (a few minutes: every configuration of
the grid starts a demo server). Timings are noisy on a shared machine; it prints numbers and
exits 1 only when the best differs.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from llmtop.cli.tune import _options
from llmtop.monitor import Monitor
from llmtop.tune.search import run_tune
from llmtop.tune.space import parse_tune_plan

PLAN = f"""
[probe]
prompt_tokens = 64
output_tokens = 32
ttft_slo = 0.2
requests_per_step = 8
warmup = 0

[tune]
url = "http://127.0.0.1:{{port}}"
start = "{sys.executable} -m llmtop demo serve --engines vllm --ports {{port}} --no-background \
--quiet --max-model-len 128 --max-num-seqs {{max_num_seqs}} --kv-tokens {{kv_tokens}}"
ready_timeout_s = 60
max_load = 32
strategy = "STRATEGY"

[tune.space]
max_num_seqs = [2, 4, 8, 16]
kv_tokens = [480, 2048]
"""


def run(strategy: str) -> dict:
    plan = parse_tune_plan(PLAN.replace("STRATEGY", strategy))
    with tempfile.TemporaryDirectory() as d:
        t0 = time.monotonic()
        rep = run_tune(plan, _options(plan, None), log_dir=d, watch_interval_s=0.5,
                       new_monitor=Monitor.from_config)
        rep["wall_s"] = time.monotonic() - t0
    return rep


def main() -> int:
    out = {s: run(s) for s in ("grid", "adaptive")}
    for s, rep in out.items():
        ran = sum(t["status"] != "skipped" for t in rep["trials"])
        print(f"{s:<9} trials run {ran}/{len(rep['trials'])}, trial time "
              f"{rep['trial_time_s']:.1f} s (wall {rep['wall_s']:.1f} s), best "
              f"{rep['best']['params'] if rep['best'] else None}")
        for t in rep["trials"]:
            lim = (t.get("limiter") or {}).get("kind")
            print(f"  {t['params']} {t['status']:<8} {t.get('duration_s') or 0:5.1f} s "
                  f"levels {len(t.get('levels') or [])} sla_load {t.get('sla_load')} "
                  f"limiter {lim} {t.get('reason') or ''}")
    g, a = out["grid"], out["adaptive"]
    same = bool(g["best"] and a["best"] and g["best"]["params"] == a["best"]["params"])
    share = a["trial_time_s"] / g["trial_time_s"] if g["trial_time_s"] else float("nan")
    print(f"same best: {same}; adaptive trial time = {100 * share:.0f} % of the grid's "
          f"(goal <= 50 %)")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
