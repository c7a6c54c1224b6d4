"""The diagnosis rules, one small module per cause; ``ROW_RULES`` runs them in order."""

from __future__ import annotations

from collections.abc import Callable

from llmtop.diagnose.context import RowCtx
from llmtop.diagnose.findings import Finding
from llmtop.diagnose.rules.decode import decode_slowdown, spec_decode_drop, ttft_rise
from llmtop.diagnose.rules.errors import aborts, errors
from llmtop.diagnose.rules.gpu import gpu_throttle
from llmtop.diagnose.rules.gpu_limit import gpu_limit
from llmtop.diagnose.rules.imbalance import imbalance
from llmtop.diagnose.rules.kv import kv_pressure
from llmtop.diagnose.rules.kv_transfer import kv_transfer
from llmtop.diagnose.rules.near_capacity import near_capacity
from llmtop.diagnose.rules.pd import pd_balance
from llmtop.diagnose.rules.prompts import long_prompts, prefix_cache_miss
from llmtop.diagnose.rules.queueing import queueing
from llmtop.diagnose.rules.routing import routing
from llmtop.diagnose.rules.stuck import stuck
from llmtop.diagnose.rules.warmup import warming_up
from llmtop.diagnose.stack_ctx import StackCtx

__all__ = ["ROW_RULES", "STACK_RULES", "Rule", "StackRule"]

Rule = Callable[[RowCtx], list[Finding]]

ROW_RULES: tuple[Rule, ...] = (
    stuck,
    warming_up,
    gpu_throttle,
    kv_pressure,
    gpu_limit,
    long_prompts,
    prefix_cache_miss,
    spec_decode_drop,
    imbalance,
    errors,
    near_capacity,
    queueing,
    decode_slowdown,
    ttft_rise,
    aborts,
)


StackRule = Callable[[StackCtx], list[Finding]]

STACK_RULES: tuple[StackRule, ...] = (routing, pd_balance, kv_transfer)
"""Rules over the serving stack (routers, their backends, pools): run once per diagnosis."""
