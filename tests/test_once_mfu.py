"""``--once`` and ``--once --json`` with the engines' FLOP/byte counters (a real vLLM 0.32's
text served on 127.0.0.1) and the GPU record's activity fields."""

from __future__ import annotations

import io
import json
import re

import pytest
from aiohttp import web

from llmtop.console.once_mfu import mfu_line
from llmtop.console.once_table import print_once
from llmtop.model import EngineRow, GpuRecord, Snapshot
from tests.conftest import fixture_text
from tests.test_once import serve

PAIR = ("vllm-real-cpu-v0.32.0-mfu-a.txt", "vllm-real-cpu-v0.32.0-mfu-b.txt")


def _value(text: str, name: str) -> float:
    m = re.search(rf"^vllm:{name}\{{[^}}]*\}} (\S+)$", text, re.M)
    assert m, name
    return float(m.group(1))


def _pair_server():
    texts = [fixture_text(n) for n in PAIR]
    n = {"i": 0}

    async def handler(request):
        if request.path != "/metrics":
            return web.Response(status=404)
        text = texts[min(n["i"], 1)]
        n["i"] += 1
        return web.Response(text=text, content_type="text/plain; version=0.0.4")

    return handler, texts


@pytest.mark.parametrize("peak", [None, "2,5"])
def test_once_json_has_the_achieved_rates_and_ratios(capsys, peak):
    from llmtop.cli import main

    handler, (a, b) = _pair_server()
    with serve(handler) as port:
        argv = ["--once", "--json", "--window", "0.3", f"vllm@127.0.0.1:{port}"]
        rc = main(argv + (["--gpu-peak", peak] if peak else []))
    out = capsys.readouterr()
    assert rc == 0, out.err
    doc = json.loads(out.out)
    [e] = doc["engines"]
    w = doc["window_s"]
    read = _value(b, "estimated_read_bytes_per_gpu_total") - _value(
        a, "estimated_read_bytes_per_gpu_total")
    flops = _value(b, "estimated_flops_per_gpu_total") - _value(
        a, "estimated_flops_per_gpu_total")
    # the window reported is the one asked for; the scrapes' own times differ by a few ms
    assert e["achieved_read_bytes_per_s"] * w == pytest.approx(read, rel=0.05)
    assert e["achieved_flops_per_s"] * w == pytest.approx(flops, rel=0.05)
    # over the same two scrapes, so their ratio is exact
    assert e["achieved_flops_per_s"] / e["achieved_read_bytes_per_s"] == pytest.approx(
        flops / read, rel=1e-9)
    assert e["achieved_bytes_per_s"] > e["achieved_read_bytes_per_s"]
    assert e["mfu_hint"] is None
    if peak is None:
        assert e["mbu"] is None and e["mfu"] is None and e["gpu_peak"] is None
    else:
        assert e["gpu_peak"] == {"gpu": None, "bytes_per_s": 2e9, "flops": 5e12,
                                 "source": "--gpu-peak"}
        assert e["mbu"] == pytest.approx(e["achieved_bytes_per_s"] / 2e9)
        assert e["mfu"] == pytest.approx(e["achieved_flops_per_s"] / 5e12)


def test_once_json_counters_off_says_how_to_turn_them_on(capsys):
    from llmtop.cli import main

    text = fixture_text("vllm-real-cpu-v0.32.0-calm-a.txt")

    async def handler(request):
        return web.Response(text=text, content_type="text/plain; version=0.0.4")

    with serve(handler) as port:
        rc = main(["--once", "--json", "--window", "0.2", f"vllm@127.0.0.1:{port}"])
    [e] = json.loads(capsys.readouterr().out)["engines"]
    assert rc == 0
    assert e["achieved_bytes_per_s"] is None and e["achieved_flops_per_s"] is None
    assert e["mfu_hint"] == "start vLLM with --enable-mfu-metrics"


def _row(**kw) -> EngineRow:
    base = dict(key="vllm@127.0.0.1:8000|m", target="vllm@127.0.0.1:8000", engine="vllm",
                model="m", achieved_read_bytes_per_s=1.38e9, achieved_write_bytes_per_s=2.4e7,
                achieved_bytes_per_s=1.404e9, achieved_flops_per_s=1.4e9)
    return EngineRow(**(base | kw))


def test_the_text_line():
    assert mfu_line(_row()) == (
        "  vllm@127.0.0.1:8000 [m] engine's count: read 1.38GB/s · write 24MB/s · "
        "1.4GFLOP/s · MBU – · MFU – · no GPU seen for this engine: give --gpu-peak "
        "GBPS,TFLOPS for MBU/MFU")
    line = mfu_line(_row(mbu=0.42, mfu=0.0014, gpu_peak={
        "gpu": "NVIDIA H100 80GB HBM3", "bytes_per_s": 3.35e12, "flops": 989e12,
        "source": "NVIDIA H100 datasheet (H100 SXM)"}))
    assert line.endswith("MBU 42% · MFU 0.14% of NVIDIA H100 80GB HBM3 "
                         "(NVIDIA H100 datasheet (H100 SXM))")
    assert mfu_line(_row(mfu_hint="unknown GPU X: give --gpu-peak GBPS,TFLOPS")).endswith(
        "MFU – · unknown GPU X: give --gpu-peak GBPS,TFLOPS")
    off = _row(achieved_read_bytes_per_s=None, achieved_write_bytes_per_s=None,
               achieved_bytes_per_s=None, achieved_flops_per_s=None,
               mfu_hint="start vLLM with --enable-mfu-metrics")
    assert mfu_line(off) is None  # no line: the hint is in the JSON


def test_print_once_shows_the_line_and_the_gpu_activity():
    gpus = [GpuRecord(host="h", index=0, source="nvml", name="NVIDIA H100 80GB HBM3", util=1.0,
                      sm_active=0.23, tensor_active=0.05, dram_active=0.61,
                      activity_source="gpm"),
            GpuRecord(host="h", index=1, source="nvml", name="NVIDIA A100-SXM4-80GB", util=0.9,
                      activity_note="GPM: not supported on NVIDIA A100-SXM4-80GB")]
    buf = io.StringIO()
    print_once(Snapshot(time=0.0, window_s=1.0, engines=[_row()], gpus=gpus), file=buf)
    out = buf.getvalue()
    assert "engine's count: read 1.38GB/s" in out
    assert "util 100% · SM active 23% tensor 5% DRAM 61% (gpm)" in out
    assert "util 90% · GPM: not supported on NVIDIA A100-SXM4-80GB" in out
