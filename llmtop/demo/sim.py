"""Discrete-time continuous-batching simulation of one inference engine.

One :class:`Engine` per simulated server. Its scheduler loop is a single asyncio task that
runs in real time: it plans a step (decode rows + prefill chunks under a token budget),
computes the step's duration from the profile (:mod:`llmtop.demo.profiles`), sleeps once
for the whole batch, then applies the step: every running request gains one token and the
consumers that wait on a request are woken (one future per request per step, no
per-token timers).

Model:

- an arrival queue (FCFS) and a running set capped at ``max_num_seqs``;
- a KV cache of fixed-size blocks (:class:`KVPool`) holding the tokens of running requests;
- a prefix cache: full prompt blocks are keyed by a chained hash of their words; blocks of
  finished requests stay cached (evictable, LRU) and later prompts with the same prefix
  reuse them (their prefill is skipped);
- pressure: vLLM preempts the newest running request (its blocks are freed and it is
  recomputed later), SGLang does the same and calls it a retraction (the radix cache is
  evicted first, by the shared LRU), Triton/TRT-LLM reserves blocks for the whole request
  at admission (never preempts) and rejects new requests once its queue is full.

Tokens are whitespace-separated words; the sim only counts them, the API layer writes the
text. Statistics go into :class:`Stats` (plain counters and histograms, bucket bounds given
by the engine's format module) and are rendered at scrape time.
"""

from __future__ import annotations

import asyncio
import math
import random
from collections import deque
from collections.abc import Callable, Sequence

from llmtop import clock as timebase
from llmtop.demo.kvpool import KVPool, prompt_hashes
from llmtop.demo.profiles import EngineSettings, Profile
from llmtop.demo.stats import Hist, Stats

__all__ = ["SPEC_TOKENS", "Engine", "Hist", "KVPool", "Rejected", "Request", "Stats",
           "prompt_hashes"]


class Rejected(Exception):
    """The engine refused a request (queue full); the API answers 503."""


class Request:
    """One request inside the engine."""

    __slots__ = (
        "admitted_t", "anon", "arrival", "background", "cached_tokens", "computed",
        "counted_prompt", "external", "fail_at", "failed", "finish_reason", "finish_t",
        "first_token_t",
        "hashes",
        "ignore_eos", "last_token_t", "max_tokens", "n_preempt", "output", "prefill_target",
        "prompt_len", "refs", "req_id", "rid", "stream", "target_len", "trace", "waiter",
    )

    def __init__(self, rid: int, prompt_len: int, hashes: list[int], max_tokens: int,
                 target_len: int, *, stream: bool, ignore_eos: bool, background: bool,
                 arrival: float):
        self.rid = rid
        self.prompt_len = prompt_len
        self.hashes = hashes
        self.max_tokens = max_tokens
        self.target_len = target_len
        self.stream = stream
        self.ignore_eos = ignore_eos
        self.background = background
        self.arrival = arrival
        self.admitted_t: float | None = None
        self.first_token_t: float | None = None
        self.last_token_t = 0.0
        self.finish_t: float | None = None
        self.finish_reason: str | None = None
        self.failed = False
        self.fail_at: int | None = None
        """Output length at which the engine fails this request (``finished_reason=error``)."""
        self.external = False
        """Its prompt's KV came from a prefill engine (P/D): only the last token is computed."""
        self.output = 0
        self.computed = 0
        self.prefill_target = prompt_len
        self.cached_tokens = 0
        self.counted_prompt = False
        self.anon = 0
        self.refs: list[int] = []
        self.n_preempt = 0
        self.waiter: asyncio.Future[None] | None = None
        self.req_id: str | None = None
        """The API's response id (``cmpl-...``), for its span; None: background traffic."""
        self.trace: tuple[bytes, bytes] | None = None
        """(trace id, parent span id) of the caller's ``traceparent``, for its span."""

    @property
    def done(self) -> bool:
        return self.finish_reason is not None

    async def wait(self) -> None:
        """Wait until the engine changes this request (new tokens, finish, abort)."""
        fut = asyncio.get_running_loop().create_future()
        self.waiter = fut
        try:
            await fut
        finally:
            self.waiter = None

    def _wake(self) -> None:
        w = self.waiter
        if w is not None and not w.done():
            w.set_result(None)


SPEC_TOKENS = 3
"""Draft tokens per speculative step (``num_speculative_tokens``) in the demo."""


def _per_token_acceptance(rate: float) -> float:
    """``q`` with ``(q + q**2 + ... + q**SPEC_TOKENS) / SPEC_TOKENS == rate`` (bisection)."""
    lo, hi = 0.0, 1.0
    for _ in range(30):
        mid = (lo + hi) / 2
        if sum(mid ** (i + 1) for i in range(SPEC_TOKENS)) / SPEC_TOKENS < rate:
            lo = mid
        else:
            hi = mid
    return lo


class Engine:
    """One simulated engine: queue, running batch, KV pool, stats, scheduler task."""

    def __init__(self, kind: str, settings: EngineSettings, profile: Profile,
                 hist_bounds: dict[str, Sequence[float]], *, split: frozenset[str] = frozenset(),
                 seed: int = 0, clock: Callable[[], float] = timebase.time):
        self.kind = kind
        self.settings = settings
        self.profile = profile
        self.model = settings.served_model_name or profile.model
        self.hist_bounds = hist_bounds
        self.split = split
        self.rng = random.Random(seed)
        self.clock = clock
        self.pool = KVPool(settings.kv_blocks(profile), settings.block_size,
                           settings.prefix_caching)
        self.reserve_full = kind == "triton"
        self.waiting: deque[Request] = deque()
        self.running: list[Request] = []
        self.stats = Stats(hist_bounds, split)
        self.start_time = self.clock()
        self.next_rid = 0
        self.bg_inflight = 0
        self.busy_s = 0.0
        self.steps = 0
        self.last_batch = 0
        self.last_step_tokens = 0
        self.last_hit_rate = 0.0
        self.gen_tput = 0.0
        self._tput_acc = (0.0, timebase.monotonic())
        self.deferred = 0
        self.decode_factor = 1.0
        """Multiplies the non-prefill part of every step (``decode-slowdown`` scenario)."""
        self.clock_factor = 1.0
        """Multiplies the whole step: SM clock max / current (set by a throttled GPU)."""
        self.spec_accept: float | None = None
        """Speculative decoding on (SGLang gauges): draft acceptance rate; None: off."""
        self.error_share = 0.0
        """Share of new requests that fail with ``finished_reason=error`` (``errors``)."""
        self.kv_role: str | None = None
        """``prefill`` / ``decode`` in a P/D stack (``demo/stack.py``): NIXL series shown."""
        self.kv_pending = 0
        """Requests waiting on a KV transfer into this engine (vLLM's ``deferred``)."""
        self.stalled = False
        """``stuck``: the scheduler makes no step (requests stay, no token), /health 200."""
        self.on_finish: Callable[[Request], None] | None = None
        """Called with each request the engine finished (not aborted): its span
        (``demo/formats_spans.py``)."""
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.closed = False

    # -- public API -------------------------------------------------------------------------
    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._loop())

    async def close(self) -> None:
        self.closed = True
        self._wake.set()
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
            self._task = None

    @property
    def kv_capacity_tokens(self) -> int:
        return self.pool.total * self.settings.block_size

    def natural_length(self) -> int:
        """Output length at which a request would emit EOS (log-normal, median ~180)."""
        return max(1, int(self.rng.lognormvariate(math.log(180), 0.8)))

    def submit(self, words: Sequence[str] | int, max_tokens: int, *, stream: bool = True,
               ignore_eos: bool = False, background: bool = False,
               hashes: list[int] | None = None, external: bool = False) -> Request:
        """Queue a request. ``words`` is the prompt (or just its length, for no caching);
        ``external``: its KV was transferred in (P/D decode), so its prefill is one token."""
        if isinstance(words, int):
            plen, hs = words, (hashes or [])
        else:
            plen = len(words)
            hs = hashes if hashes is not None else prompt_hashes(words, self.settings.block_size)
        mq = self.settings.max_queue
        if mq is not None and len(self.waiting) >= mq:
            self.stats.inc("rejected")
            raise Rejected("queue full")
        target = max_tokens if ignore_eos else min(max_tokens, self.natural_length())
        self.next_rid += 1
        r = Request(self.next_rid, max(1, plen), hs, max_tokens, max(1, target), stream=stream,
                    ignore_eos=ignore_eos, background=background, arrival=self.clock())
        r.external = external
        if background:
            self.bg_inflight += 1
        if self.error_share and self.rng.random() < self.error_share:
            r.fail_at = self.rng.randint(1, min(8, r.target_len))  # fails early in decode
        self.waiting.append(r)
        self.stats.obs("max_tokens", max_tokens)
        self.stats.obs("n", 1)
        self._wake.set()
        return r

    def abort(self, r: Request) -> None:
        """Client went away: drop the request and free its blocks."""
        if r.done:
            return
        if r in self.running:
            self.running.remove(r)
            self.pool.release(r.anon, r.refs)
            r.anon, r.refs = 0, []
        else:
            try:
                self.waiting.remove(r)
            except ValueError:
                pass
        self._finish(r, "abort", self.clock())

    def restart(self) -> None:
        """Simulated process restart: in-flight requests fail, stats and caches reset."""
        for r in [*self.running, *self.waiting]:
            r.failed = True
            r.finish_reason = "abort"
            if r.background:
                self.bg_inflight -= 1
            r._wake()
        self.running.clear()
        self.waiting.clear()
        self.pool.reset()
        self.stats = Stats(self.hist_bounds, self.split)
        self.start_time = self.clock()
        self.gen_tput = 0.0

    # -- gauges -----------------------------------------------------------------------------
    def kv_usage(self) -> float:
        return self.pool.used / self.pool.total if self.pool.total else 0.0

    def used_tokens(self) -> int:
        return sum(r.computed + max(0, r.output - 1) for r in self.running)

    # -- scheduler --------------------------------------------------------------------------
    async def _loop(self) -> None:
        next_t = timebase.monotonic()
        while not self.closed:
            if self.stalled:  # admission stall: nothing scheduled, nothing generated
                await timebase.sleep(0.25)
                next_t = timebase.monotonic()
                continue
            if not self.running and not self.waiting:
                self._wake.clear()
                self.last_batch = 0
                await self._wake.wait()
                next_t = timebase.monotonic()
                continue
            rows = self._schedule()
            dur = self._duration(rows)
            now = timebase.monotonic()
            next_t = max(next_t, now - 0.05) + dur + self.profile.step_gap_s
            await timebase.sleep(next_t - now)
            self.busy_s += dur
            self.steps += 1
            self._count_work(rows)
            self._apply(rows, self.clock())

    def _duration(self, rows: list[tuple[Request, int, bool]]) -> float:
        p = self.profile
        n = len(rows)
        ctx = 0
        prefill = 0
        for r, k, is_prefill in rows:
            if is_prefill:
                prefill += k
            else:
                ctx += r.computed + r.output
        if n == 0:
            return p.step_base_s * self.decode_factor * self.clock_factor
        return ((p.step_base_s + n * p.per_seq_s + ctx * p.per_ctx_token_s) * self.decode_factor
                + prefill * p.per_prefill_token_s) * self.clock_factor

    def _count_work(self, rows: list[tuple[Request, int, bool]]) -> None:
        """The step's work as vLLM's ``--enable-mfu-metrics`` estimates it (one GPU): the
        weights read once, each row's context KV read, the new tokens' KV written; 2 x params
        FLOPs per token plus attention over the context (``est_*`` counters)."""
        if not rows:
            return
        p = self.profile
        tokens = ctx_read = attn = 0.0
        for r, k, is_prefill in rows:
            past = float(r.computed if is_prefill else r.computed + r.output - 1)
            tokens += k
            ctx_read += past
            # each of the k new tokens attends to the past and to the chunk's earlier tokens
            attn += k * (past + (k + 1) / 2)
        st = self.stats
        st.inc("est_read_bytes", p.weights_bytes + ctx_read * p.kv_bytes_per_token)
        st.inc("est_write_bytes", tokens * p.kv_bytes_per_token)
        st.inc("est_flops", 2.0 * p.params * tokens + attn * p.attn_flops_per_ctx_token)

    def _blocks_for(self, tokens: int) -> int:
        return -(-tokens // self.settings.block_size)

    def _preempt_one(self, now: float) -> bool:
        """Free the newest running request's blocks and put it back in front of the queue."""
        if not self.running:
            return False
        victim = self.running.pop()
        self.pool.release(victim.anon, victim.refs)
        victim.anon, victim.refs = 0, []
        victim.n_preempt += 1
        # recompute: prompt and the tokens generated so far are prefilled again
        victim.prefill_target = victim.prompt_len + victim.output
        victim.computed = 0
        self.waiting.appendleft(victim)
        if self.kind == "sglang":
            self.stats.inc("retracted")
            self.stats.inc("retracted_input_tokens", victim.prompt_len)
            self.stats.inc("retracted_output_tokens", victim.output)
        else:
            self.stats.inc("preemptions")
        return True

    def _schedule(self) -> list[tuple[Request, int, bool]]:
        now = self.clock()
        st = self.settings
        budget = st.max_num_batched_tokens
        rows: list[tuple[Request, int, bool]] = []
        bs = st.block_size
        # running requests first (decode rows, then unfinished prefill chunks)
        i = 0
        while i < len(self.running):
            r = self.running[i]
            if r.computed < r.prefill_target:
                k = min(r.prefill_target - r.computed, budget)
                if k > 0:
                    rows.append((r, k, True))
                    budget -= k
                i += 1
                continue
            if not self.reserve_full:
                length = r.computed + r.output  # tokens in KV after this step's token
                if length % bs == 0:
                    while not self.pool.take(1):
                        if not self._preempt_one(now) or r not in self.running:
                            break
                    else:
                        r.anon += 1
                    if r not in self.running:
                        continue
            rows.append((r, 1, False))
            budget -= 1
            i += 1
        # admit waiting requests
        self.deferred = 0
        while self.waiting and len(self.running) < st.max_num_seqs and budget > 0:
            r = self.waiting[0]
            hit = self.pool.match(r.hashes)
            hit = min(hit, (r.prefill_target - 1) // bs)
            need_tokens = r.prefill_target + 1
            if self.reserve_full:
                need_tokens = r.prompt_len + r.max_tokens
            need = self._blocks_for(need_tokens) - hit
            for h in r.hashes[:hit]:  # pin the hit blocks before allocating (no self-eviction)
                self.pool.ref(h)
            if not self.pool.take(need):
                self.pool.release(0, r.hashes[:hit])
                break
            self.waiting.popleft()
            r.refs = list(r.hashes[:hit])
            r.anon = need
            r.computed = hit * bs
            if r.external:  # transferred KV (P/D): only the last prompt token is computed
                if r.admitted_t is None:
                    self.stats.inc("prompt_tokens_external",
                                   max(0, r.prefill_target - 1 - r.computed))
                r.computed = max(r.computed, r.prefill_target - 1)
            if r.admitted_t is None:
                r.admitted_t = now
                r.cached_tokens = hit * bs
                self.stats.inc("prefix_queries", r.prompt_len)
                self.stats.inc("prefix_hits", hit * bs)
                if r.prompt_len:
                    self.last_hit_rate = hit * bs / r.prompt_len
            self.running.append(r)
            k = min(r.prefill_target - r.computed, budget)
            rows.append((r, k, True))
            budget -= k
        return rows

    def _apply(self, rows: list[tuple[Request, int, bool]], now: float) -> None:
        st = self.stats
        gen = 0
        prefill_tokens = 0
        finished: list[Request] = []
        for r, k, is_prefill in rows:
            if r.done:
                continue
            if is_prefill:
                r.computed += k
                prefill_tokens += k
                if r.computed < r.prefill_target:
                    continue
                # prefill complete: cache the full prompt blocks, sample the first token
                if self.pool.prefix_caching:
                    start = len(r.refs)
                    for h in r.hashes[start:]:
                        # the anonymous block becomes the cached one, or (already cached by
                        # another request) is freed and the cached one referenced
                        self.pool.promote(h)
                        r.anon -= 1
                        r.refs.append(h)
                if r.first_token_t is None:
                    r.first_token_t = now
                    st.obs("ttft", now - r.arrival, streaming=r.stream)
                    st.obs("queue", (r.admitted_t or now) - r.arrival)
                else:  # recomputed after a preemption: the gap shows up as one long ITL
                    st.obs("itl", now - r.last_token_t)
                if not r.counted_prompt:
                    r.counted_prompt = True
                    st.inc("prompt_tokens", r.prompt_len, streaming=r.stream)
                    st.inc("prompt_tokens_cached", r.cached_tokens)
                    st.obs("prompt_len", r.prompt_len)
                    st.obs("prefill_kv_computed", r.prompt_len - r.cached_tokens)
                    st.obs("uncached_prompt_len", r.prompt_len - r.cached_tokens)
                r.output += 1
                r.last_token_t = now
                gen += 1
                st.inc("prefill_made_tokens")  # SGLang counts these apart from decode's
            else:
                gap = now - r.last_token_t
                st.obs("itl", gap)
                r.output += 1
                r.last_token_t = now
                gen += 1
            if r.output >= r.target_len or (r.fail_at is not None and r.output >= r.fail_at):
                finished.append(r)
            else:
                r._wake()
        st.inc("generation_tokens", gen)
        st.inc("prefill_compute_tokens", prefill_tokens)
        if self.spec_accept is not None:
            self._spec_step(sum(1 for _r, _k, p in rows if not p))
        st.obs("iteration_tokens", prefill_tokens + sum(1 for _r, _k, p in rows if not p))
        st.inc("exec_count")
        self.last_batch = len(rows)
        self.last_step_tokens = gen + prefill_tokens
        # generation throughput, SGLang-style (tokens over the last ~2 s)
        acc, t0 = self._tput_acc
        acc += gen
        mono = timebase.monotonic()
        if mono - t0 >= 2.0:
            self.gen_tput = acc / (mono - t0)
            acc, t0 = 0.0, mono
        self._tput_acc = (acc, t0)
        for r in finished:
            self.running.remove(r)
            self.pool.release(r.anon, r.refs)
            r.anon, r.refs = 0, []
            if r.fail_at is not None and r.output >= r.fail_at:
                reason = "error"
            else:
                reason = "length" if r.output >= r.max_tokens else "stop"
            self._finish(r, reason, now)

    def _spec_step(self, n: int) -> None:
        """``n`` decoding rows each verified a draft of ``SPEC_TOKENS`` tokens; each draft
        position is accepted with probability ``q**(pos + 1)`` (a draft stops at its first
        rejection), ``q`` chosen so that accepted / drafted = ``spec_accept``."""
        if n <= 0 or self.spec_accept is None:
            return
        q = _per_token_acceptance(self.spec_accept)
        st = self.stats
        st.inc("spec_drafts", n)
        st.inc("spec_draft_tokens", n * SPEC_TOKENS)
        acc = 0.0
        for pos in range(SPEC_TOKENS):
            v = n * q ** (pos + 1)
            st.inc(f"spec_pos:{pos}", v)
            acc += v
        st.inc("spec_accepted_tokens", acc)

    def _finish(self, r: Request, reason: str, now: float) -> None:
        st = self.stats
        r.finish_reason = reason
        r.finish_t = now
        if r.background:
            self.bg_inflight -= 1
        st.inc(f"finished:{reason}")
        st.inc("requests", streaming=r.stream)
        st.inc("gen_tokens_req", r.output, streaming=r.stream)
        if reason == "abort":
            st.inc("aborted")
        elif reason == "error":
            st.inc("errors")
        e2e = now - r.arrival
        st.obs("e2e", e2e, streaming=r.stream)
        # Triton's cumulative *_duration_us counters: successful requests only (real 2.51)
        ok = reason not in ("abort", "error")
        if ok:
            st.inc("e2e_us", e2e * 1e6)
        if r.admitted_t is not None:
            if ok:
                st.inc("queue_us", (r.admitted_t - r.arrival) * 1e6)
            st.obs("inference", now - r.admitted_t)
            if r.first_token_t is not None:
                st.obs("prefill", r.first_token_t - r.admitted_t)
                st.obs("decode", now - r.first_token_t)
                if ok:
                    st.inc("compute_us", (now - r.admitted_t) * 1e6)
        elif ok:
            st.inc("queue_us", e2e * 1e6)
        if r.first_token_t is not None and r.output > 1:
            st.obs("tpot", (now - r.first_token_t) / (r.output - 1), streaming=r.stream)
        st.obs("gen_len", r.output)
        st.obs("max_gen_len", r.max_tokens)
        st.obs("num_preemptions", r.n_preempt)
        if ok:
            st.inc("success")
        if self.on_finish is not None and reason != "abort":
            self.on_finish(r)
        r._wake()
