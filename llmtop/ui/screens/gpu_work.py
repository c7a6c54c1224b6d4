"""The engine detail's GPU section: the engine's own FLOP and byte counts against the GPU's
peak, beside what the hardware says its GPUs did.

- ``gpu_work_lines``: achieved bytes/s and FLOP/s per GPU, MBU and MFU with the peak they
  divide by and its source (or how to turn the counters on: ``EngineRow.mfu_hint``), the
  engine's GPUs' SM, tensor and DRAM activity, and a line saying MBU and DRAM activity
  measure different things where both are shown.
- ``headroom_line``: at capacity with a low MBU, the limit is not the GPU (one line, only
  when both numbers exist).
- ``engine_gpus``: the GPUs holding the engine's processes (attribution by the sampler).
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text

from llmtop.diagnose.thresholds import MBU_IDLE
from llmtop.model import WEIGHTS_PER_TOKEN, EngineRow, GpuRecord
from llmtop.ui import fmt
from llmtop.ui.fmt import DASH, S
from llmtop.ui.widgets.gpu_text import act, has_activity
from llmtop.ui.widgets.panels import LOCAL_HOSTS, short_gpu_name

__all__ = ["LOW_MBU", "PER_TOKEN", "SEAT_FLAGS", "engine_gpus", "gpu_work_lines", "headroom_line"]

PER_TOKEN = "it counts the weights once per token: at a batch > 1 its bytes and MBU over-state"
"""Said under an engine whose byte estimate counts the weights per token (SGLang)."""

LOW_MBU = MBU_IDLE
"""Below this MBU an engine at capacity is not held back by memory bandwidth: the diagnosis's
own threshold (``diagnose.thresholds.MBU_IDLE``, with its source), so the detail and the
``gpu_idle`` finding never disagree."""

PEAK_HINT = "give --gpu-peak GBPS,TFLOPS (e.g. 3350,989 for an H100 SXM)"
"""What to do when the GPU's peak is unknown."""

SEAT_FLAGS = {"vllm": "--max-num-seqs", "sglang": "--max-running-requests"}
"""The engine's own settings for seats and batch size, named in the headroom line."""

DIFFERENT = "they differ: MBU is estimated bytes / peak, DRAM active is its busy time"
"""Said once where the engine's estimate and the hardware's DRAM activity are both shown."""


def engine_gpus(row: EngineRow, gpus: Sequence[GpuRecord]) -> list[GpuRecord]:
    """The GPUs with a process attributed to ``row``'s target, in index order."""
    return [g for g in gpus if any(p.engine_target == row.target for p in g.processes)]


def _gpu_label(g: GpuRecord) -> str:
    host = "" if g.host in LOCAL_HOSTS else f"{g.host}:"
    return f"GPU {host}{g.index} {short_gpu_name(g.name)}"


def _hardware_line(g: GpuRecord) -> Text:
    """``GPU 0 H100 (gpm): DRAM active 18% · SM 23% · tensor 8% · busy 100%``; without
    activity, why (``activity_note``) and the busy time, labelled as what it is."""
    t = Text("  ")
    t.append(_gpu_label(g), style="bold")
    busy = f"busy {fmt.fmt_pct(act(g.util))}"
    if g.error:
        t.append(f": error: {g.error}", style=S("gauge-crit"))
    elif has_activity(g):
        t.append(f" ({g.activity_source or DASH}): ")
        t.append(f"DRAM active {fmt.fmt_pct(act(g.dram_active))} \u00b7 SM "
                 f"{fmt.fmt_pct(act(g.sm_active))} \u00b7 tensor "
                 f"{fmt.fmt_pct(act(g.tensor_active))} \u00b7 ")
        t.append(busy, style="dim")
    else:
        t.append(f": SM activity {DASH} \u00b7 ")
        t.append(f"{busy} (time any kernel ran)", style="dim")
        if g.activity_note:
            t.append(f"\n    {g.activity_note}", style="dim")
    return t


def _peak_text(peak: dict | None) -> tuple[float | None, float | None, str]:
    """The peak's bytes/s, FLOP/s and ``GPU, source`` (``–`` parts where not given)."""
    if not isinstance(peak, dict):
        return None, None, ""
    name = peak.get("gpu")
    where = ", ".join(str(x) for x in (name, peak.get("source")) if x)
    return fmt.finite(peak.get("bytes_per_s")), fmt.finite(peak.get("flops")), where


def gpu_work_lines(row: EngineRow, gpus: Sequence[GpuRecord]) -> list[Text]:
    """The GPU section of the engine detail (see the module's docstring)."""
    out = [Text("GPU work (the engine's own count, per GPU, over the window)", style="bold")]
    total = fmt.finite(row.achieved_bytes_per_s)
    read, write = fmt.finite(row.achieved_read_bytes_per_s), fmt.finite(
        row.achieved_write_bytes_per_s)
    flops = fmt.finite(row.achieved_flops_per_s)
    counted = any(v is not None for v in (total, read, write, flops))
    if counted:
        t = Text("  moves ")
        t.append(fmt.fmt_byte_rate(total), style="bold")
        if read is not None or write is not None:
            t.append(f" (read {fmt.fmt_byte_rate(read)}, write {fmt.fmt_byte_rate(write)})")
        t.append(" \u00b7 computes ")
        t.append(fmt.flop_rate(flops), style="bold")
        out.append(t)
        peak_bytes, peak_flops, where = _peak_text(row.gpu_peak)
        mbu, mfu = fmt.finite(row.mbu), fmt.finite(row.mfu)
        t = Text("  MBU ")
        t.append(fmt.fmt_pct(mbu), style="bold")
        if peak_bytes is not None:
            t.append(f" of {fmt.fmt_byte_rate(peak_bytes)}")
        t.append(" \u00b7 MFU ")
        t.append(fmt.fmt_pct(mfu), style="bold")
        if peak_flops is not None:
            t.append(f" of {fmt.flop_rate(peak_flops)} dense")
        out.append(t)
        if where:
            out.append(Text(f"  peak: {where}", style="dim"))
        elif mbu is None and mfu is None:
            out.append(Text(f"  peak: unknown GPU: {PEAK_HINT}", style=S("gauge-warn")))
        if row.engine in WEIGHTS_PER_TOKEN:
            out.append(Text(f"  {PER_TOKEN}", style="dim"))
    elif row.mfu_hint:
        out.append(Text(f"  {DASH} not exported: {row.mfu_hint}", style=S("gauge-warn")))
    else:
        out.append(Text(f"  {DASH} the engine does not report its FLOP and byte counts",
                        style="dim"))
    mine = engine_gpus(row, gpus)
    out += [_hardware_line(g) for g in mine]
    if counted and any(act(g.dram_active) is not None for g in mine if not g.error):
        out.append(Text(f"  {DIFFERENT}", style="dim"))
    return out


def headroom_line(row: EngineRow) -> Text | None:
    """At capacity (the CAP column's warning level) with MBU under ``LOW_MBU``: the limit is
    not the GPU's memory bandwidth. None unless both numbers exist and say so."""
    from llmtop.diagnose.thresholds import CAP_WARN

    cap, mbu = fmt.finite(row.capacity_used), fmt.finite(row.mbu)
    if cap is None or mbu is None or cap < CAP_WARN or mbu >= LOW_MBU:
        return None
    flags = SEAT_FLAGS.get(row.engine or "")
    return Text(f"  at capacity ({fmt.fmt_pct(cap)}), MBU {fmt.fmt_pct(mbu)}: the limit is not the "
                "GPU" + (f" ({flags})" if flags else ""), style=S("gauge-warn"))
