"""The engines' FLOP/byte counters are in the recorded scrapes and the GPU activity in the
recorded GPU samples: a replay gives the same achieved rates, MBU/MFU and GPU fields as live."""

from __future__ import annotations

import asyncio
import dataclasses
import json

import pytest

from llmtop.config import Config, GpuPeak, Target
from llmtop.model import GpuProcess, GpuRecord, GpuSample, RawScrape
from llmtop.monitor import Monitor
from llmtop.once import snapshot_json
from llmtop.record.live import RecordingMonitor
from llmtop.record.reader import Recording
from llmtop.record.recorder import Recorder
from llmtop.record.replay import snapshot_at
from tests.conftest import fixture_text
from tests.monitor_fakes import FakeSamplerBase, FakeScraperBase

TARGET = Target(name="vllm@127.0.0.1:9", base_url="http://127.0.0.1:9", engine="vllm",
                host="127.0.0.1", port=9)
CONFIG = Config(targets=(TARGET,), discover=False)
TEXTS = [fixture_text(f"vllm-real-cpu-v0.32.0-mfu-{p}.txt") for p in "ab"]


class Scraper(FakeScraperBase):
    """The real vLLM pair with the flag on: a, then b."""

    def __init__(self) -> None:
        self.n = 0

    async def scrape(self, target: Target) -> RawScrape:
        self.n += 1
        return RawScrape(target=target.name, url=target.base_url + "/metrics",
                         t_wall=1_800_000_000.0 + 5 * self.n, t_mono=100.0 + 5 * self.n,
                         status="ok", http_status=200, content_type="text/plain",
                         body=TEXTS[min(self.n, 2) - 1], engine_hint="vllm")

    async def identify(self, target: Target) -> dict:
        return {"version": "0.32.0", "host": "127.0.0.1"}

    async def aclose(self) -> None:
        return None


class Sampler(FakeSamplerBase):
    """One H100 the engine sits on, with GPM-shaped activity."""

    def sample(self) -> GpuSample:
        g = GpuRecord(host="h", index=0, source="nvml", name="NVIDIA H100 80GB HBM3",
                      sm_active=0.23, sm_occupancy=0.11, tensor_active=0.05, dram_active=0.61,
                      activity_source="gpm",
                      processes=[GpuProcess(pid=7, name="VLLM::EngineCore", used_bytes=1,
                                            engine_target=TARGET.name, sm_util=0.9)])
        return GpuSample(t_wall=1_800_000_000.0, t_mono=100.0, gpus=[g])


async def _live(path, config: Config = CONFIG, sampler: Sampler | None = None) -> dict:
    rec = Recorder(path, config)
    mon = RecordingMonitor(Monitor(config, scraper=Scraper(),
                                   gpu_sampler=sampler or Sampler()), rec)
    await mon.tick()
    first = mon.store.now_mono
    await mon.tick()
    snap = mon.store.snapshot(round(mon.store.now_mono - first, 3))
    await mon.aclose()
    return json.loads(snapshot_json(snap))


def test_replay_gives_the_same_achieved_rates(tmp_path):
    path = tmp_path / "mfu.llrec"
    live = asyncio.run(_live(path))
    [row] = live["engines"]
    assert row["achieved_read_bytes_per_s"] == pytest.approx(1.38e9, rel=0.01)
    assert row["mbu"] is not None and row["gpu_peak"]["gpu"] == "NVIDIA H100 80GB HBM3"
    [g] = live["gpus"]
    assert (g["sm_active"], g["dram_active"], g["activity_source"]) == (0.23, 0.61, "gpm")
    assert g["processes"][0]["sm_util"] == 0.9
    rec = Recording.open(path)
    replayed = json.loads(snapshot_json(snapshot_at(rec, rec.end, live["window_s"])))
    assert replayed["engines"] == live["engines"]
    assert replayed["gpus"] == live["gpus"]


class NoGpu(Sampler):
    def sample(self) -> GpuSample:
        return GpuSample(t_wall=1_800_000_000.0, t_mono=100.0, gpus=[], error="no GPU here")


def test_the_recording_keeps_its_gpu_peak(tmp_path):
    path = tmp_path / "peak.llrec"
    peak = GpuPeak(2e9, 5e12, "--gpu-peak")
    live = asyncio.run(_live(path, dataclasses.replace(CONFIG, gpu_peak=peak), NoGpu()))
    [row] = live["engines"]
    assert row["gpu_peak"]["source"] == "--gpu-peak" and row["mbu"] is not None
    rec = Recording.open(path)
    assert rec.header["gpu_peak"] == {"bytes_per_s": 2e9, "flops": 5e12, "source": "--gpu-peak"}
    replayed = json.loads(snapshot_json(snapshot_at(rec, rec.end, live["window_s"])))
    assert replayed["engines"] == live["engines"]  # no GPU in the recording: the same peak
    other = Config(gpu_peak=GpuPeak(4e9, None, "--gpu-peak"))  # replay --gpu-peak wins
    [r2] = json.loads(snapshot_json(snapshot_at(rec, rec.end, live["window_s"], other)))[
        "engines"]
    assert r2["mbu"] == pytest.approx(row["mbu"] / 2) and r2["mfu"] is None
    rec.header["gpu_peak"] = {"bytes_per_s": "fast", "flops": -1}  # damaged: ignored
    [r3] = json.loads(snapshot_json(snapshot_at(rec, rec.end, live["window_s"])))["engines"]
    assert r3["gpu_peak"] is None and r3["mbu"] is None and r3["achieved_bytes_per_s"]
