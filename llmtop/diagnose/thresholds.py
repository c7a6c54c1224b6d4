"""Every threshold of the diagnosis, in one place (``docs/diagnosis.md`` explains each).

Relative limits compare with the engine's own baseline (its median over the last 15 minutes,
the current window left out); absolute limits are where physics or the engines' own docs set
one. A change must pass both a relative and an absolute limit, so tiny values do not flap.
"""

from __future__ import annotations

__all__ = [
    "ABORT_SHARE_INFO",
    "BASELINE_FREEZE_MAX_S",
    "BASELINE_KEEP_S",
    "BASELINE_MIN_POINTS",
    "BASELINE_STEP_S",
    "CAP_CRIT",
    "CAP_MIN_REQUESTS",
    "CAP_WARN",
    "DECODE_ABS_S",
    "DECODE_CRIT_X",
    "DECODE_RUNNING_X",
    "DECODE_X",
    "DIAG_EVERY_S",
    "DIAG_WINDOW_S",
    "DRAM_BOUND",
    "DRAM_IDLE",
    "END_HOLD_S",
    "ERRORS_MIN",
    "ERROR_SHARE_CRIT",
    "ERROR_SHARE_WARN",
    "GPU_CLOCK_DROP",
    "GPU_HARD_THROTTLE",
    "GPU_UTIL_BUSY",
    "HIT_ABS_DROP",
    "HIT_BASE_MIN",
    "HIT_REL",
    "IMB_ITL_ABS_S",
    "IMB_ITL_X",
    "IMB_KV_GAP",
    "IMB_KV_ROOM",
    "IMB_RUNNING_ABS",
    "IMB_RUNNING_X",
    "IMB_WAITING_MIN",
    "KV_CRIT",
    "KV_FAIL_CRIT_PER_S",
    "KV_FAIL_MIN",
    "KV_FULL",
    "KV_XFER_MIN_S",
    "KV_XFER_SHARE",
    "LIMIT_SMALL_BATCH",
    "MBU_BOUND",
    "MBU_IDLE",
    "MFU_BOUND",
    "MIN_REQUESTS",
    "MIN_TOKENS",
    "PD_ROOM_KV",
    "PD_WAITING_MIN",
    "PREEMPT_CRIT_PER_S",
    "PREEMPT_MIN_EVENTS",
    "PROMPT_ABS_TOKENS",
    "PROMPT_X",
    "QUEUE_CRIT_S",
    "QUEUE_CRIT_SHARE",
    "QUEUE_FEW_MIN",
    "QUEUE_P95_MIN_S",
    "QUEUE_PINNED_MIN",
    "QUEUE_SERVICE_X",
    "QUEUE_SHARE",
    "QUEUE_WAITING_MIN",
    "ROUTER_OVERHEAD_MIN_S",
    "ROUTER_OVERHEAD_SHARE",
    "ROUTE_FAIR_X",
    "ROUTE_MIN_REQUESTS",
    "ROUTE_OVER_CAPACITY_X",
    "ROUTE_WAITING_MIN",
    "RUNNING_AT_LIMIT",
    "SLOWER_X",
    "SM_IDLE",
    "SPEC_ABS_DROP",
    "SPEC_REL",
    "STUCK_HEALTH_PROBE_S",
    "STUCK_IDLE_S",
    "TENSOR_BOUND",
    "TTFT_ABS_S",
    "TTFT_X",
    "WARMUP_S",
]

# ---------------------------------------------------------------- windows and baseline
DIAG_WINDOW_S = 30.0
"""The window the rules judge (live and in replay): long enough for a minimum request count."""
DIAG_EVERY_S = 5.0
"""The store re-runs the rules at most this often: deriving the 30 s rows costs more than the
diagnosis may spend per engine per 1 s refresh (``docs/benchmarks.md``, "Diagnosis"), so
they are derived every few refreshes."""
END_HOLD_S = 15.0
"""Hysteresis: a finding ends only after it has not fired for this long."""
BASELINE_STEP_S = 10.0
"""One baseline point per row per 10 s (the store's 10 s rows, which tile time)."""
BASELINE_KEEP_S = 900.0
"""The baseline is the median over the last 15 minutes (the current window left out)."""
BASELINE_FREEZE_MAX_S = 1800.0
"""While a warn/critical finding is active, its signals are held out of the baseline (their
usual values frozen at the episode's start), so a long anomaly is not absorbed as usual; an
episode longer than this becomes the new usual (the baseline learns it in 15 minutes)."""
BASELINE_MIN_POINTS = 3
"""Fewer points than this (30 s of history) give no baseline: relative rules do not apply."""

# ---------------------------------------------------------------- noise floors
MIN_REQUESTS = 20
"""A quantile or share over fewer finished requests in the window is noise."""
MIN_TOKENS = 200
"""ITL histograms count tokens: fewer in the window is noise."""

# ---------------------------------------------------------------- kv_pressure
KV_FULL = 0.95
"""KV usage at or above this, with preemption or a queue, is pressure (vLLM's Grafana
colours 0.9 / 0.98; GAIE treats 0.8 as routing headroom, not a problem)."""
KV_CRIT = 0.98
PREEMPT_MIN_EVENTS = 2.0
"""Preemptions in the window before they count (rate x window)."""
PREEMPT_CRIT_PER_S = 1.0
"""vLLM's Instances dashboard colours preemptions/s red above 1."""

# ---------------------------------------------------------------- queueing
CAP_WARN = 0.85
"""Request rate at or above this share of the profile's measured capacity (the highest rate
that met the SLOs, ``docs/capacity.md``) is ``near_capacity``: past ~85 % utilisation the
queueing delay of a busy server grows as 1/(1-ρ), so the last 15 % is the margin before TTFT
leaves its SLO (the usual autoscaling target band, 70-85 %)."""
CAP_CRIT = 1.0
"""At or above the measured capacity itself: the SLOs held only up to there."""
CAP_MIN_REQUESTS = 5
"""Fewer requests in the window than this: the rate is too thin to judge."""
QUEUE_SHARE = 0.5
"""Queue time p50 as a share of TTFT p50: above it, requests wait more than they compute."""
QUEUE_P95_MIN_S = 0.5
"""Queue p95 below this is not worth a warning (vLLM's lowest queue bucket is 0.3 s)."""
QUEUE_CRIT_S = 2.0
QUEUE_CRIT_SHARE = 0.8
QUEUE_FEW_MIN = 3
"""With fewer than MIN_REQUESTS finished in the window (a small model on a CPU finishes ~10
in 5 s), queueing is still named when the evidence is overwhelming: at least this many
finished requests, a queue of QUEUE_WAITING_MIN all window long, and their mean queue time
QUEUE_SERVICE_X times their mean service (running) time."""
QUEUE_WAITING_MIN = 5.0
"""A queue this long all window long (vLLM Doctor's *Queue Pressure* uses 5)."""
QUEUE_SERVICE_X = 2.0
"""Mean queue time at least this x the mean time the same requests ran (vLLM
``request_inference_time_seconds``): they waited longer than they were served, twice over."""
QUEUE_PINNED_MIN = 1
"""Without a service-time histogram (SGLang), a queue is still named from fewer than
QUEUE_FEW_MIN requests when the gauges are the evidence: running at the engine's own
exported limit and QUEUE_WAITING_MIN waiting all window, with at least this many requests
admitted in the window (SGLang observes queue time at a request's first forward) whose queue
time is at least QUEUE_P95_MIN_S and QUEUE_SHARE of their TTFT. A real SGLang on this CPU
(``--max-running-requests 2``, 12 clients x 200 tokens) admitted 2 in a 5 s window."""
RUNNING_AT_LIMIT = 0.95
"""running >= this x max_running: the running limit is what admits requests."""

# ---------------------------------------------------------------- baseline-relative latency
SLOWER_X = 1.5
"""Prefill/TTFT "up" for the prompt rules: this x baseline."""
TTFT_X = 2.0
TTFT_ABS_S = 0.2
DECODE_X = 1.5
DECODE_CRIT_X = 3.0
DECODE_ABS_S = 0.01
DECODE_RUNNING_X = 1.5
"""A decode slowdown with running above this x baseline (+2) is load, not a slowdown."""

# ---------------------------------------------------------------- prompts and prefix cache
PROMPT_X = 2.0
PROMPT_ABS_TOKENS = 256.0
HIT_BASE_MIN = 0.2
"""A baseline hit rate below this has no reuse to lose."""
HIT_REL = 0.5
"""Hit rate at or below this x baseline ..."""
HIT_ABS_DROP = 0.15
"""... and at least this many points (0..1) below it."""

# ---------------------------------------------------------------- spec decode
SPEC_REL = 0.7
SPEC_ABS_DROP = 0.1

# ---------------------------------------------------------------- errors and aborts
ERROR_SHARE_WARN = 0.02
ERROR_SHARE_CRIT = 0.2
ERRORS_MIN = 3.0
ABORT_SHARE_INFO = 0.1

# ---------------------------------------------------------------- GPU
GPU_HARD_THROTTLE = frozenset({"hw slowdown", "thermal slowdown (sw)", "hw thermal slowdown",
                               "hw power brake", "thermal slowdown", "sw thermal slowdown"})
"""Clock-event reasons that mean the GPU protects itself (NVML)."""
GPU_CLOCK_DROP = 0.8
"""SM clock at or below this x its usual value (baseline, else the board's max) counts."""
GPU_UTIL_BUSY = 0.3
"""A power cap matters only on a busy GPU."""

# ---------------------------------------------------------------- is the GPU the limit
# (``gpu_bound`` / ``gpu_idle``: judged only while the engine queues or its TTFT/ITL rose)
MBU_BOUND = 0.6
"""The engine's own bytes/s at or above this share of the GPU's peak bandwidth: decode is at
the memory's limit. Well-tuned decode is quoted at 60-85 % MBU (Databricks, "LLM inference
performance engineering: best practices"; torchao reached 70 % on an A100-80GB)."""
DRAM_BOUND = 0.6
"""DRAM interface busy at least this share of the time (GPM ``DRAM_BW_UTIL``, DCGM
``DRAM_ACTIVE``): its practical peak is about 0.8 (NVIDIA DCGM user guide, profiling
metrics), so this is three quarters of what the memory can give."""
MFU_BOUND = 0.4
"""FLOP/s at or above this share of the dense peak: compute-bound (prefill). Large,
well-tuned jobs reach 40-50 % (PaLM: 46 % MFU, Chowdhery et al. 2022, table 3)."""
TENSOR_BOUND = 0.5
"""Any tensor pipe active at least half the time (GPM ``ANY_TENSOR_UTIL``, DCGM
``PIPE_TENSOR_ACTIVE``; FP8 GEMMs show only here): the tensor cores are the busy part.
[spec] half, as ``SM_IDLE`` is for SMs."""
SM_IDLE = 0.5
"""SM activity below this "likely indicates ineffective GPU usage"; 0.8 or more is
"necessary, but not sufficient" for effective use (NVIDIA DCGM user guide, SM Activity)."""
MBU_IDLE = 0.3
"""MBU below this (half of ``MBU_BOUND``) while requests queue: the memory is not what
holds them (an int4 model may sit near 37 % and be fine, so this is judged only under
pressure, and only below it)."""
DRAM_IDLE = 0.3
"""DRAM activity below this (half of ``DRAM_BOUND``), likewise."""
LIMIT_SMALL_BATCH = 8.0
"""A memory-bound engine running at most this many requests reads all its weights each step
for a handful of tokens: decode's bytes per step are weights + KV, so a larger batch shares
the weights' bytes (arithmetic intensity ~ batch FLOP/byte, far below an H100's ~295) and
more seats are the first fix, not more GPUs."""

# ---------------------------------------------------------------- imbalance
IMB_WAITING_MIN = 8.0
"""An overloaded replica has at least this many waiting, all window long, while its siblings
have none: a queue of a few on one of two replicas is ordinary noise (seen in the demo
baseline: 3 waiting on one, 0 on the other, no cause to act on)."""
IMB_RUNNING_X = 2.0
"""Running at least this x the median of its idle siblings (and ``IMB_RUNNING_ABS`` above it)
is a spread; it is a finding only with its cost: a queue, preemption or ``IMB_ITL_X``."""
IMB_RUNNING_ABS = 8.0
IMB_KV_GAP = 0.4
"""KV this far above every idle sibling is a spread; a finding only with a queue or
preemption (a full cache that costs nothing is healthy)."""
IMB_KV_ROOM = 0.8
"""A sibling is idle (has room for the load) with nothing waiting and KV below this (the
Gateway API Inference Extension's routing headroom). A replica beside siblings that queue or
are full is never called overloaded: the pool is short of capacity, not badly routed."""
IMB_ITL_X = 1.5
IMB_ITL_ABS_S = 0.01
"""The busy replica's ITL p95 at least this x its idle siblings' (and 10 ms above): the
spread costs latency (the demo's ``imbalance``: ~42 ms vs ~15 ms; two healthy replicas of
different engines differ by ~1.4x, 25 ms vs 18 ms)."""

# ---------------------------------------------------------------- warming up
WARMUP_S = 120.0
"""An engine that (re)started less than this ago is warming up (cold prefix cache)."""

QUEUE_DEFERRED_SHARE = 0.5
"""vLLM: when at least this share of the waiting requests is *deferred* (LoRA budget, KV
transfer, a blocked request: ``num_requests_waiting_by_reason``), the queue is not load, and
a replica or a higher ``--max-num-seqs`` is not the fix."""

# ---------------------------------------------------------------- serving stack
ROUTE_WAITING_MIN = 4.0
"""``routing``: a backend the router keeps feeding has at least this many waiting, all window
long, while a sibling of its pool has none and KV below ``IMB_KV_ROOM`` (half of
``IMB_WAITING_MIN``: here the router's own share is evidence too; vLLM's real CPU capture
``queueing`` held 10 waiting on 2 seats, ``calm`` 0)."""
ROUTE_FAIR_X = 0.8
"""...and its routed share is at least this x an equal share (1/n of its pool): the policy
still sends it its part (a router that already steers away is doing its job)."""
ROUTE_OVER_CAPACITY_X = 1.5
"""Where the pool's capacity is known (running limits, else KV tokens): a routed share this x
its capacity share is more than it can hold (round robin over 1 and 8 seats: 0.5 vs 0.11)."""
ROUTE_MIN_REQUESTS = 10.0
"""Routed requests in the window (router rate x window) before shares are judged."""
ROUTER_OVERHEAD_SHARE = 0.3
"""``routing``: the router's own added latency (its TTFT or request time minus its backends')
at least this share of the TTFT path..."""
ROUTER_OVERHEAD_MIN_S = 0.05
"""...and at least this much (vllm-router's overhead benchmark measures ~1 ms; 50 ms is a
router in trouble: retries, a queue at its rate limiter, a slow tokenizer)."""
PD_WAITING_MIN = 4.0
"""``pd_balance``: a pool is saturated with at least this many waiting, all window long
(summed over its engines), or more running + waiting than its running limit."""
PD_ROOM_KV = 0.8
"""The other pool has room: fewer than ``PD_WAITING_MIN`` waiting and KV below this
(``IMB_KV_ROOM``'s GAIE headroom)."""
KV_XFER_SHARE = 0.3
"""``kv_transfer``: transfer / decode-pending time at least this share of the TTFT path
(means) ... (llm-d's runbook lists "KV cache transfer times" among what operators miss)"""
KV_XFER_MIN_S = 0.05
"""... and at least this long on average (NIXL's own buckets put a healthy transfer in
5-100 ms: ``NixlPromMetrics`` buckets 0.005..0.1 s)."""
KV_FAIL_MIN = 1.0
"""Failed transfers / notifications or expired KV (vLLM NIXL), bootstrap or transfer failures
(SGLang) in the window: any is a finding (vLLM documents the baseline as zero)."""
KV_FAIL_CRIT_PER_S = 0.1
"""Failures at this rate or more are critical."""
STUCK_IDLE_S = 15.0
"""``stuck``: requests running or waiting, no generated token for this long, and the server
still answering: vLLM's admission stall, vllm-project/vllm#53130 (``/health`` 200,
~0.5 tok/s). Half the diagnosis window: named long before a latency histogram can show it
(stuck requests never finish, so TTFT and e2e stay empty)."""
STUCK_HEALTH_PROBE_S = STUCK_IDLE_S / 2
"""... and its health endpoint is asked (at most once per refresh) once a row holding requests
has made no token for this long: half of ``STUCK_IDLE_S``, so the answer is in before the
finding is due, and within the 10 s window the monitor's rows are built over; a busy engine
making tokens is never asked."""
# ---------------------------------------------------------------- requests cited as examples
CITE_QUEUE_SLOWEST = 10
"""``queueing`` cites the share of TTFT the window's this-many slowest requests (by TTFT)
spent queued ("the 10 slowest requests spent 88 % of their TTFT queued")."""
CITE_PROMPT_SLOWEST = 3
"""``long_prompts`` cites the prompt tokens of the this-many slowest ("the 3 slowest had
61k-90k prompt tokens, the window's median 1.2k")."""
CITE_MIN_REQUESTS = 3
"""Requests with the values in the window below this: no citation (one or two requests say
nothing about "the slowest" against the rest)."""
