"""Demo scenarios and the in-process background traffic that keeps the demo alive.

Background traffic is simulated inside the demo process (requests go straight into each
engine, no HTTP): per engine, a target concurrency made of a slow sine wave plus short
bursts, refilled every 0.25 s. The default peaks well under each engine's ``max_num_seqs``
so a load probe still finds the knee.

Scenarios (``--scenario`` / ``--demo-scenario``):

==============  ==============================================================================
kv-pressure     small KV pools + long prompts/outputs: vLLM preempts, SGLang retracts,
                Triton queues and rejects (503)
queue-spike     every 40 s (first after 5 s) 8 s of 160 extra concurrent requests per engine
prefix-thrash   400 distinct 512-word prefixes on a small KV pool: LRU evictions, low hit rate
restart         the first engine restarts (counters reset, new start time, streams cut)
                ``fault_after`` s after start (default 10) and then every ``fault_every`` s (30)
down            the first engine's port stops listening at ``fault_after`` and listens again
                ``fault_every`` s later, alternating (connection refused while down)
garbage         the first engine's /metrics answers HTTP 200 with junk (not Prometheus text)
slow            the first engine's /metrics answers after 3 s (past the 2 s scrape timeout)
==============  ==============================================================================
"""

from __future__ import annotations

import asyncio
import math
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from llmtop.demo.sim import Engine, Rejected, prompt_hashes

__all__ = ["FAULTS", "SCENARIOS", "VOCAB", "BackgroundTraffic", "Scenario", "get_scenario"]

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
    kv_blocks: dict[str, int] = field(default_factory=dict)
    """Forced KV pool sizes (blocks) per engine kind."""


SCENARIOS: dict[str, Scenario] = {
    "default": Scenario("default"),
    "kv-pressure": Scenario("kv-pressure", base=22.0, wave=4.0, burst=6.0, first_burst_s=8.0,
                            prompt_range=(500, 1100), output_range=(300, 700), ignore_eos=True,
                            kv_blocks={"vllm": 640, "sglang": 640, "triton": 200}),
    "queue-spike": Scenario("queue-spike", burst=160.0, burst_every_s=40.0, burst_len_s=8.0,
                            first_burst_s=5.0),
    "prefix-thrash": Scenario("prefix-thrash", base=12.0, wave=4.0, shared_prefixes=400,
                              prefix_len=512, shared_share=1.0, prompt_range=(20, 120),
                              output_range=(32, 128),
                              kv_blocks={"vllm": 1500, "sglang": 1500, "triton": 400}),
}
for _f in FAULTS:
    SCENARIOS[_f] = Scenario(_f)


def get_scenario(name: str | None) -> Scenario:
    """The scenario called ``name`` (None: default); raises ``KeyError`` for unknown names."""
    return SCENARIOS["default" if name in (None, "", "default", "none") else name]


class BackgroundTraffic:
    """Keeps a wave-plus-bursts number of simulated requests in flight on each engine."""

    def __init__(self, engines: Sequence[Engine], scenario: Scenario, seed: int = 0):
        self.engines = list(engines)
        self.sc = scenario
        self.rng = random.Random(seed + 7)
        self.t0 = time.monotonic()
        self._task: asyncio.Task[None] | None = None
        self._prefixes: list[tuple[list[str], list[int]]] = []
        self.rejected = 0

    def _prefix(self, i: int, block_size: int) -> tuple[list[str], list[int]]:
        while len(self._prefixes) <= i:
            rng = random.Random(1000 + len(self._prefixes))
            words = ["system:", *rng.choices(VOCAB, k=self.sc.prefix_len - 1)]
            self._prefixes.append((words, []))
        words, hs = self._prefixes[i]
        if not hs:
            hs = prompt_hashes(words, block_size)
            self._prefixes[i] = (words, hs)
        return words, hs

    def target(self, t: float, phase: float = 0.0) -> float:
        """Background concurrency wanted at ``t`` seconds after start."""
        sc = self.sc
        v = sc.base + sc.wave * math.sin(2 * math.pi * t / sc.wave_period_s + phase)
        if t >= sc.first_burst_s:
            k = (t - sc.first_burst_s) % sc.burst_every_s
            if k < sc.burst_len_s:
                v += sc.burst
        return max(0.0, v)

    def submit_one(self, e: Engine) -> bool:
        sc = self.sc
        rng = self.rng
        bs = e.settings.block_size
        lo, hi = sc.prompt_range
        n_unique = rng.randint(lo, hi)
        if sc.shared_prefixes and rng.random() < sc.shared_share:
            pw, _ph = self._prefix(rng.randrange(sc.shared_prefixes), bs)
            words = pw + rng.choices(VOCAB, k=n_unique)
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
        t = time.monotonic() - self.t0
        for i, e in enumerate(self.engines):
            want = round(self.target(t, phase=i * 1.3))
            for _ in range(max(0, want - e.bg_inflight)):
                if not self.submit_one(e):
                    break  # Triton said 503: try again next tick

    async def run(self) -> None:
        while True:
            self.tick()
            await asyncio.sleep(0.25)

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
