"""``--once`` plain text of each engine's own FLOP/byte count: one line per engine row that
has it (``EngineRow.achieved_*``), with MBU and MFU against the peak it divided by.

    vllm@127.0.0.1:8000 [tiny-llama] engine's count: read 1.38GB/s · write 24MB/s ·
      1.4GFLOP/s · MBU 42% · MFU 0% of NVIDIA H100 80GB HBM3 (NVIDIA H100 datasheet ...)

No GPU and no ``--gpu-peak``: the ratios are ``–`` and the line says so; an unknown GPU says
how to give its peak (``EngineRow.mfu_hint``). Engines that do not count are left out here
(their ``mfu_hint`` is in ``--once --json``).
"""

from __future__ import annotations

from llmtop.model import EngineRow, Snapshot
from llmtop.units import byte_rate, flop_rate, pct

__all__ = ["mfu_line", "mfu_lines"]


def _ratio(v: float | None) -> str:
    """0.4 % reads as ``0.4%``, not ``0%``: a small MBU is the usual case on a big GPU."""
    if v is not None and 0 < v < 0.01:
        return f"{v * 100:.2g}%"
    return pct(v)


def mfu_line(row: EngineRow) -> str | None:
    """The line of one row, None when the engine does not count FLOPs and bytes."""
    if row.achieved_bytes_per_s is None and row.achieved_flops_per_s is None:
        return None
    model = f" [{row.model}]" if row.model else ""
    rank = f" rank {row.rank}" if row.rank else ""
    parts = [f"read {byte_rate(row.achieved_read_bytes_per_s)}",
             f"write {byte_rate(row.achieved_write_bytes_per_s)}",
             flop_rate(row.achieved_flops_per_s),
             f"MBU {_ratio(row.mbu)}", f"MFU {_ratio(row.mfu)}"]
    peak = row.gpu_peak
    if peak:
        what = peak.get("gpu") or "the given peak"
        parts[-1] += f" of {what} ({peak.get('source')})"
    elif row.mfu_hint:
        parts.append(row.mfu_hint)
    else:
        parts.append("no GPU seen for this engine: give --gpu-peak GBPS,TFLOPS for MBU/MFU")
    return f"  {row.target}{model}{rank} engine's count: " + " · ".join(parts)


def mfu_lines(snap: Snapshot) -> list[str]:
    """One line per engine row (and rank) that counts its FLOPs and bytes."""
    out: list[str] = []
    for row in snap.engines:
        for r in (row, *row.ranks):
            line = mfu_line(r)
            if line is not None:
                out.append(line)
    return out
