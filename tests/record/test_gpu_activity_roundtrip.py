"""A recorded GPU sample with the activity fields (GPM, MIG, throttle time) replays equal."""

from __future__ import annotations

from llmtop.config import Config
from llmtop.model import GpuProcess, GpuRecord, GpuSample
from llmtop.record.reader import Recording
from llmtop.record.recorder import Recorder


def test_activity_fields_round_trip(tmp_path):
    g = GpuRecord(
        host="box", index=0, source="nvml", name="NVIDIA H100 80GB HBM3", util=1.0,
        sm_active=0.235, sm_occupancy=0.12, tensor_active=0.08, dram_active=0.81,
        fp16_active=None, nvlink_tx_bytes_s=1.5e9, nvlink_rx_bytes_s=2.5e9,
        activity_source="gpm", activity_note=None,
        mig_activity={"1": {"sm_active": 0.4, "dram_active": None}},
        throttle_time={"power": 0.25, "thermal": 0.0},
        processes=[GpuProcess(pid=42, name="python", used_bytes=10**9, sm_util=0.37)],
    )
    a100 = GpuRecord(host="box", index=1, source="nvml", name="NVIDIA A100-SXM4-80GB",
                     activity_note="GPM: not supported on NVIDIA A100-SXM4-80GB")
    sample = GpuSample(t_wall=1000.0, t_mono=50.0, gpus=[g, a100], cost_s=0.002)
    path = tmp_path / "r.llrec"
    rec = Recorder(path, Config(), clock=lambda: 1000.0)
    rec(sample)
    rec.close()
    back = list(Recording.open(path).items())
    assert back == [sample]
