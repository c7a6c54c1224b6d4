"""Bake-off steps: each level a fixed list of requests, every level run (a ``Runner`` mixin).

A level of concurrency c sends one request per slot as warm-up (excluded; none with
``--warmup 0``), then ``max(requests_per_step, 4 x c)`` measured requests with c in flight;
the step ends when the last of them ends. An engine past its SLO still runs the rest of the
ladder, so overload shows as errors or as queueing; only an engine that refuses every
connection of a level stops the run (``engine_down``). The requests are the next ones of the
seeded list in send order, so every engine gets the same list; its hash goes in the report.

A level of rate r (``--rate`` with ``requests_per_step``, the tuner's rate levels) is open
loop: ``max(requests_per_step, 4 x r)`` measured requests sent on a fixed schedule (every
1/r s, or seeded Poisson gaps with ``--poisson``), after r requests of warm-up at that rate
(none with ``--warmup 0``). The generator's lateness against the schedule, and the rate it
held while sending (the drain excluded), say whether the level was the client's.
"""

from __future__ import annotations

import asyncio
import math
import random
import time
from typing import Any

from llmtop.loadgen.stats import step_is_client_bound

__all__ = ["FixedSteps"]

_RAMP_S = 0.5
_ERROR_BACKOFF_S = 0.05


class FixedSteps:
    """Methods of ``Runner`` for ``ProbeOptions.requests_per_step``; uses its state."""

    o: Any
    factory: Any
    steps: list[dict[str, Any]]
    stop_reason: str | None
    emit: Any
    _deadline: float
    _phase: str
    _target_conc: int
    _workers: list[asyncio.Task[Any]]
    _got_output: Any
    _short: int
    _w_planned: int | None

    def step_size(self, conc: int) -> int:
        """Measured requests of a fixed step: never fewer than 4 x its concurrency."""
        return max(self.o.requests_per_step or 0, 4 * conc)

    def rate_step_size(self, rate: float) -> int:
        """Measured requests of a fixed rate step: never fewer than 4 s of arrivals."""
        return max(self.o.requests_per_step or 0, math.ceil(4 * rate))

    async def _scheduled(self, rate: float, n: int) -> list[float]:
        """Send the next ``n`` requests of the list on an open-loop schedule at ``rate``;
        returns the actual send times once all ended (or on stop / the time bound)."""
        loop = asyncio.get_running_loop()
        rng = random.Random(self.o.seed + 17)
        tasks: list[asyncio.Task[Any]] = []
        sent: list[float] = []
        self._target_rate, self._target_conc = rate, 0
        next_t = time.perf_counter()
        try:
            for _ in range(n):
                delay = next_t - time.perf_counter()
                if delay > 0:
                    await asyncio.sleep(delay)
                if self.stop_reason is not None or time.perf_counter() >= self._deadline:
                    break
                sent.append(time.perf_counter())
                tasks.append(loop.create_task(self._send(next_t, next_t)))
                self._workers.append(tasks[-1])
                next_t += rng.expovariate(rate) if self.o.poisson else 1.0 / rate
            await self._wait_all(tasks)
        finally:
            await self._cancel(tasks)
        return sent

    async def _fixed_rate_step(self, rate: float) -> None:
        """Warm-up (one second of arrivals, excluded) then the measured list on its
        schedule; the generator's lateness judged over the sending, not the drain."""
        if self.o.warmup != 0:
            self._phase = "warmup"
            await self._scheduled(rate, math.ceil(rate))
        if self.stop_reason is not None:
            return
        self._phase = "measure"
        self._open_window()
        n = self._w_planned = self.rate_step_size(rate)
        sent = await self._scheduled(rate, n)
        step = self._close_window(None, rate, None)
        step["requests_planned"] = n
        span = sent[-1] - sent[0] if len(sent) > 1 else 0.0
        # the rate held while sending: the list's drain is not the generator's shortfall
        step["achieved_rate"] = (len(sent) - 1) / span if span > 0 else None
        step["client_bound"], step["client_bound_reasons"] = step_is_client_bound(step)
        if step["requests"] + step["errors_total"] < n:
            step["partial"] = True
        self.steps.append(step)
        self.emit({"type": "step_done", "t": time.time(), "step": step})
        if self.stop_reason is None and self._engine_gone(step):
            self.stop_reason = "engine_down"

    async def _batch(self, conc: int, n: int) -> None:
        """Send the next ``n`` requests of the list with ``conc`` in flight; returns when all
        ended, on stop or at the time bound (requests still in flight are then cancelled)."""
        left = [n]
        loop = asyncio.get_running_loop()
        spread = _RAMP_S / conc if conc > 1 else 0.0

        async def worker(k: int) -> None:
            if k:
                await asyncio.sleep(spread * k)
            while left[0] > 0 and self.stop_reason is None and time.perf_counter() < self._deadline:
                if await self._pause_if_asked():
                    continue
                left[0] -= 1
                res = await self._send()
                if res.error in ("connect", "timeout", "client_error"):
                    await asyncio.sleep(_ERROR_BACKOFF_S)

        self._target_conc = conc
        tasks = [loop.create_task(worker(k)) for k in range(conc)]
        self._workers.extend(tasks)
        try:
            await self._wait_all(tasks)
        finally:
            await self._cancel(tasks)

    async def _wait_all(self, tasks: list[asyncio.Task[Any]]) -> None:
        """Until every task ended, the run stops, or the time bound (then ``duration``)."""
        while tasks and self.stop_reason is None:
            rem = self._deadline - time.perf_counter()
            if rem <= 0:
                self.stop_reason = "duration"
                break
            _done, pending = await asyncio.wait(tasks, timeout=min(rem, 0.5))
            if not pending:
                break

    async def _cancel(self, tasks: list[asyncio.Task[Any]]) -> None:
        """Cancel what still runs of ``tasks`` (requests in flight) and forget them."""
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._workers = [t for t in self._workers if t not in tasks]

    async def _fixed_step(self, conc: int) -> None:
        """Warm-up (one request per slot, excluded) then the measured list; every level runs
        whatever the SLOs say, so overload shows as errors or as queueing."""
        if self.o.warmup != 0:
            self._phase = "warmup"
            await self._batch(conc, conc)
        if self.stop_reason is not None:
            return
        self._phase = "measure"
        self._open_window()
        n = self._w_planned = self.step_size(conc)
        await self._batch(conc, n)
        step = self._close_window(conc, None, None)
        step["requests_planned"] = n
        # its ramp and its drain are the list's, not the generator's: judged without them
        step["client_bound"], step["client_bound_reasons"] = step_is_client_bound(step)
        if step["requests"] + step["errors_total"] < step["requests_planned"]:
            step["partial"] = True
        self.steps.append(step)
        self.emit({"type": "step_done", "t": time.time(), "step": step})
        if self.stop_reason is None and self._engine_gone(step):
            self.stop_reason = "engine_down"

    @staticmethod
    def _engine_gone(step: dict[str, Any]) -> bool:
        """Every request of the step failed to connect: the engine is gone, stop."""
        errs = step.get("errors") or {}
        n = step.get("requests", 0) + sum(errs.values())
        return n > 0 and errs.get("connect", 0) == n

    def _list_json(self) -> dict[str, Any]:
        """Bake-off steps: the size of each step's list and the hash of every request sent."""
        if self.o.requests_per_step is None:
            return {}
        d = self.factory.digest
        return {"short_outputs": {"requests": len(self._got_output), "short": self._short},
                "requests_per_step": {
                    (str(c) if r is None else f"{r:g}/s"):
                    (self.step_size(c or 1) if r is None else self.rate_step_size(r))
                    for c, r in self._ladder()},
                "request_list_sha256": d.hexdigest() if d is not None else None,
                "warmup_requests_per_step": "concurrency" if self.o.warmup != 0 else 0}

    def _traffic_json(self) -> dict[str, Any]:
        """What the load was shaped by: synthetic lengths, a dataset or an engine's own."""
        o = self.o
        if o.dataset:
            return {"kind": "dataset", "dataset": o.dataset, "seed": o.seed}
        out: dict[str, Any] = {"kind": "engine" if o.traffic else "synthetic", "seed": o.seed}
        if o.traffic:
            out.update(o.traffic)
        if not (o.traffic or {}).get("prompt"):
            out.update({"prompt_tokens": o.prompt_tokens, "output_tokens": o.output_tokens,
                        "length_dist": o.length_dist})
        if o.shared_prefix:
            out["shared_prefix"] = list(o.shared_prefix)
        return out
