"""The engines' own FLOP/byte counters: parsed, made per-GPU rates, divided by the GPU's peak.

Real text: a real vLLM 0.32 (CPU) with ``--enable-mfu-metrics`` under load (the ``mfu`` pair,
5 s apart) and without the flag (the ``calm`` pair: the counters exist and stay 0).
"""

from __future__ import annotations

import re

import pytest

from llmtop.config import Config, GpuPeak, Target
from llmtop.gpu.peaks import parse_gpu_peak
from llmtop.history.derive import MFU_HINTS, derive_window
from llmtop.history.rows import fill_ratios
from llmtop.history.store import Store
from llmtop.model import EngineRow, GpuProcess, GpuRecord, GpuSample, ModelSample, RawScrape
from llmtop.parse import sglang, vllm
from tests.conftest import fixture_text

T = Target(name="vllm@127.0.0.1:8000", base_url="http://127.0.0.1:8000", host="127.0.0.1",
           engine="vllm")
MFU = ("vllm-real-cpu-v0.32.0-mfu-a.txt", "vllm-real-cpu-v0.32.0-mfu-b.txt")
CALM = ("vllm-real-cpu-v0.32.0-calm-a.txt", "vllm-real-cpu-v0.32.0-calm-b.txt")
GAP_S = 5.0  # the two scrapes of each pair were taken 5 s apart


def _counters(name: str) -> dict[str, float]:
    (m,) = vllm.normalize(fixture_text(name)).models
    return {k: v for k, v in m.counters.items() if k.startswith("est_")}


def _store(pair: tuple[str, str], *, target: Target = T, gpus=(), **cfg) -> Store:
    store = Store(Config(targets=(target,), **cfg))
    for i, name in enumerate(pair):
        store.ingest(RawScrape(target=target.name, url=target.base_url + "/metrics",
                               t_wall=1_800_000_000.0 + GAP_S * i, t_mono=GAP_S * i,
                               status="ok", http_status=200, body=fixture_text(name),
                               engine_hint=target.engine))
    if gpus:
        store.ingest_gpus(GpuSample(t_wall=1_800_000_005.0, t_mono=GAP_S, gpus=list(gpus)))
    return store


def _row(store: Store) -> EngineRow:
    (row,) = store.snapshot(60.0, GAP_S).engines
    return row


def _gpu(name: str, owner: str | None = T.name, index: int = 0) -> GpuRecord:
    return GpuRecord(host="h", index=index, source="nvml", name=name,
                     processes=[GpuProcess(pid=4711, name="VLLM::EngineCore", used_bytes=1,
                                           engine_target=owner)])


def test_vllm_counters_parsed_from_the_real_text():
    assert _counters(MFU[0]) == {"est_flops": 1.2149003264e10,
                                 "est_read_bytes": 8.363410432e09,
                                 "est_write_bytes": 2.03966464e08}
    assert _counters(CALM[0]) == {"est_flops": 0.0, "est_read_bytes": 0.0,
                                  "est_write_bytes": 0.0}  # without the flag: 0, kept


def test_achieved_rates_are_the_counters_own_rate_and_no_gpu_gives_no_ratio():
    a, b = _counters(MFU[0]), _counters(MFU[1])
    row = _row(_store(MFU))
    assert row.achieved_flops_per_s == pytest.approx((b["est_flops"] - a["est_flops"]) / GAP_S)
    read = (b["est_read_bytes"] - a["est_read_bytes"]) / GAP_S
    write = (b["est_write_bytes"] - a["est_write_bytes"]) / GAP_S
    assert row.achieved_read_bytes_per_s == pytest.approx(read)
    assert row.achieved_write_bytes_per_s == pytest.approx(write)
    assert row.achieved_bytes_per_s == pytest.approx(read + write)
    assert 1.3e9 < read < 1.5e9  # ~1.38 GB/s read under 3 streams on this CPU
    # no GPU on this machine and no --gpu-peak: the rates stand, the ratios are unknown
    assert row.mbu is None and row.mfu is None and row.gpu_peak is None
    assert row.mfu_hint is None
    js = row.to_json()
    assert js["achieved_bytes_per_s"] == pytest.approx(read + write) and js["mbu"] is None


def test_the_gpu_the_engine_sits_on_gives_the_peak():
    row = _row(_store(MFU, gpus=[_gpu("NVIDIA H100 80GB HBM3"),
                                 _gpu("NVIDIA A100-SXM4-40GB", owner=None, index=1)]))
    assert row.gpu_peak == {"gpu": "NVIDIA H100 80GB HBM3", "bytes_per_s": 3350e9,
                            "flops": 989e12, "source": "NVIDIA H100 datasheet (H100 SXM)"}
    assert row.mbu == pytest.approx(row.achieved_bytes_per_s / 3350e9)
    assert row.mfu == pytest.approx(row.achieved_flops_per_s / 989e12)


def test_gpu_peak_override_wins_even_without_a_gpu():
    peak = parse_gpu_peak("2,5")  # 2 GB/s, 5 TFLOP/s
    row = _row(_store(MFU, gpu_peak=peak))
    assert row.gpu_peak == {"gpu": None, "bytes_per_s": 2e9, "flops": 5e12,
                            "source": "--gpu-peak"}
    assert row.mbu == pytest.approx(row.achieved_bytes_per_s / 2e9)
    assert 0.6 < row.mbu < 0.8


def test_unknown_gpu_says_give_gpu_peak():
    row = _row(_store(MFU, gpus=[_gpu("NVIDIA GeForce RTX 4090")]))
    assert row.mbu is None and row.mfu is None and row.gpu_peak is None
    assert row.mfu_hint == ("unknown GPU NVIDIA GeForce RTX 4090: "
                            "give --gpu-peak GBPS,TFLOPS")
    assert row.achieved_bytes_per_s is not None  # the rates are still shown


def test_bandwidth_only_row_gives_mbu_not_mfu():
    row = _row(_store(MFU, gpus=[_gpu("NVIDIA A10G")]))
    assert row.mbu == pytest.approx(row.achieved_bytes_per_s / 600e9)
    assert row.mfu is None


def test_counters_at_zero_are_off_not_a_measure_and_say_how_to_turn_them_on():
    row = _row(_store(CALM, gpus=[_gpu("NVIDIA H100 80GB HBM3")]))
    assert row.generation_tokens_per_s and row.generation_tokens_per_s > 0  # it was busy
    assert row.achieved_flops_per_s is None and row.achieved_bytes_per_s is None
    assert row.achieved_read_bytes_per_s is None and row.achieved_write_bytes_per_s is None
    assert row.mbu is None and row.mfu is None
    assert row.mfu_hint == "start vLLM with --enable-mfu-metrics"


def test_a_vllm_without_the_metric_gets_the_hint_other_engines_do_not():
    old = ("edge-vllm-v1-0.7-era.txt", "edge-vllm-v1-0.7-era.txt")
    assert "est_flops" not in vllm.normalize(fixture_text(old[0])).models[0].counters
    assert _row(_store(old)).mfu_hint == "start vLLM with --enable-mfu-metrics"
    ll = Target(name="llamacpp@127.0.0.1:8080", base_url="http://127.0.0.1:8080",
                host="127.0.0.1", engine="llamacpp")
    pair = ("llamacpp-real-b0-sdist-11434.0.0-under-load.txt",) * 2
    row = _row(_store(pair, target=ll))
    assert row.mfu_hint is None and row.achieved_bytes_per_s is None


def _ms(flops: float, read: float, write: float) -> ModelSample:
    return ModelSample("m", counters={"est_flops": flops, "est_read_bytes": read,
                                      "est_write_bytes": write})


def test_a_counter_reset_never_gives_a_negative_rate():
    w = derive_window([(0.0, _ms(100.0, 1000.0, 10.0)), (1.0, _ms(200.0, 2000.0, 20.0)),
                       (2.0, _ms(5.0, 50.0, 1.0)), (3.0, _ms(15.0, 150.0, 2.0))])
    assert w.achieved == {"achieved_flops_per_s": 10.0, "achieved_read_bytes_per_s": 100.0,
                          "achieved_write_bytes_per_s": 1.0}  # only after the reset
    w = derive_window([(0.0, _ms(100.0, 1000.0, 10.0)), (1.0, _ms(5.0, 50.0, 1.0))])
    assert all(v is None for v in w.achieved.values())  # one point after it: unknown


def test_ranks_get_their_own_ratios_and_the_row_their_mean():
    row = EngineRow(key="t|m", target="t", engine="vllm", model="m")
    ranks = []
    for i, (f, r) in enumerate(((4e12, 1e12), (2e12, 3e12))):
        rr = EngineRow(key=f"t|m|{i}", target="t", engine="vllm", model="m", rank=str(i),
                       achieved_flops_per_s=f, achieved_read_bytes_per_s=r,
                       achieved_write_bytes_per_s=0.0, achieved_bytes_per_s=r)
        ranks.append(rr)
    row.ranks = ranks
    row.achieved_flops_per_s, row.achieved_bytes_per_s = 6e12, 4e12  # the sum over ranks
    row.achieved_read_bytes_per_s, row.achieved_write_bytes_per_s = 4e12, 0.0
    fill_ratios([row], [], GpuPeak(bytes_per_s=4e12, flops=10e12, source="test"))
    assert [rr.mbu for rr in ranks] == [0.25, 0.75]
    assert row.achieved_bytes_per_s == 2e12 and row.mbu == 0.5
    assert row.achieved_flops_per_s == 3e12 and row.mfu == pytest.approx(0.3)


def test_sglang_counters_and_their_absence():
    text = fixture_text("sglang-real-cpu-v0.5.23-under-load.txt")
    (m,) = sglang.normalize(text).models
    assert not any(k.startswith("est_") for k in m.counters)  # --enable-mfu-metrics off
    (m,) = sglang.normalize(text, identity={"sglang": {"enable_mfu_metrics": True}}).models
    assert {k: v for k, v in m.counters.items() if k.startswith("est_")} == {
        "est_flops": 0.0, "est_read_bytes": 0.0, "est_write_bytes": 0.0}  # on, idle so far
    assert MFU_HINTS["sglang"] == "start SGLang with --enable-metrics --enable-mfu-metrics"


def test_sglang_real_pair_gives_rates():
    sg = Target(name="sglang@127.0.0.1:30000", base_url="http://127.0.0.1:30000",
                host="127.0.0.1", engine="sglang")
    pair = ("sglang-real-cpu-v0.5.23-mfu-a.txt", "sglang-real-cpu-v0.5.23-mfu-b.txt")
    a, b = ((m.counters for m in sglang.normalize(fixture_text(n)).models) for n in pair)
    (a,), (b,) = a, b
    row = _row(_store(pair, target=sg))
    assert row.achieved_read_bytes_per_s == pytest.approx(
        (b["est_read_bytes"] - a["est_read_bytes"]) / GAP_S)
    assert row.achieved_flops_per_s == pytest.approx((b["est_flops"] - a["est_flops"]) / GAP_S)
    assert row.mfu_hint is None and row.mbu is None


def test_nan_and_garbage_counters_are_not_a_measure():
    b = fixture_text(MFU[1])
    nan_b = re.sub(r"^(vllm:estimated_read_bytes_per_gpu_total\{[^}]*\}) \S+$", r"\1 NaN", b,
                   flags=re.M)
    store = _store(MFU)
    store.ingest(RawScrape(target=T.name, url=T.base_url + "/metrics", t_wall=1_800_000_010.0,
                           t_mono=10.0, status="ok", http_status=200, body=nan_b,
                           engine_hint="vllm"))
    (row,) = store.snapshot(60.0, 10.0).engines
    assert row.achieved_read_bytes_per_s is None and row.achieved_bytes_per_s is None
    assert row.achieved_flops_per_s is not None and row.mbu is None
    garbage = re.sub(r"^(vllm:estimated_flops_per_gpu_total\{[^}]*\}) \S+$", r"\1 12GB", b,
                     flags=re.M)
    store.ingest(RawScrape(target=T.name, url=T.base_url + "/metrics", t_wall=1_800_000_011.0,
                           t_mono=11.0, status="ok", http_status=200, body=garbage,
                           engine_hint="vllm"))
    (row,) = store.snapshot(60.0, 11.0).engines
    assert row.state == "bad_payload" and row.error  # a clear state, not a traceback


def test_an_engine_that_has_served_nothing_is_not_told_its_flag_is_off():
    """Counters at 0 before the first request cannot tell "off" from "nothing to count yet"
    (a vLLM started with --enable-mfu-metrics that has served nothing): the hint says both;
    once tokens were generated, 0 counters mean off."""
    from llmtop.history.rows import fill_achieved

    row = EngineRow(key="k", target=T.name, engine="vllm")
    fill_achieved(row, {}, served=0.0)
    assert row.mfu_hint == ("none counted yet (nothing served since start); if they stay "
                            "\u2013: start vLLM with --enable-mfu-metrics")
    fill_achieved(row, {}, served=12.0)
    assert row.mfu_hint == "start vLLM with --enable-mfu-metrics"
    fill_achieved(row, {}, served=None)  # the engine does not say: the plain hint
    assert row.mfu_hint == "start vLLM with --enable-mfu-metrics"


def test_a_real_sglang_without_the_flag_gets_the_hint_and_an_idle_one_that_counts_none():
    """Off and idle told apart on text captured from the real SGLang 0.5.23: without
    --enable-mfu-metrics (no series; it has served tokens) the row says how to turn them on;
    with it, counters that stand still are 0 B/s and 0 FLOP/s, with no hint."""
    sg = Target(name="sglang@127.0.0.1:30000", base_url="http://127.0.0.1:30000",
                host="127.0.0.1", engine="sglang")
    row = _row(_store(("sglang-real-cpu-v0.5.23-under-load.txt",) * 2, target=sg))
    assert row.engine == "sglang" and row.requests_per_s == 0.0  # scraped, idle in between
    assert row.achieved_bytes_per_s is None and row.achieved_flops_per_s is None
    assert row.mfu_hint == "start SGLang with --enable-metrics --enable-mfu-metrics"
    row = _row(_store(("sglang-real-cpu-v0.5.23-mfu-b.txt",) * 2, target=sg))
    assert row.achieved_bytes_per_s == 0.0 and row.achieved_flops_per_s == 0.0
    assert row.mfu_hint is None


def test_an_sglang_that_says_it_counts_is_idle_not_off_before_its_first_count():
    """SGLang started with the flag and --skip-server-warmup, before any request or /health
    (each runs a forward pass and creates the series): no series yet, but ``/server_info``
    says ``enable_mfu_metrics: true``. That is 0 B/s with no hint, not "start SGLang with"."""
    from llmtop.history.rows import fill_achieved

    text = fixture_text("sglang-real-cpu-v0.5.23-under-load.txt")  # no estimated_* series
    (m,) = sglang.normalize(text, identity={"sglang": {"enable_mfu_metrics": True}}).models
    w = derive_window([(0.0, m), (1.0, m)])
    assert w.achieved == {"achieved_flops_per_s": 0.0, "achieved_read_bytes_per_s": 0.0,
                          "achieved_write_bytes_per_s": 0.0}
    row = EngineRow(key="k", target="t", engine="sglang")
    fill_achieved(row, w.achieved, served=None)  # generation_tokens_total absent until then
    assert row.achieved_bytes_per_s == 0.0 and row.mfu_hint is None
    for ident in ({"sglang": {"enable_mfu_metrics": False}}, None):
        (m,) = sglang.normalize(text, identity=ident).models
        assert derive_window([(0.0, m), (1.0, m)]).achieved == {}  # off, or not known: off
