"""HTTP servers of the demo engines, the GPU JSON endpoint and the fault scenarios.

:class:`DemoServer` builds one :class:`~llmtop.demo.sim.Engine` per requested engine, one
HTTP server (:mod:`llmtop.demo.httpd`, stdlib asyncio) per engine on its own 127.0.0.1 port
(metrics and OpenAI API on the same port; real Triton splits HTTP 8000 / metrics 8002, the
demo serves both on one port), plus a small control server whose ``GET /gpus`` returns the
simulated GPUs as ``{"gpus": [GpuRecord JSON]}`` (``GET /gpus?limit=N``: the first N of them,
for a box with fewer GPUs than engines).
"""

from __future__ import annotations

import asyncio
import os
import random
import socket
import uuid
import zlib
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from llmtop import clock
from llmtop.demo import formats_sglang, formats_triton, formats_vllm, openai
from llmtop.demo.formats_spans import SCOPE_VLLM, vllm_resource, vllm_span
from llmtop.demo.gpu import SimGpu
from llmtop.demo.httpd import HttpServer, Request, Response, Router, json_response
from llmtop.demo.logs import engine_log
from llmtop.demo.profiles import (
    DEFAULT_PROFILE,
    PROFILES,
    EngineSettings,
    Profile,
    engine_settings,
)
from llmtop.demo.scenarios import (
    BackgroundTraffic,
    anomaly_seconds,
    baseline_seconds,
    get_scenario,
)
from llmtop.demo.sim import Engine
from llmtop.demo.span_sender import SpanSender
from llmtop.demo.stack import Stack

__all__ = ["ENGINE_KINDS", "DemoServer"]

ENGINE_KINDS = ("vllm", "sglang", "triton")
_OWNED_BY = {"vllm": "vllm", "sglang": "sglang", "triton": "tensorrt_llm"}
_SLOW_METRICS_S = 3.0
_DECODE_SLOWDOWN = 2.5
"""``decode-slowdown``: each step's non-prefill time is multiplied by this."""
_ERROR_SHARE = 0.10
"""``errors``: the share of requests that fail."""
_SPEC_ACCEPT = (0.72, 0.22)
"""``spec-decode-drop``: draft acceptance in the baseline, then in the anomaly."""
_GARBAGE = (b"\x00\x01garbage ::: {{ not prometheus }} 12 34\n%%%% demo scenario 'garbage' "
            b"%%%%\n}{ \xff\xfe junk=\n")


def _bind(port: int, host: str = "127.0.0.1") -> socket.socket:
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((host, port))
    s.listen(256)
    s.setblocking(False)
    return s


class _EngineSite:
    def __init__(self, kind: str, engine: Engine, gpu: SimGpu | None, port: int):
        self.kind = kind
        self.engine = engine
        self.gpu = gpu
        self.port = port
        self.http: HttpServer | None = None
        self.fault: str | None = None
        self.log: Any = None
        """Its log (``demo/logs.py``), when the demo writes logs (``log_dir``)."""
        self.host = "127.0.0.1"
        """Where it listens (``llmtop demo serve --host``)."""

    @property
    def target(self) -> str:
        return f"{self.kind}@127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def listening(self) -> bool:
        return self.http is not None and self.http.listening

    async def listen(self, sock: socket.socket | None = None) -> None:
        assert self.http is not None
        sock = sock or _bind(self.port, self.host)
        self.port = sock.getsockname()[1]
        await self.http.listen(sock)

    def unlisten(self) -> None:
        """"down": new connections are refused (listener closed); a kept-alive connection
        is dropped on its next request, as when the server process has died."""
        if self.http is not None:
            self.http.unlisten()


def _check_fits(s: EngineSettings, profile: Profile, used_gib: float = 0.5) -> None:
    """Refuse settings the simulated GPU cannot hold, in the order and with the words of
    vLLM's ``ValueError``s: more memory asked than is free (``used_gib`` held by other
    processes and the CUDA context; ``vllm/v1/worker/utils.py``), no memory left for the KV
    cache after the weights, or a KV cache smaller than one request of the full context
    (``vllm/v1/core/kv_cache_utils.py``)."""
    total = profile.mem_total_bytes / 2**30
    free = total - used_gib
    want = total * s.gpu_memory_utilization
    if want > free:
        raise ValueError(
            f"Free memory on device cuda:0 ({free:.2f}/{total:.2f} GiB) on startup is less "
            f"than desired GPU memory utilization ({s.gpu_memory_utilization}, {want:.2f} GiB)."
            " Decrease GPU memory utilization or reduce GPU memory used by other processes.")
    left = profile.mem_total_bytes * s.gpu_memory_utilization - profile.weights_bytes \
        - profile.activation_bytes
    if s.num_gpu_blocks is None and left <= 0:
        raise ValueError("No available memory for the cache blocks. Try increasing "
                         "`gpu_memory_utilization` when initializing the engine.")
    tokens = s.kv_blocks(profile) * s.block_size
    if tokens < s.max_model_len:
        raise ValueError(
            f"To serve at least one request with the models's max seq len ({s.max_model_len}), "
            f"({s.max_model_len * profile.kv_bytes_per_token / 2**30:.2f} GiB KV cache is "
            f"needed, which is larger than the available KV cache memory "
            f"({tokens * profile.kv_bytes_per_token / 2**30:.2f} GiB). Based on the available "
            f"memory, the estimated maximum model length is {tokens}. Try increasing "
            "`gpu_memory_utilization` or decreasing `max_model_len` when initializing the "
            "engine.")


class DemoServer:
    """The demo engines, their HTTP servers, background traffic and scenario faults."""

    def __init__(self, engines: Sequence[str] = ENGINE_KINDS, ports: Sequence[int] = (),
                 *, scenario: str | None = None, seed: int = 0, background: bool = True,
                 profile: str | None = None, fault_after: float = 10.0,
                 fault_every: float = 30.0, gpu_port: int = 0,
                 baseline_s: float | None = None, anomaly_s: float | None = None,
                 settings: dict[str, Any] | None = None, gpu_used_gib: float = 0.5,
                 host: str = "127.0.0.1", otlp_endpoint: str | None = None,
                 log_dir: str | None = None):
        for k in engines:
            if k not in ENGINE_KINDS:
                raise ValueError(f"unknown demo engine {k!r} (choose from vllm, sglang, triton)")
        self.scenario = get_scenario(scenario)
        if self.scenario.stack is not None:  # a serving stack: demo vLLMs behind a router
            engines = ["vllm"] * len(self.scenario.stack.backends)
        self.kinds = list(engines)
        self.ports = list(ports) + [0] * (len(self.kinds) + 1 - len(ports))
        """One per engine, then (a stack scenario) the router's; 0: any free port."""
        self.stack: Stack | None = None
        self.seed = seed
        self.background = background
        self.profile = PROFILES[profile or self.scenario.profile or DEFAULT_PROFILE.name]
        self.fault_after = fault_after
        self.fault_every = fault_every
        self.gpu_port = gpu_port
        self.baseline_s = baseline_seconds(self.scenario, baseline_s)
        """Seconds of healthy traffic before the scenario's anomaly (0: none)."""
        self.anomaly_started: float | None = None
        """Unix time the anomaly began (None: not yet, or the scenario has none)."""
        self.anomaly_s = anomaly_seconds(anomaly_s)
        """Seconds the anomaly lasts (None: until the demo stops)."""
        self.anomaly_ended: float | None = None
        """Unix time the anomaly ended (None: not yet, or never)."""
        self.settings = dict(settings or {})
        """Scheduler knobs given on the command line (``EngineSettings`` fields), applied to
        every engine over the scenario's (a tuner's trial: seats, token budget, KV pool;
        ``kv_tokens`` sets the pool in tokens)."""
        self.gpu_used_gib = gpu_used_gib
        """GiB of the simulated GPU held by others (and the CUDA context) at start."""
        self.host = host
        """The address every engine and the GPU endpoint listen on (loopback unless told:
        0.0.0.0 inside a network namespace, as a container's engine would)."""
        self.spans = SpanSender(otlp_endpoint) if otlp_endpoint else None
        """Where the demo vLLMs send their request spans (``--otlp-traces-endpoint``)."""
        self.log_dir = log_dir
        """Where each engine writes its log, ``<kind>-<port>.log`` (None: no logs)."""
        self.sites: list[_EngineSite] = []
        self.traffic: BackgroundTraffic | None = None
        self._tasks: list[asyncio.Task[Any]] = []
        self._gpu_http: HttpServer | None = None
        self.gpu_url = ""

    # -- lifecycle --------------------------------------------------------------------------
    async def start(self) -> None:
        sc = self.scenario
        # the default demo's small KV pools and Triton limit are there to make its background
        # load visible; without background traffic (a probe's ceiling) the engines are whole
        sized = self.background or sc.name != "default"
        for i, kind in enumerate(self.kinds):
            changes: dict[str, Any] = dict(sc.settings.get(kind, {})) if sized else {}
            if kind in sc.kv_blocks and sized:
                changes["num_gpu_blocks"] = sc.kv_blocks[kind]
            if sc.stack is not None:  # each backend's own seats and token budget
                b = sc.stack.backends[i]
                changes["max_num_seqs"] = b.max_num_seqs
                if b.max_num_batched_tokens:
                    changes["max_num_batched_tokens"] = b.max_num_batched_tokens
            changes.update(self.settings)
            kv_tokens = changes.pop("kv_tokens", None)
            settings = engine_settings(kind, **changes)
            if kv_tokens is not None:  # whole blocks, as an engine sizes its pool
                settings = replace(settings, num_gpu_blocks=max(
                    1, -(-int(kv_tokens) // settings.block_size)))
            if self.settings:
                _check_fits(settings, self.profile, self.gpu_used_gib)
            fmt = _FORMATS[kind]
            engine = Engine(kind, settings, self.profile, fmt.HIST_BOUNDS,
                            split=getattr(fmt, "SPLIT", frozenset()), seed=self.seed + i)
            sock = _bind(self.ports[i], self.host)
            es = _EngineSite(kind, engine, None, sock.getsockname()[1])
            es.host = self.host
            es.gpu = SimGpu(i, engine, es.target)
            if i == 0 and sc.name in ("garbage", "slow"):
                es.fault = sc.name
            es.http = HttpServer(self._router(es))
            await es.listen(sock)
            if sc.effect == "spec-decode-drop" and kind in sc.effect_engines:
                engine.spec_accept = _SPEC_ACCEPT[0]
            if self.spans is not None and kind == "vllm":
                engine.on_finish = self._span_hook(es)
            if self.log_dir is not None:
                self._open_log(es)
            engine.start()
            self.sites.append(es)
        grouter = Router()
        grouter.add_get("/gpus", self._gpus)
        grouter.add_get("/", self._gpus)
        self._gpu_http = HttpServer(grouter)
        gsock = _bind(self.gpu_port, self.host)
        await self._gpu_http.listen(gsock)
        self.gpu_url = f"http://127.0.0.1:{gsock.getsockname()[1]}/gpus"
        loop = asyncio.get_running_loop()
        if self.spans is not None:
            self.spans.start()
        if sc.stack is not None:
            self.stack = Stack(sc.stack, self.sites, self.seed)
            await self.stack.start(_bind(self.ports[len(self.kinds)]), self.background)
        elif self.background:
            self.traffic = BackgroundTraffic([s.engine for s in self.sites], sc, self.seed)
            self.traffic.start()
        self._tasks.append(loop.create_task(self._gpu_loop()))
        if any(s.log is not None for s in self.sites):
            self._tasks.append(loop.create_task(self._log_loop()))
        if sc.name in ("restart", "down") and self.sites:
            self._tasks.append(loop.create_task(self._fault_loop(sc.name)))
        if sc.anomaly or sc.effect or (sc.stack is not None and sc.stack.anomaly is not None):
            self._tasks.append(loop.create_task(self._anomaly_after(self.baseline_s)))

    async def stop(self) -> None:
        for t in self._tasks:
            t.cancel()
        for t in self._tasks:
            try:
                await t
            except asyncio.CancelledError:
                pass
        self._tasks.clear()
        if self.traffic is not None:
            await self.traffic.close()
        if self.stack is not None:
            await self.stack.stop()
        for s in self.sites:
            await s.engine.close()
            if s.http is not None:
                await s.http.close()
        if self._gpu_http is not None:
            await self._gpu_http.close()
        if self.spans is not None:
            self.spans.close()
        for s in self.sites:
            if s.log is not None:
                s.log.out.close()

    def _open_log(self, es: _EngineSite) -> None:
        """Start ``es``'s log with its engine's start-up lines; each finished request adds
        its access line (after the span hook, when there is one)."""
        assert self.log_dir is not None
        os.makedirs(self.log_dir, exist_ok=True)
        path = os.path.join(self.log_dir, f"{es.kind}-{es.port}.log")
        es.log = engine_log(es.kind, path, es.port, es.engine.model)
        es.log.startup()
        before = es.engine.on_finish
        log = es.log

        def finished(r: Any) -> None:
            if before is not None:
                before(r)
            log.finished(r)

        es.engine.on_finish = finished

    def _span_hook(self, es: _EngineSite) -> Callable[[Any], None]:
        """Queue each finished request's ``llm_request`` span, the resource naming the
        engine's target (``service.name``: the row llmtop shows it in)."""
        sender = self.spans
        assert sender is not None
        resource = vllm_resource(es.target, os.getpid(), str(uuid.uuid4()))
        rng = random.Random(f"spans:{self.seed}:{es.port}")

        def hook(r: Any) -> None:
            sender.add(resource, SCOPE_VLLM, vllm_span(r, rng))

        return hook

    def info(self) -> dict[str, Any]:
        """What a client needs: per engine target, URLs; the GPU URL; the pid."""
        return {
            "pid": os.getpid(),
            "scenario": self.scenario.name,
            "rule": self.scenario.rule,
            "baseline_s": self.baseline_s,
            "anomaly_s": self.anomaly_s,
            "gpu_url": self.gpu_url,
            "engines": [{
                "engine": s.kind,
                "target": s.target,
                "port": s.port,
                "base_url": s.base_url,
                "metrics_url": s.base_url + "/metrics",
                "api_base": s.base_url + "/v1",
                "model": s.engine.model,
                "max_num_seqs": s.engine.settings.max_num_seqs,
                "role": s.engine.kv_role or ("both" if self.stack else None),
                "log": s.log.out.path if s.log is not None else None,
            } for s in self.sites],
            "router": self.stack.info() if self.stack is not None else None,
            "otlp_traces_endpoint": self.spans.endpoint if self.spans is not None else None,
        }

    # -- background loops -------------------------------------------------------------------
    async def _gpu_loop(self) -> None:
        while True:
            for s in self.sites:
                if s.gpu is not None:
                    s.gpu.update()
            await clock.sleep(0.5)

    async def _log_loop(self) -> None:
        """Each engine's periodic lines: vLLM's statistics every 10 s, SGLang's batches
        every second (``demo/logs.py``)."""
        n = 0
        while True:
            await clock.sleep(1.0)
            n += 1
            for s in self.sites:
                if s.log is not None and (s.kind != "vllm" or n % 10 == 0):
                    s.log.periodic(s.engine)

    async def _anomaly_after(self, delay: float) -> None:
        await clock.sleep(delay)
        self.start_anomaly()
        if self.anomaly_s is not None:
            await clock.sleep(self.anomaly_s)
            self.end_anomaly()

    def end_anomaly(self) -> None:
        """Back to the baseline: its traffic, no effect (idempotent; only after a start)."""
        if self.anomaly_started is None or self.anomaly_ended is not None:
            return
        self.anomaly_ended = clock.time()
        if self.traffic is not None:
            self.traffic.anomaly = False
        if self.stack is not None and self.scenario.stack is not None:
            self.stack.end_anomaly(self.scenario.stack)
            for s in self.sites:
                if not s.listening:
                    asyncio.get_running_loop().create_task(s.listen())
        for s in self.sites:
            if s.kind not in self.scenario.effect_engines:
                continue
            s.engine.decode_factor = 1.0
            s.engine.error_share = 0.0
            if self.scenario.effect == "spec-decode-drop":
                s.engine.spec_accept = _SPEC_ACCEPT[0]
            if s.gpu is not None:
                s.gpu.overheat(False)

    def start_anomaly(self) -> None:
        """End the baseline: switch the traffic and apply the scenario's effect (idempotent)."""
        if self.anomaly_started is not None:
            return
        self.anomaly_started = clock.time()
        sc = self.scenario
        if self.traffic is not None:
            self.traffic.anomaly = True
        if self.stack is not None:
            self.stack.start_anomaly()
        throttled: set[str] = set()
        for s in self.sites:
            if s.kind not in sc.effect_engines:
                continue
            e = s.engine
            if sc.effect == "decode-slowdown":
                e.decode_factor = _DECODE_SLOWDOWN
            elif sc.effect == "errors":
                e.error_share = _ERROR_SHARE
            elif sc.effect == "spec-decode-drop":
                e.spec_accept = _SPEC_ACCEPT[1]
                # tokens per verify step fall from 1 + 0.7 x 3 to 1 + 0.2 x 3
                e.decode_factor = (1 + 3 * _SPEC_ACCEPT[0]) / (1 + 3 * _SPEC_ACCEPT[1])
            elif sc.effect == "gpu-throttle" and s.gpu is not None and s.kind not in throttled:
                throttled.add(s.kind)  # one GPU: the first engine of that kind
                s.gpu.overheat()

    async def _fault_loop(self, kind: str) -> None:
        es = self.sites[0]
        await clock.sleep(self.fault_after)
        log = es.log
        while True:
            if kind == "restart":
                es.engine.restart()
                if log is not None:  # a new process: its start-up lines
                    log.new_process()
                    log.startup()
            elif es.listening:
                if log is not None:  # what the real vLLM writes as it dies (demo/logs.py)
                    log.crash(len(es.engine.running))
                es.unlisten()
            else:
                try:
                    await es.listen()
                except OSError:
                    pass  # port taken meanwhile: stay down, retry next period
                else:
                    if log is not None:  # back: a new process's start-up lines
                        log.up = True
                        log.new_process()
                        log.startup()
            await clock.sleep(self.fault_every)

    # -- HTTP -------------------------------------------------------------------------------
    async def _gpus(self, request: Request) -> Response:
        gpus = [s.gpu.record() for s in self.sites if s.gpu]
        limit = request.query.get("limit", "")
        if limit:
            if not limit.isdigit():
                return json_response({"error": "limit must be a whole number"}, status=400)
            gpus = gpus[: int(limit)]
        return json_response({"gpus": gpus})

    def _router(self, es: _EngineSite) -> Router:
        e = es.engine
        kind = es.kind
        r = Router()

        def bind(fn: Callable[..., Any]) -> Callable[[Request], Any]:
            async def handler(request: Request) -> Any:
                return await fn(request, e)
            return handler

        r.add_get("/metrics", self._metrics_handler(es))
        r.add_post("/v1/completions", bind(openai.completions))
        r.add_post("/v1/chat/completions", bind(openai.chat_completions))
        def js(fn: Callable[[], Any]) -> Callable[[Request], Any]:
            async def handler(request: Request) -> Response:
                return json_response(fn())
            return handler

        r.add_get("/v1/models", js(lambda: _models(es)))
        if kind == "vllm":
            r.add_get("/health", _ok)
            r.add_get("/version", js(lambda: {"version": "0.33.0"}))
            r.add_get("/load", js(lambda:
                {"server_load": len(e.running) + len(e.waiting)}))
            r.add_post("/tokenize", bind(_tokenize))
        elif kind == "sglang":
            r.add_get("/health", _ok)
            r.add_get("/health_generate", _ok)
            for path in ("/server_info", "/get_server_info"):
                r.add_get(path, js(lambda: _sglang_server_info(e)))
            for path in ("/model_info", "/get_model_info"):
                r.add_get(path, js(lambda:
                    {"model_path": e.model, "tokenizer_path": e.model, "is_generation": True}))
            r.add_get("/v1/loads", js(lambda: _sglang_loads(e)))
        else:
            r.add_get("/v2", js(lambda: {
                "name": "triton", "version": "2.59.0",
                "extensions": ["classification", "sequence", "model_repository",
                               "model_repository(unload_dependents)", "schedule_policy",
                               "model_configuration", "system_shared_memory",
                               "cuda_shared_memory", "binary_tensor_data", "parameters",
                               "statistics", "trace", "logging"]}))
            r.add_get("/v2/health/ready", _ok)
            r.add_get("/v2/health/live", _ok)
            r.add_get("/health/ready", _ok)
            r.add_get("/v2/models/{name}/ready", _ok)
        return r

    def _metrics_handler(self, es: _EngineSite) -> Callable[[Request], Any]:
        fmt = _FORMATS[es.kind]

        async def handler(request: Request) -> Response:
            if es.fault == "garbage":
                return Response(body=_GARBAGE, content_type="text/plain")
            if es.fault == "slow":
                await clock.sleep(_SLOW_METRICS_S)
            if es.kind == "triton":
                body = formats_triton.render(es.engine, es.gpu)
            else:
                body = fmt.render(es.engine)
            if es.log is not None:
                es.log.scraped()
            return Response(body=body, content_type=fmt.CONTENT_TYPE)
        return handler


_FORMATS: dict[str, Any] = {"vllm": formats_vllm, "sglang": formats_sglang,
                            "triton": formats_triton}


async def _ok(request: Request) -> Response:
    return Response(status=200)


async def _tokenize(request: Request, e: Engine) -> Response:
    try:
        body = request.json()
    except ValueError:
        return openai.error_response(400, "Invalid JSON body")
    words = openai.prompt_words(body, chat="messages" in body) or []
    return json_response({"count": len(words), "max_model_len": e.settings.max_model_len,
                              "tokens": [zlib.crc32(w.encode()) % 128000 for w in words],
                              "token_strs": None})


def _models(es: _EngineSite) -> dict[str, Any]:
    e = es.engine
    created = int(e.start_time)
    card: dict[str, Any] = {"id": e.model, "object": "model", "created": created,
                            "owned_by": _OWNED_BY[es.kind]}
    if es.kind == "vllm":
        card.update({"root": e.model, "parent": None,
                     "max_model_len": e.settings.max_model_len,
                     "permission": [{"id": "modelperm-demo", "object": "model_permission",
                                     "created": created, "allow_create_engine": False,
                                     "allow_sampling": True, "allow_logprobs": True,
                                     "allow_search_indices": False, "allow_view": True,
                                     "allow_fine_tuning": False, "organization": "*",
                                     "group": None, "is_blocking": False}]})
    elif es.kind == "sglang":
        card.update({"root": e.model, "max_model_len": e.settings.max_model_len})
    return {"object": "list", "data": [card]}


def _sglang_server_info(e: Engine) -> dict[str, Any]:
    s = e.settings
    return {
        "model_path": e.model, "tokenizer_path": e.model, "host": "127.0.0.1",
        "served_model_name": e.model, "context_length": s.max_model_len,
        "max_running_requests": s.max_num_seqs, "max_total_tokens": e.kv_capacity_tokens,
        "chunked_prefill_size": s.max_num_batched_tokens, "page_size": 1,
        "mem_fraction_static": s.gpu_memory_utilization, "tp_size": 1, "dp_size": 1,
        "enable_metrics": True, "schedule_policy": "fcfs", "version": "0.5.23",
        "max_total_num_tokens": e.kv_capacity_tokens,
        "internal_states": [{"last_gen_throughput": round(e.gen_tput, 2),
                             "avg_spec_accept_length": (None if e.spec_accept is None else
                                                        round(1 + 3 * e.spec_accept, 3))}],
    }


def _sglang_loads(e: Engine) -> dict[str, Any]:
    s = e.settings
    used = e.pool.used * s.block_size
    return {
        "timestamp": clock.time(), "version": "0.5.23", "accelerator": "cuda",
        "num_accelerators": 1,
        "loads": [{
            "dp_rank": 0, "num_running_reqs": len(e.running), "num_waiting_reqs": len(e.waiting),
            "num_used_tokens": used, "num_total_tokens": e.kv_capacity_tokens,
            "max_total_num_tokens": e.kv_capacity_tokens, "max_running_requests": s.max_num_seqs,
            "token_usage": round(e.kv_usage(), 4), "gen_throughput": round(e.gen_tput, 2),
            "cache_hit_rate": round(e.last_hit_rate, 4),
            "utilization": 0.0,
        }],
    }
