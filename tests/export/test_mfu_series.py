"""The exporter's MBU/MFU and achieved-rate series equal ``--once --json``'s fields for the
same rows (a real vLLM 0.32's counters, with and without a peak), and the GPU activity
gauges equal the GPU record's fields; what is None is absent, never 0."""

from __future__ import annotations

import pytest

from llmtop.config import Config, GpuPeak, Target
from llmtop.export.view import View, build
from llmtop.history.store import Store
from llmtop.model import GpuProcess, GpuRecord, GpuSample, RawScrape, Snapshot
from tests.conftest import fixture_text

FIELDS = {"achieved_flops_per_s": "llmtop_engine_achieved_flops_per_second",
          "achieved_read_bytes_per_s": "llmtop_engine_achieved_read_bytes_per_second",
          "achieved_write_bytes_per_s": "llmtop_engine_achieved_write_bytes_per_second",
          "achieved_bytes_per_s": "llmtop_engine_achieved_bytes_per_second",
          "mbu": "llmtop_engine_mbu_ratio", "mfu": "llmtop_engine_mfu_ratio"}
GPU = {"sm_active": "llmtop_gpu_sm_active_ratio", "sm_occupancy": "llmtop_gpu_sm_occupancy_ratio",
       "tensor_active": "llmtop_gpu_tensor_active_ratio",
       "dram_active": "llmtop_gpu_dram_active_ratio"}


def _snap(pair: tuple[str, str], peak: GpuPeak | None) -> Snapshot:
    t = Target(name="vllm@127.0.0.1:8000", base_url="http://127.0.0.1:8000",
               host="127.0.0.1", engine="vllm")
    s = Store(Config(targets=(t,), gpu_peak=peak))
    for i, name in enumerate(pair):
        s.ingest(RawScrape(target=t.name, url=t.base_url + "/metrics", t_wall=1e9 + 5 * i,
                           t_mono=5.0 * i, status="ok", http_status=200,
                           body=fixture_text(name), engine_hint="vllm"))
    gpus = [GpuRecord(host="h", index=0, source="nvml", name="NVIDIA H100 80GB HBM3",
                      sm_active=0.23, tensor_active=0.05, dram_active=0.61,
                      activity_source="gpm",
                      processes=[GpuProcess(pid=1, name="x", used_bytes=1,
                                            engine_target=t.name)]),
            GpuRecord(host="h", index=1, source="nvml", name="NVIDIA A100-SXM4-80GB",
                      activity_note="GPM: not supported on NVIDIA A100-SXM4-80GB")]
    s.ingest_gpus(GpuSample(t_wall=1e9 + 5, t_mono=5.0, gpus=gpus))
    return s.snapshot(60.0, 5.0)


def _served(snap: Snapshot, prefix: str) -> dict[tuple[str, str], float]:
    return {(s.name, s.labels.get("gpu") or s.labels.get("target")): s.value
            for m in build(View(version="t", mode="direct", snap=snap))
            for s in m.samples if s.name.startswith(prefix)}


@pytest.mark.parametrize("pair", [("vllm-real-cpu-v0.32.0-mfu-a.txt",
                                   "vllm-real-cpu-v0.32.0-mfu-b.txt"),
                                  ("vllm-real-cpu-v0.32.0-calm-a.txt",
                                   "vllm-real-cpu-v0.32.0-calm-b.txt")])
@pytest.mark.parametrize("peak", [None, GpuPeak(2e9, 5e12, "--gpu-peak")])
def test_engine_series_equal_the_json(pair, peak):
    snap = _snap(pair, peak)
    [row] = [r.to_json() for r in snap.engines]
    served = _served(snap, "llmtop_engine_")
    want = {(name, row["target"]): row[f] for f, name in FIELDS.items() if row[f] is not None}
    got = {k: v for k, v in served.items() if k[0] in FIELDS.values()}
    assert got == pytest.approx(want)
    if "calm" in pair[0]:
        assert got == {}  # the counters stay 0 without the flag: nothing pretends to measure
    else:
        assert len(got) == 6  # the H100 the engine sits on, or the override, gives MBU/MFU


def test_gpu_activity_gauges():
    snap = _snap(("vllm-real-cpu-v0.32.0-mfu-a.txt", "vllm-real-cpu-v0.32.0-mfu-b.txt"), None)
    got = {k: v for k, v in _served(snap, "llmtop_gpu_").items() if k[0] in GPU.values()}
    assert got == {("llmtop_gpu_sm_active_ratio", "0"): 0.23,
                   ("llmtop_gpu_tensor_active_ratio", "0"): 0.05,
                   ("llmtop_gpu_dram_active_ratio", "0"): 0.61}  # GPU 1: none, absent
