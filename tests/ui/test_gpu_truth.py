"""GPU truth on screen: real activity (SM, tensor, DRAM) leads where the GPU reports it,
NVML's utilization is labelled ``busy`` (time any kernel ran), the engine's own FLOP/byte
counts against the peak (MBU, MFU) in its detail, and at capacity with a low MBU a line
saying the limit is not the GPU. Records and rows are built by hand with the contract
fields; missing, NaN and garbage values are ``–``, never a traceback."""

from __future__ import annotations

import dataclasses

import pytest
from rich.cells import cell_len

from llmtop.config import Thresholds
from llmtop.model import EngineRow, GpuProcess, GpuRecord
from llmtop.ui import fmt
from llmtop.ui.fake import H100_PEAK
from llmtop.ui.screens.gpu import (
    gpu_cells,
    gpu_details,
    gpu_layout,
    process_cells,
    process_layout,
    throttle_cell_text,
)
from llmtop.ui.screens.gpu_work import DIFFERENT, PEAK_HINT, gpu_work_lines, headroom_line
from llmtop.ui.textshot import screen_lines
from llmtop.ui.widgets.gpu_text import BUSY_MEANS, activity_items, has_activity
from llmtop.ui.widgets.panels import gpu_line

from .conftest import first_paint, make_app

GIB = 1024**3
TARGET = "vllm@127.0.0.1:8000"
TH = Thresholds()

# An H100 decoding with GPM: busy 100 % at 23 % SM activity.
GPM = GpuRecord(host="", index=0, source="nvml", name="NVIDIA H100 80GB HBM3", util=1.0,
                mem_used_bytes=61 * GIB, mem_total_bytes=80 * GIB, power_w=420.0,
                power_limit_w=700.0, temp_c=71.0, sm_clock_mhz=1755.0, mem_clock_mhz=2619.0,
                throttle=[], sm_active=0.23, sm_occupancy=0.11, tensor_active=0.08,
                dram_active=0.18, fp16_active=0.02, activity_source="gpm",
                nvlink_tx_bytes_s=2.1e9, nvlink_rx_bytes_s=1.9e9,
                throttle_time={"power": 0.0, "thermal": 0.0},
                processes=[GpuProcess(pid=4100, used_bytes=60 * GIB, engine_target=TARGET,
                                      sm_util=0.97, cmdline="vllm serve")])
# An A100: no GPM, the sampler's note says so; power-capped 35 % of the interval.
A100 = GpuRecord(host="", index=1, source="nvml", name="NVIDIA A100-SXM4-80GB", util=0.97,
                 mem_used_bytes=38 * GIB, mem_total_bytes=80 * GIB, power_w=320.0,
                 power_limit_w=400.0, temp_c=64.0, throttle=["power cap"],
                 throttle_time={"power": 0.35, "thermal": 0.0},
                 activity_note="GPM: not supported on NVIDIA A100-SXM4-80GB",
                 processes=[GpuProcess(pid=4101, used_bytes=37 * GIB,
                                       engine_target="sglang@127.0.0.1:30000",
                                       sm_util=0.95)])


def _cells(g: GpuRecord, width: int, *, activity: bool) -> dict[str, str]:
    cols = gpu_layout(width, activity=activity)
    return {c.key: t.plain.strip() for c, t in zip(cols, gpu_cells(g, cols, TH), strict=True)}


# -- overview GPU lines ----------------------------------------------------------------------
def test_overview_line_leads_with_sm_activity_and_labels_busy():
    line = gpu_line(GPM, TH, wide=False).plain
    assert line.startswith("0 H100  SM ")
    sm_at, busy_at = line.index(" 23% "), line.index("busy 100%")
    assert sm_at < line.index("TC 8%") < line.index("DRAM 18%") < busy_at
    assert "71\u00b0C" not in line  # not near its slowdown: the room went to activity
    full = dataclasses.replace(GPM, sm_active=1.0, tensor_active=1.0, dram_active=1.0,
                               mem_used_bytes=80 * GIB, power_w=700.0, processes=[
                                   GpuProcess(pid=1, engine_target="sglang@127.0.0.1:30000")])
    line = gpu_line(full, TH, wide=False).plain
    assert line.endswith(" sglang@:30000") and cell_len(line) <= 78  # 80 less the padding
    hot = gpu_line(dataclasses.replace(GPM, temp_c=86.0, temp_slowdown_c=87.0), TH,
                   wide=False).plain
    assert "86\u00b0C vllm@:8000" in hot
    wide = gpu_line(GPM, TH, wide=True).plain
    assert "MEM " in wide and "/700W" in wide and "1755MHz" in wide


def test_overview_line_without_activity_says_busy_not_sm():
    line = gpu_line(A100, TH, wide=False).plain
    assert line.startswith("1 A100  busy ") and " 97% " in line
    assert " SM " not in line and "TC" not in line
    assert "PWR 35%" in line  # the power limit held the clocks 35 % of the interval
    assert cell_len(line) <= 78
    held = dataclasses.replace(A100, throttle=[], throttle_time={"thermal": 0.1, "power": 0.02,
                                                                 "low utilization": 0.5})
    assert " LOW 50% " in gpu_line(held, TH, wide=True).plain  # the largest share, tagged
    cool = dataclasses.replace(A100, throttle=[], throttle_time={"thermal": 0.1})
    assert " THM 10% " in gpu_line(cool, TH, wide=True).plain


def test_overview_missing_nan_and_garbage_are_dashes():
    g = dataclasses.replace(GPM, sm_active=float("nan"), tensor_active="x",  # type: ignore
                            dram_active=None, util=float("inf"),
                            throttle_time="garbage")  # type: ignore[arg-type]
    line = gpu_line(g, TH, wide=False).plain
    assert "SM \u00b7\u00b7\u00b7\u00b7\u00b7    \u2013 " in line  # occupancy keeps it
    assert "TC \u2013" in line and "DRAM \u2013" in line and "busy \u2013" in line
    assert "nan" not in line.lower() and "inf" not in line.lower()


# -- GPU screen ------------------------------------------------------------------------------
@pytest.mark.parametrize("width", [80, 120, 160])
def test_activity_layout_fits_and_leads(width):
    cols = gpu_layout(width, len("1 A100-SXM4-80GB"), activity=True)
    assert sum(c.width for c in cols) == width - 1
    assert [c.key for c in cols][:5] == ["gpu", "sm", "tensor", "dram", "busy"]
    assert ("clock" in [c.key for c in cols]) is (width >= 120)  # the details say it at 80
    assert cols[-1].key == "throttle" and cols[-1].width >= 8
    local = gpu_layout(width, len("1 A100"), activity=True)
    assert local[-1].width >= 18  # "power 35% · thermal…" beside a local GPU
    fleet = dataclasses.replace(GPM, host="demo-node-0")
    cells = gpu_cells(fleet, cols := gpu_layout(width, len("demo-node-0:0 H100"),
                                                 activity=True), TH)
    assert cells[0].plain.strip() == "demo-node-0:0 H100", cols  # never cut
    assert sum(c.width for c in cols) == width - 1


@pytest.mark.parametrize("width", [80, 160])
def test_activity_cells(width):
    c = _cells(GPM, width, activity=True)
    assert c["sm"].endswith("23%") and "\u2588" in c["sm"]
    assert (c["tensor"], c["dram"], c["busy"]) == ("8%", "18%", "100%")
    assert c["throttle"] == "none"
    a = _cells(A100, width, activity=True)
    assert a["sm"].endswith("\u2013") and a["tensor"] == a["dram"] == "\u2013"
    assert a["busy"] == "97%" and a["throttle"] == "power 35%"


def test_without_activity_the_lead_column_is_busy():
    cols = gpu_layout(80)
    assert cols[1].key == "util" and cols[1].label == "BUSY"
    assert _cells(A100, 80, activity=False)["util"].endswith("97%")


def test_throttle_cell_time_first_then_the_reasons_it_does_not_name():
    g = dataclasses.replace(A100, throttle=["power cap", "thermal slowdown"],
                            throttle_time={"power": 0.35, "thermal": 0.0})
    assert throttle_cell_text(g) == "power 35% \u00b7 thermal slowdown"
    assert throttle_cell_text(dataclasses.replace(g, throttle_time=None)) == (
        "power cap, thermal slowdown")
    assert throttle_cell_text(dataclasses.replace(g, throttle_time={"power": 0.0})) == (
        "power cap, thermal slowdown")  # every share 0: the reasons
    bad = dataclasses.replace(g, throttle_time={"power": float("nan"), "x": "y"})
    assert throttle_cell_text(bad) == "power cap, thermal slowdown"


def test_details_say_where_activity_came_from_or_why_there_is_none():
    d = dict(gpu_details(GPM))
    assert list(d)[:3] == ["activity from", "SM occupancy", "FP16 pipe"]
    assert (d["activity from"], d["SM occupancy"], d["FP16 pipe"]) == ("gpm", "11%", "2%")
    assert d["NVLink TX/RX"] == "2.1GB/s / 1.9GB/s" and d["clocks held by"] == "none"
    a = dict(gpu_details(A100))
    assert a["SM activity"] == "\u2013 (GPM: not supported on NVIDIA A100-SXM4-80GB)"
    assert a["clocks held by"] == "power 35%" and "NVLink TX/RX" not in a
    plain = GpuRecord(host="", index=0, source="dcgm", util=0.5)
    assert dict(gpu_details(plain))["busy ="] == BUSY_MEANS
    assert activity_items(GpuRecord(host="", index=0, source="dcgm")) == []  # nothing known
    assert dict(gpu_details(GPM, clocks=True))["SM/mem clock"] == "1755/2619 MHz"
    garbage = dataclasses.replace(GPM, throttle_time="garbage")  # type: ignore[arg-type]
    assert "clocks held by" not in dict(gpu_details(garbage))
    assert "activity note" not in d
    partial = dataclasses.replace(GPM, activity_note="GPM: NVLink metrics not supported")
    assert dict(gpu_details(partial))["activity note"] == "GPM: NVLink metrics not supported"


def test_process_busy_time():
    cols = process_layout(80)
    assert [c.label for c in cols][5] == "BUSY" and process_layout(160)[5].label == "SM BUSY"
    row = {c.key: t.plain.strip() for c, t in zip(cols, process_cells(GPM, GPM.processes[0],
                                                                      cols), strict=True)}
    assert row["busy"] == "97%"
    nan = GpuProcess(pid=1, sm_util=float("nan"))
    assert [t.plain.strip() for t in process_cells(GPM, nan, cols)][5] == "\u2013"


def test_has_activity():
    assert has_activity(GPM) and not has_activity(A100)
    assert not has_activity(dataclasses.replace(GPM, sm_active=float("nan"), sm_occupancy=None,
                                                tensor_active=None, dram_active=None,
                                                fp16_active=None))
    assert has_activity(GpuRecord(host="", index=0, source="dcgm", dram_active=0.0))  # 0 is


# -- engine detail ---------------------------------------------------------------------------
def _row(**kw) -> EngineRow:
    base = dict(key=f"{TARGET}|m", target=TARGET, engine="vllm", model="m",
                achieved_read_bytes_per_s=3.9e11, achieved_write_bytes_per_s=1.0e10,
                achieved_bytes_per_s=4.0e11, achieved_flops_per_s=2.1e13,
                mbu=4.0e11 / 3.35e12, mfu=2.1e13 / 989e12, gpu_peak=dict(H100_PEAK))
    base.update(kw)
    return EngineRow(**base)


def _text(lines) -> list[str]:
    return [t.plain for t in lines]


def test_gpu_work_with_counters_peak_and_dram():
    lines = _text(gpu_work_lines(_row(), [GPM, A100]))
    assert lines[1] == ("  moves 400GB/s (read 390GB/s, write 10GB/s) \u00b7 computes "
                        "21 TFLOP/s")
    assert lines[2] == "  MBU 12% of 3.35TB/s \u00b7 MFU 2% of 989 TFLOP/s dense"
    assert lines[3] == "  peak: NVIDIA H100 80GB HBM3, NVIDIA H100 datasheet (SXM)"
    assert lines[4] == ("  GPU 0 H100 (gpm): DRAM active 18% \u00b7 SM 23% \u00b7 tensor 8% "
                        "\u00b7 busy 100%")  # only its own GPU: the A100 is SGLang's
    assert lines[5] == f"  {DIFFERENT}" and len(lines) == 6
    assert all(cell_len(x) <= 76 for x in lines)  # the detail body at 80 columns


def test_gpu_work_unknown_peak_says_how_to_give_one():
    lines = _text(gpu_work_lines(_row(mbu=None, mfu=None, gpu_peak=None), []))
    assert lines[2] == "  MBU \u2013 \u00b7 MFU \u2013"
    assert lines[3] == f"  peak: unknown GPU: {PEAK_HINT}"
    assert DIFFERENT not in "\n".join(lines)  # no DRAM activity to set beside it


def test_gpu_work_without_counters_gives_the_hint_or_says_so():
    none = dict(achieved_read_bytes_per_s=None, achieved_write_bytes_per_s=None,
                achieved_bytes_per_s=None, achieved_flops_per_s=None, mbu=None, mfu=None,
                gpu_peak=None)
    hinted = _text(gpu_work_lines(_row(**none, mfu_hint="start vLLM with --enable-mfu-metrics"),
                                  [GPM]))
    assert hinted[1] == "  \u2013 not exported: start vLLM with --enable-mfu-metrics"
    assert hinted[2].startswith("  GPU 0 H100 (gpm): DRAM active 18%")
    assert DIFFERENT not in "\n".join(hinted)  # no estimate to compare with
    silent = _text(gpu_work_lines(_row(**none), []))
    assert silent[1] == "  \u2013 the engine does not report its FLOP and byte counts"
    a100 = _text(gpu_work_lines(_row(**none, target="sglang@127.0.0.1:30000"), [A100]))
    assert a100[2] == ("  GPU 1 A100: SM activity \u2013 \u00b7 busy 97% (time any kernel "
                       "ran)\n    GPM: not supported on NVIDIA A100-SXM4-80GB")


def test_gpu_work_garbage_is_a_dash():
    bad = _row(achieved_bytes_per_s=float("nan"), achieved_read_bytes_per_s=None,
               achieved_write_bytes_per_s=None, achieved_flops_per_s=float("inf"),
               mbu=float("nan"), mfu="x", gpu_peak={"bytes_per_s": "?", "flops": None})
    lines = _text(gpu_work_lines(bad, []))
    assert lines[1] == "  \u2013 the engine does not report its FLOP and byte counts"
    assert fmt.flop_rate(float("nan")) == fmt.flop_rate(None) == fmt.DASH
    assert fmt.flop_rate(2.6e9) == "2.6 GFLOP/s" and fmt.flop_rate(989e12) == "989 TFLOP/s"


def test_headroom_line_only_at_capacity_with_low_mbu():
    line = headroom_line(_row(capacity_used=0.95))
    assert line is not None and line.plain == (
        "  at capacity (95%), MBU 12%: the limit is not the GPU (--max-num-seqs)")
    assert headroom_line(_row(capacity_used=0.5)) is None  # not at capacity
    assert headroom_line(_row(capacity_used=0.95, mbu=0.7)) is None  # the GPU may be
    assert headroom_line(_row(capacity_used=0.95, mbu=None)) is None
    assert headroom_line(_row(capacity_used=None)) is None
    assert headroom_line(_row(capacity_used=0.95, mbu=float("nan"))) is None
    other = headroom_line(_row(capacity_used=1.2, engine="triton"))
    assert other is not None and other.plain.endswith("the limit is not the GPU")


# -- whole screens ---------------------------------------------------------------------------
@pytest.mark.parametrize("size", [(80, 24), (120, 30), (160, 48)])
async def test_screens_at_each_size(size):
    app = make_app("gpu")
    async with app.run_test(size=size) as pilot:
        await first_paint(app, pilot)
        over = screen_lines(app)
        gpu0 = next(x for x in over if x.startswith(" 0 H100  SM "))
        assert "busy 100%" in gpu0 and "DRAM 18%" in gpu0 and gpu0.rstrip().endswith(
            "vllm@:8000")
        assert next(x for x in over if x.startswith(" 1 A100  busy ")).rstrip().endswith(
            "sglang@:30000")
        await pilot.press("g")
        await pilot.pause()
        text = "\n".join(screen_lines(app))
        assert "activity from gpm" in text and "100%" in text
        await pilot.press("down")
        await pilot.pause()
        text = "\n".join(screen_lines(app))
        assert "SM activity \u2013 (GPM: not supported on NVIDIA A100-SXM4-80GB)" in text
        assert "power 35%" in text
        await pilot.press("escape", "down", "down", "enter")
        await pilot.pause()
        text = "\n".join(screen_lines(app))
        assert "MBU 12% of 3.35TB/s" in text and "MFU 2% of 989 TFLOP/s dense" in text
        assert "the limit is not the GPU (--max-num-seqs)" in text
        assert DIFFERENT in text


def test_the_detail_has_a_gpu_section_only_where_there_is_something_to_say():
    from llmtop.ui.fake import demo_snapshot
    from llmtop.ui.screens.detail import detail_renderable

    def text(row, gpus) -> str:
        import io

        from rich.console import Console

        console = Console(width=100, record=True, file=io.StringIO())
        console.print(detail_renderable(row, {}, gpus=gpus))
        return console.export_text()

    snap = demo_snapshot("ok")
    vllm, triton = (next(r for r in snap.engines if r.engine == e) for e in ("vllm", "triton"))
    assert "GPU work" not in text(triton, snap.gpus)  # no GPU of its own, no counters, no hint
    shown = text(vllm, snap.gpus)  # its GPU, busy time only
    assert "GPU work" in shown and "GPU 0 H100: SM activity \u2013 \u00b7 busy 87%" in shown
    assert "GPU work" in text(dataclasses.replace(
        triton, mfu_hint="start vLLM with --enable-mfu-metrics"), [])


def test_gpu_history_leads_with_real_activity_only_where_the_gpu_reports_it():
    """The GPU screen's history: SM and DRAM activity first for a GPU that reported them in
    the kept span; a GPU with busy time only gets no empty activity rows."""
    from llmtop.ui.screens.gpu import history_rows
    from llmtop.ui.widgets.panels import SparkClock

    busy = {"util": [0.9] * 20, "mem_used": [1e9] * 20, "power": [300.0] * 20,
            "temp": [60.0] * 20}
    labels = [label for label, _ in history_rows(busy, 80, SparkClock())]
    assert labels[:3] == ["history", "busy", "VRAM"] and "SM" not in labels
    gone = {**busy, "sm_active": [None] * 20, "dram_active": [None] * 20}
    assert [label for label, _ in history_rows(gone, 80, SparkClock())] == labels
    active = {**busy, "sm_active": [None] * 10 + [0.23] * 10, "dram_active": [0.6] * 20}
    rows = history_rows(active, 80, SparkClock())
    assert [label for label, _ in rows][:4] == ["history", "SM", "DRAM", "busy"]
    assert rows[1][1].plain.endswith("23%") and rows[3][1].plain.endswith("90%")


def test_sglangs_per_token_byte_count_is_said_under_its_mbu():
    """SGLang counts the weights once per token in the batch: its MBU is shown as it says,
    with one line that it over-states at a batch > 1; a vLLM row has no such line."""
    from llmtop.ui.screens.gpu_work import PER_TOKEN

    row = EngineRow(key="k", target="sglang@127.0.0.1:30000", engine="sglang",
                    achieved_bytes_per_s=4.0e12, achieved_read_bytes_per_s=3.9e12,
                    achieved_write_bytes_per_s=1e11, achieved_flops_per_s=1e14, mbu=1.2,
                    mfu=0.1, gpu_peak=H100_PEAK)
    text = "\n".join(t.plain for t in gpu_work_lines(row, []))
    assert "MBU 120%" in text and PER_TOKEN in text
    vllm = dataclasses.replace(row, engine="vllm", target="vllm@127.0.0.1:8000", mbu=0.82)
    assert PER_TOKEN not in "\n".join(t.plain for t in gpu_work_lines(vllm, []))
