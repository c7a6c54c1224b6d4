"""The GPU detail table: every field with its unit; missing values are dashes, not zeros."""

from __future__ import annotations

from rich.console import Console

from llmtop.model import GpuRecord
from llmtop.ui.screens.gpu import gpu_table


def rows(g: GpuRecord) -> dict[str, str]:
    console = Console(width=120, record=True, color_system=None)
    console.print(gpu_table(g, []))
    out = {}
    for line in console.export_text().splitlines():
        if line.strip():
            name, _, value = line.strip().partition("  ")
            out[name] = value.strip()
    return out


def test_values_carry_their_units():
    # values as an H100 over real NVML returned them (scripts/gpu_smoke.py, 2026-11-22)
    g = GpuRecord(host="vm", index=0, source="nvml", power_w=125.877, power_limit_w=700.0,
                  energy_j=4908.04, temp_c=40.0, temp_slowdown_c=89.0, sm_clock_mhz=1980.0,
                  mem_clock_max_mhz=2619.0, fan_pct=35.0, mig_mode=False, util=0.0,
                  pcie_tx_bytes_s=605 * 1024.0, ecc_corrected=0)
    r = rows(g)
    assert r["power_w"] == "125.9 W" and r["power_limit_w"] == "700 W"
    assert r["energy_j"] == "4.9 kJ since driver load"
    assert r["temp_c"] == "40 °C" and r["temp_slowdown_c"] == "89 °C"
    assert r["sm_clock_mhz"] == "1980 MHz" and r["mem_clock_max_mhz"] == "2619 MHz"
    assert r["fan_pct"] == "35%" and r["mig_mode"] == "off" and r["util"] == "0%"
    assert r["ecc_corrected"] == "0"
    assert r["pcie_tx_bytes_s"].endswith("/s")


def test_missing_fields_are_dashes_and_other_sources_say_lifetime():
    g = GpuRecord(host="h", index=1, source="dcgm", energy_j=2.5e6)
    r = rows(g)
    assert r["energy_j"] == "2.5 MJ lifetime counter"
    for name in ("power_w", "temp_c", "fan_pct", "sm_clock_mhz", "mig_mode", "util"):
        assert r[name] == "–", name
