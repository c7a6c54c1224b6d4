"""Serving-stack scenarios: a simulated vLLM router in front of demo vLLM engines.

Each is a :class:`StackSpec` (the backends, round robin or P/D, the load through the router,
the KV transfer) carried by a :class:`~llmtop.demo.scenarios.Scenario` of the same name;
:mod:`llmtop.demo.stack` runs it. Diagnosis scenarios run a calm baseline first (30 s, or
``LLMTOP_DEMO_BASELINE_S``), then their anomaly.

==============  ==============================================================================
stack           calm: round robin over two equal vLLM backends (64 seats each), light load
routing         round robin over a 1-seat and an 8-seat backend; after the baseline the load
                rises to 12 clients: the 1-seat one queues while the other has room
routing-down    round robin over two equal backends; after the baseline the second one's port
                closes: failures, retries, its breaker opens, the router marks it unhealthy
pd-balance      P/D: one prefill engine, two decode engines; after the baseline prompts get
                ~6x longer and the load doubles: the prefill queue grows, decode idles
kv-transfer     P/D: one prefill, one decode; after the baseline the KV link slows from
                25 GB/s to 0.15 GB/s (a transfer ~10x the prefill) and 5 % of transfers fail
stuck           round robin over two equal backends; after the baseline the second one's
                scheduler stops (requests running and waiting, no token, /health 200)
==============  ==============================================================================
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["RULES", "STACKS", "StackBackend", "StackSpec"]


@dataclass(frozen=True)
class StackBackend:
    """One demo vLLM engine behind the router."""

    role: str = "both"
    """``both`` (regular mode), ``prefill`` or ``decode`` (P/D mode)."""
    max_num_seqs: int = 64
    max_num_batched_tokens: int | None = None
    down_at_anomaly: bool = False
    """Its port stops listening when the anomaly starts (``routing-down``)."""
    stall_at_anomaly: bool = False
    """Its scheduler stops when the anomaly starts (``stuck``)."""


@dataclass(frozen=True)
class StackSpec:
    """A router, its backends and the traffic sent through it."""

    backends: tuple[StackBackend, ...]
    pd: bool = False
    """``--vllm-pd-disaggregation``: each request goes to a prefill, then a decode backend."""
    policy: str = "round_robin"
    clients: float = 6.0
    """Requests in flight through the router (closed loop), baseline."""
    prompt_range: tuple[int, int] = (50, 300)
    output_range: tuple[int, int] = (32, 128)
    transfer_gb_s: float = 25.0
    """KV transfer bandwidth between prefill and decode (GB/s; NIXL over RDMA)."""
    transfer_fail: float = 0.0
    """Share of KV transfers that fail (the decode engine then recomputes the prompt)."""
    anomaly: dict[str, object] | None = None
    """Fields above that change when the anomaly starts."""


_EQUAL = (StackBackend(), StackBackend())

STACKS: dict[str, StackSpec] = {
    "stack": StackSpec(_EQUAL, clients=6.0),
    "routing": StackSpec((StackBackend(max_num_seqs=1), StackBackend(max_num_seqs=8)),
                         clients=1.0, output_range=(64, 128),
                         anomaly={"clients": 12.0}),
    "routing-down": StackSpec((StackBackend(), StackBackend(down_at_anomaly=True)),
                              clients=6.0, anomaly={}),
    "pd-balance": StackSpec((StackBackend("prefill", max_num_batched_tokens=1024),
                             StackBackend("decode"), StackBackend("decode")),
                            pd=True, clients=8.0, output_range=(32, 96),
                            anomaly={"clients": 48.0, "prompt_range": (1200, 1800)}),
    "kv-transfer": StackSpec((StackBackend("prefill"), StackBackend("decode")), pd=True,
                             clients=6.0, prompt_range=(300, 600), output_range=(32, 96),
                             anomaly={"transfer_gb_s": 0.15, "transfer_fail": 0.05}),
    "stuck": StackSpec((StackBackend(), StackBackend(stall_at_anomaly=True)), clients=6.0,
                       anomaly={}),
}
"""Scenario name -> its stack."""

RULES = {"routing": "routing", "routing-down": "routing", "pd-balance": "pd_balance",
         "kv-transfer": "kv_transfer", "stuck": "stuck"}
"""Stack scenario -> the diagnosis rule it is meant to trigger."""
