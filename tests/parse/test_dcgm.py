"""DCGM exporter adapter on the README fixtures and a hand-made edge fixture."""

from __future__ import annotations

import pytest

from llmtop.parse import dcgm
from llmtop.parse.exposition import ParseError
from llmtop.parse.gpu_common import clean
from tests.conftest import fixture_text

UUID = "GPU-604ac76c-d9cf-fef3-62e9-d92044ab6e52"


@pytest.mark.parametrize("name", ["dcgm-exporter-readme.txt", "dcgm-exporter-readme-k8s.txt"])
def test_readme_fixtures(name):
    s = dcgm.normalize(fixture_text(name), identity={"host": "gpu-box"})
    assert s.engine == "dcgm"
    assert s.models == []
    assert len(s.gpus) == 1
    g = s.gpus[0]
    assert g.source == "dcgm"
    assert g.host == "gpu-box"
    assert g.index == 0
    assert g.uuid == UUID
    assert g.sm_clock_mhz == 139.0
    assert g.mem_clock_mhz == 405.0
    assert g.mem_temp_c is None  # 9223372036854775794 = DCGM blank sentinel
    for attr in ("util", "mem_used_bytes", "mem_total_bytes", "power_w", "temp_c", "energy_j"):
        assert getattr(g, attr) is None, attr
    assert g.name is None
    assert g.pci_bus_id is None
    assert g.processes == []  # k8s labels present but empty: no pod
    assert g.extra == {}


def test_no_identity_host_is_empty():
    g = dcgm.normalize(fixture_text("dcgm-exporter-readme.txt")).gpus[0]
    assert g.host == ""


def test_edge_fixture_two_gpus():
    s = dcgm.normalize(fixture_text("dcgm-HANDMADE-edge-mig-k8s.txt"), identity={"host": "x"})
    assert s.extra["driver_version"] == "550.54.15"
    g0, g1 = s.gpus
    assert (g0.host, g0.index, g0.uuid) == ("node-a", 0, "GPU-aaaa")  # Hostname label wins
    assert g0.name == "NVIDIA H100 80GB HBM3"
    assert g0.pci_bus_id == "00000000:07:00.0"
    assert g0.util == pytest.approx(0.87)
    assert g0.mem_used_bytes == 71234 * 2**20
    assert g0.mem_free_bytes == 9662 * 2**20
    assert g0.mem_reserved_bytes == 663 * 2**20
    assert g0.mem_total_bytes == (71234 + 9662 + 663) * 2**20
    assert g0.power_w == 512.25
    assert g0.temp_c == 64.0
    assert g0.mem_temp_c is None
    assert g0.energy_j == pytest.approx(123456.789)
    assert g0.xid == 0
    assert g0.throttle == ["power cap"]
    assert g0.pcie_tx_bytes_s == 52428800.0
    assert g0.pcie_rx_bytes_s == 1048576.0
    assert g0.extra["gr_engine_active"] == 0.912345
    assert g0.tensor_active == 0.412  # a named field now, no longer an extra
    assert g0.dram_active is None  # fp64 blank
    assert g0.activity_source == "dcgm"
    assert "tensor_active" not in g0.extra and "dram_active" not in g0.extra
    assert g0.extra["enc_util"] == pytest.approx(0.05)
    assert g0.mig_mode is None
    assert g0.processes == []
    assert g0.power_limit_w is None

    assert (g1.host, g1.index, g1.uuid) == ("node-a", 1, "GPU-bbbb")
    assert g1.util is None  # int32 blank
    assert g1.power_w is None  # NaN
    assert g1.mem_used_bytes == 1024 * 2**20  # only from the MIG instance series
    assert g1.mem_total_bytes is None  # no free value
    assert g1.mig_mode is True
    assert g1.mig_instances == ["3g.40gb id 2"]
    assert [p.name for p in g1.processes] == ["llm/vllm-0/vllm"]
    assert g1.processes[0].pid is None


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (9223372036854775794.0, None),
        (float(0x7FFFFFFFFFFFFFF0), None),
        (2147483632.0, None),
        (2147483635.0, None),
        (140737488355328.0, None),
        (float("nan"), None),
        (float("inf"), None),
        (2147483631.0, 2147483631.0),
        (0.0, 0.0),
        (405.0, 405.0),
    ],
)
def test_clean_sentinels(value, expected):
    assert clean(value) == expected


@pytest.mark.parametrize(
    "body",
    [
        "",
        "<html><body>nope</body></html>",
        'DCGM_FI_DEV_GPU_UTIL{gpu="0" 5\n',
        "vllm:num_requests_running 1\n",
    ],
)
def test_garbage_raises(body):
    with pytest.raises(ParseError):
        dcgm.normalize(body)



def test_profiling_fields_land_in_the_named_activity_fields():
    s = dcgm.normalize(fixture_text("dcgm-HANDMADE-prof-activity.txt"))
    g0, g1 = s.gpus
    assert g0.name == "NVIDIA A100-SXM4-80GB" and g0.util == 1.0
    assert g0.activity_source == "dcgm"
    assert g0.sm_active == 0.23  # DCGM ratios are 0..1 already
    assert g0.sm_occupancy == 0.11
    assert g0.tensor_active == 0.07
    assert g0.dram_active == 0.81
    assert g0.fp16_active == 0.02
    assert g0.pcie_tx_bytes_s == 52428800.0
    assert g0.nvlink_tx_bytes_s == 21474836480.0
    assert g0.nvlink_rx_bytes_s is None  # the fp64 blank
    assert g0.extra == {"gr_engine_active": 0.99, "fp32_active": 0.04}
    assert g0.mig_activity == {}

    # MIG: each GPU instance's activity under its id; the whole GPU's stays unknown
    assert g1.mig_mode is True and g1.sm_active is None and g1.dram_active is None
    assert g1.mig_activity == {
        "1": {"sm_active": 0.6, "tensor_active": 0.3, "dram_active": 0.4},
        "2": {"sm_active": 0.05, "dram_active": None},  # -0.5 is garbage, not a ratio
    }
    assert g1.activity_source == "dcgm"
    assert g1.extra == {}


def test_without_profiling_fields_there_is_no_activity_source():
    g = dcgm.normalize(fixture_text("dcgm-exporter-readme.txt")).gpus[0]
    assert g.activity_source is None and g.sm_active is None and g.mig_activity == {}


def test_a_ratio_over_one_is_held_at_one():
    text = fixture_text("dcgm-HANDMADE-prof-activity.txt")
    old = next(ln for ln in text.splitlines() if ln.startswith("DCGM_FI_PROF_DRAM_ACTIVE{")
               and 'gpu="0"' in ln)
    g0 = dcgm.normalize(text.replace(old, old.rsplit(" ", 1)[0] + " 1.02")).gpus[0]
    assert g0.dram_active == 1.0
