"""``--lengths-from prometheus:URL --match SEL``: the fleet's traffic shape from Prometheus.

One instant query per histogram, through fleet mode's client (``sources.prometheus``):
``sum by (le) (increase(<family>_bucket{SEL}[W]))`` and ``sum(increase(<family>_sum{SEL}[W]))``
for vLLM's ``vllm:request_prompt_tokens`` / ``vllm:request_generation_tokens`` or SGLang's
``sglang:prompt_tokens_histogram`` / ``sglang:generation_tokens_histogram``, and the prefix hit
rate as ``increase(hits) / increase(queries)`` over the same window. The result is the same
``traffic`` dict as ``traffic.build_traffic`` makes from direct scrapes.
"""

from __future__ import annotations

import math
import time
from typing import Any

from llmtop.loadgen.shape import ShapeError, window_dist
from llmtop.loadgen.traffic import NO_LENGTHS_HINT, TrafficError
from llmtop.model import Hist

__all__ = ["LENGTH_FAMILIES", "PREFIX_COUNTERS", "prometheus_traffic"]

LENGTH_FAMILIES = (
    ("vllm", "vllm:request_prompt_tokens", "vllm:request_generation_tokens"),
    ("sglang", "sglang:prompt_tokens_histogram", "sglang:generation_tokens_histogram"),
)
PREFIX_COUNTERS = (
    ("vllm", "vllm:prefix_cache_hits_total", "vllm:prefix_cache_queries_total"),
    ("vllm", "vllm:gpu_prefix_cache_hits_total", "vllm:gpu_prefix_cache_queries_total"),
    ("sglang", "sglang:cached_tokens_total", "sglang:prompt_tokens_total"),
)


def _sel(match: str | None) -> str:
    m = (match or "").strip()
    if m.startswith("{") and m.endswith("}"):
        m = m[1:-1]
    return "{" + m + "}" if m else ""


def _scalar(res: Any) -> float | None:
    for r in res.result:
        try:
            v = float(r["value"][1])
        except (KeyError, IndexError, TypeError, ValueError):
            continue
        if math.isfinite(v):
            return v
    return None


async def _hist(client: Any, family: str, sel: str, window: str, t: float) -> Hist | None:
    res = await client.query(f"sum by (le) (increase({family}_bucket{sel}[{window}]))", t)
    pairs = []
    for r in res.result:
        try:
            le = r["metric"]["le"]
            pairs.append((math.inf if le in ("+Inf", "Inf", "inf") else float(le),
                          float(r["value"][1])))
        except (KeyError, IndexError, TypeError, ValueError):
            continue
    if not pairs:
        return None
    pairs.sort()
    total = _scalar(await client.query(f"sum(increase({family}_sum{sel}[{window}]))", t))
    cum = tuple(max(0.0, v) for _, v in pairs)
    return Hist(tuple(b for b, _ in pairs), cum, total or 0.0, cum[-1])


async def prometheus_traffic(url: str, match: str | None, window_s: float, *,
                             lengths: bool, prefix: bool,
                             transport: Any = None) -> dict[str, Any]:
    """The ``traffic`` dict over the last ``window_s`` seconds; raises ``TrafficError``."""
    from llmtop.config import PrometheusConfig
    from llmtop.sources.prometheus import PromClient, PromError

    if window_s <= 0:
        raise TrafficError("--lengths-window must be > 0 with prometheus: (the server keeps "
                           "history; there is no lifetime to read)")
    sel, window, t = _sel(match), f"{int(window_s)}s", time.time()
    client = PromClient(PrometheusConfig(url=url, match=match), transport=transport)
    out: dict[str, Any] = {"source": f"{client.display_url} {sel or '(all series)'}"}
    try:
        if lengths:
            for engine, p_fam, o_fam in LENGTH_FAMILIES:
                ph = await _hist(client, p_fam, sel, window, t)
                oh = await _hist(client, o_fam, sel, window, t) if ph else None
                if ph and oh:
                    try:
                        out["prompt"] = window_dist(ph)[0].describe()
                        out["output"] = window_dist(oh)[0].describe()
                    except ShapeError as exc:
                        raise TrafficError(f"{out['source']}: {exc} (last {window}); widen "
                                           "--lengths-window or --match") from None
                    out["engine"] = engine
                    break
            else:
                raise TrafficError(f"{out['source']}: no prompt/output length histograms "
                                   f"(vllm:request_prompt_tokens, sglang:prompt_tokens_"
                                   f"histogram) match; {NO_LENGTHS_HINT}")
        if prefix:
            for engine, hits, queries in PREFIX_COUNTERS:
                h = _scalar(await client.query(f"sum(increase({hits}{sel}[{window}]))", t))
                q = _scalar(await client.query(f"sum(increase({queries}{sel}[{window}]))", t))
                if h is not None and q:
                    out["prefix_hit_rate"] = min(1.0, max(0.0, h / q))
                    out.setdefault("engine", engine)
                    break
            else:
                raise TrafficError(f"{out['source']}: no prefix-cache counters match; use "
                                   "--shared-prefix N:P instead")
    except PromError as exc:
        raise TrafficError(f"Prometheus: {exc.message}") from None
    finally:
        await client.aclose()
    out["window"] = f"last {window_s / 60:g} min (Prometheus increase)"
    out["window_s"] = window_s
    out["read_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))
    return out
