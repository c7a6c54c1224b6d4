"""A simulated serving stack: a vLLM router in front of demo vLLM engines.

:class:`Stack` runs a :class:`~llmtop.demo.stack_scenarios.StackSpec` over the engine sites
:class:`~llmtop.demo.server.DemoServer` built: a :class:`SimRouter` that routes round robin
(or, in P/D mode, each request to a prefill engine, a KV transfer, then a decode engine),
counts as ``vllm-router`` does (:mod:`llmtop.demo.formats_router`), checks its backends'
health every 2 s (3 failures: unhealthy, 2 successes: healthy again) and opens a backend's
circuit breaker after 5 failed requests in a row; and the closed-loop traffic sent through it.

The KV transfer takes ``base + prompt tokens x KV bytes per token / bandwidth``; meanwhile the
request waits in the decode engine as vLLM's ``deferred`` and the router counts it as a
pending decode (``vllm_router_pd_decode_pending_seconds``); the decode engine records the
NIXL histograms and computes only the last prompt token (``prompt_tokens_by_source``
``external_kv_transfer``). A failed transfer (``nixl_num_failed_transfers``) is recomputed.

The router serves ``/metrics``, ``/health`` and the OpenAI routes on one port (the real one
puts ``/metrics`` on its ``--prometheus-port``). An HTTP request in P/D mode is prefilled in
process, then its decode engine serves it and computes the prompt again, as a real router in
front of engines without a KV connector does.
"""

from __future__ import annotations

import asyncio
import dataclasses
import random
from typing import Any

from llmtop import clock
from llmtop.demo import formats_router, openai
from llmtop.demo.httpd import HttpServer, Request, Response, Router, json_response
from llmtop.demo.scenarios import VOCAB
from llmtop.demo.sim import Engine, Rejected
from llmtop.demo.sim import Request as SimRequest
from llmtop.demo.stack_scenarios import StackSpec

__all__ = ["Backend", "SimRouter", "Stack"]

HEALTH_INTERVAL_S = 2.0
HEALTH_FAILURES = 3
HEALTH_SUCCESSES = 2
CB_FAILURES = 5
_P = "vllm_router_"


class Backend:
    """One worker as the router sees it: its engine site, role, health and breaker."""

    def __init__(self, site: Any, role: str) -> None:
        self.site = site
        self.role = role
        self.healthy = True
        self.breaker_open = False
        self._fails = self._oks = self._cb_fails = 0
        self.inflight = 0
        self.inflight_tokens = 0
        self.pending = 0

    @property
    def url(self) -> str:
        return self.site.base_url

    @property
    def engine(self) -> Engine:
        return self.site.engine

    @property
    def w(self) -> tuple[tuple[str, str], ...]:
        return (("worker", self.url),)


async def _done(r: SimRequest) -> None:
    while not r.done:
        await r.wait()


class SimRouter:
    """Routing, health checks, breakers and the ``vllm_router_*`` counters."""

    def __init__(self, backends: list[Backend], spec: StackSpec, seed: int = 0) -> None:
        self.backends = backends
        self.spec = spec
        self.m = formats_router.RouterMetrics()
        self.rng = random.Random(seed + 11)
        self._next: dict[str, int] = {}
        self.failed = 0
        self._init_gauges()

    def _init_gauges(self) -> None:
        m = self.m
        for b in self.backends:
            m.set(_P + "cb_state", b.w, 0)
            m.set(_P + "worker_health", b.w, 1)
        m.set(_P + "active_workers", (), len(self.backends))

    # -- choice --------------------------------------------------------------------------------
    def pick(self, role: str) -> Backend | None:
        """Round robin over the backends of ``role`` the router still trusts."""
        pool = [b for b in self.backends if b.role == role]
        ok = [b for b in pool if b.healthy and not b.breaker_open]
        if not ok:
            return None
        i = self._next.get(role, 0)
        self._next[role] = i + 1
        b = ok[i % len(ok)]
        self.m.inc(_P + "policy_decisions_total", (("policy", self.spec.policy), *b.w))
        return b

    def outcome(self, b: Backend, ok: bool) -> None:
        self.m.inc(_P + "cb_outcomes_total", (*b.w, ("outcome", "success" if ok else "failure")))
        b._cb_fails = 0 if ok else b._cb_fails + 1
        if not ok and not b.breaker_open and b._cb_fails >= CB_FAILURES:
            self._breaker(b, True)

    def _breaker(self, b: Backend, open_: bool) -> None:
        b.breaker_open = open_
        steps = [("closed", "open")] if open_ else [("open", "half_open"), ("half_open", "closed")]
        for frm, to in steps:
            self.m.inc(_P + "cb_state_transitions_total", (*b.w, ("from", frm), ("to", to)))
        self.m.set(_P + "cb_state", b.w, 1 if open_ else 0)

    def check_health(self) -> None:
        """One round of health checks (``GET /health``: answered while the port listens)."""
        for b in self.backends:
            if b.site.listening:
                b._oks, b._fails = b._oks + 1, 0
                if not b.healthy and b._oks >= HEALTH_SUCCESSES:
                    b.healthy = True
                    if b.breaker_open:
                        b._cb_fails = 0
                        self._breaker(b, False)
            else:
                b._fails, b._oks = b._fails + 1, 0
                if b.healthy and b._fails >= HEALTH_FAILURES:
                    b.healthy = False
            self.m.set(_P + "worker_health", b.w, 1 if b.healthy else 0)

    async def health_loop(self) -> None:
        while True:
            await clock.sleep(HEALTH_INTERVAL_S)
            self.check_health()

    # -- requests ------------------------------------------------------------------------------
    async def _attempts(self, route: str, role: str, serve: Any) -> bool:
        """Up to 3 attempts on successive backends of ``role``; ``serve(backend)`` runs one."""
        for attempt in range(1, 4):
            b = self.pick(role)
            if b is None:
                return False
            self.m.inc(_P + "processed_requests_total", b.w)
            if b.site.listening:
                ok = await serve(b)
                self.outcome(b, ok)
                return ok
            self.outcome(b, False)  # connection refused: retry elsewhere after a backoff
            self.m.inc(_P + "retries_total", (("route", route),))
            backoff = 0.05 * attempt
            self.m.observe(_P + "retry_backoff_duration_seconds", (("attempt", str(attempt)),),
                           backoff)
            await clock.sleep(backoff)
        return False

    async def generate(self, words: list[str], max_tokens: int, *, route: str,
                       stream: bool) -> bool:
        """One request through the router, in process (the background traffic)."""
        t0 = clock.monotonic()
        if self.spec.pd:
            return await self._pd(words, max_tokens, route, stream, t0)
        self.m.inc(_P + "requests_total", (("route", route),))

        async def serve(b: Backend) -> bool:
            try:
                r = b.engine.submit(words, max_tokens, stream=stream, ignore_eos=True,
                                    background=True)
            except Rejected:
                return False
            await _done(r)
            return not r.failed and r.finish_reason != "error"

        ok = await self._attempts(route, "both", serve)
        self.m.observe(_P + "generate_duration_seconds", (), clock.monotonic() - t0)
        return ok

    async def _pd(self, words: list[str], max_tokens: int, route: str, stream: bool,
                  t0: float) -> bool:
        m = self.m
        m.inc(_P + "pd_requests_total", (("route", route),))
        p, d = self.pick("prefill"), self.pick("decode")
        if p is None or d is None:
            self.failed += 1
            return False
        m.inc(_P + "pd_prefill_requests_total", p.w)
        m.inc(_P + "pd_decode_requests_total", d.w)
        for b in (p, d):
            m.inc(_P + "processed_requests_total", b.w)
        p.inflight += 1
        p.inflight_tokens += len(words)
        self._pd_gauges()
        try:
            r = p.engine.submit(words, 1, stream=False, ignore_eos=True, background=True)
            await _done(r)
        finally:
            p.inflight -= 1
            p.inflight_tokens -= len(words)
        self.outcome(p, True)
        external = await self._transfer(p, d, len(words))
        d.inflight += 1
        self._pd_gauges()
        try:
            r = d.engine.submit(words, max_tokens, stream=stream, ignore_eos=True,
                                background=True, external=external)
            await _done(r)
        finally:
            d.inflight -= 1
            self._pd_gauges()
        self.outcome(d, True)
        m.observe(_P + "pd_request_duration_seconds", (("route", route),),
                  clock.monotonic() - t0)
        return True

    async def _transfer(self, p: Backend, d: Backend, tokens: int) -> bool:
        """The KV of ``tokens`` prompt tokens from ``p`` to ``d`` (NIXL, read by the decode
        side); True when it arrived, False when it failed (``d`` recomputes)."""
        spec = self.spec
        prof = d.engine.profile
        nbytes = tokens * prof.kv_bytes_per_token
        t = 0.002 + nbytes / (spec.transfer_gb_s * 1e9)
        d.pending += 1
        d.engine.kv_pending += 1
        self._pd_gauges()
        t_wait = clock.monotonic()
        try:
            await clock.sleep(t)
        finally:
            d.pending -= 1
            d.engine.kv_pending -= 1
        self.m.observe_summary(_P + "pd_decode_pending_seconds", clock.monotonic() - t_wait)
        st = d.engine.stats
        failed = self.rng.random() < spec.transfer_fail
        if failed:
            st.inc("nixl_failed")
            return False
        st.obs("nixl_xfer", t)
        st.obs("nixl_post", 0.0004)
        st.obs("nixl_bytes", nbytes)
        st.obs("nixl_descs", max(1, -(-tokens // d.engine.settings.block_size)) * 2)
        return True

    def _pd_gauges(self) -> None:
        m = self.m
        for b in self.backends:
            w = (*b.w, ("rank", "aggregate"))
            if b.role == "prefill":
                m.set(_P + "pd_unknown_prefill_requests", w, 0)
                m.set(_P + "pd_prefill_occupancy", w, b.inflight)
                m.set(_P + "pd_active_prefill_tokens", w, b.inflight_tokens)
            elif b.role == "decode":
                m.set(_P + "pd_active_decode_requests", w, b.inflight)
                m.set(_P + "pd_pending_decode_requests", w, b.pending)

    # -- HTTP ----------------------------------------------------------------------------------
    def http_router(self) -> Router:
        r = Router()

        async def metrics(request: Request) -> Response:
            return Response(body=formats_router.render(self.m),
                            content_type=formats_router.CONTENT_TYPE)

        async def health(request: Request) -> Response:
            return Response(status=200)

        async def models(request: Request) -> Response:
            model = self.backends[0].engine.model
            return json_response({"object": "list", "data": [
                {"id": model, "object": "model", "owned_by": "vllm"}]})

        r.add_get("/metrics", metrics)
        r.add_get("/health", health)
        r.add_get("/v1/models", models)
        r.add_post("/v1/completions", self._proxy(openai.completions, "/v1/completions"))
        r.add_post("/v1/chat/completions",
                   self._proxy(openai.chat_completions, "/v1/chat/completions"))
        return r

    def _proxy(self, handler: Any, route: str) -> Any:
        async def proxy(request: Request) -> Any:
            role = "decode" if self.spec.pd else "both"
            self.m.inc(_P + ("pd_requests_total" if self.spec.pd else "requests_total"),
                       (("route", route),))
            if self.spec.pd:
                p = self.pick("prefill")
                if p is not None:
                    self.m.inc(_P + "pd_prefill_requests_total", p.w)
                    words = openai.prompt_words(request.json(), chat="messages" in
                                                request.json()) or ["x"]
                    await _done(p.engine.submit(words, 1, stream=False, ignore_eos=True))
                    self.outcome(p, True)
            b = self.pick(role)
            if b is None or not b.site.listening:
                if b is not None:
                    self.outcome(b, False)
                return openai.error_response(503, "no healthy worker")
            self.m.inc(_P + "processed_requests_total", b.w)
            if self.spec.pd:
                self.m.inc(_P + "pd_decode_requests_total", b.w)
            resp = await handler(request, b.engine)
            self.outcome(b, getattr(resp, "status", 200) < 500)
            return resp
        return proxy


class Stack:
    """The router, its HTTP server, its health checks and the traffic through it."""

    def __init__(self, spec: StackSpec, sites: list[Any], seed: int = 0) -> None:
        self.spec = spec
        self.sites = sites
        self.backends = [Backend(s, b.role) for s, b in zip(sites, spec.backends, strict=True)]
        for be in self.backends:
            if spec.pd:
                be.engine.kv_role = be.role
        self.router = SimRouter(self.backends, spec, seed)
        self.rng = random.Random(seed + 3)
        self.http: HttpServer | None = None
        self.port = 0
        self._tasks: list[asyncio.Task[Any]] = []
        self._inflight: set[asyncio.Task[Any]] = set()
        self._n = 0

    @property
    def target(self) -> str:
        return f"vllm-router@127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self, sock: Any, background: bool = True) -> None:
        self.port = sock.getsockname()[1]
        self.http = HttpServer(self.router.http_router())
        await self.http.listen(sock)
        loop = asyncio.get_running_loop()
        self._tasks.append(loop.create_task(self.router.health_loop()))
        if background:
            self._tasks.append(loop.create_task(self._traffic()))

    def start_anomaly(self) -> None:
        """The scenario's change: other traffic or link, a backend down or stalled."""
        if self.spec.anomaly is not None:
            self.spec = dataclasses.replace(self.spec, **self.spec.anomaly)
            self.router.spec = self.spec
        for be, b in zip(self.backends, self.spec.backends, strict=True):
            if b.down_at_anomaly:
                be.site.unlisten()
            if b.stall_at_anomaly:
                be.engine.stalled = True

    def end_anomaly(self, spec: StackSpec) -> None:
        """Back to ``spec`` (the baseline's): its traffic and link, every backend serving."""
        self.spec = self.router.spec = spec
        for be in self.backends:
            be.engine.stalled = False

    async def _traffic(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            want = round(self.spec.clients)
            for _ in range(min(12, max(0, want - len(self._inflight)))):
                t = loop.create_task(self._one())
                self._inflight.add(t)
                t.add_done_callback(self._inflight.discard)
            await clock.sleep(0.25)

    async def _one(self) -> None:
        spec, rng = self.spec, self.rng
        self._n += 1
        words = rng.choices(VOCAB, k=rng.randint(*spec.prompt_range))
        out = rng.randint(*spec.output_range)
        words = words[: max(1, self.backends[0].engine.settings.max_model_len - out - 1)]
        route = "/v1/chat/completions" if self._n % 2 else "/v1/completions"
        if not await self.router.generate(words, out, route=route, stream=self._n % 3 != 0):
            await clock.sleep(0.5)  # nothing to send it to: a client's pause before retrying

    async def stop(self) -> None:
        for t in [*self._tasks, *self._inflight]:
            t.cancel()
        for t in [*self._tasks, *self._inflight]:
            try:
                await t
            except asyncio.CancelledError:
                pass
        self._tasks.clear()
        if self.http is not None:
            await self.http.close()

    def info(self) -> dict[str, Any]:
        return {"target": self.target, "base_url": self.base_url, "port": self.port,
                "metrics_url": self.base_url + "/metrics", "engine": "vllm-router",
                "policy": self.spec.policy, "pd": self.spec.pd,
                "backends": [{"url": b.url, "role": b.role} for b in self.backends]}
