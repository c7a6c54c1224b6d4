"""The GPU screen (nvitop-like): a row per GPU with human labels and bars, the processes of
every GPU (pid, user, engine, VRAM, command), the selected GPU's history; ``–`` when missing."""

from __future__ import annotations

import pytest
from textual.widgets import DataTable

from llmtop.config import Thresholds
from llmtop.model import GpuProcess, GpuRecord
from llmtop.ui.fake import FakeSource
from llmtop.ui.screens.gpu import (
    GpuScreen,
    details_text,
    gpu_cells,
    gpu_details,
    gpu_layout,
    process_cells,
    process_layout,
    throttle_words,
)
from llmtop.ui.textshot import screen_lines

from .conftest import first_paint, make_app

GIB = 1024**3
H100 = GpuRecord(host="vm", index=0, source="nvml", name="NVIDIA H100 80GB HBM3", util=0.87,
                 mem_used_bytes=61 * GIB, mem_total_bytes=80 * GIB, power_w=125.877,
                 power_limit_w=700.0, energy_j=4908.04, temp_c=40.0, temp_slowdown_c=89.0,
                 sm_clock_mhz=1980.0, mem_clock_mhz=2619.0, fan_pct=35.0, mig_mode=False,
                 throttle=["power cap", "thermal slowdown"], ecc_corrected=0,
                 pcie_tx_bytes_s=605 * 1024.0)


def cells(g: GpuRecord, width: int) -> dict[str, str]:
    cols = gpu_layout(width)
    return {c.key: t.plain.strip() for c, t in zip(cols, gpu_cells(g, cols, Thresholds()),
                                                    strict=True)}


@pytest.mark.parametrize("width", [80, 160])
def test_layout_fits_the_width(width):
    assert sum(c.width for c in gpu_layout(width)) == width - 1
    assert sum(c.width for c in process_layout(width)) == width - 1


@pytest.mark.parametrize("width", [80, 160])
def test_gpu_row_has_units_bars_and_throttle_words(width):
    c = cells(H100, width)
    assert c["util"].endswith("87%") and "\u2588" in c["util"]
    assert c["mem"].endswith("61/80G")
    assert c["power"] == "126/700W" and c["temp"] == "40\u00b0C"
    assert c["clock"] == "1980/2619"
    assert "power cap" in c["throttle"]
    for t in gpu_cells(H100, gpu_layout(width), Thresholds()):
        assert t.cell_len <= max(col.width for col in gpu_layout(width))


def test_missing_values_are_dashes_never_zero():
    c = cells(GpuRecord(host="", index=3, source="dcgm"), 80)
    assert c["power"] == "\u2013W" and c["temp"] == "\u2013" and c["clock"] == "\u2013/\u2013"
    assert c["throttle"] == "\u2013" and c["util"].endswith("\u2013")
    assert "0" not in c["util"] + c["temp"]


def test_throttle_words():
    assert throttle_words(H100) == "power cap, thermal slowdown"
    assert throttle_words(GpuRecord(host="", index=0, source="nvml", throttle=["idle"])) == "none"
    assert throttle_words(GpuRecord(host="", index=0, source="nvml")) == "\u2013"


def test_details_use_human_labels_and_skip_what_is_not_reported():
    d = dict(gpu_details(H100))
    assert d["energy"] == "4.9 kJ since driver load" and d["fan"] == "35%"
    assert d["MIG"] == "off" and d["ECC corr/uncorr"] == "0 / \u2013"
    assert "mem_used_bytes" not in d and "power_limit_w" not in d
    assert "memory temp" not in d  # not reported: left out, not shown as 0


def test_process_row_pid_user_engine_vram_command():
    cols = process_layout(80)
    p = GpuProcess(pid=4100, name="python3", used_bytes=60 * GIB,
                   engine_target="vllm@127.0.0.1:8000", cmdline="python3 -m vllm serve",
                   user="llm")
    row = {c.key: t.plain.strip() for c, t in zip(cols, process_cells(H100, p, cols),
                                                   strict=True)}
    assert row == {"gpu": "vm:0", "pid": "4100", "user": "llm", "engine": "vllm@:8000",
                   "mem": "60.0G", "busy": "–", "cmd": "python3 -m vllm serve"}
    ghost = GpuProcess(pid=77, used_bytes=GIB, visible=False)
    row = [t.plain.strip() for t in process_cells(H100, ghost, cols)]
    assert row[2] == "\u2013" and row[3] == "\u2013" and row[5] == "\u2013"
    assert row[6] == "(pid not visible here)"


@pytest.mark.parametrize("size", [(80, 24), (160, 48)])
async def test_screen_rows_processes_and_history_of_the_selected_gpu(size):
    app = make_app("ok")
    async with app.run_test(size=size) as pilot:
        await first_paint(app, pilot)
        await pilot.press("g")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, GpuScreen)
        text = "\n".join(screen_lines(app))
        assert "History \u00b7 GPU 0 H100" in text
        assert screen.query_one("#gpu-table", DataTable).row_count == 2
        assert screen.query_one("#gpu-procs", DataTable).row_count == 2
        assert "llm" in text and "vllm@:8000" in text and "sglang@:30000" in text
        lines = screen_lines(app)
        assert all(len(line.rstrip()) <= size[0] for line in lines)
        await pilot.press("down")
        await pilot.pause()
        assert "History \u00b7 GPU 1 H100" in "\n".join(screen_lines(app))
        assert screen.selected().index == 1


async def test_gpu_unavailable_state():
    app = make_app("no_gpu")
    async with app.run_test(size=(80, 24)) as pilot:
        await first_paint(app, pilot)
        await pilot.press("g")
        await pilot.pause()
        text = "\n".join(screen_lines(app))
        assert "GPU unavailable: NVML library not found" in text
        assert "GPU unavailable: GPU unavailable" not in text
        assert "PID" not in text


async def test_no_processes_says_so():
    snap = FakeSource.demo("ok")._snap
    for g in snap.gpus:
        g.processes = []
    app = make_app(source=FakeSource(snap))
    async with app.run_test(size=(80, 24)) as pilot:
        await first_paint(app, pilot)
        await pilot.press("g")
        await pilot.pause()
        assert "no process holds GPU memory" in "\n".join(screen_lines(app))


def test_a_lost_gpu_says_why_in_its_row():
    lost = GpuRecord(host="", index=2, source="nvml", name="NVIDIA H100", error="GPU is lost")
    c = cells(lost, 80)
    assert c["gpu"] == "2 H100" and c["throttle"] == "error: GPU is lost"
    assert c["util"] == c["mem"] == c["power"] == ""


@pytest.mark.parametrize("width", [80, 120, 160])
def test_a_fleet_gpu_name_is_never_cut(width):
    """Fleet mode's ``host:index`` (``demo-node-0:0``) showed as ``demo-no`` at 80 columns."""
    from dataclasses import replace

    g = replace(H100, host="demo-node-0")
    cols = gpu_layout(width, len("demo-node-0:0 H100"))
    assert sum(c.width for c in cols) <= width
    name = next(t.plain for c, t in zip(cols, gpu_cells(g, cols, Thresholds()), strict=True)
                if c.key == "gpu").strip()
    assert name.startswith("demo-node-0:0 H100") and "\u2026" not in name, name
    throttle = next(c for c in cols if c.key == "throttle")
    assert throttle.width >= 8


# A real H200's details as NVML gives them (scripts/gpu_smoke.py on the lent machine, 2026-11-27):
# five lines' worth at 80 columns.
H200 = GpuRecord(host="vm", index=0, source="nvml", name="NVIDIA H200", mem_util=0.0,
                 mem_free_bytes=137 * GIB, mem_reserved_bytes=615 * 1024**2,
                 temp_slowdown_c=89.0, temp_shutdown_c=95.0, sm_clock_max_mhz=1980.0,
                 mem_clock_max_mhz=3201.0, pcie_tx_bytes_s=567e3, pcie_rx_bytes_s=432e3,
                 ecc_corrected=0, ecc_uncorrected=0, energy_j=6100.0, mig_mode=False,
                 pci_bus_id="00000000:00:06.0", uuid="GPU-bc07e255-f2b6-72f4-3e3a-f8ebb2402ed2")


@pytest.mark.parametrize("width", [61, 77, 157])
def test_details_pack_whole_items_into_the_width(width):
    lines = details_text(H200, width).plain.split("\n")
    items = [f"{k} {v}" for k, v in gpu_details(H200)]
    assert all(len(line) <= width for line in lines)
    assert " \u00b7 ".join(lines) == " \u00b7 ".join(items)  # nothing split, nothing lost
    assert len(lines) > 1


def test_details_past_the_lines_end_with_a_mark():
    full = details_text(H200, 77).plain.split("\n")
    assert len(full) > 3
    cut = details_text(H200, 77, 3).plain.split("\n")
    assert len(cut) == 3 and cut[:2] == full[:2]
    assert cut[2].endswith(" \u00b7 \u2026") and len(cut[2]) <= 77
    assert details_text(H200, 157, 3).plain.split("\n") == details_text(H200, 157).plain.split(
        "\n")  # all of it fits: no mark
    assert "\u2026" not in details_text(H200, 157, 3).plain


@pytest.mark.parametrize(("size", "whole"), [((80, 24), True), ((80, 14), False)])
async def test_a_real_gpus_details_use_the_free_rows(monkeypatch, size, whole):
    """A real H200's details at 80 columns: all of them where the two GPUs and their
    processes leave rows free (80x24); three lines ending in '…' where they do not."""
    import dataclasses

    import llmtop.ui.fake as fake

    real = fake._gpus

    def gpus():
        g = real()
        extra = {f.name: getattr(H200, f.name) for f in dataclasses.fields(H200)
                 if f.name.startswith(("mem_", "temp_s", "sm_clock_max", "pcie", "ecc", "energy",
                                       "pci_bus", "uuid"))}
        return [dataclasses.replace(g[0], source="nvml", **extra), *g[1:]]

    monkeypatch.setattr(fake, "_gpus", gpus)
    app = make_app("ok")
    async with app.run_test(size=size) as pilot:
        await first_paint(app, pilot)
        await pilot.press("g")
        await pilot.pause()
        text = "\n".join(screen_lines(app))
        assert "memory busy" in text
        assert ("uuid GPU-bc07e255-f2b6-72f4-3e3a-f8ebb2402ed2" in text) is whole
        assert ("\u00b7 \u2026" in text) is not whole
