"""Dollars per million output tokens, from a GPU-hour price and a measured throughput.

``usd_per_mtok = price_per_gpu_hour x gpus / (output_tok_per_s x 3600) x 1e6``: what one
million output tokens cost when the engine runs all hour at that throughput. Priced at the
SLA boundary (the highest load within the SLOs) and at the maximum throughput.
"""

from __future__ import annotations

from typing import Any

__all__ = ["cost_per_mtok", "usd_per_mtok"]


def usd_per_mtok(price_per_gpu_hour: float, gpus: float, tok_per_s: float | None
                 ) -> float | None:
    """$ per 1M output tokens; None without a positive throughput."""
    if tok_per_s is None or tok_per_s <= 0:
        return None
    return price_per_gpu_hour * gpus / (tok_per_s * 3600.0) * 1e6


def cost_per_mtok(report: dict[str, Any], price_per_gpu_hour: float | None, gpus: float = 1.0,
                  ) -> dict[str, Any] | None:
    """``{"sla": $, "max": $, "gpu_hour_price": ..., "gpus": ...}`` or None without a price."""
    if price_per_gpu_hour is None:
        return None
    sla = report.get("sla_boundary") or {}
    top = report.get("max_throughput") or {}
    return {"sla": usd_per_mtok(price_per_gpu_hour, gpus, sla.get("output_tokens_per_s")
                                if sla.get("met") else None),
            "max": usd_per_mtok(price_per_gpu_hour, gpus, top.get("output_tokens_per_s")),
            "gpu_hour_price": price_per_gpu_hour, "gpus": gpus}
