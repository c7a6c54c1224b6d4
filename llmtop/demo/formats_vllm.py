"""vLLM 0.33 (V1) ``/metrics`` for a simulated engine, rendered by ``prometheus_client``.

Names, HELP text, types, label names, buckets and the ``_total``/``_created`` samples are
those of ``vllm/v1/metrics/loggers.py`` 0.33.0 in single-API-server mode (checked against
``tests/fixtures/metrics/vllm-generated-v0.33.0-loggers.txt``). The python_*/process_*
families come from prometheus_client's own collectors, except ``process_start_time_seconds``,
which is the simulated engine's start (it changes on a simulated restart). The 1-2-5 token
buckets stop at 2000 because the demo's ``max_model_len`` is 2048.

The ``vllm:estimated_*_per_gpu`` counters are those of ``--enable-mfu-metrics``
(``vllm/v1/metrics/perf.py``): names, HELP and order as a real vLLM 0.32 wrote them
(``tests/fixtures/metrics/vllm-real-cpu-v0.32.0-calm-b.txt``); the demo engine runs as if
started with the flag, its values the simulated steps' work (``sim.Engine._count_work``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import Metric
from prometheus_client.gc_collector import GCCollector
from prometheus_client.platform_collector import PlatformCollector
from prometheus_client.process_collector import ProcessCollector
from prometheus_client.utils import floatToGoString

from llmtop.demo.sim import SPEC_TOKENS, Engine, Hist

__all__ = ["CONTENT_TYPE", "HIST_BOUNDS", "render"]

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

_125 = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000)
_LAT = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0,
        120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0)
_ITL = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5,
        10.0, 20.0, 40.0, 80.0)

_NIXL_TIME = (0.001, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 5.0)

HIST_BOUNDS: dict[str, tuple[float, ...]] = {
    "prompt_len": _125,
    "gen_len": _125,
    "iteration_tokens": (1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384),
    "max_gen_len": _125,
    "n": (1, 2, 5, 10, 20),
    "max_tokens": _125,
    "ttft": (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0,
             7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0),
    "itl": _ITL,
    "tpot": _ITL,
    "e2e": _LAT,
    "queue": _LAT,
    "inference": _LAT,
    "prefill": _LAT,
    "decode": _LAT,
    "num_preemptions": (1, 2, 3, 4, 5, 10, 20),
    "prefill_kv_computed": _125,
    # the NIXL connector's (P/D engines only, ``Engine.kv_role``)
    "nixl_xfer": _NIXL_TIME[1:],
    "nixl_post": _NIXL_TIME,
    "nixl_bytes": tuple(2 ** (10 + i) for i in range(1, 25, 2)),
    "nixl_descs": (10, 20, 30, 50, 75, 100, 200, 400, 1000, 2000, 4000, 10000, 20000, 50000),
}

# (family, sim histogram key, HELP) in the order vLLM registers them
_HISTS = (
    ("vllm:request_prompt_tokens", "prompt_len", "Number of prefill tokens processed."),
    ("vllm:request_generation_tokens", "gen_len", "Number of generation tokens processed."),
    ("vllm:iteration_tokens_total", "iteration_tokens",
     "Histogram of number of tokens per engine_step."),
    ("vllm:request_max_num_generation_tokens", "max_gen_len",
     "Histogram of maximum number of requested generation tokens."),
    ("vllm:request_params_n", "n", "Histogram of the n request parameter."),
    ("vllm:request_params_max_tokens", "max_tokens",
     "Histogram of the max_tokens request parameter."),
    ("vllm:time_to_first_token_seconds", "ttft", "Histogram of time to first token in seconds."),
    ("vllm:inter_token_latency_seconds", "itl", "Histogram of inter-token latency in seconds."),
    ("vllm:request_time_per_output_token_seconds", "tpot",
     "Histogram of time_per_output_token_seconds per request."),
    ("vllm:e2e_request_latency_seconds", "e2e", "Histogram of e2e request latency in seconds."),
    ("vllm:request_queue_time_seconds", "queue",
     "Histogram of time spent in WAITING phase for request."),
    ("vllm:request_inference_time_seconds", "inference",
     "Histogram of time spent in RUNNING phase for request."),
    ("vllm:request_prefill_time_seconds", "prefill",
     "Histogram of time spent in PREFILL phase for request."),
    ("vllm:request_decode_time_seconds", "decode",
     "Histogram of time spent in DECODE phase for request."),
    ("vllm:request_num_preemptions", "num_preemptions",
     "Histogram of the number of times a request was preempted."),
    ("vllm:request_prefill_kv_computed_tokens", "prefill_kv_computed",
     "Histogram of new KV tokens computed during prefill (excluding cached tokens)."),
)

_MFU_DOC = "(for Model Flops Utilization calculations)."
_MFU = (
    ("vllm:estimated_flops_per_gpu", "est_flops",
     f"Estimated number of floating point operations per GPU {_MFU_DOC}"),
    ("vllm:estimated_read_bytes_per_gpu", "est_read_bytes",
     f"Estimated number of bytes read from memory per GPU {_MFU_DOC}"),
    ("vllm:estimated_write_bytes_per_gpu", "est_write_bytes",
     f"Estimated number of bytes written to memory per GPU {_MFU_DOC}"),
)
"""(family without ``_total``, sim counter, HELP) of vLLM's ``--enable-mfu-metrics``."""

_H_WAITING_BY_REASON = (
    "Number of waiting requests by reason. Reason labels: 'capacity' = waiting for scheduling "
    "capacity; 'deferred' = deferred by transient constraints (LoRA budget, KV transfer, "
    "blocked status). Sum of all reasons equals vllm:num_requests_waiting."
)
_H_SLEEP = (
    "Engine sleep state; awake = 0 means engine is sleeping; awake = 1 means engine is awake; "
    "weights_offloaded = 1 means sleep level 1; discard_all = 1 means sleep level 2."
)
_H_CACHED_BY_SOURCE = (
    "Prefix-cache hit tokens by the cache tier that supplied them: device (local HBM), host "
    "(offloaded to DRAM), disk, p2p (transferred from another vLLM instance) or "
    "external_unspecified. Counted at admission; sums to vllm:prefix_cache_hits + "
    "vllm:external_prefix_cache_hits."
)


def _gauge(name: str, doc: str, labels: dict[str, str], value: float) -> Metric:
    m = Metric(name, doc, "gauge")
    m.add_sample(name, labels, value)
    return m


class _Collector:
    def __init__(self, engine: Engine):
        self.e = engine
        scratch = CollectorRegistry(auto_describe=False)
        self._gc = GCCollector(registry=scratch)
        self._platform = PlatformCollector(registry=scratch)
        self._process = ProcessCollector(registry=scratch)

    def collect(self) -> Iterator[Metric]:
        e = self.e
        yield from self._gc.collect()
        yield from self._platform.collect()
        for m in self._process.collect():
            if m.name == "process_start_time_seconds":
                m = _gauge(m.name, m.documentation, {}, e.start_time)
            yield m
        yield from self._vllm()

    def _vllm(self) -> Iterator[Metric]:
        e = self.e
        st = e.stats
        c = st.c
        created = st.created
        base = {"engine": "0", "model_name": e.model}

        def counter(name: str, doc: str, series: list[tuple[dict[str, str], float]]) -> Metric:
            m = Metric(name, doc, "counter")
            for labels, v in series:
                m.add_sample(name + "_total", labels, v)
            for labels, _v in series:
                m.add_sample(name + "_created", labels, created)
            return m

        for name, key, doc in _MFU:
            yield counter(name, doc, [(base, c[key])])
        yield _gauge("vllm:num_requests_running", "Number of requests in model execution batches.",
                     base, len(e.running))
        yield _gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.",
                     base, len(e.waiting) + e.kv_pending)
        m = Metric("vllm:num_requests_waiting_by_reason", _H_WAITING_BY_REASON, "gauge")
        m.add_sample(m.name, {**base, "reason": "capacity"}, len(e.waiting))
        m.add_sample(m.name, {**base, "reason": "deferred"}, e.kv_pending)
        yield m
        m = Metric("vllm:engine_sleep_state", _H_SLEEP, "gauge")
        for state, v in (("awake", 1), ("weights_offloaded", 0), ("discard_all", 0)):
            m.add_sample(m.name, {**base, "sleep_state": state}, v)
        yield m
        yield _gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.",
                     base, round(e.kv_usage(), 6))
        yield counter("vllm:prefix_cache_queries",
                      "Prefix cache queries, in terms of number of queried tokens.",
                      [(base, c["prefix_queries"])])
        yield counter("vllm:prefix_cache_hits",
                      "Prefix cache hits, in terms of number of cached tokens.",
                      [(base, c["prefix_hits"])])
        yield counter("vllm:external_prefix_cache_queries",
                      "External prefix cache queries from KV connector cross-instance cache "
                      "sharing, in terms of number of queried tokens.", [(base, 0.0)])
        yield counter("vllm:external_prefix_cache_hits",
                      "External prefix cache hits from KV connector cross-instance cache "
                      "sharing, in terms of number of cached tokens.", [(base, 0.0)])
        yield counter("vllm:mm_cache_queries",
                      "Multi-modal cache queries, in terms of number of queried items.",
                      [(base, 0.0)])
        yield counter("vllm:mm_cache_hits",
                      "Multi-modal cache hits, in terms of number of cached items.", [(base, 0.0)])
        yield counter("vllm:num_preemptions", "Cumulative number of preemption from the engine.",
                      [(base, c["preemptions"])])
        yield counter("vllm:prompt_tokens", "Number of prefill tokens processed.",
                      [(base, c["prompt_tokens"])])
        cached = c["prompt_tokens_cached"]
        external = c["prompt_tokens_external"]
        yield counter("vllm:prompt_tokens_by_source", "Number of prompt tokens by source.", [
            ({**base, "source": "local_compute"}, c["prompt_tokens"] - cached - external),
            ({**base, "source": "local_cache_hit"}, cached),
            ({**base, "source": "external_kv_transfer"}, external),
        ])
        yield counter("vllm:prompt_tokens_cached",
                      "Number of cached prompt tokens (local + external).", [(base, cached)])
        yield counter("vllm:prompt_tokens_cached_by_source", _H_CACHED_BY_SOURCE, [
            ({**base, "source": "device"}, c["prefix_hits"]),
            ({**base, "source": "host"}, 0.0),
            ({**base, "source": "p2p"}, 0.0),
            ({**base, "source": "disk"}, 0.0),
            ({**base, "source": "external_unspecified"}, 0.0),
        ])
        yield counter("vllm:generation_tokens", "Number of generation tokens processed.",
                      [(base, c["generation_tokens"])])
        if e.spec_accept is not None:  # only with a speculative_config, as in vLLM
            yield from _spec_counters(counter, base, c)
        yield counter("vllm:request_success", "Count of successfully processed requests.", [
            ({**base, "finished_reason": r}, c[f"finished:{r}"])
            for r in ("stop", "length", "abort", "error", "repetition")
        ])
        mlabels = {"model_name": e.model}
        yield counter("vllm:admission_rejections",
                      "Number of admission attempts rejected by a queue limit, by reason.", [
                          ({**mlabels, "reason": "max_num_queued_reqs"}, c["rejected"]),
                          ({**mlabels, "reason": "max_num_queued_tokens"}, 0.0),
                      ])
        for name, key, doc in _HISTS:
            yield _hist(name, doc, base, st.hist(key), created)
        s = e.settings
        blocks = e.pool.total
        tokens = blocks * s.block_size
        yield _gauge("vllm:cache_config_info", "Information of the LLMEngine CacheConfig", {
            "block_size": str(s.block_size),
            "cache_dtype": "auto",
            "enable_prefix_caching": str(s.prefix_caching),
            "engine": "0",
            "gpu_memory_utilization": str(s.gpu_memory_utilization),
            "is_attention_free": "False",
            "kv_cache_layout": "None",
            "kv_cache_max_concurrency": str(round(tokens / s.max_model_len, 2)),
            "kv_cache_size_tokens": str(tokens),
            "num_cpu_blocks": "None",
            "num_gpu_blocks": str(blocks),
            "num_gpu_blocks_override": "None",
            "prefix_caching_hash_algo": "sha256",
            "sliding_window": "None",
            "user_specified_block_size": "False",
        }, 1.0)
        if e.kv_role is not None:  # a P/D engine: the NIXL connector's families
            yield from _nixl(base, st, counter, created)
        if e.kv_role == "prefill":  # and its offloading connector (MultiConnector)
            yield from _offload(base, e, counter)


# (family, sim key, HELP) of NixlPromMetrics (vllm/distributed/kv_transfer/kv_connector/v1/
# nixl_connector.py), in the order it declares them
_NIXL_HISTS = (
    ("vllm:nixl_xfer_time_seconds", "nixl_xfer",
     "Histogram of transfer duration for NIXL KV Cache transfers."),
    ("vllm:nixl_post_time_seconds", "nixl_post",
     "Histogram of transfer post time for NIXL KV Cache transfers."),
    ("vllm:nixl_bytes_transferred", "nixl_bytes",
     "Histogram of bytes transferred per NIXL KV Cache transfers."),
    ("vllm:nixl_num_descriptors", "nixl_descs",
     "Histogram of number of descriptors per NIXL  KV Cache transfers."),
)
_NIXL_COUNTERS = (
    ("vllm:nixl_num_failed_transfers", "nixl_failed", "Number of failed NIXL KV Cache transfers."),
    ("vllm:nixl_num_failed_notifications", "nixl_failed_notifications",
     "Number of failed NIXL KV Cache notifications."),
    ("vllm:nixl_num_kv_expired_reqs", "nixl_expired",
     "Number of requests that had their KV expire. NOTE: This metric is tracked on the P "
     "instance."),
)


def _nixl(base: dict[str, str], st: Any, counter: Any, created: float) -> Iterator[Metric]:
    for name, key, doc in _NIXL_HISTS:
        yield _hist(name, doc, base, st.hist(key), created)
    for name, key, doc in _NIXL_COUNTERS:
        yield counter(name, doc, [(base, st.c[key])])


def _offload(base: dict[str, str], e: Engine, counter: Any) -> Iterator[Metric]:
    """vLLM's ``OffloadingConnector`` (``offloading/metrics.py``, vLLM 0.32): every computed
    prompt block stored to CPU; the demo's prefix hits are on the GPU, so nothing loads back."""
    c = e.stats.c
    per_token = float(e.profile.kv_bytes_per_token)
    computed = c["prompt_tokens"] - c["prompt_tokens_cached"] - c["prompt_tokens_external"]
    yield counter("vllm:kv_offload_store_bytes", "Total bytes stored from GPU to offload storage.",
                  [(base, max(0.0, computed) * per_token)])
    yield counter("vllm:kv_offload_load_bytes", "Total bytes loaded from offload storage to GPU.",
                  [(base, 0.0)])
    yield counter("vllm:kv_offload_allocation_failure",
                  "Number of KV offload store allocation attempts that failed.", [(base, 0.0)])


def _spec_counters(counter: Any, base: dict[str, str], c: Any) -> Iterator[Metric]:
    """``vllm/v1/spec_decode/metrics.py`` ``SpecDecodingProm`` (whole counts, as vLLM's)."""
    yield counter("vllm:spec_decode_num_drafts", "Number of spec decoding drafts.",
                  [(base, float(int(c["spec_drafts"])))])
    yield counter("vllm:spec_decode_num_draft_tokens", "Number of draft tokens.",
                  [(base, float(int(c["spec_draft_tokens"])))])
    yield counter("vllm:spec_decode_num_accepted_tokens", "Number of accepted tokens.",
                  [(base, float(int(c["spec_accepted_tokens"])))])
    yield counter("vllm:spec_decode_num_accepted_tokens_per_pos",
                  "Accepted tokens per draft position.",
                  [({**base, "position": str(i)}, float(int(c[f"spec_pos:{i}"])))
                   for i in range(SPEC_TOKENS)])


def _hist(name: str, doc: str, labels: dict[str, str], h: Hist, created: float) -> Metric:
    m = Metric(name, doc, "histogram")
    cum = h.cumulative()
    for b, v in zip((*h.bounds, float("inf")), cum, strict=True):
        m.add_sample(name + "_bucket", {**labels, "le": floatToGoString(b)}, v)
    m.add_sample(name + "_count", labels, h.count)
    m.add_sample(name + "_sum", labels, h.sum)
    m.add_sample(name + "_created", labels, created)
    return m


_collectors: dict[int, _Collector] = {}


def render(engine: Engine) -> bytes:
    """The engine's ``/metrics`` body, exactly as vLLM 0.33 renders it."""
    col = _collectors.get(id(engine))
    if col is None or col.e is not engine:
        col = _collectors[id(engine)] = _Collector(engine)
    return generate_latest(col)  # type: ignore[arg-type]
