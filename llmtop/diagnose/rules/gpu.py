"""``gpu_throttle``: the GPU under the engine (by process attribution) runs slower."""

from __future__ import annotations

from llmtop.diagnose.context import RowCtx
from llmtop.diagnose.findings import Evidence, Finding
from llmtop.diagnose.thresholds import GPU_CLOCK_DROP, GPU_HARD_THROTTLE, GPU_UTIL_BUSY

__all__ = ["gpu_throttle"]


def gpu_throttle(c: RowCtx) -> list[Finding]:
    """Hardware/thermal slowdown bits on the engine's GPU (critical with a clock drop), or a
    power cap on a busy GPU whose SM clock fell well below its usual value."""
    hits: list[str] = []
    ev: list[Evidence] = []
    critical = False
    for g in c.gpus:
        if g.error or not g.throttle:
            continue
        reasons = [r.lower() for r in g.throttle]
        hard = [r for r in reasons if r in GPU_HARD_THROTTLE]
        clock, usual = g.sm_clock_mhz, c.gpu_usual(g, "sm_clock")
        ref = usual if usual is not None else g.sm_clock_max_mhz
        low = clock is not None and ref is not None and ref > 0 and clock <= GPU_CLOCK_DROP * ref
        busy = g.util is not None and g.util >= GPU_UTIL_BUSY
        capped_low = ("power cap" in reasons and usual is not None and clock is not None
                      and clock <= GPU_CLOCK_DROP * usual and busy)
        if not hard and not capped_low:
            continue
        critical = critical or (bool(hard) and low)
        words = ", ".join(hard or ["power cap"])
        word = "usual" if usual is not None else "max"
        clk = (f": SM clock {clock:.0f} MHz vs {ref:.0f} {word}" if clock is not None
               and ref is not None else "")
        # a fleet has a GPU0 on every host: DCGM GPUs name theirs
        where = f" on {g.host}" if g.source == "dcgm" and g.host else ""
        hits.append(f"GPU{g.index}{where} {words}{clk}")
        w = f"gpu{g.index}"
        ev.append(Evidence(f"{w}.throttle", ", ".join(reasons), "now"))
        ev.append(Evidence(f"{w}.sm_clock_mhz", clock, "now", usual,
                           GPU_CLOCK_DROP * ref if ref else None))
        if g.temp_c is not None:
            ev.append(Evidence(f"{w}.temp_c", g.temp_c, "now", None, g.temp_slowdown_c))
    if not hits:
        return []
    action = ("check cooling and power (nvidia-smi -q -d PERFORMANCE,TEMPERATURE,POWER); a "
              "hardware slowdown needs the machine looked at")
    return [c.finding("gpu_throttle", "critical" if critical else "warn",
                      "the GPU under this engine is throttled: " + "; ".join(hits), ev, action)]
