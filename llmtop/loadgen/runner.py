"""Load shapes and step scheduling, inside the worker process.

- Fixed concurrency (closed loop): N workers, each sends its next request when the last ends.
- Rate (open loop): constant or Poisson arrivals; ``concurrency`` caps requests in flight.
- Sweep: a concurrency ladder 1, 2, 4, ... up to ``max_concurrency`` (or a rate ladder R, 2R,
  4R, ... with ``rate``). Load carries over between steps (workers are added, never restarted,
  and new workers start spread over min(0.5 s, warm-up / 2));
  each step has a warm-up (excluded) and a measurement window. A request belongs to the window
  in which it completes. Stop rules, after each step: error rate > bound, TTFT p95 > SLO,
  throughput gain < 5 % over two steps (``plateau``), time or request budget used.

Retry-After on 429/503 pauses all sending until it passes (capped at 60 s); each pause is
counted per step. ``stop()`` cancels requests in flight at once; the report is still built.

Honesty (``docs/probe.md``): a monitor task records every pause of the event loop longer
than ``stats.STALL_BOUND_S``; with ``--rate`` each request carries its intended send time;
every request sent is counted as finished, failed or cancelled (with the tokens it had
received), against the server's generation-token counter where it exports one
(``reconcile``).
"""

from __future__ import annotations

import asyncio
import math
import random
import time
from array import array
from collections.abc import Callable
from typing import Any

from llmtop.loadgen import knee
from llmtop.loadgen.client import JSON_LIB, Result, StreamClient
from llmtop.loadgen.dataset import load_dataset
from llmtop.loadgen.fixed_steps import FixedSteps
from llmtop.loadgen.options import ProbeOptions, redact_url
from llmtop.loadgen.prepare import Prepared
from llmtop.loadgen.prompts import PromptFactory, new_digest
from llmtop.loadgen.rawhttp import RawStreamClient
from llmtop.loadgen.reconcile import Preflight, Tally, read_counters, settled_counters
from llmtop.loadgen.report import capacity
from llmtop.loadgen.stats import STALL_BOUND_S, error_rate, percentiles, summarize_step
from llmtop.loadgen.traffic import dists

__all__ = ["PLATEAU_GAIN", "Runner", "ladder", "plateau_reached"]

PLATEAU_GAIN = 0.05
RETRY_AFTER_CAP_S = 60.0
ERROR_BACKOFF_S = 0.05
MIN_ERRORS_FOR_STOP = 20
RAMP_S = 0.5
"""New closed-loop workers of a step start spread over this (at most half the warm-up)."""
_perf = time.perf_counter


def ladder(options: ProbeOptions) -> list[tuple[int | None, float | None]]:
    """The steps as ``(concurrency, rate)``."""
    if options.levels:
        return [(c, None) for c in options.levels]
    if not options.sweep:
        if options.rate is not None:
            return [(None, options.rate)]
        return [(options.concurrency or 1, None)]
    if options.rate is not None:
        return [(None, options.rate * 2**k) for k in range(10)]
    steps, c = [], 1
    while c < options.max_concurrency:
        steps.append((c, None))
        c *= 2
    steps.append((options.max_concurrency, None))
    return steps


def plateau_reached(tputs: list[float], gain: float = PLATEAU_GAIN) -> bool:
    """True when neither of the last two steps beat the best before them by ``gain``."""
    if len(tputs) < 3:
        return False
    best = max(tputs[:-2])
    return best > 0 and all(t < (1 + gain) * best for t in tputs[-2:])


class Runner(FixedSteps):
    """Runs one probe; ``emit(event)`` gets every event (see docs/probe.md)."""

    def __init__(self, options: ProbeOptions, prepared: Prepared,
                 emit: Callable[[dict[str, Any]], None]) -> None:
        self.o = options
        self.p = prepared
        self.emit = emit
        traffic = options.traffic or {}
        p_dist, o_dist = dists(traffic)
        self.factory = PromptFactory(
            model=prepared.model, endpoint=prepared.endpoint, calibration=prepared.calibration,
            prompt_tokens=options.prompt_tokens, output_tokens=options.output_tokens,
            length_dist=options.length_dist, shared_prefix=options.shared_prefix,
            ignore_eos=prepared.ignore_eos, seed=options.seed, prompt_dist=p_dist,
            output_dist=o_dist, context=prepared.context,
            prefix_share=traffic.get("prefix_hit_rate"),
            dataset=load_dataset(options.dataset) if options.dataset else None,
            min_tokens=options.requests_per_step is not None)
        if options.requests_per_step is not None:
            self.factory.digest = new_digest()
        self._asked_prompt = array("d")
        self._asked_output = array("d")
        self._got_prompt = array("d")
        self._got_output = array("d")
        self._short = 0
        self.slo = {"ttft": options.ttft_slo, "itl": options.itl_slo, "tpot": options.tpot_slo}
        self.steps: list[dict[str, Any]] = []
        self.stop_reason: str | None = None
        self.started = time.time()
        self._t0 = _perf()
        total = options.total_duration
        self._deadline = self._t0 + total if total is not None else math.inf
        self._sent = 0
        self._completed = 0
        self._inflight = 0
        self._area = 0.0
        self._area_t = self._t0
        self._drain: tuple[float, float] | None = None
        self._resume_at = 0.0
        self._window: list[Result] | None = None
        self._w_start = self._t0
        self._w_area0 = 0.0
        self._w_cpu0 = time.process_time()
        self._w_wait0 = _cpu_wait_s()
        self._w_ttft: list[float] = []
        self._w_sent = 0
        self._w_due = 0
        self._w_cap_waits = 0
        self._w_tokens = 0
        self._w_errors: dict[str, int] = {}
        self._w_late = 0
        """Measured requests that got their first token later than the TTFT SLO."""
        self._w_planned: int | None = None
        """The measured list's size (fixed steps), for ``ttft_slo_missed``."""
        self._live: set[Result] = set()
        """Measured requests in flight, to count those already past the TTFT SLO."""
        self._ra_count = 0
        self._ra_wait = 0.0
        self._lags: list[float] = []
        self._stalls: list[tuple[float, float]] = []
        self.tally = Tally()
        self._dispatch_lags: list[float] = []
        self._target_conc = 0
        self._target_rate: float | None = None
        self._cap: asyncio.Semaphore | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._workers: list[asyncio.Task[Any]] = []
        self._wake = asyncio.Event()
        self._step_idx = 0
        self._phase = "setup"
        self.cancelled_in_flight = 0
        self.protection: dict[str, Any] | None = None
        """What ``worker.protect`` applied (``--cpu-pin``, ``--nice``), for the report."""
        cls = RawStreamClient if options.client == "raw" else StreamClient
        self.client: RawStreamClient | StreamClient = cls(
            prepared.endpoint_url, api_key=options.api_key, insecure=options.insecure,
            timeout_s=options.request_timeout)

    # ----- control ---------------------------------------------------------------------------
    def stop(self, reason: str = "stopped") -> None:
        """Stop at once (cancels requests in flight); safe to call more than once."""
        if self.stop_reason is None:
            self.stop_reason = reason
        self._wake.set()

    def _budget_done(self) -> str | None:
        if self.o.max_requests is not None and self._completed >= self.o.max_requests:
            return "max_requests"
        if _perf() >= self._deadline:
            return "duration"
        return None

    def _may_send(self) -> bool:
        if self.stop_reason is not None or _perf() >= self._deadline:
            return False
        if self.o.max_requests is not None and self._sent >= self.o.max_requests:
            if self._drain is None:
                self._mark(0)
                self._drain = (_perf(), self._area)
            return False
        return True

    def _mark(self, delta: int) -> None:
        t = _perf()
        self._area += self._inflight * (t - self._area_t)
        self._area_t = t
        self._inflight += delta

    # ----- requests --------------------------------------------------------------------------
    async def _send(self, intended: float | None = None, ready: float | None = None) -> Result:
        """One request; ``intended``: its scheduled send time, ``ready``: when it could have
        gone (the schedule, or later when the concurrency cap held it): the generator's own
        lateness is the send time minus ``ready``."""
        self._sent += 1
        self._w_sent += 1
        body = self.factory.next_payload()
        asked = self.factory.last_asked
        self._mark(1)
        res = Result(_perf(), intended)
        measured = self._window is not None
        if measured:
            self._live.add(res)
            if ready is not None:
                self._dispatch_lags.append(max(0.0, res.t_send - ready))
        try:
            await self.client.request(body, res)
        except asyncio.CancelledError:
            self.tally.cancelled(res, asked[1])
            raise
        finally:
            self._mark(-1)
            if measured:
                self._live.discard(res)
        self.tally.done(res, asked[1])
        self._on_result(res)
        if self._window is not None and res.error is None:  # asked vs got, measured requests
            if asked[0] is not None:
                self._asked_prompt.append(asked[0])
            self._asked_output.append(asked[1])
            self._short += res.tokens < asked[1]
            if res.prompt_tokens is not None:
                self._got_prompt.append(res.prompt_tokens)
            self._got_output.append(res.tokens)
        return res

    def _on_result(self, res: Result) -> None:
        self._completed += 1
        if self._window is not None:
            self._window.append(res)
            if res.error is None:
                self._w_tokens += res.tokens
                if res.t_first is not None:
                    ttft = res.t_first - res.t_send
                    self._w_ttft.append(ttft)
                    self._w_late += self.o.ttft_slo is not None and ttft > self.o.ttft_slo
            else:
                self._w_errors[res.error] = self._w_errors.get(res.error, 0) + 1
        if res.retry_after is not None:
            now = _perf()
            new = now + min(res.retry_after, RETRY_AFTER_CAP_S)
            ext = new - max(self._resume_at, now)
            self._ra_count += 1
            if ext > 0:
                self._ra_wait += ext
                self._resume_at = new
        if self.o.max_requests is not None and self._completed >= self.o.max_requests:
            self._wake.set()

    async def _pause_if_asked(self) -> bool:
        """Honour Retry-After; True when a pause happened."""
        wait = self._resume_at - _perf()
        if wait > 0:
            await asyncio.sleep(min(wait, max(0.0, self._deadline - _perf())))
            return True
        return False

    async def _closed_worker(self, i: int, delay: float = 0.0) -> None:
        if delay > 0:  # staggered start: new workers do not all send in the same instant
            await asyncio.sleep(delay)
        while i < self._target_conc and self._may_send():
            if await self._pause_if_asked():
                continue
            res = await self._send()
            if res.error in ("connect", "timeout", "client_error"):
                await asyncio.sleep(ERROR_BACKOFF_S)

    async def _one(self, intended: float, ready: float) -> None:
        try:
            await self._send(intended, ready)
        finally:
            if self._cap is not None:
                self._cap.release()

    async def _dispatcher(self) -> None:
        rng = random.Random(self.o.seed + 17)
        next_t = _perf()
        while True:
            rate = self._target_rate or 1.0
            next_t += rng.expovariate(rate) if self.o.poisson else 1.0 / rate
            delay = next_t - _perf()
            if delay > 0:
                await asyncio.sleep(delay)
            if not self._may_send():
                return
            if await self._pause_if_asked():
                next_t = _perf()
                continue
            self.tally.due += 1
            self._w_due += 1
            ready = next_t
            if self._cap is not None:
                if self._cap.locked():
                    self._w_cap_waits += 1
                    await self._cap.acquire()
                    ready = max(next_t, _perf())
                else:
                    await self._cap.acquire()
                if not self._may_send():
                    self._cap.release()
                    return
            t = asyncio.get_running_loop().create_task(self._one(next_t, ready))
            self._tasks.add(t)
            t.add_done_callback(self._tasks.discard)

    async def _lag_monitor(self) -> None:
        """Loop lag every 0.1 s; a lag over ``STALL_BOUND_S`` is a stall (when, how long)."""
        interval = 0.1
        while True:
            t = _perf()
            await asyncio.sleep(interval)
            lag = max(0.0, _perf() - t - interval)
            self._lags.append(lag)
            if lag > STALL_BOUND_S and self._window is not None:
                self._stalls.append((t + interval - self._w_start, lag))

    async def _progress(self) -> None:
        while True:
            await asyncio.sleep(self.o.progress_interval)
            self.emit(self.progress_event())
            errs = sum(self._w_errors.values())
            n = len(self._window) if self._window is not None else 0
            if (errs >= MIN_ERRORS_FOR_STOP and self._window is not None
                    and self.o.requests_per_step is None
                    and error_rate(n - errs, errs) > self.o.max_error_rate):
                self.stop("error_rate")

    def progress_event(self) -> dict[str, Any]:
        now = _perf()
        w = self._window
        elapsed = now - self._w_start if w is not None else 0.0
        q = percentiles(self._w_ttft) if w is not None else {}
        area = self._area + self._inflight * (now - self._area_t)
        return {
            "type": "progress", "t": time.time(), "step": self._step_idx, "phase": self._phase,
            "concurrency": self._target_conc or None, "rate": self._target_rate,
            "in_flight": self._inflight,
            "achieved_concurrency": (area - self._w_area0) / elapsed if elapsed > 0 else None,
            "requests_done": len(w) if w is not None else 0, "requests_sent": self._sent,
            "requests_total": self._completed,
            "output_tokens_per_s": self._w_tokens / elapsed if elapsed > 0 else None,
            "ttft_p50_s": q.get("p50"), "ttft_p95_s": q.get("p95"),
            "errors": dict(self._w_errors), "elapsed_s": now - self._t0,
            "requests_planned": self._w_planned if w is not None else None,
            "ttft_slo_missed": self.ttft_slo_missed(now) if w is not None else None,
        }

    def ttft_slo_missed(self, now: float) -> int | None:
        """Measured requests whose TTFT is already past the SLO: finished so, or still
        waiting for their first token longer than it (None without a TTFT SLO). TTFT is
        timed from the actual send, as the SLO check does."""
        slo = self.o.ttft_slo
        if slo is None:
            return None
        waiting = sum(1 for r in self._live
                      if r.t_first is None and now - r.t_send > slo)
        return self._w_late + waiting

    # ----- steps -----------------------------------------------------------------------------
    async def _wait(self, seconds: float | None) -> None:
        end = _perf() + seconds if seconds is not None else math.inf
        end = min(end, self._deadline)
        while self.stop_reason is None and self._budget_done() is None:
            rem = end - _perf()
            if rem <= 0:
                return
            self._wake.clear()
            try:
                await asyncio.wait_for(self._wake.wait(), min(rem, 1.0))
            except asyncio.TimeoutError:
                pass

    def _open_window(self) -> None:
        self._mark(0)
        self._window = []
        self._w_ttft = []
        self._w_sent = 0
        self._w_due = 0
        self._w_cap_waits = 0
        self._w_tokens = 0
        self._w_errors = {}
        self._w_late = 0
        self._w_planned = None
        self._live = set()
        self._ra_count = 0
        self._ra_wait = 0.0
        self._lags = []
        self._stalls = []
        self._dispatch_lags = []
        self._drain = None
        self._w_start = _perf()
        self._w_area0 = self._area
        self._w_cpu0 = time.process_time()
        self._w_wait0 = _cpu_wait_s()

    def _close_window(self, conc: int | None, rate: float | None, planned: float | None,
                      ) -> dict[str, Any]:
        self._mark(0)
        t_end = _perf()
        dur = t_end - self._w_start
        cpu = (time.process_time() - self._w_cpu0) / dur if dur > 0 else None
        wait = _cpu_wait_s()
        wait = wait - self._w_wait0 if wait is not None and self._w_wait0 is not None else None
        if self._drain is not None and self._drain[0] > self._w_start:
            d_t, d_area = self._drain
            achieved = (d_area - self._w_area0) / (d_t - self._w_start) if d_t > self._w_start \
                else None
        else:
            achieved = (self._area - self._w_area0) / dur if dur > 0 else None
        lags = self._lags
        step = summarize_step(
            self._window or [], duration_s=dur, slo=self.slo, concurrency=conc, rate=rate,
            achieved_concurrency=achieved, achieved_rate=self._w_sent / dur if dur > 0 else None,
            client_cpu=cpu,
            loop_lag_ms=1000 * sum(lags) / len(lags) if lags else None,
            loop_lag_max_ms=1000 * max(lags) if lags else None,
            retry_after_count=self._ra_count, retry_after_wait_s=self._ra_wait,
            dispatch_lag_ms=(1000 * sum(self._dispatch_lags) / len(self._dispatch_lags)
                             if self._dispatch_lags else None),
            index=self._step_idx, stalls=self._stalls, cpu_wait_s=wait,
            generator_lateness=self._dispatch_lags if rate else None,
            # a Poisson schedule's own count in the window (its arrivals vary around the
            # rate); a constant rate's is the rate. A generator that falls behind shows as
            # lateness, whichever.
            due_rate=(self._w_due / dur if self.o.poisson else rate) if rate and dur > 0
            else None,
            cap_waits=self._w_cap_waits if rate else None)
        step["partial"] = bool(self.stop_reason in ("stopped", "error_rate")
                               or (planned is not None and dur < 0.98 * planned))
        self._window = None
        return step

    def _set_load(self, conc: int | None, rate: float | None) -> None:
        loop = asyncio.get_running_loop()
        if rate is None:
            self._target_conc = conc or 1
            start = len(self._workers)
            new = self._target_conc - start
            spread = min(RAMP_S, self.o.effective_warmup / 2) if new > 1 else 0.0
            while len(self._workers) < self._target_conc:
                k = len(self._workers) - start
                self._workers.append(loop.create_task(
                    self._closed_worker(len(self._workers), spread * k / new)))
            return
        first = self._target_rate is None
        self._target_rate = rate
        self._target_conc = 0
        if first:
            cap = self.o.concurrency or (self.o.max_concurrency if self.o.sweep else None)
            self._cap = asyncio.Semaphore(cap) if cap else None
            self._workers.append(loop.create_task(self._dispatcher()))

    def _ladder(self) -> list[tuple[int | None, float | None]]:
        return ladder(self.o)

    def _sweep_stop(self) -> str | None:
        last = self.steps[-1]
        if last["error_rate"] > self.o.max_error_rate:
            return "error_rate"
        p95 = last["ttft_s"]["p95"]
        if self.o.ttft_slo is not None and p95 is not None and p95 > self.o.ttft_slo:
            return "ttft_slo"
        if plateau_reached([s["output_tokens_per_s"] for s in self.steps]):
            return "plateau"
        return None

    async def run(self) -> dict[str, Any]:
        """Run every step; always returns the (possibly partial) report."""
        loop = asyncio.get_running_loop()
        aux = [loop.create_task(self._lag_monitor()), loop.create_task(self._progress())]
        plan = ladder(self.o)
        counter0 = self.p.counters_before
        self.tally.preflight = self.p.preflight
        if counter0 is None:  # not read before the preflight: the books hold the run alone
            counter0 = await read_counters(self.p.endpoint_url, self.o.api_key,
                                           self.o.insecure)
            if counter0 is not None:
                self.tally.preflight = Preflight()
        try:
            for idx, (conc, rate) in enumerate(plan):
                if self.stop_reason is not None:
                    break
                if (b := self._budget_done()) is not None:
                    self.stop_reason = b
                    break
                self._step_idx = idx
                warm = self.o.effective_warmup
                planned = self.o.step_duration if self.o.sweep else None
                if planned is None and self.o.duration is not None:
                    planned = max(0.0, self.o.duration - warm)
                self.emit({"type": "step_started", "t": time.time(), "step": idx,
                           "concurrency": conc, "rate": rate, "warmup_s": warm,
                           "duration_s": planned, "steps_planned": len(plan)})
                if self.o.requests_per_step is not None and rate is not None:
                    await self._fixed_rate_step(rate)
                    continue
                if self.o.requests_per_step is not None:
                    await self._fixed_step(conc or 1)
                    continue
                self._set_load(conc, rate)
                if warm > 0:
                    self._phase = "warmup"
                    await self._wait(warm)
                    if self.stop_reason is not None:
                        break
                self._phase = "measure"
                self._open_window()
                await self._wait(planned)
                step = self._close_window(conc, rate, planned)
                self.steps.append(step)
                self.emit({"type": "step_done", "t": time.time(), "step": step})
                if self.stop_reason is None and self.o.sweep:
                    self.stop_reason = self._sweep_stop()
                if self.stop_reason is None and (b := self._budget_done()) is not None:
                    self.stop_reason = b
            else:
                if self.stop_reason is None:
                    self.stop_reason = "ladder_done" if self.o.sweep else "done"
        finally:
            if self._window is not None:  # stopped during a window: keep what it measured
                step = self._close_window(self._target_conc or None, self._target_rate, None)
                step["partial"] = True
                self.steps.append(step)
                self.emit({"type": "step_done", "t": time.time(), "step": step})
            self.cancelled_in_flight = self._inflight
            for t in (*self._workers, *self._tasks, *aux):
                t.cancel()
            await asyncio.gather(*self._workers, *self._tasks, *aux, return_exceptions=True)
            await self.client.aclose()
        if counter0 is not None:
            pf = self.tally.preflight
            self.tally.server_delta(counter0, await settled_counters(
                self.p.endpoint_url, counter0, self.tally.received + pf.output_tokens,
                self.tally.finished + pf.ok, self.o.api_key, self.o.insecure))
        return self.report()

    def report(self) -> dict[str, Any]:
        """The JSON report (see docs/probe.md), with the capacity answer."""
        rep = self._report()
        rep["capacity"] = capacity(rep)
        return rep

    def _report(self) -> dict[str, Any]:
        sweep = self.o.sweep
        return {
            "target": redact_url(self.p.endpoint_url),
            "model": self.p.model,
            "endpoint": self.p.endpoint,
            "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.started)),
            "started_unix": self.started,
            "duration_s": _perf() - self._t0,
            "options": self.o.to_json(),
            "prompt_calibration": self.p.calibration.to_json(),
            "preflight": self.p.preflight.to_json(),
            "ignore_eos": self.p.ignore_eos,
            "client": {"library": "raw-asyncio" if self.o.client == "raw" else "aiohttp",
                       "json": JSON_LIB, "loop": _loop_name(),
                       "process": "separate", "protection": self.protection},
            "steps": self.steps,
            "saturation": knee.saturation(self.steps) if sweep else None,
            "max_throughput": knee.max_throughput(self.steps),
            "sla_boundary": knee.sla_boundary(self.steps, self.slo, self.o.max_error_rate),
            "stop_reason": self.stop_reason,
            "partial": self.stop_reason in ("stopped", "error_rate"),
            "requests_sent": self._sent,
            "requests_completed": self._completed,
            "cancelled_in_flight": self.cancelled_in_flight,
            "reconciliation": self.tally.to_json(self._sent, self.o.max_requests),
            "traffic": self._traffic_json(),
            "lengths": {
                "asked": {"prompt": _q(self._asked_prompt), "output": _q(self._asked_output)},
                "actual": {"prompt": _q(self._got_prompt), "output": _q(self._got_output)},
            },
            "context": self.p.context,
            **self._list_json(),
        }


def _q(values: array) -> dict[str, float | None] | None:
    """Quantiles of lengths, None when nothing was recorded."""
    return percentiles(values) if len(values) else None


def _cpu_wait_s() -> float | None:
    """Seconds this thread has spent runnable but waiting for a CPU (Linux schedstat)."""
    try:
        with open("/proc/thread-self/schedstat", encoding="ascii") as f:
            return int(f.read().split()[1]) / 1e9
    except (OSError, ValueError, IndexError):
        return None


def _loop_name() -> str:
    try:
        return type(asyncio.get_running_loop()).__module__.split(".")[0]
    except RuntimeError:
        return "asyncio"
