"""Value types shared by every layer.

Contract: ``None`` always means "not reported by the source", never zero.
Nothing here does I/O, reads a clock or imports a UI library.

- Here: samples, engine rows, GPU records, ``Snapshot`` (``from llmtop.model import X``).
- ``model.stack``: routers, their backends and roles.
- ``model.request_records``: single requests (from spans and live slots), cold starts.
- ``model.gpu``: GPU records and samples; ``model.kv``: the KV transfer and tier values
  (both re-exported here).
- ``model.values``: ``Hist``, ``Quantiles``, ``json_number``, below the rest (the first two
  re-exported here).

Flow::

    Scraper --RawScrape--> adapter (parse/) --EngineSample--> Store (history/)
        --> EngineRow / Snapshot --> ui/, console/, --once --json
    GpuSampler --GpuSample--> Store
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from llmtop.model.gpu import GpuProcess, GpuRecord, GpuSample
from llmtop.model.kv import (
    KV_TIER_FIELDS,
    KV_TIERS_FIELDS,
    KV_TRANSFER_FIELDS,
    KvTier,
    KvTiers,
    KvTransfer,
)
from llmtop.model.logs import LogEvent, LogLocation, LogSummary, RawLog
from llmtop.model.values import Hist, Quantiles, json_number

if TYPE_CHECKING:
    from llmtop.model.request_records import RequestRecord
    from llmtop.model.stack import RouterRow

__all__ = [
    "COUNTER_KEYS",
    "ENGINES",
    "GAUGE_KEYS",
    "GOOD_STATES",
    "HIST_KEYS",
    "KV_TIERS_FIELDS",
    "KV_TIER_FIELDS",
    "KV_TRANSFER_FIELDS",
    "LABELLED",
    "LATENCY_KINDS",
    "PHASE_KINDS",
    "SCRAPE_HEALTH",
    "SCRAPE_KINDS",
    "SCRAPE_METRICS",
    "SCRAPE_SLOTS",
    "SCRAPE_WORKERS",
    "STATES",
    "WEIGHTS_PER_TOKEN",
    "Container",
    "EngineRow",
    "EngineSample",
    "Event",
    "GpuProcess",
    "GpuRecord",
    "GpuSample",
    "Hist",
    "KvTier",
    "KvTiers",
    "KvTransfer",
    "LogEvent",
    "LogLocation",
    "LogSummary",
    "ModelSample",
    "Quantiles",
    "RawLog",
    "RawScrape",
    "RawSpans",
    "Snapshot",
]

ENGINES = ("vllm", "sglang", "triton", "trtllm", "tgi", "llamacpp", "lmdeploy", "ollama", "dcgm",
           "dynamo_worker")
"""Engine ids, as they appear in ``--once --json`` and in target hints (``vllm@host:port``)."""

STATES = ("ok", "down", "http_error", "unauthorized", "bad_payload", "stale", "restarted")
"""Target states. ``stale``/``restarted`` are decided by the store, the rest by the scraper."""

GOOD_STATES = ("ok", "restarted")
"""States whose latest scrape was good: the row's values are current."""

LATENCY_KINDS = ("ttft", "itl", "tpot", "e2e", "queue")
"""Latency histograms every adapter maps into, all in seconds."""

PHASE_KINDS = ("prefill", "decode", "inference")
"""Per-request phase-time histograms (seconds): vLLM ``request_{prefill,decode,inference}_time``."""

HIST_KEYS = (*LATENCY_KINDS, *PHASE_KINDS, "prompt_len", "gen_len", "iteration_tokens")
"""All histogram keys of ``ModelSample.hists``: latencies and phases in seconds; prompt and
generation lengths per request and tokens per engine step (``iteration_tokens``) in tokens."""

GAUGE_KEYS = (
    "running",  # requests in the running batch
    "waiting",  # requests queued
    "waiting_deferred",  # of those, deferred (vLLM: LoRA budget, KV transfer, blocked)
    "swapped",  # vLLM V0 only
    "max_running",  # max concurrent requests (max_num_seqs / max_running_requests / TRT max)
    "kv_usage",  # 0..1
    "kv_capacity_tokens",  # KV cache capacity in tokens
    "prefix_hit_rate_gauge",  # an engine-computed hit-rate gauge (fallback only)
    "spec_accept_rate_gauge",  # an engine-computed spec-decode acceptance gauge (fallback only)
)

COUNTER_KEYS = (
    "prompt_tokens",
    "generation_tokens",
    "requests",  # finished requests, all reasons
    "preemptions",  # vLLM preemptions, SGLang retractions
    "prefix_queries",  # tokens queried against the prefix cache
    "prefix_hits",  # tokens found in the prefix cache
    "aborted",
    "errors",
    "rejected",
    "spec_drafts",  # speculative-decoding draft rounds
    "spec_draft_tokens",  # tokens proposed by the draft
    "spec_accepted_tokens",  # draft tokens accepted
    "est_flops",  # the engine's own estimate of FLOPs per GPU (vLLM/SGLang --enable-mfu-metrics)
    "est_read_bytes",  # ... of bytes read from GPU memory per GPU
    "est_write_bytes",  # ... of bytes written per GPU
    # finished requests by reason and failures by reason: LABELLED["counters"]
)

LABELLED: dict[str, dict[str, str]] = {
    "gauges": {
        "kv_queue": "queue",  # SGLang's P/D queues: requests in each
    },
    "counters": {
        "finished": "reason",  # finished requests by finish reason (stop, length, abort, error...)
        "error": "reason",  # failed requests by the engine's failure reason (TGI, Triton)
        "prompt_tokens": "source",  # vLLM prompt tokens by where their KV came from
        "cached_tokens": "tier",  # vLLM prefix-cache hit tokens by the KV tier that served them
        "tier_chunk_queries": "tier",  # vLLM offloading connector, per secondary tier
        "tier_chunk_hits": "tier",
        "tier_read_bytes": "tier",  # read back into the primary tier (load-back)
        "tier_write_bytes": "tier",  # written to the tier (offload)
        "tier_failed": "tier",  # promotion and cascade job failures
    },
    "hists": {
        "kv_stage": "stage",  # SGLang KV transfer stage latencies (s)
    },
}
"""Families of ``ModelSample.gauges_by`` / ``counters_by`` / ``hists_by`` (by kind): one value
per label value, ``{family: {label value: value}}``; here family -> what its label names
(``parse.kv_series``, ``parse.kv_offload``)."""


WEIGHTS_PER_TOKEN = frozenset({"sglang"})
"""Engines whose byte estimate counts the weights once per token in the batch, not once per
step (SGLang's ``_estimate_decode_perf``; measured: 4 requests at once count 4.0x one
alone): at batch > 1 their bytes/s, so their MBU, over-state what memory moved and may pass
1. Shown as they say; never read as evidence that memory is the limit."""

SCRAPE_METRICS = "metrics"
"""A ``RawScrape`` of a target's metrics endpoint: parsed into samples, counted as a scrape."""
SCRAPE_SLOTS = "slots"
"""llama-server's ``/slots`` (its requests in flight), reduced by ``sources.slots``."""
SCRAPE_WORKERS = "workers"
"""A router's ``/workers`` list (roles per backend), reduced by ``sources.router_workers``."""
SCRAPE_HEALTH = "health"
"""The health endpoint of a row that may be stuck (``sources.health``: only the code counts)."""
SCRAPE_KINDS = (SCRAPE_METRICS, SCRAPE_SLOTS, SCRAPE_WORKERS, SCRAPE_HEALTH)
"""What a ``RawScrape`` can be (``RawScrape.kind``); every kind but metrics is a side poll."""


@dataclass(frozen=True, slots=True)
class RawScrape:
    """One raw scrape of one target, exactly as fetched. This is what recordings store."""

    target: str
    """Target name (``Target.name``)."""
    url: str
    """URL fetched, without credentials."""
    t_wall: float
    """Unix time when the response completed (or failed)."""
    t_mono: float
    """Monotonic seconds at the same moment; replay supplies the recorded value."""
    status: str
    """``ok`` | ``down`` | ``http_error`` | ``unauthorized`` | ``bad_payload``."""
    http_status: int | None = None
    content_type: str | None = None
    body: str | None = None
    """Decoded body when ``status == "ok"``; None otherwise."""
    error: str | None = None
    """Short human-readable reason when not ok ("connection refused", "HTML page", ...)."""
    elapsed_s: float | None = None
    headers: dict[str, str] | None = None
    """Selected response headers only (e.g. ``process-start-time-unix``); never auth headers."""
    identity: dict[str, Any] | None = None
    """What identity endpoints said (``/version``, ``/v1/models``, ``/v2``, ...), when probed."""
    engine_hint: str | None = None
    """Engine id known for this target (from the user's hint or detection)."""
    kind: str = SCRAPE_METRICS
    """What was fetched (``SCRAPE_KINDS``): consumers dispatch on this, never on ``url``."""


@dataclass(frozen=True, slots=True)
class RawSpans:
    """One OTLP trace export body as received (gunzipped), from an engine's tracer. This is
    what recordings store; replay decodes ``body`` again (``sources.otlp_decode``)."""

    t_wall: float
    t_mono: float
    body: bytes
    kind: str = "protobuf"
    """``protobuf`` or ``json`` (the OTLP encoding of ``body``)."""
    peer: str | None = None
    """The sender's address (host only): matches spans to an engine row on that host."""
    transport: str = "http"
    """``http`` or ``grpc``."""
    spans: Any = None
    """The decoded spans when the receiver decoded them already (never recorded)."""


@dataclass(slots=True)
class ModelSample:
    """Normalized values of one model (or one data-parallel rank) at one scrape.

    Gauges and counters hold raw cumulative values; rates are derived later from deltas.
    A key that is absent means the engine does not report it.
    """

    model: str
    rank: str | None = None
    gauges: dict[str, float] = field(default_factory=dict)
    counters: dict[str, float] = field(default_factory=dict)
    hists: dict[str, Hist] = field(default_factory=dict)
    info: dict[str, str] = field(default_factory=dict)
    gauges_by: dict[str, dict[str, float]] = field(default_factory=dict)
    """Gauge families with one value per label (``LABELLED["gauges"]``)."""
    counters_by: dict[str, dict[str, float]] = field(default_factory=dict)
    """Counter families with one value per label (``LABELLED["counters"]``), cumulative."""
    hists_by: dict[str, dict[str, Hist]] = field(default_factory=dict)
    """Histogram families with one histogram per label (``LABELLED["hists"]``)."""

    def labelled(self, kind: str) -> dict[str, dict[str, Any]]:
        """``gauges_by``, ``counters_by`` or ``hists_by`` for ``kind`` (gauges, counters,
        hists)."""
        return {"gauges": self.gauges_by, "counters": self.counters_by,
                "hists": self.hists_by}[kind]


@dataclass(slots=True)
class EngineSample:
    """What an adapter extracts from one scrape of one target."""

    engine: str
    version: str | None = None
    start_time: float | None = None
    """Process start (unix s): ``process_start_time_seconds``, the earliest ``_created``,
    or a ``Process-Start-Time-Unix`` header. A change marks a restart."""
    models: list[ModelSample] = field(default_factory=list)
    """One per model, data-parallel ranks already aggregated."""
    ranks: list[ModelSample] = field(default_factory=list)
    """Per (model, rank) samples when the target has more than one rank; else empty."""
    gpus: list[GpuRecord] = field(default_factory=list)
    """GPUs the payload describes (Triton ``nv_gpu_*``, DCGM exporter)."""
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class EngineRow:
    """One row of the engines view: a target and model (or one rank), over one window."""

    key: str
    """Stable row key: ``target|model`` (rank rows ``target|model|rank``)."""
    target: str
    engine: str | None = None
    engine_version: str | None = None
    model: str | None = None
    rank: str | None = None
    state: str = "ok"
    error: str | None = None
    http_status: int | None = None
    last_ok_age_s: float | None = None
    """Seconds since the last good scrape (None if never)."""
    running: float | None = None
    waiting: float | None = None
    waiting_deferred: float | None = None
    """Of ``waiting``, those the engine defers for a transient constraint, not for capacity
    (vLLM's ``num_requests_waiting_by_reason{reason="deferred"}``: LoRA budget, KV transfer,
    a blocked request); None where the engine does not say."""
    max_running: float | None = None
    kv_cache_usage: float | None = None
    kv_capacity_tokens: float | None = None
    prefix_hit_rate: float | None = None
    ttft_s: Quantiles | None = None
    itl_s: Quantiles | None = None
    tpot_s: Quantiles | None = None
    e2e_s: Quantiles | None = None
    queue_s: Quantiles | None = None
    prefill_s: Quantiles | None = None
    decode_s: Quantiles | None = None
    inference_s: Quantiles | None = None
    prompt_len: Quantiles | None = None
    """Prompt tokens per finished request over the window (tokens, not seconds)."""
    gen_len: Quantiles | None = None
    """Generated tokens per finished request over the window (tokens)."""
    iteration_tokens: Quantiles | None = None
    """Tokens per engine step (batch size in tokens) over the window."""
    spec_accept_rate: float | None = None
    """Speculative decoding: accepted / drafted tokens over the window (None: no drafts)."""
    prompt_tokens_per_s: float | None = None
    generation_tokens_per_s: float | None = None
    requests_per_s: float | None = None
    preemptions_per_s: float | None = None
    errors_per_s: float | None = None
    finished: dict[str, float] | None = None
    """Finished requests by reason, counted over the window."""
    ranks: list[EngineRow] = field(default_factory=list)
    lifetime: Mapping[str, Any] = field(default_factory=dict)
    """Since process start: ``{"ttft_s": Quantiles, "itl_s": ..., "prefix_hit_rate": x, ...}``."""
    info: dict[str, str] = field(default_factory=dict)
    labels: dict[str, str] | None = None
    """Fleet mode: the row's group labels and ``job`` (None in direct mode)."""
    capacity_used: float | None = None
    """Request rate over the window / the matching profile's capacity (``llmtop.capacity``);
    None without a profile or a rate."""
    capacity: dict[str, Any] | None = None
    """The matching profile: capacity, SLOs, shape, ``measured_unix``, ``age_s``, ``stale``."""
    capacity_drift: list[dict[str, Any]] = field(default_factory=list)
    """How the live traffic differs from the profile's shape (``what``, ``ratio``, ``text``)."""
    router: str | None = None
    """The target of the router this engine is a backend of (``llmtop.topology``), else None."""
    role: str | None = None
    """``prefill`` | ``decode`` | ``both`` (``model.stack.ROLES``), from its router, its own
    KV-transfer role or pod labels; None when nothing says."""
    kv_transfer: KvTransfer | None = None
    """P/D KV transfer over the window; None when the engine exports none."""
    kv_tiers: KvTiers | None = None
    """KV offload tiers over the window; None when none."""
    tokens_idle_s: float | None = None
    """Seconds the engine has held running or waiting requests without a new generated token
    (up to the end of the window; 0 when a token came in the newest interval); None when
    unknown. The ``stuck`` rule reads it."""
    container: Container | None = None
    """The container, pod or network namespace the engine runs in (None: the host's own
    network, or not known); from discovery (``llmtop.sources.containers``)."""
    achieved_flops_per_s: float | None = None
    """The engine's estimated FLOP/s per GPU over the window (``est_flops`` delta)."""
    achieved_read_bytes_per_s: float | None = None
    achieved_write_bytes_per_s: float | None = None
    achieved_bytes_per_s: float | None = None
    """Read plus written bytes/s per GPU over the window."""
    mbu: float | None = None
    """Memory-bandwidth utilisation: achieved bytes/s / the GPU's peak bandwidth, 0..1."""
    mfu: float | None = None
    """Model FLOPs utilisation: achieved FLOP/s / the GPU's dense peak, 0..1."""
    gpu_peak: dict[str, Any] | None = None
    """The peak the ratios divide by: ``bytes_per_s``, ``flops``, ``gpu`` (name),
    ``source`` (datasheet row or ``--gpu-peak``); None: unknown GPU and no override."""
    mfu_hint: str | None = None
    """How to turn the engine's FLOP/byte counters on when it does not export them
    (``start vLLM with --enable-mfu-metrics``); None when exported or not applicable."""
    log: LogSummary | None = None
    """The engine's log over the window (``history``); None when no log is followed."""
    health_status: int | str | None = None
    """The engine's health endpoint in the window (``sources.health``), asked only while
    the row may be stuck: its HTTP status code, ``timeout`` or ``down``; None when not
    asked (not a stuck candidate, or no health path known: Ollama, Triton's port unknown)."""

    @property
    def capacity_requests_per_s(self) -> float | None:
        """The matching profile's capacity in requests/s (None without one)."""
        return self.capacity.get("requests_per_s") if self.capacity is not None else None

    def to_json(self) -> dict[str, Any]:
        def q(v: Quantiles | None) -> dict[str, Any] | None:
            return v.to_json() if v is not None else None

        out: dict[str, Any] = {
            "target": self.target,
            "engine": self.engine,
            "engine_version": self.engine_version,
            "model": self.model,
            "state": self.state,
            "error": self.error,
            "running": json_number(self.running),
            "waiting": json_number(self.waiting),
            "waiting_deferred": json_number(self.waiting_deferred),
            "max_running": json_number(self.max_running),
            "kv_cache_usage": json_number(self.kv_cache_usage),
            "kv_capacity_tokens": json_number(self.kv_capacity_tokens),
            "prefix_hit_rate": json_number(self.prefix_hit_rate),
            "ttft_s": q(self.ttft_s),
            "itl_s": q(self.itl_s),
            "tpot_s": q(self.tpot_s),
            "e2e_s": q(self.e2e_s),
            "queue_s": q(self.queue_s),
            "prefill_s": q(self.prefill_s),
            "decode_s": q(self.decode_s),
            "inference_s": q(self.inference_s),
            "prompt_len": q(self.prompt_len),
            "gen_len": q(self.gen_len),
            "iteration_tokens": q(self.iteration_tokens),
            "spec_accept_rate": json_number(self.spec_accept_rate),
            "prompt_tokens_per_s": json_number(self.prompt_tokens_per_s),
            "generation_tokens_per_s": json_number(self.generation_tokens_per_s),
            "requests_per_s": json_number(self.requests_per_s),
            "preemptions_per_s": json_number(self.preemptions_per_s),
            "errors_per_s": json_number(self.errors_per_s),
            "finished": self.finished,
            "ranks": [r.to_json() for r in self.ranks],
            "lifetime": {
                k: (v.to_json() if isinstance(v, Quantiles) else v)
                for k, v in self.lifetime.items()
            },
            "capacity_used": json_number(self.capacity_used),
            "capacity": ({**self.capacity, "drift": list(self.capacity_drift)}
                         if self.capacity is not None else None),
        }
        out["router"] = self.router
        out["role"] = self.role
        out["kv_transfer"] = self.kv_transfer.to_json() if self.kv_transfer else None
        out["kv_tiers"] = self.kv_tiers.to_json() if self.kv_tiers else None
        out["tokens_idle_s"] = json_number(self.tokens_idle_s)
        out["container"] = self.container.to_json() if self.container is not None else None
        out["health_status"] = self.health_status
        out["achieved_flops_per_s"] = json_number(self.achieved_flops_per_s)
        out["achieved_read_bytes_per_s"] = json_number(self.achieved_read_bytes_per_s)
        out["achieved_write_bytes_per_s"] = json_number(self.achieved_write_bytes_per_s)
        out["achieved_bytes_per_s"] = json_number(self.achieved_bytes_per_s)
        out["mbu"] = json_number(self.mbu)
        out["mfu"] = json_number(self.mfu)
        out["gpu_peak"] = self.gpu_peak
        out["mfu_hint"] = self.mfu_hint
        out["log"] = self.log.to_json() if self.log is not None else None
        if self.rank is not None:
            out["rank"] = self.rank
        if self.labels is not None:
            out["labels"] = dict(self.labels)
        return out


@dataclass(frozen=True, slots=True)
class Event:
    """One event-log line."""

    t_wall: float
    level: str
    """``info`` | ``warn`` | ``error``."""
    target: str | None
    text: str


@dataclass(slots=True)
class Snapshot:
    """Everything one screen (or one ``--once``) shows, at one moment, over one window."""

    time: float
    window_s: float
    engines: list[EngineRow] = field(default_factory=list)
    gpus: list[GpuRecord] = field(default_factory=list)
    gpu_error: str | None = None
    routers: list[RouterRow] = field(default_factory=list)
    """The row of each router target (``model.stack.ROUTERS``), with its backends; a router
    is never among ``engines``."""
    requests: list[RequestRecord] | None = None
    """The window's finished requests, slowest TTFT first; None
    when llmtop receives no spans (``history.request_window``)."""
    requests_window: dict[str, Any] | None = None
    """The requests' summary, in-flight requests, cold starts and receiver counters."""
    log_events: Mapping[str, Sequence[LogEvent]] = field(default_factory=dict)
    """Per target, the engine's kept log events, oldest first (read-only; ``history.logs``),
    for the log view; empty when no log is followed. ``to_json`` leaves them out (the row's
    ``log`` summarises them)."""

    def to_json(self, version: str) -> dict[str, Any]:
        out = {
            "llmtop": version,
            "time": self.time,
            "window_s": self.window_s,
            "engines": [e.to_json() for e in self.engines],
            "routers": [r.to_json() for r in self.routers],
            "gpus": [g.to_json() for g in self.gpus],
            "gpu_error": self.gpu_error,
        }
        if self.requests is not None:  # only where spans are received (docs/requests.md)
            out["requests"] = [r.to_json() for r in self.requests]
            out["requests_window"] = self.requests_window
        return out


@dataclass(frozen=True, slots=True)
class Container:
    """Where an engine found by discovery runs, in names an operator knows. Every field may
    be None: what the box did not tell (``docs/discovery.md``)."""

    runtime: str | None = None
    """``docker`` | ``containerd`` | ``cri-o`` | ``podman`` | None (a bare namespace)."""
    id: str | None = None
    """Full container id, from the cgroup path."""
    name: str | None = None
    """Container name (Docker's, Podman's, or the pod's container)."""
    pod: str | None = None
    namespace: str | None = None
    """Kubernetes namespace of the pod."""
    netns: str | None = None
    """Network namespace: its ``ip netns`` name, else its inode (None: not readable)."""
    pid: int | None = field(default=None, compare=False)
    """The engine's process id on this machine (GPU attribution; not shown, not recorded)."""

    @property
    def label(self) -> str:
        """Short words for a row: ``pod prod/vllm-0``, ``ctr vllm-a``, ``netns blue``."""
        if self.pod:
            return f"pod {self.namespace}/{self.pod}" if self.namespace else f"pod {self.pod}"
        if self.name:
            return f"ctr {self.name}"
        if self.id:
            return f"ctr {self.id[:12]}"
        return f"netns {self.netns or '?'}"

    def to_json(self) -> dict[str, str | None]:
        return {"runtime": self.runtime, "id": self.id, "name": self.name, "pod": self.pod,
                "namespace": self.namespace, "netns": self.netns}

    @classmethod
    def from_json(cls, obj: Any) -> Container | None:
        """The value ``to_json`` wrote (None for anything else: an old or bad recording)."""
        if not isinstance(obj, dict):
            return None
        keys = ("runtime", "id", "name", "pod", "namespace", "netns")
        return cls(**{k: str(obj[k]) if obj.get(k) is not None else None for k in keys})
