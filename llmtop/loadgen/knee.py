"""Saturation and SLA analysis over sweep steps (pure).

- ``find_knee``: guidellm-style two-line fit of output tok/s against load (both axes
  normalised by their maxima). Every split with at least two points on each side is fitted
  by least squares; the split with the smallest total squared error wins and the knee is
  where the two lines meet. Accepted only with at least ``MIN_POINTS`` points, a rising
  first line, a tail slope <= 0.25x the rising slope and the knee's throughput (the fitted
  value where the lines meet) >= 85 % of the peak.
- ``saturation``: the accepted knee, snapped to the lowest ladder step at (or within 10 %
  below) the knee's load: the first step where throughput has stopped rising.
- ``max_throughput``: the step with the highest output tok/s.
- ``sla_boundary``: the highest load, counted up from the lowest step, whose TTFT p95 (and
  per-request ITL p95 / TPOT p95 where those SLOs are set) meets the SLO, with its goodput.

Partial and client-bound steps (``stats.step_is_client_bound``) are left out of all three:
their numbers are the load generator's, not the server's.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["MIN_POINTS", "find_knee", "max_throughput", "saturation", "sla_boundary"]

MIN_POINTS = 5
TAIL_SLOPE_RATIO = 0.25
KNEE_PEAK_SHARE = 0.85


def _fit(xs: Sequence[float], ys: Sequence[float]) -> tuple[float, float, float]:
    """Least-squares line: (slope, intercept, sse)."""
    n = len(xs)
    mx = sum(xs) / n
    my = sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    if sxx == 0:
        return 0.0, my, sum((y - my) ** 2 for y in ys)
    m = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx
    b = my - m * mx
    return m, b, sum((y - (m * x + b)) ** 2 for x, y in zip(xs, ys, strict=True))


def find_knee(xs: Sequence[float], ys: Sequence[float]) -> dict[str, Any]:
    """Two-line knee fit. Returns a dict with ``accepted`` and the reason either way."""
    pts = sorted((x, y) for x, y in zip(xs, ys, strict=True) if x is not None and y is not None)
    out: dict[str, Any] = {"method": "two_line_fit", "accepted": False, "points": len(pts)}
    if len(pts) < MIN_POINTS:
        out["reason"] = f"need at least {MIN_POINTS} steps, have {len(pts)}"
        return out
    xmax = max(x for x, _ in pts)
    ymax = max(y for _, y in pts)
    if xmax <= 0 or ymax <= 0:
        out["reason"] = "no throughput"
        return out
    nx = [x / xmax for x, _ in pts]
    ny = [y / ymax for _, y in pts]
    best = None
    for k in range(2, len(pts) - 1):
        m1, b1, e1 = _fit(nx[:k], ny[:k])
        m2, b2, e2 = _fit(nx[k:], ny[k:])
        if best is None or e1 + e2 < best[0]:
            best = (e1 + e2, k, m1, b1, m2, b2)
    assert best is not None
    _, k, m1, b1, m2, b2 = best
    xk = (b2 - b1) / (m1 - m2) if m1 != m2 else nx[k - 1]
    xk = min(max(xk, nx[0]), nx[-1])
    knee_x = xk * xmax
    knee_y = (m2 * xk + b2) * ymax  # the fitted throughput where the two lines meet
    # the saturation step: the lowest step at (or within 10 % below) the knee's load
    at = [i for i in range(len(pts)) if pts[i][0] >= 0.9 * knee_x]
    near = at[0] if at else len(pts) - 1
    out.update({"load": knee_x, "nearest_load": pts[near][0], "output_tokens_per_s": knee_y,
                "rise_slope": m1, "tail_slope": m2, "split": k})
    if m1 <= 0:
        out["reason"] = "throughput does not rise"
    elif m2 > TAIL_SLOPE_RATIO * m1:
        out["reason"] = (f"still rising: tail slope {m2:.3f} > {TAIL_SLOPE_RATIO} x "
                         f"rise slope {m1:.3f}")
    elif knee_y < KNEE_PEAK_SHARE * ymax:
        out["reason"] = f"knee throughput {knee_y:.0f} < {KNEE_PEAK_SHARE:.0%} of peak {ymax:.0f}"
    else:
        out["accepted"] = True
        out["reason"] = "ok"
    return out


def _load_key(steps: Sequence[dict[str, Any]]) -> str:
    return "rate" if steps and steps[0].get("rate") and not steps[0].get("concurrency") \
        else "concurrency"


def _usable(steps: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Whole steps whose numbers are the server's: never a partial or client-bound one."""
    return [s for s in steps
            if s.get("requests") and not s.get("partial") and not s.get("client_bound")]


def saturation(steps: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """The accepted knee as ``{"concurrency"|"rate", "step", "output_tokens_per_s", "fit"}``."""
    st = _usable(steps)
    key = _load_key(st)
    xs = [float(s[key]) for s in st if s.get(key)]
    ys = [float(s["output_tokens_per_s"]) for s in st if s.get(key)]
    fit = find_knee(xs, ys)
    if not fit["accepted"]:
        return None
    step = next(s for s in st if float(s[key]) == fit["nearest_load"])
    return {key: step[key], "knee_load": fit["load"], "step": step["index"],
            "output_tokens_per_s": step["output_tokens_per_s"],
            "requests_per_s": step["requests_per_s"],
            "client_bound": step.get("client_bound", False), "fit": fit}


def max_throughput(steps: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """The step with the highest output tok/s."""
    st = _usable(steps)
    if not st:
        return None
    key = _load_key(st)
    s = max(st, key=lambda s: s["output_tokens_per_s"])
    return {key: s[key], "step": s["index"], "output_tokens_per_s": s["output_tokens_per_s"],
            "requests_per_s": s["requests_per_s"], "client_bound": s.get("client_bound", False)}


def _passes(s: dict[str, Any], slo: dict[str, float | None]) -> bool:
    checks = (("ttft", "ttft_s"), ("itl", "itl_request_s"), ("tpot", "tpot_s"))
    for key, field in checks:
        lim = slo.get(key)
        if lim is None:
            continue
        v = (s.get(field) or {}).get("p95")
        if v is None or v > lim:
            return False
    return True


def sla_boundary(steps: Sequence[dict[str, Any]], slo: dict[str, float | None],
                 max_error_rate: float = 1.0) -> dict[str, Any] | None:
    """Highest load (contiguous from the lowest step) meeting every set SLO at p95."""
    if not any(v is not None for v in slo.values()):
        return None
    st = _usable(steps)
    key = _load_key(st)
    st = sorted(st, key=lambda s: s.get(key) or 0)
    last = None
    for s in st:
        if s.get("error_rate", 0.0) > max_error_rate or not _passes(s, slo):
            break
        last = s
    if last is None:
        return {key: None, "step": None, "met": False, "slo": dict(slo)}
    return {key: last[key], "step": last["index"], "met": True, "slo": dict(slo),
            "ttft_p95_s": last["ttft_s"]["p95"], "itl_p95_s": last["itl_request_s"]["p95"],
            "tpot_p95_s": last["tpot_s"]["p95"], "goodput_per_s": last["goodput_per_s"],
            "output_tokens_per_s": last["output_tokens_per_s"],
            "requests_per_s": last["requests_per_s"]}
