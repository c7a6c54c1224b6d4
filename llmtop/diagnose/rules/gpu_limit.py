"""``gpu_bound`` / ``gpu_idle``: while an engine queues or its TTFT/ITL rose, is the GPU the
limit, or does the engine leave it idle?

- **pressure** first: requests waiting all window long (``waiting_min`` >= 1), or TTFT p95 /
  ITL p95 up against the engine's baseline (``TTFT_X``/``TTFT_ABS_S``, ``DECODE_X``/
  ``DECODE_ABS_S``, over ``MIN_REQUESTS`` requests / ``MIN_TOKENS`` tokens); none: no claim;
- ``gpu_bound``: the engine's own bytes/s near the GPU's peak (``mbu`` >= ``MBU_BOUND``) or the
  DRAM interface busy (``dram_active`` >= ``DRAM_BOUND``): memory-bound decode; or its FLOP/s
  (``mfu`` >= ``MFU_BOUND``) or the tensor pipes (``tensor_active`` >= ``TENSOR_BOUND``):
  compute-bound prefill. The action is hardware or a lighter model, except at a small batch,
  where each step re-reads the weights for a few requests and more seats come first;
- ``gpu_idle``: every activity number there is low (``sm_active`` < ``SM_IDLE``, ``mbu`` <
  ``MBU_IDLE``, ``dram_active`` < ``DRAM_IDLE``; a memory one, MBU or DRAM, known: decode at
  its memory limit runs at low SM activity, so SM activity alone says nothing) and the KV cache
  has room (a full cache is ``kv_pressure``'s): seat or batch limits when running sits at its
  limit, else the scheduler or the CPU side.

A number not reported (None) is never read as low or high: without any, no claim. SGLang's
MBU (``model.WEIGHTS_PER_TOKEN``: weights counted per token) is never evidence of the memory
limit, only of an idle GPU. GPU
activity is the mean over the GPUs holding the engine's memory (attribution).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from llmtop.diagnose.context import RowCtx, fmt_pct, fmt_s
from llmtop.diagnose.findings import Evidence, Finding
from llmtop.diagnose.signals import count
from llmtop.diagnose.thresholds import (
    DECODE_ABS_S,
    DECODE_X,
    DRAM_BOUND,
    DRAM_IDLE,
    KV_FULL,
    LIMIT_SMALL_BATCH,
    MBU_BOUND,
    MBU_IDLE,
    MFU_BOUND,
    MIN_REQUESTS,
    MIN_TOKENS,
    RUNNING_AT_LIMIT,
    SM_IDLE,
    TENSOR_BOUND,
    TTFT_ABS_S,
    TTFT_X,
)
from llmtop.model import WEIGHTS_PER_TOKEN, GpuRecord
from llmtop.units import byte_rate

__all__ = ["gpu_limit", "gpu_mean"]

_SEATS = {"vllm": "--max-num-seqs", "sglang": "--max-running-requests",
          "llamacpp": "--parallel"}
_BATCH = {"vllm": "--max-num-batched-tokens", "sglang": "--chunked-prefill-size"}


def _fraction(v: float | None) -> float | None:
    """A 0..1 reading, or None (missing, NaN, out of range: no evidence either way)."""
    return v if v is not None and math.isfinite(v) and 0.0 <= v <= 1.5 else None


def gpu_mean(gpus: Sequence[GpuRecord], name: str) -> float | None:
    """The mean of one activity field over the GPUs that report it (None: none does)."""
    vals = [v for g in gpus if not g.error and (v := _fraction(getattr(g, name))) is not None]
    return sum(vals) / len(vals) if vals else None


def _known(*ev: Evidence) -> list[Evidence]:
    """The evidence whose value was reported (a missing number is no evidence)."""
    return [e for e in ev if e.value is not None]


def _pressure(c: RowCtx) -> tuple[str, list[Evidence]] | None:
    """What makes the question worth asking: a queue all window, or a latency that rose."""
    row = c.row
    w, wmin = row.waiting, c.waiting_min
    if w is not None and w >= 1 and wmin is not None and wmin >= 1:
        return (f"{w:.0f} requests wait (never fewer than {wmin:.0f} in the window)",
                [c.ev("waiting", 1.0), c.ev("waiting_min", 1.0, wmin, baseline=False)])
    for sig, attr, x, gap, least in (("ttft_p95", "ttft_s", TTFT_X, TTFT_ABS_S, MIN_REQUESTS),
                                     ("itl_p95", "itl_s", DECODE_X, DECODE_ABS_S, MIN_TOKENS)):
        v, usual = c.sig(sig), c.usual(sig)
        if v is None or usual is None or usual <= 0 or count(row, attr) < least:
            continue
        if v >= x * usual and v - usual >= gap:
            name = sig.split("_")[0].upper()
            return (f"{name} p95 {fmt_s(v)} (usual {fmt_s(usual)})",
                    [c.ev(sig, x * usual)])
    return None


def _at_seat_limit(c: RowCtx) -> bool:
    run, lim = c.row.running, c.row.max_running
    return run is not None and lim is not None and lim > 0 and run >= RUNNING_AT_LIMIT * lim


def _bound(c: RowCtx, why: str, ev: list[Evidence], mbu: float | None, dram: float | None,
           mfu: float | None, tensor: float | None) -> Finding | None:
    row = c.row
    memory = (mbu is not None and mbu >= MBU_BOUND) or (dram is not None and dram >= DRAM_BOUND)
    compute = (mfu is not None and mfu >= MFU_BOUND) or (
        tensor is not None and tensor >= TENSOR_BOUND)
    if not (memory or compute):
        return None
    said: list[str] = []
    if mbu is not None and row.achieved_bytes_per_s is not None:
        peak = (row.gpu_peak or {}).get("bytes_per_s")
        of = f" of {byte_rate(peak)}" if isinstance(peak, (int, float)) else ""
        said.append(f"it moves {byte_rate(row.achieved_bytes_per_s)}{of} per GPU "
                    f"(MBU {fmt_pct(mbu)})")
    elif mbu is not None:
        said.append(f"MBU {fmt_pct(mbu)}")
    if dram is not None:
        said.append(f"DRAM busy {fmt_pct(dram)}")
    if mfu is not None and compute:
        said.append(f"MFU {fmt_pct(mfu)}")
    if tensor is not None and compute:
        said.append(f"tensor cores busy {fmt_pct(tensor)}")
    kind = "memory bandwidth (decode)" if memory else "compute (prefill)"
    ev += _known(Evidence("mbu", mbu, c.window, None, MBU_BOUND),
                 Evidence("gpu.dram_active", dram, "now", None, DRAM_BOUND),
                 Evidence("mfu", mfu, c.window, None, MFU_BOUND),
                 Evidence("gpu.tensor_active", tensor, "now", None, TENSOR_BOUND))
    seats = _SEATS.get(row.engine, "the running limit")
    run, kv = row.running, row.kv_cache_usage
    small = (memory and not compute and run is not None and 0 < run <= LIMIT_SMALL_BATCH
             and (kv is None or kv < KV_FULL))
    summary = f"the GPU is the limit, its {kind}: {', '.join(said)} while {why}"
    if small:
        assert run is not None
        tokens = f"{run:.0f} token{'s' if run != 1 else ''}"
        summary = (f"each step is bound by the GPU's memory bandwidth ({', '.join(said)}) "
                   f"while {why}, but at a batch of only {run:.0f} it reads all the weights "
                   f"for {tokens}: more seats would share those bytes")
        ev.append(c.ev("running", LIMIT_SMALL_BATCH, baseline=False))
        action = (f"raise {seats} first: a step reads the weights once for the whole batch, so "
                  "more requests per step cost little bandwidth each; then more or faster GPUs, "
                  "or quantised weights")
    elif memory:
        action = ("more GPUs (another replica, or tensor parallelism to split the bytes of each "
                  "step), faster memory (H200: 4.8 TB/s), FP8/INT4 weights or an FP8 KV cache "
                  f"(fewer bytes per step), or a smaller model; raising {seats} adds KV reads "
                  "to every step and helps little here")
    else:
        batch = _BATCH.get(row.engine, "the prefill chunk size")
        action = ("more or faster GPUs, FP8, or a smaller model; a smaller "
                  f"{batch} spreads prefill between decode steps (protects ITL, not "
                  "throughput)")
    return c.finding("gpu_bound", "warn", summary, ev, action)


def _idle(c: RowCtx, why: str, ev: list[Evidence], mbu: float | None, dram: float | None,
          sm: float | None) -> Finding | None:
    row = c.row
    if mbu is None and dram is None:
        # memory-bound decode runs at 10-20 % SM activity: SM activity alone cannot say the
        # GPU is idle; a measure of memory traffic must say it too
        return None
    if any(v is not None and v >= lim for v, lim in ((sm, SM_IDLE), (mbu, MBU_IDLE),
                                                      (dram, DRAM_IDLE))):
        return None
    kv = row.kv_cache_usage
    if kv is not None and kv >= KV_FULL:
        return None  # the cache is what is full: kv_pressure's
    said = [f"{name} {fmt_pct(v)}" for name, v in (("SM activity", sm), ("MBU", mbu),
                                                    ("DRAM busy", dram)) if v is not None]
    seats = _SEATS.get(row.engine, "the running limit")
    batch = _BATCH.get(row.engine, "the token budget per step")
    room = f", KV {fmt_pct(kv)}" if kv is not None else ""
    if _at_seat_limit(c):
        assert row.running is not None
        where = (f"running sits at its limit of {row.max_running:.0f}{room}: the seats, not "
                 "the GPU, hold the queue")
        action = (f"raise {seats} (and {batch} if prefill chunks fill each step): the GPU "
                  "has room for a larger batch")
        ev.append(c.ev("running", row.max_running, baseline=False))
    else:
        run = f"{row.running:.0f} running" if row.running is not None else "running unknown"
        where = (f"{run}{room}: the engine makes few or small steps (a seat or batch limit "
                 "llmtop cannot see, a stalled scheduler, or the CPU side)")
        if row.running is not None and row.max_running is None:
            # vLLM does not export --max-num-seqs: the number running may be it
            first = (f"if {row.running:.0f} running is the engine's limit (not exported), "
                     f"raise {seats} / {batch}")
        else:
            first = f"if running is at the engine's limit, raise {seats} / {batch}"
        action = (f"{first}; else look at its host side: the engine process's CPU (a CPU "
                  "quota, a busy tokenizer or detokenizer: py-spy or top on it) and its "
                  "scheduler; more GPUs will not help")
    summary = f"the engine leaves the GPU idle: {', '.join(said)} while {why}; {where}"
    ev += _known(Evidence("gpu.sm_active", sm, "now", None, SM_IDLE),
                 Evidence("mbu", mbu, c.window, None, MBU_IDLE),
                 Evidence("gpu.dram_active", dram, "now", None, DRAM_IDLE))
    return c.finding("gpu_idle", "warn", summary, ev, action)


def gpu_limit(c: RowCtx) -> list[Finding]:
    """``gpu_bound`` or ``gpu_idle`` under pressure (see the module doc), else nothing."""
    pressure = _pressure(c)
    if pressure is None:
        return []
    why, ev = pressure
    gpus = [g for g in c.gpus if not g.error]
    mbu, mfu = _fraction(c.row.mbu), _fraction(c.row.mfu)
    dram, tensor = gpu_mean(gpus, "dram_active"), gpu_mean(gpus, "tensor_active")
    sm = gpu_mean(gpus, "sm_active")
    # an engine that counts the weights per token over-states its bytes at batch > 1: its
    # MBU may say "low" (an upper bound, so the truth is lower still) but never "at the limit"
    found = _bound(c, why, list(ev), None if c.row.engine in WEIGHTS_PER_TOKEN else mbu,
                   dram, mfu, tensor)
    if found is None:
        found = _idle(c, why, list(ev), mbu, dram, sm)
    return [found] if found is not None else []
