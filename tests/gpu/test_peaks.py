"""The GPU peak table (NVML device names -> bandwidth and dense BF16), --gpu-peak, and the
peak an engine divides by."""

from __future__ import annotations

import pytest

from llmtop.config import GpuPeak
from llmtop.gpu.peaks import PEAKS, engine_peak, parse_gpu_peak, peak_for
from llmtop.model import GpuProcess, GpuRecord

# NVML device names as the driver reports them, with (GB/s, dense BF16 TFLOP/s)
NAMES = {
    "NVIDIA A100-SXM4-40GB": (1555, 312),
    "NVIDIA A100-PCIE-40GB": (1555, 312),
    "NVIDIA A100-SXM4-80GB": (2039, 312),
    "NVIDIA A100 80GB PCIe": (1935, 312),
    "NVIDIA H100 80GB HBM3": (3350, 989),
    "NVIDIA H100 PCIe": (2000, 756.5),
    "NVIDIA H100 NVL": (3900, 835.5),
    "NVIDIA H200": (4800, 989),
    "NVIDIA H200 NVL": (4800, 835.5),
    "NVIDIA B200": (8000, 2250),
    "NVIDIA L40S": (864, 362.05),
    "NVIDIA L4": (300, 121),
    "NVIDIA A10G": (600, None),
}


@pytest.mark.parametrize("name", sorted(NAMES))
def test_each_gpu_of_the_table(name):
    gbps, tflops = NAMES[name]
    p = peak_for(name)
    assert p is not None and p.gpu == name and p.source.startswith(("NVIDIA", "AWS"))
    assert p.bytes_per_s == pytest.approx(gbps * 1e9)
    assert (p.flops is None) if tflops is None else p.flops == pytest.approx(tflops * 1e12)


def test_dense_never_sparse_and_every_row_sourced():
    for _pattern, bw, flops, source in PEAKS:
        assert source and bw > 0
        assert flops is None or flops <= 2.3e15  # B200's dense BF16; sparse would be 4.5e15


@pytest.mark.parametrize("name", ["NVIDIA L40", "Tesla T4", "NVIDIA GeForce RTX 4090", "", None])
def test_unknown_gpu_is_none(name):
    assert peak_for(name) is None


def test_parse_gpu_peak():
    assert parse_gpu_peak("3350,989") == GpuPeak(3350e9, 989e12, "--gpu-peak")
    assert parse_gpu_peak(" 600 , ") == GpuPeak(600e9, None, "--gpu-peak")
    assert parse_gpu_peak(",121").flops == 121e12


@pytest.mark.parametrize("bad", ["3350", "a,b", "0,989", "-1,2", "nan,1", ",", "1,2,3", ""])
def test_parse_gpu_peak_refuses_with_a_line(bad):
    with pytest.raises(ValueError, match="--gpu-peak"):
        parse_gpu_peak(bad)


def _gpu(name, owner, index=0):
    return GpuRecord(host="h", index=index, source="nvml", name=name,
                     processes=[GpuProcess(pid=1, name="x", used_bytes=1, engine_target=owner)])


def test_engine_peak():
    gpus = [_gpu("NVIDIA H100 80GB HBM3", "a"), _gpu("NVIDIA L4", "b", 1),
            _gpu("NVIDIA GeForce RTX 4090", "c", 2), _gpu("NVIDIA H100 80GB HBM3", "d", 3),
            _gpu("NVIDIA L4", "d", 4)]
    assert engine_peak("a", gpus)[0].bytes_per_s == 3350e9
    assert engine_peak("b", gpus)[0].flops == 121e12
    assert engine_peak("c", gpus) == (None, "unknown GPU NVIDIA GeForce RTX 4090: "
                                            "give --gpu-peak GBPS,TFLOPS")
    peak, note = engine_peak("d", gpus)
    assert peak is None and note.startswith("GPUs of different models")
    assert engine_peak("nobody", gpus) == (None, None)
    own = GpuPeak(1e9, 1e12, "--gpu-peak")
    assert engine_peak("c", gpus, own) == (own, None)
