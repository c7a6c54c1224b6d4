"""GPU/model profiles and per-engine settings of the simulated engines.

A :class:`Profile` names the hardware and model being simulated and holds the timing
parameters of one engine step (see ``docs/demo.md`` for where the numbers come from).
An :class:`EngineSettings` holds the scheduler knobs of one engine (``max_num_seqs``,
token budget per step, KV pool size, queue limit).

Step duration (seconds), for a batch with ``n`` sequences, ``ctx`` context tokens read by
the decode rows and ``p`` prefill tokens computed in this step::

    t = step_base_s + n * per_seq_s + ctx * per_ctx_token_s + p * per_prefill_token_s

plus ``step_gap_s`` of host time between steps, during which the GPU is idle (so SM
utilization is below 100 % at small batches, as on a real server).

The work of a step, as vLLM's ``--enable-mfu-metrics`` estimates it (``vllm/v1/metrics/
perf.py``: weights read once per step, KV read per context token, KV written per new token;
FLOPs 2 x params per token plus attention), uses ``weights_bytes``, ``kv_bytes_per_token`` and
``attn_flops_per_ctx_token``; the GPU's peaks (``peak_bytes_s``, ``peak_flops``) turn it into
the demo GPU's DRAM and tensor activity (``demo/gpu.py``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

__all__ = ["DEFAULT_PROFILE", "PROFILES", "EngineSettings", "Profile", "engine_settings"]

GIB = 1024**3


@dataclass(frozen=True, slots=True)
class Profile:
    """One GPU + model combination."""

    name: str
    gpu_name: str
    model: str
    mem_total_bytes: int
    weights_bytes: int
    activation_bytes: int
    """Memory reserved for activations/CUDA graphs, outside the KV pool."""
    kv_bytes_per_token: int
    """2 (K,V) x layers x kv_heads x head_dim x dtype bytes."""
    step_base_s: float
    """Fixed cost of one forward pass (weights read from HBM, launch overhead)."""
    per_seq_s: float
    """Extra cost per sequence in the batch (sampling, per-row kernels)."""
    per_ctx_token_s: float
    """Attention KV read per context token of a decode row."""
    per_prefill_token_s: float
    """Compute per prompt token prefilled (about 2 x params FLOPs / effective FLOP/s)."""
    step_gap_s: float
    """Host-side time between two steps (scheduling, detokenizing) when the GPU idles."""
    power_idle_w: float
    power_limit_w: float
    sm_clock_max_mhz: float
    mem_clock_max_mhz: float
    peak_bytes_s: float
    """The GPU's peak memory bandwidth (datasheet), bytes/s."""
    peak_flops: float
    """The GPU's dense BF16 tensor peak (datasheet, without sparsity), FLOP/s."""
    attn_flops_per_ctx_token: float
    """Attention FLOPs per query token per context token: 2 FLOPs per K and V element per
    query head; Llama-3-8B has 4 query heads per KV head, so 4 x ``kv_bytes_per_token`` (bf16:
    2 bytes per element)."""
    temp_ambient_c: float = 32.0

    @property
    def params(self) -> float:
        """Parameters (bf16 weights: 2 bytes each)."""
        return self.weights_bytes / 2


H100_LLAMA_8B = Profile(
    name="h100-llama3-8b",
    gpu_name="NVIDIA H100 80GB HBM3",
    model="meta-llama/Llama-3.1-8B-Instruct",
    mem_total_bytes=81559 * 1024 * 1024,
    weights_bytes=int(14.99 * GIB),
    activation_bytes=int(4.2 * GIB),
    kv_bytes_per_token=2 * 32 * 8 * 128 * 2,  # 131072 B: 32 layers, 8 KV heads, dim 128, bf16
    step_base_s=0.0070,
    per_seq_s=0.00018,
    per_ctx_token_s=4.0e-8,
    per_prefill_token_s=2.5e-5,
    step_gap_s=0.0012,
    power_idle_w=72.0,
    power_limit_w=700.0,
    sm_clock_max_mhz=1980.0,
    mem_clock_max_mhz=2619.0,
    peak_bytes_s=3.35e12,  # NVIDIA H100 SXM datasheet: 3.35 TB/s HBM3
    peak_flops=989e12,  # NVIDIA H100 SXM datasheet: 1,979 TF BF16 with sparsity, half dense
    attn_flops_per_ctx_token=4.0 * 2 * 32 * 8 * 128 * 2,
)

H100_LLAMA_8B_TUNED = replace(
    H100_LLAMA_8B,
    name="h100-llama3-8b-tuned",
    step_base_s=0.0052,  # the weights (16.1 GB) take 4.8 ms at 3.35 TB/s, plus launch
    per_seq_s=0.00002,  # CUDA graphs, fused sampling: almost nothing per row
    step_gap_s=0.0003,  # async scheduling: the host prepares the next step meanwhile
)
"""A decode-tuned H100 (the ``gpu-bound`` scenario): a step costs little beyond its bytes,
so a large batch of long contexts moves ~80 % of the peak bandwidth (vLLM's own MBU reached
with CUDA graphs; well-tuned decode is quoted at 60-85 %)."""

H100_LLAMA_8B_EAGER = replace(
    H100_LLAMA_8B,
    name="h100-llama3-8b-eager",
    step_gap_s=0.016,  # every kernel launched from Python (vLLM --enforce-eager): host-bound
)
"""An H100 whose engine launches every kernel from the host each step (``--enforce-eager``,
no CUDA graphs): at a small batch the GPU waits on the host most of each step (the
``gpu-idle`` scenario)."""

A100_LLAMA_8B = replace(
    H100_LLAMA_8B,
    name="a100-llama3-8b",
    gpu_name="NVIDIA A100-SXM4-80GB",
    mem_total_bytes=81920 * 1024 * 1024,
    step_base_s=0.0105,
    per_seq_s=0.00025,
    per_ctx_token_s=6.5e-8,
    per_prefill_token_s=6.0e-5,
    power_idle_w=60.0,
    power_limit_w=400.0,
    sm_clock_max_mhz=1410.0,
    mem_clock_max_mhz=1593.0,
    peak_bytes_s=2.039e12,  # NVIDIA A100 80GB SXM datasheet: 2,039 GB/s
    peak_flops=312e12,  # NVIDIA A100 datasheet: 312 TF BF16 dense
)

PROFILES = {p.name: p for p in (H100_LLAMA_8B, H100_LLAMA_8B_TUNED, H100_LLAMA_8B_EAGER,
                                 A100_LLAMA_8B)}
DEFAULT_PROFILE = H100_LLAMA_8B


@dataclass(frozen=True, slots=True)
class EngineSettings:
    """Scheduler knobs of one simulated engine."""

    engine: str
    max_num_seqs: int
    """vLLM ``--max-num-seqs``, SGLang ``--max-running-requests``, TRT-LLM max batch size."""
    max_num_batched_tokens: int
    """Token budget of one step (chunked prefill)."""
    max_model_len: int
    block_size: int = 16
    gpu_memory_utilization: float = 0.90
    num_gpu_blocks: int | None = None
    """Force the KV pool size (scenarios); None = derived from the profile's memory."""
    max_queue: int | None = None
    """Waiting requests beyond which new ones are rejected (TRT-LLM in Triton: 503)."""
    prefix_caching: bool = True
    served_model_name: str | None = None

    def kv_blocks(self, profile: Profile) -> int:
        """KV pool in blocks, as vLLM sizes it from ``gpu_memory_utilization``."""
        if self.num_gpu_blocks is not None:
            return self.num_gpu_blocks
        budget = profile.mem_total_bytes * self.gpu_memory_utilization
        free = budget - profile.weights_bytes - profile.activation_bytes
        return max(64, int(free // (profile.kv_bytes_per_token * self.block_size)))


_DEFAULTS = {
    # max_model_len 2048 keeps vLLM's 1-2-5 token-length buckets identical to the fixture's.
    "vllm": EngineSettings("vllm", max_num_seqs=64, max_num_batched_tokens=2048,
                           max_model_len=2048),
    "sglang": EngineSettings("sglang", max_num_seqs=48, max_num_batched_tokens=4096,
                             max_model_len=4096, gpu_memory_utilization=0.88),
    "triton": EngineSettings("triton", max_num_seqs=64, max_num_batched_tokens=4096,
                             max_model_len=4096, max_queue=32, block_size=64,
                             served_model_name="tensorrt_llm"),
}


def engine_settings(engine: str, **changes: object) -> EngineSettings:
    """Default settings of ``engine`` (``vllm`` | ``sglang`` | ``triton``), with changes."""
    return replace(_DEFAULTS[engine], **changes)  # type: ignore[arg-type]
