"""Demo scenarios and the in-process background traffic that keeps the demo alive.

Background traffic is simulated inside the demo process (requests go straight into each
engine, no HTTP): per engine, a target concurrency made of a slow sine wave plus short
bursts, refilled every 0.25 s. Traffic shape, KV pool and scheduler settings can differ per
engine kind (``per_engine``, ``kv_blocks``, ``settings``).

The default demo keeps every engine's KV cache 20-80 % full, shows a prefix hit rate, and
lets Triton (running limit 32) queue a little: a small queue that comes and drains.

Diagnosis scenarios (``rule`` names the rule each is for; ``DIAGNOSIS`` maps them) run a
healthy **baseline** first (``baseline_s``, 30 s; the environment variable
``LLMTOP_DEMO_BASELINE_S`` or ``DemoServer(baseline_s=...)`` changes it) and then
switch to their anomaly: other traffic (``anomaly``, per engine kind) and/or an ``effect``
on some engines (``effect_engines``) that :class:`~llmtop.demo.server.DemoServer` applies.

================  ============================================================================
kv-pressure       small KV pools + long prompts/outputs: vLLM preempts, SGLang retracts,
                  Triton queues and rejects (503); from the start, or after a light-load
                  baseline when ``LLMTOP_DEMO_BASELINE_S`` is set
queue-spike       every 40 s (first after 5 s) 8 s of 160 extra concurrent requests per engine
prefix-thrash     400 distinct 512-word prefixes on a small KV pool: LRU evictions, low hit rate
restart           the first engine restarts (counters reset, new start time, streams cut)
                  ``fault_after`` s after start (default 10) and then every ``fault_every`` s (30)
down              the first engine's port stops listening at ``fault_after`` and listens again
                  ``fault_every`` s later, alternating (connection refused while down)
garbage           the first engine's /metrics answers HTTP 200 with junk (not Prometheus text)
slow              the first engine's /metrics answers after 3 s (past the 2 s scrape timeout)
long-prompts      after the baseline, vLLM's and SGLang's prompts get ~3.5x longer (shared
                  prefixes too, so the hit rate holds): prefill time and TTFT rise
decode-slowdown   after the baseline, every vLLM and SGLang step takes 2.5x as long (a noisy
                  neighbour on the GPU): ITL/TPOT rise, same prompts, no queue, same KV
gpu-throttle      after the baseline, vLLM's GPU overheats: HW (thermal) slowdown, SM clock
                  down to 45 %, and that engine's ITL rises (x2.2)
errors            after the baseline, 10 % of vLLM's and Triton's requests fail (vLLM
                  ``finished_reason="error"``, Triton ``nv_inference_request_failure``)
imbalance         after the baseline, vLLM gets most of the traffic (48 concurrent) and its
                  replica SGLang (same model) almost none (4)
queueing          after the baseline, vLLM's and SGLang's load exceeds their running limit
                  (64, 48) while KV has room: a queue all along, queue time most of TTFT
prefix-miss       after the baseline, vLLM's and SGLang's shared system prompts start with a
                  timestamp: no prefix reuse, same prompt lengths, prefill and TTFT up
spec-decode-drop  vLLM and SGLang decode speculatively (3 draft tokens); after the baseline
                  their acceptance rate falls from ~0.7 to ~0.2 and their ITL rises
gpu-bound         a decode-tuned H100 (CUDA graphs); after the baseline vLLM's and SGLang's
                  load rises to ~90 / ~70 long decodes (outputs 1200-1600 tokens) on their
                  64 / 48 seats: the batch's KV reads and the weights move ~80 % of the peak
                  bandwidth, a queue grows
gpu-idle          vLLM and SGLang with 4 seats, launching every kernel from the host
                  (``--enforce-eager``, 16 ms of host time per step); after the baseline 24
                  clients each: the queue grows while SM activity and MBU stay low
================  ============================================================================
"""

from __future__ import annotations

import asyncio
import dataclasses
import math
import os
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from llmtop import clock
from llmtop.demo.sim import Engine, Rejected
from llmtop.demo.stack_scenarios import RULES as _STACK_RULES
from llmtop.demo.stack_scenarios import STACKS

__all__ = [
    "ANOMALY_ENV",
    "BASELINE_ENV",
    "DIAGNOSIS",
    "FAULTS",
    "SCENARIOS",
    "VOCAB",
    "BackgroundTraffic",
    "Scenario",
    "anomaly_seconds",
    "baseline_seconds",
    "get_scenario",
]

VOCAB = (
    'the', 'of', 'and', 'to', 'in', 'is', 'that', 'for', 'it', 'as', 'with', 'was', 'on',
    'be', 'by', 'at', 'this', 'from', 'or', 'an', 'are', 'not', 'have', 'but', 'which',
    'one', 'all', 'were', 'can', 'their', 'there', 'has', 'been', 'more', 'when', 'will',
    'would', 'who', 'so', 'what', 'if', 'out', 'up', 'about', 'into', 'than', 'them',
    'only', 'other', 'new', 'some', 'could', 'time', 'these', 'two', 'may', 'then', 'do',
    'first', 'any', 'like', 'now', 'my', 'such', 'our', 'over', 'man', 'me', 'even', 'most',
    'made', 'after', 'also', 'did', 'many', 'before', 'must', 'through', 'back', 'years',
    'where', 'much', 'your', 'way', 'well', 'down', 'should', 'because', 'each', 'just',
    'those',
)

FAULTS = ("restart", "down", "garbage", "slow")
BASELINE_ENV = "LLMTOP_DEMO_BASELINE_S"
"""Environment variable: seconds of healthy baseline before a scenario's anomaly."""
ANOMALY_ENV = "LLMTOP_DEMO_ANOMALY_S"
"""Environment variable: seconds the anomaly lasts before the baseline's traffic (and no
effect) returns; unset: it lasts until the demo stops."""

@dataclass(frozen=True)
class Scenario:
    """Traffic shape and engine overrides of one scenario."""

    name: str
    base: float = 4.0
    """Mean background concurrency per engine."""
    wave: float = 3.0
    wave_period_s: float = 90.0
    burst: float = 10.0
    burst_every_s: float = 40.0
    burst_len_s: float = 5.0
    first_burst_s: float = 20.0
    prompt_range: tuple[int, int] = (50, 400)
    output_range: tuple[int, int] = (64, 256)
    ignore_eos: bool = False
    shared_prefixes: int = 4
    prefix_len: int = 256
    shared_share: float = 0.6
    ramp: int | None = None
    """At most this many new background requests per engine per 0.25 s tick (None: all
    at once), so a start does not overflow a queue limit (Triton's 503 at 32 waiting)."""
    prefix_salt: bool = False
    """Shared prefixes start with a unique timestamp: nothing is reused."""
    kv_blocks: dict[str, int] = field(default_factory=dict)
    """Forced KV pool sizes (blocks) per engine kind."""
    settings: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Other ``EngineSettings`` changes per engine kind (e.g. ``max_num_seqs``)."""
    per_engine: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Traffic fields (``base``, ``prompt_range``...) that differ per engine kind."""
    baseline_s: float = 0.0
    """Healthy seconds before the anomaly (0: the scenario has no anomaly phase)."""
    anomaly: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Traffic fields per engine kind from the end of the baseline on."""
    effect: str | None = None
    """``decode-slowdown`` | ``gpu-throttle`` | ``errors`` | ``spec-decode-drop``: applied by
    the server."""
    effect_engines: tuple[str, ...] = ()
    """Engine kinds the effect applies to (``gpu-throttle``: the first engine of the kind)."""
    rule: str | None = None
    """The diagnosis rule the scenario is meant to trigger (documentation, tests)."""
    profile: str | None = None
    """The simulated GPU and model (``profiles.PROFILES``) when the demo is not given one."""
    stack: Any = None
    """A serving stack (:class:`~llmtop.demo.stack_scenarios.StackSpec`): a simulated router
    in front of demo vLLM engines instead of the three engines (:mod:`llmtop.demo.stack`)."""

    def shape(self, kind: str, anomaly: bool = False) -> Scenario:
        """This scenario's traffic for one engine kind, in the baseline or the anomaly."""
        changes = dict(self.per_engine.get(kind, {}))
        if anomaly:
            changes.update(self.anomaly.get(kind, {}))
        return dataclasses.replace(self, **changes) if changes else self


# The default demo: KV 20-80 % full (pools as with --num-gpu-blocks-override), a visible
# prefix hit rate, Triton's batch (32) a little short of its load so a small queue comes and
# goes. vLLM and SGLang serve the same model and carry the same load (no imbalance).
_DEFAULT_KV = {"vllm": 1200, "sglang": 1100, "triton": 440}
_DEFAULT: dict[str, Any] = {
    "ramp": 12, "base": 20.0, "wave": 4.0, "wave_period_s": 45.0, "burst": 6.0,
    "burst_every_s": 40.0, "burst_len_s": 4.0, "first_burst_s": 20.0,
    "kv_blocks": _DEFAULT_KV,
    "settings": {"triton": {"max_num_seqs": 32}},
    "per_engine": {"triton": {"base": 39.0, "wave": 3.0, "wave_period_s": 16.0, "burst": 0.0,
                              "output_range": (24, 96)}},
}
# Diagnosis scenarios: the same engines and load, Triton below its limit (no queue), then
# the anomaly on vLLM (and SGLang) while Triton stays as it was (a control).
_CALM: dict[str, Any] = {
    **_DEFAULT, "burst": 0.0, "baseline_s": 30.0,
    "per_engine": {"triton": {"base": 20.0, "wave": 3.0, "burst": 0.0}},
}
_LONG = {"prompt_range": (300, 1200), "prefix_len": 1024}
_KV_HOT: dict[str, Any] = {"base": 22.0, "wave": 4.0, "burst": 6.0, "first_burst_s": 8.0,
                           "prompt_range": (500, 1100), "output_range": (300, 700),
                           "ignore_eos": True}

_LONG_DECODE: dict[str, Any] = {"base": 20.0, "wave": 3.0, "burst": 0.0, "ignore_eos": True,
                                 "prompt_range": (100, 300), "output_range": (1200, 1600),
                                 "ramp": 8}
"""Long decodes: each request's context grows to ~1,500-2,000 tokens, so the batch's KV reads
are as large as the weights' (the ``gpu-bound`` scenario)."""

_FEW: dict[str, Any] = {"base": 2.5, "wave": 1.0, "burst": 0.0}

SCENARIOS: dict[str, Scenario] = {
    "default": Scenario("default", **_DEFAULT),
    # the pressure from the start, unless a baseline is asked for ($LLMTOP_DEMO_BASELINE_S):
    # then a light load on the same small pools first (KV a third full, no queue)
    "kv-pressure": Scenario("kv-pressure", base=6.0, wave=2.0, burst=0.0,
                            kv_blocks={"vllm": 640, "sglang": 640, "triton": 200},
                            anomaly={k: _KV_HOT for k in ("vllm", "sglang", "triton")},
                            rule="kv_pressure"),
    "queue-spike": Scenario("queue-spike", burst=160.0, burst_every_s=40.0, burst_len_s=8.0,
                            first_burst_s=5.0),  # bursts: the verdict's queue_growth
    "prefix-thrash": Scenario("prefix-thrash", base=12.0, wave=4.0, shared_prefixes=400,
                              prefix_len=512, shared_share=1.0, prompt_range=(20, 120),
                              output_range=(32, 128),
                              kv_blocks={"vllm": 1500, "sglang": 1500, "triton": 400}),
    "long-prompts": Scenario("long-prompts", **{
        **_CALM, "kv_blocks": {"vllm": 3400, "sglang": 3200, "triton": 440},
        "anomaly": {"vllm": _LONG, "sglang": _LONG}}, rule="long_prompts"),
    "decode-slowdown": Scenario("decode-slowdown", **_CALM, effect="decode-slowdown",
                                effect_engines=("vllm", "sglang"), rule="decode_slowdown"),
    "gpu-throttle": Scenario("gpu-throttle", **_CALM, effect="gpu-throttle",
                             effect_engines=("vllm",), rule="gpu_throttle"),
    "errors": Scenario("errors", **_CALM, effect="errors", effect_engines=("vllm", "triton"),
                       rule="errors"),
    "queueing": Scenario("queueing", **{
        **_CALM, "kv_blocks": {"vllm": 3000, "sglang": 2400, "triton": 440},
        "anomaly": {"vllm": {"base": 84.0, "wave": 4.0, "burst": 0.0},
                    "sglang": {"base": 64.0, "wave": 4.0, "burst": 0.0}}}, rule="queueing"),
    "prefix-miss": Scenario("prefix-miss", **{
        **_CALM, "prompt_range": (50, 300), "prefix_len": 1024,
        "kv_blocks": {"vllm": 3000, "sglang": 2800, "triton": 440},
        "anomaly": {"vllm": {"prefix_salt": True}, "sglang": {"prefix_salt": True}}},
        rule="prefix_cache_miss"),
    "spec-decode-drop": Scenario("spec-decode-drop", **_CALM, effect="spec-decode-drop",
                                 effect_engines=("vllm", "sglang"), rule="spec_decode_drop"),
    "imbalance": Scenario("imbalance", **{
        **_CALM, "kv_blocks": {"vllm": 1700, "sglang": 1600, "triton": 440},
        "anomaly": {"vllm": {"base": 48.0, "wave": 3.0, "burst": 0.0},
                    "sglang": {"base": 4.0, "wave": 1.0, "burst": 0.0}}}, rule="imbalance"),
    # vLLM and SGLang (replicas of one model) both: one alone would be an imbalance beside
    # an idle sibling, and that is what the diagnosis would rightly name first
    "gpu-bound": Scenario("gpu-bound", **{
        **_CALM, "profile": "h100-llama3-8b-tuned",
        "kv_blocks": {"vllm": 9000, "sglang": 9000, "triton": 440},
        "per_engine": {**_CALM["per_engine"], "vllm": _LONG_DECODE, "sglang": _LONG_DECODE},
        "anomaly": {"vllm": {"base": 90.0}, "sglang": {"base": 70.0}}}, rule="gpu_bound"),
    "gpu-idle": Scenario("gpu-idle", **{
        **_CALM, "profile": "h100-llama3-8b-eager",
        "kv_blocks": {"vllm": 3000, "sglang": 3000, "triton": 440},
        "settings": {**_CALM["settings"], "vllm": {"max_num_seqs": 4},
                     "sglang": {"max_num_seqs": 4}},
        "per_engine": {**_CALM["per_engine"], "vllm": _FEW, "sglang": _FEW},
        "anomaly": {"vllm": {"base": 24.0, "wave": 2.0},
                    "sglang": {"base": 24.0, "wave": 2.0}}}, rule="gpu_idle"),
}
for _f in FAULTS:
    SCENARIOS[_f] = Scenario(_f, rule="warming_up" if _f == "restart" else None)
for _name, _spec in STACKS.items():
    SCENARIOS[_name] = Scenario(_name, stack=_spec, rule=_STACK_RULES.get(_name),
                                baseline_s=30.0 if _spec.anomaly is not None else 0.0)

DIAGNOSIS = {name: sc.rule for name, sc in SCENARIOS.items() if sc.rule}
"""Scenario name -> the diagnosis rule it is meant to trigger."""


def get_scenario(name: str | None) -> Scenario:
    """The scenario called ``name`` (None: default); raises ``KeyError`` for unknown names."""
    return SCENARIOS["default" if name in (None, "", "default", "none") else name]


def baseline_seconds(scenario: Scenario, override: float | None = None) -> float:
    """Seconds of baseline before ``scenario``'s anomaly: ``override``, else the environment
    variable ``LLMTOP_DEMO_BASELINE_S``, else the scenario's own (0 for scenarios without an
    anomaly phase)."""
    if not scenario.baseline_s and not scenario.anomaly and not scenario.effect:
        return 0.0
    if override is not None:
        return max(0.0, float(override))
    env = os.environ.get(BASELINE_ENV, "").strip()
    if env:
        try:
            return max(0.0, float(env))
        except ValueError:
            pass
    return scenario.baseline_s


def anomaly_seconds(override: float | None = None) -> float | None:
    """How long the anomaly lasts: ``override``, else ``$LLMTOP_DEMO_ANOMALY_S``, else None
    (until the demo stops)."""
    if override is not None:
        return max(0.0, float(override))
    env = os.environ.get(ANOMALY_ENV, "").strip()
    try:
        return max(0.0, float(env)) if env else None
    except ValueError:
        return None


class BackgroundTraffic:
    """Keeps a wave-plus-bursts number of simulated requests in flight on each engine."""

    def __init__(self, engines: Sequence[Engine], scenario: Scenario, seed: int = 0):
        self.engines = list(engines)
        self.sc = scenario
        self.shapes = [scenario.shape(e.kind) for e in self.engines]
        self.anomaly_shapes = [scenario.shape(e.kind, anomaly=True) for e in self.engines]
        self.anomaly = False
        """True from the end of the baseline on (set by the server)."""
        self.rng = random.Random(seed + 7)
        self.t0 = clock.monotonic()
        self._task: asyncio.Task[None] | None = None
        self._prefix_len = max(s.prefix_len for s in (*self.shapes, *self.anomaly_shapes,
                                                      scenario))
        self._prefixes: list[list[str]] = []
        self._salt = 0
        self.rejected = 0

    def _prefix(self, i: int, n: int) -> list[str]:
        """The first ``n`` words of shared prefix ``i`` (a longer prefix extends a shorter)."""
        while len(self._prefixes) <= i:
            rng = random.Random(1000 + len(self._prefixes))
            self._prefixes.append(["system:", *rng.choices(VOCAB, k=self._prefix_len - 1)])
        return self._prefixes[i][:n]

    def target(self, t: float, phase: float = 0.0, shape: Scenario | None = None) -> float:
        """Background concurrency wanted at ``t`` seconds after start."""
        sc = shape or self.sc
        v = sc.base + sc.wave * math.sin(2 * math.pi * t / sc.wave_period_s + phase)
        if sc.burst and t >= sc.first_burst_s:
            k = (t - sc.first_burst_s) % sc.burst_every_s
            if k < sc.burst_len_s:
                v += sc.burst
        return max(0.0, v)

    def submit_one(self, e: Engine, shape: Scenario | None = None) -> bool:
        sc = shape or self.sc
        rng = self.rng
        lo, hi = sc.prompt_range
        n_unique = rng.randint(lo, hi)
        if sc.shared_prefixes and rng.random() < sc.shared_share:
            words = self._prefix(rng.randrange(sc.shared_prefixes), sc.prefix_len)
            if sc.prefix_salt:  # "[2026-11-25 13:05:42.123 #n] system: ..." defeats reuse
                self._salt += 1
                words = [f"[ts{self._salt}]", *words[1:]]
            words = words + rng.choices(VOCAB, k=n_unique)
        else:
            words = rng.choices(VOCAB, k=n_unique)
        limit = e.settings.max_model_len
        out = rng.randint(*sc.output_range)
        words = words[: max(1, limit - out - 1)]
        # TRT-LLM in Triton is a decoupled model whose clients stream (a non-streamed request
        # would count its whole latency as Triton's "first response"); elsewhere 70 % stream.
        stream = e.kind == "triton" or rng.random() < 0.7
        try:
            e.submit(words, out, stream=stream, ignore_eos=sc.ignore_eos, background=True)
        except Rejected:
            self.rejected += 1
            return False
        return True

    def tick(self) -> None:
        t = clock.monotonic() - self.t0
        shapes = self.anomaly_shapes if self.anomaly else self.shapes
        for i, e in enumerate(self.engines):
            shape = shapes[i]
            want = round(self.target(t, phase=i * 1.3, shape=shape))
            n = max(0, want - e.bg_inflight)
            for _ in range(n if shape.ramp is None else min(n, shape.ramp)):
                if not self.submit_one(e, shape):
                    break  # Triton said 503: try again next tick

    async def run(self) -> None:
        while True:
            self.tick()
            await clock.sleep(0.25)

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self.run())

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
            self._task = None
