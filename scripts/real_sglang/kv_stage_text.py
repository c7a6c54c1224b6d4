"""Render SGLang's P/D KV-transfer stage histograms as SGLang 0.5.23 declares them (no server).

Run with the cached SGLang: ``~/.cache/llmtop/sglang-venv-0.5.23/bin/python
scripts/real_sglang/kv_stage_text.py``. The declarations (name, HELP, buckets, labels) are
those of ``sglang/srt/observability/metrics_collector.py`` (``kv_transfer_bootstrap_ms``,
``kv_transfer_alloc_ms``, ``kv_transfer_latency_ms``, ``per_stage_req_latency_seconds``) in
the installed wheel, checked against it at run time; the observations are SYNTHETIC and
follow ``req_time_stats.py``: a decode instance observes ``decode_prepare``,
``decode_bootstrap`` (prealloc queue -> transfer queue: bootstrap + KV allocation),
``decode_transferred`` (transfer queue -> wait queue: the KV arriving), ``decode_waiting``
and the bootstrap/alloc histograms; the transfer latency is observed on the prefill side.
The llmtop fixture ``tests/fixtures/stack/sglang-decode-kv-stages-SYNTHETIC.txt`` is its output.
"""

from __future__ import annotations

import inspect
import sys

import prometheus_client
from prometheus_client import CollectorRegistry, Gauge, Histogram, generate_latest
from prometheus_client.utils import INF

import sglang
from sglang.srt.observability import metrics_collector

__all__: list[str] = []

LABELS = {"engine_type": "decode", "model_name": "Qwen/Qwen3-0.6B", "moe_ep_rank": "0",
          "pp_rank": "0", "tp_rank": "0"}
MS = (1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500)
STAGE_BUCKETS = tuple(0.001 * 1.62 ** i for i in range(30))  # exponential_buckets(0.001, 1.62, 30)
OBS = {  # stage -> observations (s)
    "decode_prepare": [0.001] * 20,
    "decode_bootstrap": [0.02] * 15 + [0.06] * 5,
    "decode_transferred": [0.1] * 16 + [0.3] * 4,
    "decode_waiting": [0.005] * 20,
}


def main() -> None:
    src = inspect.getsource(metrics_collector)
    for needle in ('name="sglang:kv_transfer_bootstrap_ms"', 'name="sglang:kv_transfer_alloc_ms"',
                   "buckets=(1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500)",
                   'name="sglang:per_stage_req_latency_seconds"',
                   "exponential_buckets(start=0.001, width=1.62, length=30)"):
        if needle not in src:
            sys.exit(f"sglang {sglang.__version__}: {needle} not in metrics_collector.py")
    prometheus_client.disable_created_metrics()
    reg = CollectorRegistry()
    names = list(LABELS)
    for name, doc, v in (("sglang:num_running_reqs", "The number of running requests.", 4),
                         ("sglang:num_queue_reqs",
                          "The number of requests in the waiting queue.", 0)):
        Gauge(name, doc, names, registry=reg).labels(**LABELS).set(v)
    boot = Histogram("sglang:kv_transfer_bootstrap_ms",
                     "Histogram of KV transfer bootstrap time in ms.", names, buckets=MS,
                     registry=reg).labels(**LABELS)
    alloc = Histogram("sglang:kv_transfer_alloc_ms",
                      "Histogram of KV transfer allocation waiting time in ms.", names,
                      buckets=MS, registry=reg).labels(**LABELS)
    for v in [8.0] * 15 + [40.0] * 5:
        boot.observe(v)
        alloc.observe(v / 4)
    stages = Histogram("sglang:per_stage_req_latency_seconds",
                       "The latency of each stage of requests.", [*names, "stage"],
                       buckets=(*STAGE_BUCKETS, INF), registry=reg)
    for stage, values in OBS.items():
        for v in values:
            stages.labels(**LABELS, stage=stage).observe(v)
    sys.stdout.write(f"# source: SGLang {sglang.__version__} (pip wheel) declarations in "
                     "sglang/srt/observability/metrics_collector.py, stages per "
                     "req_time_stats.py, rendered by scripts/real_sglang/kv_stage_text.py; "
                     "SYNTHETIC values (a decode instance)\n")
    sys.stdout.write(generate_latest(reg).decode())


if __name__ == "__main__":
    main()
