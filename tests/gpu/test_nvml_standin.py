"""The GPU sampler through real pynvml over a C stand-in for libnvidia-ml (``nvml_standin.c``).

pynvml's own ctypes structures, struct versions and return codes are exercised: GPM on an
H100-like GPU, an A100-like GPU without GPM (per-process SM time, NVLink counters and
violation time instead), a call answering NOT_SUPPORTED, a lost GPU, a MIG GPU; each with its
samples freed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from llmtop.gpu import reasons
from llmtop.gpu.nvml import NvmlSampler

MIB = 1024.0 * 1024.0

H100 = """
device 0 name NVIDIA H100 80GB HBM3
device 0 uuid GPU-h100-0
device 0 util 100 40
device 0 memory 85899345920 8589934592 77309411328
device 0 power 350000
device 0 pcie 4096 2048       # KB/s, NVML's blocking call: not asked once GPM gives PCIe
device 0 gpm 1
device 0 metric 2 23.5        # SM_UTIL, percent
device 0 metric 3 12.0        # SM_OCCUPANCY
device 0 metric 5 8.0         # ANY_TENSOR_UTIL
device 0 metric 10 81.0       # DRAM_BW_UTIL
device 0 metric 13 1.5 3      # FP16_UTIL answers NOT_SUPPORTED in its own return code
device 0 metric 20 100        # PCIe TX, MiB/s
device 0 metric 21 50
device 0 metric 60 2000       # NVLink total RX, MiB/s
device 0 metric 61 1000
"""

A100 = """
device 0 name NVIDIA A100-SXM4-80GB
device 0 uuid GPU-a100-0
device 0 util 97 60
device 0 gpm 0
device 0 pcie 2048 1024
device 0 proc 4242 10737418240
device 0 proc 4343 1073741824
device 0 procutil 4242 37 1000000000
device 0 procutil 4343 5 999500000
device 0 nvlinks 2
device 0 nvlink 0 {tx0} 100
device 0 nvlink 1 {tx1} 100
device 0 violation 0 {power}
device 0 violation 1 0
"""


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def _sampler(clock: Clock, pcie_every_s: float = 5.0) -> NvmlSampler:
    import pynvml

    return NvmlSampler(nvml=pynvml, clock=clock, wall=lambda: 1000.0, hostname="box",
                       host_pid_namespace=False, pcie_every_s=pcie_every_s)


def test_gpm_values_land_in_the_named_fields_as_fractions_and_bytes(standin):
    standin.write(H100)
    clock = Clock()
    s = _sampler(clock)
    first = s.sample().gpus[0]
    assert first.error is None and first.name == "NVIDIA H100 80GB HBM3"
    assert first.activity_source == "gpm" and first.activity_note is None
    assert first.sm_active is None  # one sample: no window yet
    assert standin.live_samples == 1

    clock.t = 0.05  # under NVML's 100 ms: not measured, the last values stand
    assert s.sample().gpus[0].sm_active is None
    assert standin.calls("nvmlGpmMetricsGet") == 0

    clock.t = 1.0
    g = s.sample().gpus[0]
    assert g.sm_active == pytest.approx(0.235)
    assert g.sm_occupancy == pytest.approx(0.12)
    assert g.tensor_active == pytest.approx(0.08)
    assert g.dram_active == pytest.approx(0.81)
    assert g.fp16_active is None  # its own return code said NOT_SUPPORTED
    assert g.pcie_tx_bytes_s == pytest.approx(100 * MIB)
    assert g.pcie_rx_bytes_s == pytest.approx(50 * MIB)
    assert g.nvlink_rx_bytes_s == pytest.approx(2000 * MIB)
    assert g.nvlink_tx_bytes_s == pytest.approx(1000 * MIB)
    assert g.util == pytest.approx(1.0)  # busy time, beside 23.5 % SM activity
    assert standin.live_samples == 2  # the rolling window: last sample + the spare

    clock.t = 1.05  # too soon again: the same values, no new window
    again = s.sample().gpus[0]
    assert again.sm_active == pytest.approx(0.235)
    assert standin.calls("nvmlGpmMetricsGet") == 1

    assert standin.calls("nvmlDeviceGetPcieThroughput") == 2  # tx and rx, before GPM had any
    clock.t = 7.0
    g = s.sample().gpus[0]
    assert g.pcie_tx_bytes_s == pytest.approx(100 * MIB)  # GPM's, not NVML's 4096 KB/s
    assert standin.calls("nvmlDeviceGetPcieThroughput") == 2  # not asked again
    assert standin.calls("nvmlGpmMetricsGet") == 2
    assert standin.calls("nvmlGpmSampleAlloc") == 2  # two samples, reused every window
    assert standin.calls("nvmlGpmQueryDeviceSupport") == 1  # support decided once
    s.close()
    assert standin.live_samples == 0
    assert standin.calls("nvmlShutdown") == 1


def test_a100_without_gpm_names_it_and_the_older_calls_still_work(standin):
    standin.write(A100.format(tx0=1000, tx1=2000, power=0))
    clock = Clock()
    s = _sampler(clock, pcie_every_s=1.0)  # NVLink counters are read at most every 1 s
    g = s.sample().gpus[0]
    assert g.activity_note == "GPM: not supported on NVIDIA A100-SXM4-80GB"
    assert g.activity_source is None and g.sm_active is None
    assert g.util == pytest.approx(0.97)
    assert g.pcie_tx_bytes_s == pytest.approx(2048 * 1024)  # NVML's KB/s where GPM is absent
    by_pid = {p.pid: p for p in g.processes}
    assert by_pid[4242].sm_util == pytest.approx(0.37)
    assert by_pid[4343].sm_util == pytest.approx(0.05)
    assert g.nvlink_tx_bytes_s is None and g.throttle_time is None  # first read: no rate
    assert standin.live_samples == 0

    # 2 s later: 3000 KiB more sent over the links, power held the clocks for 0.5 s
    standin.write(A100.format(tx0=2000, tx1=4000, power=500_000_000))
    clock.t = 2.0
    g = s.sample().gpus[0]
    assert g.nvlink_tx_bytes_s == pytest.approx(3000 * 1024 / 2.0)
    assert g.nvlink_rx_bytes_s == pytest.approx(0.0)
    assert g.throttle_time == {"power": pytest.approx(0.25), "thermal": 0.0}
    # no sample newer than the last stamp (NOT_FOUND): the last answer is held
    assert {p.pid: p.sm_util for p in g.processes} == {4242: 0.37, 4343: 0.05}
    assert standin.calls("nvmlDeviceGetProcessUtilization") == 1

    # a counter going back is a reset: no rate, never a negative one
    standin.write(A100.format(tx0=10, tx1=20, power=600_000_000))
    clock.t = 3.0
    g = s.sample().gpus[0]
    assert g.nvlink_tx_bytes_s is None
    assert g.throttle_time["power"] == pytest.approx(0.1)

    reads = standin.calls("nvmlDeviceGetFieldValues")
    standin.write(A100.format(tx0=1010, tx1=20, power=600_000_000))
    clock.t = 3.5  # within 1 s of the last read: its rate is held, the links not read
    g = s.sample().gpus[0]
    assert g.nvlink_tx_bytes_s is None and standin.calls("nvmlDeviceGetFieldValues") == 0
    clock.t = 4.0
    g = s.sample().gpus[0]
    assert g.nvlink_tx_bytes_s == pytest.approx(1000 * 1024 / 1.0)
    assert reads > 0 and standin.calls("nvmlDeviceGetFieldValues") == 1
    s.close()


def test_not_supported_calls_leave_one_field_empty_and_are_not_asked_again(standin):
    standin.write(H100 + "device 0 fail nvmlDeviceGetPowerUsage 3\n"
                  "device 0 fail nvmlGpmQueryDeviceSupport 3\n")
    clock = Clock()
    s = _sampler(clock)
    for t in (0.0, 1.0, 2.0):
        clock.t = t
        g = s.sample().gpus[0]
    assert g.error is None and g.power_w is None
    assert g.mem_total_bytes == 85899345920
    assert g.activity_note == "GPM: not supported on NVIDIA H100 80GB HBM3"
    assert g.sm_active is None and g.activity_source is None
    assert standin.calls("nvmlDeviceGetPowerUsage") == 1
    assert standin.calls("nvmlGpmQueryDeviceSupport") == 1
    assert standin.live_samples == 0
    s.close()


def test_a_refused_sample_is_a_note_and_frees_its_samples(standin):
    standin.write(H100 + "device 0 fail nvmlGpmSampleGet 3\n")
    s = _sampler(Clock())
    g = s.sample().gpus[0]
    assert g.activity_note == "GPM: not supported on NVIDIA H100 80GB HBM3 (Not Supported)"
    assert g.activity_source is None and g.power_w == pytest.approx(350.0)
    assert standin.live_samples == 0
    s.close()


def test_a_lost_gpu_is_marked_and_its_samples_freed(standin):
    standin.write(H100)
    clock = Clock()
    s = _sampler(clock)
    s.sample()
    clock.t = 1.0
    assert s.sample().gpus[0].sm_active == pytest.approx(0.235)
    assert standin.live_samples == 2
    standin.write(H100 + "device 0 fail * 15\n")  # NVML_ERROR_GPU_IS_LOST on every call
    clock.t = 2.0
    out = s.sample()
    assert out.gpus[0].error == reasons.GPU_LOST
    assert out.error == reasons.GPU_LOST_ALL
    assert out.gpus[0].name == "NVIDIA H100 80GB HBM3"  # what we knew is kept
    assert standin.live_samples == 0
    s.close()
    assert standin.live_samples == 0


MIG = """
device 0 name NVIDIA H100 80GB HBM3
device 0 gpm 1
device 0 mig 1
device 0 gi 0 1 NVIDIA H100 80GB HBM3 MIG 3g.40gb
device 0 gimetric 1 2 40
device 0 gimetric 1 10 70
device 0 procutil 77 50 1000000000
"""


def test_mig_instances_get_their_own_gpm_window_and_are_freed_when_gone(standin):
    standin.write(MIG + "device 0 gi 1 2 NVIDIA H100 80GB HBM3 MIG 1g.10gb\n"
                  "device 0 gimetric 2 2 10\n")
    clock = Clock()
    s = _sampler(clock)
    g = s.sample().gpus[0]
    assert g.mig_mode is True and len(g.mig_instances) == 2
    assert g.activity_source == "gpm" and g.mig_activity == {}
    clock.t = 1.0
    g = s.sample().gpus[0]
    assert g.mig_activity["1"]["sm_active"] == pytest.approx(0.40)
    assert g.mig_activity["1"]["dram_active"] == pytest.approx(0.70)
    assert g.mig_activity["2"]["sm_active"] == pytest.approx(0.10)
    assert g.mig_activity["2"]["dram_active"] is None
    assert standin.live_samples == 4
    assert standin.calls("nvmlDeviceGetProcessUtilization") == 0  # not under MIG

    standin.write(MIG)  # GPU instance 2 was destroyed
    clock.t = 2.0
    g = s.sample().gpus[0]
    assert set(g.mig_activity) == {"1"}
    assert standin.live_samples == 2
    s.close()
    assert standin.live_samples == 0


def test_the_ordinary_library_search_finds_the_standin(standin_lib, tmp_path):
    """A fresh process: llmtop checks for ``libnvidia-ml.so.1`` and pynvml loads it by name,
    found through ``LD_LIBRARY_PATH`` (dlopen's documented search path)."""
    script = tmp_path / "script.txt"
    script.write_text(H100)
    code = (
        "import json; from llmtop.gpu.nvml import NvmlSampler\n"
        "s = NvmlSampler(hostname='box', host_pid_namespace=False)\n"
        "g = s.sample().gpus[0]; s.close()\n"
        "print(json.dumps([g.name, g.activity_source, g.activity_note]))\n"
    )
    env = dict(os.environ, LD_LIBRARY_PATH=str(standin_lib.parent),
               NVML_STANDIN_SCRIPT=str(script))
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == [
        "NVIDIA H100 80GB HBM3", "gpm", None]


def test_garbage_values_and_a_transient_refusal(standin):
    """A NaN or negative metric is None; a sample refused for a reason that may pass
    (``NVML_ERROR_UNKNOWN``) is a note and the window starts again next tick."""
    standin.write(H100.replace("metric 2 23.5", "metric 2 nan").replace("metric 3 12.0",
                                                                           "metric 3 -4"))
    clock = Clock()
    s = _sampler(clock)
    s.sample()
    clock.t = 1.0
    g = s.sample().gpus[0]
    assert g.sm_active is None and g.sm_occupancy is None
    assert g.dram_active == pytest.approx(0.81)

    standin.write(H100 + "device 0 fail nvmlGpmSampleGet 999\n")
    clock.t = 2.0
    g = s.sample().gpus[0]
    assert g.activity_note == "GPM: Unknown Error" and g.sm_active is None
    assert standin.live_samples == 0  # the broken window is freed

    standin.write(H100)
    for t in (3.0, 4.0):
        clock.t = t
        g = s.sample().gpus[0]
    assert g.activity_note is None and g.sm_active == pytest.approx(0.235)
    s.close()
    assert standin.live_samples == 0


def test_the_standin_is_not_what_other_tests_load_by_name(standin):
    """Loaded by its path, the stand-in must not answer a later ``dlopen`` of the driver's
    name in this process (other tests expect "library not found", or the real driver)."""
    import ctypes

    try:
        lib = ctypes.CDLL("libnvidia-ml.so.1")
    except OSError:
        return  # no driver here: the honest answer
    assert not hasattr(lib, "standin_live_samples")  # the real driver, not the stand-in
