"""SGLang 0.5.23 ``/metrics`` for a simulated engine, in multiprocess style.

SGLang serves its metrics through prometheus_client's ``MultiProcessCollector``
(``add_prometheus_middleware``), so there are no ``_created`` samples, histogram samples come
as ``_sum``, the buckets, then ``_count``, gauges without a ``multiprocess_mode`` carry a ``pid``
label (``num_retracted_reqs``, ``num_paused_reqs``), and series labelled ``is_streaming``
appear only once a request of that kind has finished. The family table below was taken from
``tests/fixtures/metrics/sglang-generated-v0.5.23-metrics_collector.txt`` (names, HELP,
types, labels, buckets); left out (documented subset): the two ``dp_attention_*``
histograms (DP attention is off in the demo). Values come from the simulation.
"""

from __future__ import annotations

import math
import os
import random
import time
from collections.abc import Iterator

from prometheus_client import generate_latest
from prometheus_client.core import Metric
from prometheus_client.utils import floatToGoString

from llmtop import clock
from llmtop.demo.sim import Engine, Hist

__all__ = ["CONTENT_TYPE", "HIST_BOUNDS", "SPLIT", "render"]

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

# (family, type, HELP, label base, has is_streaming, has pid, extra label sets, buckets)
_SPEC: list[tuple[str, str, str, str, bool, bool, list[tuple[tuple[str, str], ...]],
                  tuple[float, ...]]] = [('sglang:prefill_effective_tokens', 'counter',
      'Effective prefill tokens with retracted-request re-counts excluded, updated on each log '
      'interval. mode: device_hit, host_hit, storage_hit, input. Windowed prefix cache hit rate = '
      'rate(sum of *_hit) / rate(sum of all modes); per-tier rate uses a single *_hit mode in the '
      'numerator.',
      'sched', False, False,
      [(('mode', 'input'),), (('mode', 'device_hit'),), (('mode', 'host_hit'),),
       (('mode', 'storage_hit'),)],
      ()),
     ('sglang:scheduler_idle_seconds', 'counter',
      'Total wall time while the scheduler has no runnable or queued work.', 'sched', False, False,
      [], ()),
     ('sglang:scheduler_process_cpu_seconds', 'counter',
      'Total CPU time consumed by the scheduler process across all threads.', 'sched', False, False,
      [], ()),
     ('sglang:scheduler_stage_seconds', 'counter',
      'Total scheduler-loop wall time exclusively attributed to each stage. forward_overlap (full, '
      'partial, none): full=both endpoints active, partial=one, none=no observed overlap '
      '(including unavailable timing). Not exact overlapped/exposed seconds.',
      'sched', False, False,
      [(('category', 'other'), ('forward_overlap', 'none')),
       (('category', 'recv_requests'), ('forward_overlap', 'none')),
       (('category', 'process_input_requests'), ('forward_overlap', 'none')),
       (('category', 'get_next_batch_to_run'), ('forward_overlap', 'none')),
       (('category', 'process_queue'), ('forward_overlap', 'none')),
       (('category', 'run_batch'), ('forward_overlap', 'none')),
       (('category', 'process_batch_result'), ('forward_overlap', 'none')),
       (('category', 'sanity_check_cache'), ('forward_overlap', 'none')),
       (('category', 'idle'), ('forward_overlap', 'none'))],
      ()),
     ('sglang:dp_attention_tokens', 'counter',
      'Tokens of MLP-sync steps on this DP rank. kind=scheduled: tokens this rank ran; '
      'kind=imbalance: tokens the busiest rank ran beyond this rank, i.e. capacity lost to DP '
      'imbalance on this rank. On speculative-decode steps the unit is batch rows (requests).',
      'sched', False, False, [(('kind', 'scheduled'),), (('kind', 'imbalance'),)], ()),
     ('sglang:dp_attention_steps', 'counter',
      'MLP-sync steps on this DP rank. rank_state=idle: this rank had no tokens and only ran to '
      'keep the DP collectives in lockstep.',
      'sched', False, False, [(('rank_state', 'active'),), (('rank_state', 'idle'),)], ()),
     ('sglang:dp_attention_pairs', 'counter',
      'Causal (query, key) pairs attended by MLP-sync steps on this DP rank, pricing every layer '
      'as full attention: a decode row reads its sequence, a prefill chunk its prefix plus the '
      "pairs within the chunk. kind=scheduled: this rank; kind=imbalance: the busiest rank's "
      'excess over this rank. The context-length counterpart of sglang:dp_attention_tokens_total; '
      'like it, speculative-decode steps count one query per row. Sliding-window layers execute '
      'fewer pairs than counted, so on hybrid-SWA models long rows are overstated.',
      'sched', False, False, [(('kind', 'scheduled'),), (('kind', 'imbalance'),)], ()),
     ('sglang:realtime_tokens', 'counter',
      'Total number of tokens processed (updated on each log interval). mode: prefill_compute, '
      'prefill_cache, decode.',
      'sched', False, False,
      [(('mode', 'prefill_compute'),), (('mode', 'prefill_cache'),), (('mode', 'decode'),)], ()),
     ('sglang:num_retracted_requests', 'counter', 'Total number of retracted requests.', 'sched',
      False, False, [], ()),
     ('sglang:num_retracted_input_tokens', 'counter', 'Total number of retracted input tokens.',
      'sched', False, False, [], ()),
     ('sglang:num_retracted_output_tokens', 'counter', 'Total number of retracted output tokens.',
      'sched', False, False, [], ()),
     ('sglang:prompt_tokens', 'counter', 'Number of prefill tokens processed.', 'tok', True, False,
      [], ()),
     ('sglang:generation_tokens', 'counter', 'Number of generation tokens processed.', 'tok', True,
      False, [], ()),
     ('sglang:cached_tokens', 'counter',
      'Number of cached prompt tokens by source (device/host/storage).', 'tok', False, False,
      [(('cache_source', 'device'),)], ()),
     ('sglang:num_requests', 'counter', 'Number of requests processed.', 'tok', True, False, [],
      ()),
     ('sglang:num_so_requests', 'counter', 'Number of structured output requests processed.', 'tok',
      False, False, [], ()),
     ('sglang:num_aborted_requests', 'counter', 'Number of requests aborted.', 'tok', False, False,
      [], ()),
     ('sglang:max_total_num_tokens', 'gauge',
      'Maximum total number of tokens in the KV cache pool.', 'sched', False, False, [], ()),
     ('sglang:weight_memory_usage_gb', 'gauge', 'Memory used by model weights in GB.', 'sched',
      False, False, [], ()),
     ('sglang:kv_cache_memory_usage_gb', 'gauge', 'Memory used by the KV cache pools in GB.',
      'sched', False, False, [], ()),
     ('sglang:graph_memory_usage_gb', 'gauge', 'Memory used by captured device graphs in GB.',
      'sched', False, False, [(('phase', 'decode'),)], ()),
     ('sglang:page_size', 'gauge', 'KV cache page size in tokens.', 'sched', False, False, [], ()),
     ('sglang:num_pages', 'gauge', 'Number of KV cache pages.', 'sched', False, False, [], ()),
     ('sglang:context_len', 'gauge', 'Maximum context length.', 'sched', False, False, [], ()),
     ('sglang:startup_available_gpu_memory_gb', 'gauge', 'Available GPU memory in GB at startup.',
      'sched', False, False, [], ()),
     ('sglang:num_running_reqs', 'gauge', 'The number of running requests.', 'sched', False, False,
      [], ()),
     ('sglang:num_queue_reqs', 'gauge', 'The number of requests in the waiting queue.', 'sched',
      False, False, [], ()),
     ('sglang:num_grammar_queue_reqs', 'gauge',
      'The number of requests in the grammar waiting queue.', 'sched', False, False, [], ()),
     ('sglang:gen_throughput', 'gauge', 'The generation throughput (token/s).', 'sched', False,
      False, [], ()),
     ('sglang:cache_hit_rate', 'gauge', 'The prefix cache hit rate.', 'sched', False, False, [],
      ()),
     ('sglang:decode_sum_seq_lens', 'gauge', 'The sum of all sequence lengths in decode.', 'sched',
      False, False, [], ()),
     ('sglang:token_usage', 'gauge', 'The token usage.', 'sched', False, False, [], ()),
     ('sglang:full_token_usage', 'gauge', 'The token usage for full attention layers.', 'sched',
      False, False, [], ()),
     ('sglang:swa_token_usage', 'gauge', 'The token usage for SWA layers.', 'sched', False, False,
      [], ()),
     ('sglang:mamba_usage', 'gauge', 'The token usage for Mamba layers.', 'sched', False, False, [],
      ()),
     ('sglang:num_used_tokens', 'gauge', 'The number of used tokens.', 'sched', False, False, [],
      ()),
     ('sglang:kv_available_tokens', 'gauge', 'Number of free token slots in the KV cache pool.',
      'sched', False, False, [], ()),
     ('sglang:kv_evictable_tokens', 'gauge',
      'Number of evictable (radix-cached) token slots in the KV cache pool.', 'sched', False, False,
      [], ()),
     ('sglang:kv_used_tokens', 'gauge', 'Number of actively used token slots in the KV cache pool.',
      'sched', False, False, [], ()),
     ('sglang:swa_available_tokens', 'gauge',
      'Number of free token slots in the SWA pool (hybrid-SWA only).', 'sched', False, False, [],
      ()),
     ('sglang:swa_evictable_tokens', 'gauge',
      'Number of evictable (radix-cached) token slots in the SWA pool.', 'sched', False, False, [],
      ()),
     ('sglang:swa_used_tokens', 'gauge', 'Number of actively used token slots in the SWA pool.',
      'sched', False, False, [], ()),
     ('sglang:mamba_available_tokens', 'gauge',
      'Number of free state slots in the mamba SSM pool (hybrid-SSM only).', 'sched', False, False,
      [], ()),
     ('sglang:mamba_evictable_tokens', 'gauge',
      'Number of evictable (radix-cached) state slots in the mamba SSM pool.', 'sched', False,
      False, [], ()),
     ('sglang:mamba_used_tokens', 'gauge',
      'Number of actively used state slots in the mamba SSM pool.', 'sched', False, False, [], ()),
     ('sglang:spec_accept_length', 'gauge',
      'Mean acceptance length of speculative decoding (accepted drafts + bonus token per forward).',
      'sched', False, False, [], ()),
     ('sglang:spec_accept_rate', 'gauge',
      'Speculative acceptance rate (`accepted drafts / proposed drafts` in batch).', 'sched', False,
      False, [], ()),
     ('sglang:spec_cap_length', 'gauge',
      'Mean DSpark confidence-scheduled verify window per verify step, incl the bonus slot (0 when '
      'no cap is scheduled).',
      'sched', False, False, [], ()),
     ('sglang:spec_block_accept_length', 'gauge',
      'Mean uncapped full-block accept length per verify step (accept + cap-trimmed drafts; exact '
      'only in DSpark cap-accept mode).',
      'sched', False, False, [], ()),
     ('sglang:spec_num_steps', 'gauge', 'Currently active speculative_num_steps.', 'sched', False,
      False, [], ()),
     ('sglang:spec_num_draft_tokens', 'gauge',
      'Currently active speculative_num_draft_tokens (decouples from steps under topk>1).', 'sched',
      False, False, [], ()),
     ('sglang:num_prefill_bootstrap_queue_reqs', 'gauge',
      'The number of requests in the prefill bootstrap queue.', 'sched', False, False, [], ()),
     ('sglang:num_prefill_inflight_queue_reqs', 'gauge',
      'The number of requests in the prefill inflight queue.', 'sched', False, False, [], ()),
     ('sglang:num_decode_prealloc_queue_reqs', 'gauge',
      'The number of requests in the decode prealloc queue.', 'sched', False, False, [], ()),
     ('sglang:num_decode_transfer_queue_reqs', 'gauge',
      'The number of requests in the decode transfer queue.', 'sched', False, False, [], ()),
     ('sglang:num_decode_host_receive_queue_reqs', 'gauge',
      'Requests in the decode transfer queue receiving into host memory or waiting for device '
      'admission.',
      'sched', False, False, [], ()),
     ('sglang:num_decode_deferred_kv_release_reqs', 'gauge',
      'The number of failed decode requests whose KV allocations are held pending transfer drain '
      'acknowledgement or timeout.',
      'sched', False, False, [], ()),
     ('sglang:pending_prealloc_token_usage', 'gauge',
      'The token usage for pending preallocated tokens (not preallocated yet).', 'sched', False,
      False, [], ()),
     ('sglang:prealloc_full_token_usage', 'gauge',
      'Share of the full-attention KV pool held by decode requests whose KV transfer is pending '
      '(preallocated, not yet running); same capacity basis as sglang:full_token_usage.',
      'sched', False, False, [], ()),
     ('sglang:prealloc_swa_token_usage', 'gauge',
      'Share of the SWA KV pool held by decode requests whose KV transfer is pending; same '
      'capacity basis as sglang:swa_token_usage.',
      'sched', False, False, [], ()),
     ('sglang:utilization', 'gauge', 'The utilization.', 'sched', False, False, [], ()),
     ('sglang:fwd_occupancy', 'gauge', 'Forward pass GPU occupancy percentage.', 'sched', False,
      False, [], ()),
     ('sglang:new_token_ratio', 'gauge', 'The new token ratio.', 'sched', False, False, [], ()),
     ('sglang:is_cuda_graph', 'gauge', 'Whether the batch is using CUDA graph.', 'sched', False,
      False, [], ()),
     ('sglang:num_unique_running_routing_keys', 'gauge',
      'Number of unique routing keys in running batch.', 'sched', False, False, [], ()),
     ('sglang:routing_key_running_req_count', 'gauge',
      'Distribution of routing keys by running request count (gt < count <= le).', 'sched', False,
      False, [], ()),
     ('sglang:routing_key_all_req_count', 'gauge',
      'Distribution of routing keys by running+waiting request count (gt < count <= le).', 'sched',
      False, False, [], ()),
     ('sglang:queue_time_seconds', 'histogram', 'Histogram of queueing time in seconds.', 'sched',
      False, False, [],
      (0.0, 0.001, 0.005, 0.01, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 3.0, 4.0, 5.0, 10.0, 15.0, 20.0,
       30.0, 40.0, 50.0, 60.0, 70.0, 80.0, 90.0, 100.0, 200.0, 300.0, 400.0, 500.0, 600.0, 700.0,
       800.0, 900.0, 1000.0, 1200.0, 1400.0, 1600.0, 1800.0, 2000.0, 2500.0, 3000.0)),
     ('sglang:time_to_first_token_seconds', 'histogram',
      'Histogram of time to first token in seconds.', 'tok', True, False, [],
      (0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 2.0, 4.0, 6.0, 8.0, 10.0, 20.0, 40.0, 60.0, 80.0, 100.0, 200.0,
       400.0)),
     ('sglang:inter_token_latency_seconds', 'histogram',
      'Histogram of inter-token latency in seconds.', 'tok', False, False, [],
      (0.002, 0.004, 0.006, 0.008, 0.01, 0.015, 0.02, 0.025, 0.03, 0.035, 0.04, 0.06, 0.08, 0.1,
       0.2, 0.4, 0.6, 0.8, 1.0, 2.0, 4.0, 6.0, 8.0)),
     ('sglang:e2e_request_latency_seconds', 'histogram',
      'Histogram of End-to-end request latency in seconds', 'tok', True, False, [],
      (0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 2.0, 4.0, 6.0, 8.0, 10.0, 20.0, 40.0, 60.0, 80.0, 100.0, 200.0,
       400.0, 600.0, 1200.0, 1800.0, 2400.0)),
     ('sglang:request_time_per_output_token_seconds', 'histogram',
      'Per-request TPOT in seconds: (finished_time - first_token_time) / (completion_tokens - 1).',
      'tok', True, False, [],
      (0.002, 0.004, 0.006, 0.008, 0.01, 0.015, 0.02, 0.025, 0.03, 0.035, 0.04, 0.06, 0.08, 0.1,
       0.2, 0.4, 0.6, 0.8, 1.0, 2.0, 4.0, 6.0, 8.0)),
     ('sglang:prompt_tokens_histogram', 'histogram', 'Histogram of prompt token length.', 'tok',
      False, False, [],
      (100.0, 300.0, 500.0, 700.0, 1000.0, 1500.0, 2000.0, 3000.0, 4000.0, 5000.0, 6000.0, 7000.0,
       8000.0, 9000.0, 10000.0, 12500.0, 15000.0, 17500.0, 20000.0, 22500.0, 25000.0, 27500.0,
       30000.0, 35000.0, 40000.0, 60000.0, 80000.0, 100000.0, 200000.0, 300000.0, 400000.0,
       600000.0, 800000.0, 1000000.0, 1100000.0)),
     ('sglang:uncached_prompt_tokens_histogram', 'histogram',
      'Histogram of uncached (compute) prompt token length.', 'tok', False, False, [],
      (100.0, 300.0, 500.0, 700.0, 1000.0, 1500.0, 2000.0, 3000.0, 4000.0, 5000.0, 6000.0, 7000.0,
       8000.0, 9000.0, 10000.0, 12500.0, 15000.0, 17500.0, 20000.0, 22500.0, 25000.0, 27500.0,
       30000.0, 35000.0, 40000.0, 60000.0, 80000.0, 100000.0, 200000.0, 300000.0, 400000.0,
       600000.0, 800000.0, 1000000.0, 1100000.0)),
     ('sglang:generation_tokens_histogram', 'histogram', 'Histogram of generation token length.',
      'tok', False, False, [],
      (100.0, 300.0, 500.0, 700.0, 1000.0, 1500.0, 2000.0, 3000.0, 4000.0, 5000.0, 6000.0, 7000.0,
       8000.0, 9000.0, 10000.0, 12500.0, 15000.0, 17500.0, 20000.0, 22500.0, 25000.0, 27500.0,
       30000.0, 35000.0, 40000.0, 60000.0, 80000.0, 100000.0, 200000.0, 300000.0, 400000.0,
       600000.0, 800000.0, 1000000.0, 1100000.0)),
     ('sglang:num_retracted_reqs', 'gauge', 'The number of retracted requests.', 'sched', False,
      True, [], ()),
     ('sglang:num_paused_reqs', 'gauge', 'The number of paused requests by async weight sync.',
      'sched', False, True, [], ())]

_ROUTING_BOUNDS = (("0", "1"), ("1", "2"), ("2", "3"), ("3", "5"), ("5", "7"), ("7", "10"),
                   ("10", "20"), ("20", "50"), ("50", "100"), ("100", "200"), ("200", "+Inf"))

_HIST_KEYS = {
    "sglang:queue_time_seconds": "queue",
    "sglang:time_to_first_token_seconds": "ttft",
    "sglang:inter_token_latency_seconds": "itl",
    "sglang:e2e_request_latency_seconds": "e2e",
    "sglang:request_time_per_output_token_seconds": "tpot",
    "sglang:prompt_tokens_histogram": "prompt_len",
    "sglang:uncached_prompt_tokens_histogram": "uncached_prompt_len",
    "sglang:generation_tokens_histogram": "gen_len",
}

HIST_BOUNDS: dict[str, tuple[float, ...]] = {
    _HIST_KEYS[row[0]]: row[7] for row in _SPEC if row[0] in _HIST_KEYS
}
SPLIT = frozenset({"ttft", "e2e", "tpot", "prompt_tokens", "gen_tokens_req", "requests"})

# counters split by is_streaming -> sim counter key
_STREAM_COUNTERS = {
    "sglang:prompt_tokens": "prompt_tokens",
    "sglang:generation_tokens": "gen_tokens_req",
    "sglang:num_requests": "requests",
}


def _values(e: Engine) -> dict[str, float]:
    """Scalar values of the scheduler gauges/counters without extra labels."""
    st = e.stats
    c = st.c
    bs = e.settings.block_size
    prof = e.profile
    gib = 1024**3
    total_tokens = e.kv_capacity_tokens
    used = e.pool.used * bs
    evictable = len(e.pool.lru) * bs
    wall = max(0.0, clock.time() - e.start_time)
    kv_gb = total_tokens * prof.kv_bytes_per_token / gib
    return {
        "sglang:scheduler_idle_seconds": max(0.0, wall - e.busy_s),
        "sglang:scheduler_process_cpu_seconds": time.process_time(),
        "sglang:num_retracted_requests": c["retracted"],
        "sglang:num_retracted_input_tokens": c["retracted_input_tokens"],
        "sglang:num_retracted_output_tokens": c["retracted_output_tokens"],
        "sglang:num_so_requests": 0.0,
        "sglang:num_aborted_requests": c["aborted"],
        "sglang:max_total_num_tokens": float(total_tokens),
        "sglang:weight_memory_usage_gb": round(prof.weights_bytes / gib, 2),
        "sglang:kv_cache_memory_usage_gb": round(kv_gb, 2),
        "sglang:page_size": 1.0,
        "sglang:num_pages": float(total_tokens),
        "sglang:context_len": float(e.settings.max_model_len),
        "sglang:startup_available_gpu_memory_gb": round(prof.mem_total_bytes / gib - 0.9, 2),
        "sglang:num_running_reqs": float(len(e.running)),
        "sglang:num_queue_reqs": float(len(e.waiting)),
        "sglang:gen_throughput": round(e.gen_tput, 2),
        "sglang:cache_hit_rate": round(e.last_hit_rate, 4),
        "sglang:decode_sum_seq_lens": float(e.used_tokens()),
        "sglang:token_usage": round(e.kv_usage(), 4),
        "sglang:full_token_usage": round(e.kv_usage(), 4),
        "sglang:num_used_tokens": float(used),
        "sglang:kv_available_tokens": float(e.pool.free * bs),
        "sglang:kv_evictable_tokens": float(evictable),
        "sglang:kv_used_tokens": float(used),
        "sglang:fwd_occupancy": (math.nan if not e.running
                                 else round(100.0 * len(e.running) / e.settings.max_num_seqs, 2)),
        "sglang:new_token_ratio": 0.7 if e.running else 0.0,
        "sglang:is_cuda_graph": 1.0 if e.running else 0.0,
        **_spec(e),
    }


def _spec(e: Engine) -> dict[str, float]:
    """Speculative decoding gauges (EAGLE, 3 steps, 4 draft tokens) while it is on; SGLang
    reports 0 for all of them without it."""
    a = e.spec_accept
    if a is None:
        return {}
    if e.running:  # the last verify batch's acceptance: a little noise around the rate
        a = min(1.0, max(0.0, a + _NOISE.uniform(-0.04, 0.04)))
    return {"sglang:spec_accept_rate": round(a, 4),
            "sglang:spec_accept_length": round(1 + 3 * a, 4),
            "sglang:spec_num_steps": 3.0, "sglang:spec_num_draft_tokens": 4.0}


_NOISE = random.Random(11)


def _labelled(e: Engine, name: str, extra: dict[str, str]) -> float:
    c = e.stats.c
    if name == "sglang:prefill_effective_tokens":
        return {"input": c["prompt_tokens"], "device_hit": c["prefix_hits"]}.get(extra["mode"], 0.0)
    if name == "sglang:realtime_tokens":
        return {"prefill_compute": c["prefill_compute_tokens"], "prefill_cache": c["prefix_hits"],
                "decode": c["generation_tokens"] - c["prefill_made_tokens"]}.get(extra["mode"], 0.0)
    if name == "sglang:scheduler_stage_seconds":
        if extra.get("category") == "run_batch":
            return e.busy_s
        if extra.get("category") == "idle":
            return max(0.0, clock.time() - e.start_time - e.busy_s)
        return 0.0
    if name == "sglang:cached_tokens":
        return c["prefix_hits"]
    if name == "sglang:graph_memory_usage_gb":
        return 0.42
    return 0.0


class _Collector:
    def __init__(self, engine: Engine):
        self.e = engine

    def collect(self) -> Iterator[Metric]:
        e = self.e
        st = e.stats
        sched = {"engine_type": "unified", "model_name": e.model, "moe_ep_rank": "0",
                 "pp_rank": "0", "tp_rank": "0"}
        tok = {"engine_type": "unified", "model_name": e.model}
        vals = _values(e)
        pid = str(os.getpid())
        for name, typ, doc, base_kind, stream, has_pid, extras, _bounds in _SPEC:
            base = sched if base_kind == "sched" else tok
            m = Metric(name, doc, typ)
            sample = name + "_total" if typ == "counter" else name
            if typ == "histogram":
                key = _HIST_KEYS[name]
                if stream:
                    for s in ("true", "false"):
                        h = st.h.get(f"{key}:{s}")
                        if h is not None:
                            _hist(m, {**base, "is_streaming": s}, h)
                else:
                    _hist(m, base, st.hist(key))
                if m.samples:
                    yield m
                continue
            if stream:
                key = _STREAM_COUNTERS[name]
                for s in ("true", "false"):
                    if f"{key}:{s}" in st.c:
                        m.add_sample(sample, {**base, "is_streaming": s}, st.c[f"{key}:{s}"])
                if m.samples:
                    yield m
                continue
            if name.startswith("sglang:routing_key_"):
                for gt, le in _ROUTING_BOUNDS:
                    m.add_sample(sample, {**base, "gt": gt, "le": le}, 0.0)
                yield m
                continue
            if extras:
                if name == "sglang:cached_tokens" and not st.c["prefix_hits"]:
                    continue  # only incremented when > 0, so absent until the first hit
                for ex in extras:
                    d = dict(ex)
                    m.add_sample(sample, {**base, **d}, _labelled(e, name, d))
                yield m
                continue
            if typ == "counter" and name in _LAZY and not vals.get(name):
                continue  # a real 0.5.23 server shows these only after their first increment
            labels = {**base, "pid": pid} if has_pid else base
            m.add_sample(sample, labels, vals.get(name, 0.0))
            yield m


_LAZY = frozenset({"sglang:num_retracted_requests", "sglang:num_retracted_input_tokens",
                   "sglang:num_retracted_output_tokens", "sglang:num_aborted_requests",
                   "sglang:num_so_requests"})
"""Labelled counters that a real server leaves out of ``/metrics`` until they first count."""


def _hist(m: Metric, labels: dict[str, str], h: Hist) -> None:
    m.add_sample(m.name + "_sum", labels, h.sum)
    for b, v in zip((*h.bounds, math.inf), h.cumulative(), strict=True):
        m.add_sample(m.name + "_bucket", {**labels, "le": floatToGoString(b)}, v)
    m.add_sample(m.name + "_count", labels, h.count)


def render(engine: Engine) -> bytes:
    """The engine's ``/metrics`` body, as SGLang 0.5.23 renders it."""
    return generate_latest(_Collector(engine))  # type: ignore[arg-type]
