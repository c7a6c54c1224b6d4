"""A network-free ``Source`` built from model objects: tests, screenshots and docs use it.

``FakeSource.demo(scenario)`` gives fixed, deterministic data for vLLM + SGLang + Triton and
two GPUs; ``scenario`` is ``"ok"``, ``"no_gpu"``, ``"down"``, ``"pressure"``, ``"empty"``
(no engine, no GPU), ``"states"`` (one row in each bad state: BAD PAYLOAD, RESTARTED,
STALE, HTTP 503, UNAUTHORIZED, DOWN), ``"requests"`` (``pressure`` with a window of single
requests, ``demo_requests``), ``"stack"`` (two routers: round robin over a 1-seat and an
8-seat backend, and prefill/decode pools; ``ui.fake_stack``), ``"gpu"`` (GPU truth: an
H100 with GPM activity, busy 100 % at 23 % SM activity, its vLLM at capacity with its own
FLOP/byte counts, MBU 12 %; an A100 without GPM, its SGLang without the counters) or
``"logs"`` / ``"logs_down"`` (engine logs: ``ui.fake_logs``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from llmtop.gpu import reasons
from llmtop.history.request_window import RequestWindow
from llmtop.model import EngineRow, Event, GpuProcess, GpuRecord, Quantiles, Snapshot
from llmtop.model.request_records import PROBE_TRACE_PREFIX, RequestRecord
from llmtop.parse.exposition import Family, Sample

__all__ = ["FROZEN_TIME", "FakeSource", "demo_requests", "demo_snapshot"]

FROZEN_TIME = 1_795_000_000.0
"""A fixed wall clock (2026-11-18 11:06:40 UTC) for deterministic screens."""

GIB = 1024**3
LLAMA = "meta-llama/Llama-3.1-8B-Instruct"
VLLM_KEY = f"vllm@127.0.0.1:8000|{LLAMA}"


def _q(p50: float, p95: float, n: float = 100.0) -> Quantiles:
    return Quantiles(p50=p50, p90=p50 + (p95 - p50) * 0.8, p95=p95, p99=p95 * 1.3,
                     mean=p50 * 1.1, count=n)


def _vllm(kv: float = 0.62, waiting: float = 3, state: str = "ok") -> EngineRow:
    ranks = [
        EngineRow(key=f"{VLLM_KEY}|{i}", target="vllm@127.0.0.1:8000",
                  engine="vllm", model=LLAMA, rank=str(i), running=12 + i,
                  waiting=waiting / 2, max_running=128, kv_cache_usage=kv - 0.02 * i,
                  generation_tokens_per_s=910.0 + 40 * i, requests_per_s=3.1,
                  ttft_s=_q(0.18, 0.41), itl_s=_q(0.021, 0.034))
        for i in range(2)
    ]
    return EngineRow(
        key=VLLM_KEY, target="vllm@127.0.0.1:8000", engine="vllm",
        engine_version="0.11.0", model=LLAMA, state=state, last_ok_age_s=0.4,
        running=25, waiting=waiting, max_running=256, kv_cache_usage=kv,
        kv_capacity_tokens=524288, prefix_hit_rate=0.43, ttft_s=_q(0.18, 0.42),
        itl_s=_q(0.021, 0.035), tpot_s=_q(0.022, 0.031), e2e_s=_q(4.1, 7.9),
        queue_s=_q(0.01, 0.09), prompt_tokens_per_s=5230.0, generation_tokens_per_s=1862.0,
        requests_per_s=6.2, preemptions_per_s=0.0, errors_per_s=0.0,
        finished={"stop": 301.0, "length": 60.0, "abort": 2.0}, ranks=ranks,
        lifetime={"ttft_s": _q(0.2, 0.5, 9000), "itl_s": _q(0.02, 0.04, 9e5),
                  "tpot_s": _q(0.022, 0.033, 9000), "e2e_s": _q(4.0, 8.2, 9000),
                  "queue_s": _q(0.01, 0.1, 9000), "prompt_len": _q(512, 1900, 9000),
                  "gen_len": _q(180, 512, 9000), "prefix_hit_rate": 0.38},
        info={"block_size": "16", "num_gpu_blocks": "32768", "cache_dtype": "auto",
              "enable_prefix_caching": "True", "gpu_memory_utilization": "0.9"},
        capacity_used=0.62, capacity=_capacity(),
    )


def _capacity() -> dict:
    """The vLLM's capacity profile: 10 req/s within TTFT p95 ≤ 500 ms, measured 2 days ago."""
    return {"requests_per_s": 10.0, "output_tokens_per_s": 3000.0,
            "slo": {"ttft": 0.5, "itl": None, "tpot": None},
            "shape": {"prompt_mean": 850.0, "prompt_p90": 1800.0, "output_mean": 300.0,
                      "output_p90": 510.0, "prefix_hit_rate": 0.4},
            "measured_unix": FROZEN_TIME - 2 * 86400, "age_s": 2 * 86400.0, "stale": False,
            "url": "http://127.0.0.1:8000", "engine": "vllm", "model": LLAMA, "gpu": None,
            "source": "probe", "path": None}


def _sglang(state: str = "ok") -> EngineRow:
    return EngineRow(
        key="sglang@127.0.0.1:30000|Qwen/Qwen2.5-7B-Instruct", target="sglang@127.0.0.1:30000",
        engine="sglang", engine_version="0.5.3", model="Qwen/Qwen2.5-7B-Instruct", state=state,
        last_ok_age_s=0.3, running=14, waiting=0, max_running=None, kv_cache_usage=0.35,
        prefix_hit_rate=0.71, ttft_s=_q(0.09, 0.22), itl_s=_q(0.015, 0.024),
        generation_tokens_per_s=1204.0, requests_per_s=4.8, preemptions_per_s=0.0,
        errors_per_s=0.0, finished={"stop": 240.0}, info={"page_size": "1"},
    )


def _triton(state: str = "ok") -> EngineRow:
    down = state != "ok"
    return EngineRow(
        key="triton@127.0.0.1:8002|ensemble", target="triton@127.0.0.1:8002", engine="triton",
        engine_version="2.59.0", model="ensemble", state=state,
        error="connection refused" if down else None, last_ok_age_s=14.0 if down else 0.5,
        running=4, waiting=1, max_running=64, kv_cache_usage=None, prefix_hit_rate=None,
        ttft_s=None, itl_s=None, e2e_s=Quantiles(mean=1.9, count=40),
        generation_tokens_per_s=None, requests_per_s=2.0, preemptions_per_s=None,
        errors_per_s=0.0,
    )


_CMDLINES = (
    f"python3 -m vllm.entrypoints.openai.api_server --model {LLAMA} --port 8000",
    f"python3 -m sglang.launch_server --model-path {LLAMA} --port 30000",
)


def _gpus() -> list[GpuRecord]:
    out = []
    for i, (util, used, temp, thr, owner) in enumerate(
        ((0.87, 61, 71, [], "vllm@127.0.0.1:8000"),
         (0.54, 38, 64, [], "sglang@127.0.0.1:30000"))
    ):
        out.append(GpuRecord(
            host="", index=i, source="demo", uuid=f"GPU-demo-{i}", name="NVIDIA H100 80GB HBM3",
            util=util, mem_util=util * 0.6, mem_used_bytes=used * GIB, mem_total_bytes=80 * GIB,
            mem_free_bytes=(80 - used) * GIB, power_w=420.0 - 100 * i, power_limit_w=700.0,
            temp_c=temp, temp_slowdown_c=87, sm_clock_mhz=1755 - 200 * i,
            sm_clock_max_mhz=1980, mem_clock_mhz=2619, throttle=thr, fan_pct=None,
            processes=[GpuProcess(pid=4100 + i, name="python3", used_bytes=(used - 1) * GIB,
                                  engine_target=owner, user="llm",
                                  cmdline=_CMDLINES[i])],
        ))
    return out


H100_PEAK = {"bytes_per_s": 3.35e12, "flops": 989e12, "gpu": "NVIDIA H100 80GB HBM3",
             "source": "NVIDIA H100 datasheet (SXM)"}
"""The peak the ``gpu`` scenario's vLLM divides by (the shape of ``EngineRow.gpu_peak``)."""


def _gpu_truth(vllm: EngineRow, sglang: EngineRow, gpus: list[GpuRecord]) -> None:
    """The ``gpu`` scenario, in place: GPU 0 an H100 whose GPM says the engine leaves it
    idle (busy 100 %, SM 23 %, DRAM 18 %), its vLLM at 95 % of capacity moving 0.40 TB/s
    (MBU 12 %); GPU 1 an A100 (no GPM: the note says so), its SGLang without the counters.
    SYNTHETIC values, shaped like the contract fields."""
    h100, a100 = gpus
    h100.util, h100.mem_util = 1.0, 0.21
    h100.sm_active, h100.sm_occupancy, h100.tensor_active = 0.23, 0.11, 0.08
    h100.dram_active, h100.fp16_active, h100.activity_source = 0.18, 0.02, "gpm"
    h100.nvlink_tx_bytes_s, h100.nvlink_rx_bytes_s = 2.1e9, 1.9e9
    h100.throttle_time = {"power": 0.0, "thermal": 0.0}
    h100.processes[0].sm_util = 0.97
    a100.name, a100.util = "NVIDIA A100-SXM4-80GB", 0.97
    a100.activity_note = "GPM: not supported on NVIDIA A100-SXM4-80GB"
    a100.throttle, a100.throttle_time = ["power cap"], {"power": 0.35, "thermal": 0.0}
    a100.processes[0].sm_util = 0.95
    vllm.capacity_used = 0.95
    vllm.achieved_read_bytes_per_s, vllm.achieved_write_bytes_per_s = 3.9e11, 1.0e10
    vllm.achieved_bytes_per_s, vllm.achieved_flops_per_s = 4.0e11, 2.1e13
    vllm.mbu, vllm.mfu, vllm.gpu_peak = 4.0e11 / 3.35e12, 2.1e13 / 989e12, dict(H100_PEAK)
    sglang.mfu_hint = "start SGLang with --enable-metrics --enable-mfu-metrics"


def demo_snapshot(scenario: str = "ok", t: float = FROZEN_TIME) -> Snapshot:
    """A fixed snapshot: vLLM + SGLang + Triton and two GPUs, shaped by ``scenario``."""
    vllm = _vllm()
    triton = _triton()
    gpus = _gpus()
    gpu_error = None
    if scenario == "pressure":
        vllm = _vllm(kv=0.97, waiting=31)
        vllm.preemptions_per_s = 4.0
        vllm.ttft_s = _q(0.9, 1.8)
        vllm.capacity_used = 0.95
        vllm.capacity_drift = [{"what": "prompt", "ratio": 2.1, "live": 1785.0,
                                "measured": 850.0,
                                "text": "prompts 2.1× longer than when measured"}]
        gpus[0].throttle = ["power cap"]
    if scenario == "down":
        triton = _triton(state="down")
    sglang = _sglang()
    if scenario == "headroom":  # SGLang measured too: 4.8 of 5.5 req/s, near its capacity
        sglang.capacity_used = 0.87
        sglang.capacity = {**_capacity(), "requests_per_s": 5.5, "output_tokens_per_s": 1400.0,
                           "url": "http://127.0.0.1:30000", "engine": "sglang",
                           "model": sglang.model}
    if scenario == "gpu":
        _gpu_truth(vllm, sglang, gpus)
    if scenario == "no_gpu":
        gpus = []
        gpu_error = reasons.LIBRARY_NOT_FOUND  # the sampler's own words
    if scenario == "empty":  # nothing found, no NVML: what a first start on a laptop shows
        return Snapshot(time=t, window_s=10.0, gpu_error=reasons.LIBRARY_NOT_FOUND)
    if scenario == "states":
        return Snapshot(time=t, window_s=10.0, engines=_state_rows(), gpus=gpus)
    if scenario == "stack":
        from llmtop.ui.fake_stack import stack_snapshot

        return stack_snapshot(t, gpus)
    return Snapshot(time=t, window_s=10.0, engines=[vllm, sglang, triton], gpus=gpus,
                    gpu_error=gpu_error)


def _state_rows() -> list[EngineRow]:
    """One row per state badge (the ``states`` scenario)."""
    vllm = _vllm(state="bad_payload")
    vllm.error = "line 1: label value not quoted"
    vllm.last_ok_age_s = 4.0
    sglang = _sglang(state="restarted")
    triton = _triton(state="stale")
    triton.last_ok_age_s = 125.0
    out = [vllm, sglang, triton]
    for port, state, status, age in ((8003, "http_error", 503, 3.0),
                                     (8004, "unauthorized", 401, None),
                                     (8005, "down", None, 1080.0)):
        target = f"tgi@127.0.0.1:{port}"
        out.append(EngineRow(key=f"{target}|", target=target, engine="tgi", state=state,
                             http_status=status, last_ok_age_s=age,
                             error=f"HTTP {status}" if status else "connection refused"))
    return out


def demo_requests(t: float = FROZEN_TIME) -> RequestWindow:
    """A minute of single requests shaped like the engines' spans (``parse/spans.py``):
    vLLM's (ids ``cmpl-<hex>-0``, tokens, queue/prefill/decode, no finish reason) with a
    queue building behind a few long prompts and the probe's requests among them; SGLang's
    (no tokens); Triton's (queue and compute, no TTFT). Deterministic; SYNTHETIC values."""
    import random

    rnd = random.Random(44)
    w = RequestWindow()
    reqs = []
    for i in range(60):
        long = i % 17 == 3
        prompt = rnd.randint(61_000, 90_000) if long else rnd.randint(600, 2400)
        queue = rnd.uniform(4.0, 7.9) if long or i % 7 == 0 else rnd.uniform(0.005, 0.3)
        prefill = prompt / 30_000 + rnd.uniform(0.01, 0.05)
        out = rnd.randint(40, 512)
        decode = out * rnd.uniform(0.021, 0.035)
        probe = i % 11 == 5
        reqs.append(RequestRecord(
            id=f"cmpl-{rnd.getrandbits(64):016x}-0", engine="vllm",
            target="vllm@127.0.0.1:8000", prompt_tokens=prompt, output_tokens=out,
            queue_s=queue, prefill_s=prefill, decode_s=decode, ttft_s=queue + prefill,
            e2e_s=queue + prefill + decode + 0.004, source="probe" if probe else "traffic",
            trace_id=(PROBE_TRACE_PREFIX + f"{rnd.getrandbits(80):020x}") if probe else None,
            t_start=t - 50 + i * 0.8 - (queue + prefill + decode), t_end=t - 50 + i * 0.8))
    for i in range(25):
        queue, prefill, decode = rnd.uniform(0.002, 0.02), rnd.uniform(0.03, 0.09), \
            rnd.uniform(0.8, 3.0)
        reqs.append(RequestRecord(
            id=f"{rnd.getrandbits(128):032x}", engine="sglang",
            target="sglang@127.0.0.1:30000", queue_s=queue, prefill_s=prefill,
            decode_s=decode, ttft_s=queue + prefill, e2e_s=queue + prefill + decode,
            t_end=t - 40 + i * 1.5))
    for i in range(8):
        queue, compute = rnd.uniform(0.01, 0.2), rnd.uniform(1.2, 2.4)
        reqs.append(RequestRecord(
            id=str(9100 + i), engine="triton", target="triton@127.0.0.1:8002", queue_s=queue,
            prefill_s=compute, e2e_s=queue + compute + 0.002, model="ensemble",
            t_end=t - 30 + i * 3.0))
    w.add(sorted(reqs, key=lambda r: r.t_end or 0.0))
    w.spans_seen = len(reqs)
    return w


SERIES_POINTS = 120
"""Points in every fake series (two minutes at one a second)."""


def _tail(values: list, last: int | None) -> list:
    return values if last is None else values[-last:] if last > 0 else []


def _wave(n: int, base: float, amp: float, gap_at: tuple[int, ...] = ()) -> list[float | None]:
    out: list[float | None] = [base + amp * math.sin(i / 6.0) for i in range(n)]
    for g in gap_at:
        if 0 <= g < n:
            out[g] = None
    return out


def _families() -> tuple[dict[str, Family], dict[str, Family]]:
    now: dict[str, Family] = {}
    prev: dict[str, Family] = {}
    rows = [
        ("vllm:num_requests_running", "gauge", 25.0, 24.0),
        ("vllm:num_requests_waiting", "gauge", 3.0, 2.0),
        ("vllm:kv_cache_usage_perc", "gauge", 0.62, 0.61),
        ("vllm:generation_tokens_total", "counter", 1_203_400.0, 1_201_538.0),
        ("vllm:prompt_tokens_total", "counter", 3_450_000.0, 3_444_770.0),
        ("vllm:num_preemptions_total", "counter", 12.0, 12.0),
    ]
    lab = {"engine": "0", "model_name": LLAMA}
    for name, typ, v_now, v_prev in rows:
        now[name] = Family(name, typ, "", [Sample(name, lab, v_now)])
        prev[name] = Family(name, typ, "", [Sample(name, lab, v_prev)])
    hist = "vllm:request_time_per_output_token_seconds"  # a long name: cut at 80 columns
    for fams, scale in ((now, 1.0), (prev, 0.98)):
        samples = [Sample(f"{hist}_bucket", {**lab, "le": le}, float(round(n * scale)))
                   for le, n in (("0.05", 310), ("0.1", 902), ("0.5", 1790), ("+Inf", 1841))]
        samples += [Sample(f"{hist}_sum", lab, 41.2 * scale),
                    Sample(f"{hist}_count", lab, float(round(1841 * scale)))]
        fams[hist] = Family(hist, "histogram", "", samples)
    return now, prev


class FakeSource:
    """A ``Source`` that returns fixed snapshots; ``tick`` can be given a function of the
    tick number (``snapshots=lambda n: ...``) to script changes."""

    def __init__(
        self,
        snapshot: Snapshot | None = None,
        *,
        snapshots: Callable[[int], Snapshot] | None = None,
        host: str = "demo-host",
        events: list[Event] | None = None,
        fail_on: set[int] | None = None,
        replay: Any = None,
        requests: RequestWindow | None = None,
    ) -> None:
        self._snap = snapshot or demo_snapshot()
        self._snapshots = snapshots
        self.host = host
        self.ticks = 0
        self._fail_on = fail_on or set()
        self.replay = replay
        self.requests = requests
        """The request window ``request_window`` answers (None: no spans, no receiver)."""
        self._events: list[Event] = list(events) if events is not None else [
            Event(FROZEN_TIME - 60, "info", "vllm@127.0.0.1:8000", "up: vllm 0.11.0"),
            Event(FROZEN_TIME - 42, "info", "sglang@127.0.0.1:30000", "up: sglang 0.5.3"),
            Event(FROZEN_TIME - 30, "warn", "triton@127.0.0.1:8002", "restarted"),
        ]
        self.now_families, self.prev_families = _families()

    @classmethod
    def demo(cls, scenario: str = "ok", **kw: Any) -> FakeSource:
        if scenario == "requests":
            kw.setdefault("requests", demo_requests())
            scenario = "pressure"
        from llmtop.ui.fake_logs import LOGS_SCENARIOS, logs_snapshot

        if scenario in LOGS_SCENARIOS:  # engine logs (``ui.fake_logs``)
            window = kw.setdefault("requests", demo_requests())
            return cls(logs_snapshot(demo_snapshot("ok"), scenario, window), **kw)
        return cls(demo_snapshot(scenario), **kw)

    async def tick(self) -> Snapshot:
        n = self.ticks
        self.ticks += 1
        if n in self._fail_on:
            raise RuntimeError(f"simulated poller failure at tick {n}")
        if self._snapshots is not None:
            self._snap = self._snapshots(n)
        return self._snap

    def snapshot(self, window_s: float) -> Snapshot | None:
        snap = replace(self._snap, window_s=window_s)
        return snap

    def series(self, key: str, field: str, last: int | None = None) -> list[float | None]:
        row = next((r for r in self._snap.engines if r.key == key), None)
        if row is None or row.state != "ok":
            return _tail([None] * SERIES_POINTS, last)
        base = {"ttft_p50": 0.18, "ttft_p95": 0.42, "itl_p95": 0.035, "gen_tps": 1800.0,
                "running": 25.0, "waiting": 3.0, "kv": 0.6, "preempt_s": 0.0}.get(field, 1.0)
        return _tail(_wave(SERIES_POINTS, base, base * 0.3, gap_at=(40, 41, 42)), last)

    def gpu_series(self, key: str, field: str, last: int | None = None
                   ) -> list[float | None]:
        if field in ("sm_active", "dram_active"):  # the GPU's own value, as kept; else none
            now = next((getattr(g, field) for g in (self._snap.gpus if self._snap else ())
                        if key in (f"{g.host}:{g.index}", f"{g.host}#{g.index}")), None)
            if now is None:
                return _tail([None] * SERIES_POINTS, last)
            return _tail(_wave(SERIES_POINTS, now, now * 0.3, gap_at=(70,)), last)
        base = {"util": 0.6, "mem_used": 50.0 * GIB, "power": 400.0, "temp": 65.0}.get(field, 0.6)
        amp = base * (0.4 if field == "util" else 0.15)
        return _tail(_wave(SERIES_POINTS, base, amp, gap_at=(70,)), last)

    def series_count(self) -> int | None:
        return SERIES_POINTS

    def series_times(self, last: int | None = None) -> list[float]:
        """One point a second, the newest at the snapshot's time."""
        end = self._snap.time if self._snap is not None else FROZEN_TIME
        return _tail([end - (SERIES_POINTS - 1 - i) for i in range(SERIES_POINTS)], last)

    def events(self) -> list[Event]:
        return list(self._events)

    def event(self, level: str, target: str | None, text: str) -> None:
        t = self._snap.time if self._snap is not None else FROZEN_TIME
        self._events.append(Event(t, level, target, text))

    def raw_families(self, target: str) -> tuple[dict, dict, float]:
        if not target.startswith("vllm"):
            return {}, {}, 0.0
        return self.now_families, self.prev_families, 1.0

    def request_window(self) -> RequestWindow | None:
        return self.requests

    async def aclose(self) -> None:
        return None
