"""The engine detail's KV transfer and KV offload tiers sections: the numbers the row has,
``–`` for a present key that is None, no section without data; at 80 columns in the TUI;
and on the demo's P/D engines (the kv-transfer stack scenario's formats)."""

from __future__ import annotations

import io
from dataclasses import replace

from rich.console import Console

from llmtop.demo import formats_vllm
from llmtop.demo.profiles import DEFAULT_PROFILE, engine_settings
from llmtop.demo.sim import Engine
from llmtop.model import EngineRow, KvTier, KvTiers, KvTransfer, Quantiles
from llmtop.ui.fake import FakeSource, demo_snapshot
from llmtop.ui.fmt import fmt_bytes
from llmtop.ui.screens.detail import EngineDetailScreen, detail_renderable
from llmtop.ui.screens.kv import kv_section
from llmtop.ui.textshot import screen_lines
from tests.stack.build import feed, store_with, target

from .conftest import first_paint, make_app

XFER = KvTransfer.of(
    time_s=Quantiles(p50=0.032, p95=0.075, mean=0.037, count=100.0),
    bytes_per_s=60e6, failures_per_s=0.2, expired_per_s=None,
    queues={"decode_prealloc": 3.0},
    prompt_tokens_by_source={"external_kv_transfer": 4950.0, "local_compute": 50.0},
    stages={"bootstrap": Quantiles(p50=0.008, p95=0.045, mean=0.016, count=10.0)})
TIERS = KvTiers.of(hit_rate=0.6, offload_bytes_per_s=400 * 2**20, load_back_bytes_per_s=None,
                   failures_per_s=0.1,
                   tiers={"1:fs": KvTier(hit_rate=0.25, offload_bytes_per_s=150 * 2**20)})


def _text(parts: list, width: int = 80) -> list[str]:
    c = Console(width=width, file=io.StringIO(), record=True)
    for p in parts:
        c.print(p)
    return [ln.rstrip() for ln in c.export_text().splitlines()]


def _row(**kv) -> EngineRow:
    return EngineRow(key="e|m", target="e", engine="vllm", model="m", state="ok", **kv)


def test_sections_show_the_numbers_the_row_has():
    lines = _text(kv_section(_row(kv_transfer=XFER, kv_tiers=TIERS)))
    words = [" ".join(ln.split()) for ln in lines]
    assert "KV transfer (window; P/D prefill → decode)" in words
    assert "time p50 / p95 / mean 32ms / 75ms / 37ms" in words
    assert "bytes 57.2M/s" in words and "failures 0.2/s" in words
    assert "expired –" in words  # present, unknown: a dash, never 0
    assert "queue decode_prealloc 3" in words
    assert "prompt tokens external_kv_transfer 5.0k/s" in words
    assert "stage bootstrap 8ms / 45ms / 16ms" in words
    assert "KV offload tiers (window)" in words
    assert "hit rate 60%" in words and "offload 400M/s" in words and "load back –" in words
    assert "tier 1:fs hit 25% · offload 150M/s" in words  # only the tier's own keys
    assert not any("usage" in w or "latency now" in w for w in words)  # keys it lacks
    assert max(map(len, lines)) <= 80


def test_no_section_without_data_and_dash_for_none():
    assert kv_section(_row()) == []
    words = [" ".join(ln.split()) for ln in _text(kv_section(_row(
        kv_transfer=KvTransfer.of(time_s=None), kv_tiers=KvTiers.of(hit_rate=None))))]
    assert "time p50 / p95 / mean –" in words and "hit rate –" in words
    body = _text([detail_renderable(_row(), {})])
    assert not any(ln.startswith("KV ") for ln in body)


async def test_detail_screen_at_80_columns():
    snap = demo_snapshot()
    snap.engines = [replace(r, kv_transfer=XFER, kv_tiers=TIERS) for r in snap.engines]
    app = make_app(source=FakeSource(snap))
    async with app.run_test(size=(80, 120)) as pilot:
        await first_paint(app, pilot)
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, EngineDetailScreen)
        lines = [ln.strip() for ln in screen_lines(app)]
        assert "KV transfer (window; P/D prefill → decode)" in lines
        assert "KV offload tiers (window)" in lines
        assert any(" ".join(ln.split()) == "time p50 / p95 / mean 32ms / 75ms / 37ms"
                   for ln in lines)


def _demo_engine(role: str) -> Engine:
    e = Engine("vllm", engine_settings("vllm"), DEFAULT_PROFILE, formats_vllm.HIST_BOUNDS,
               seed=1)
    e.kv_role = role
    return e


def test_demo_pd_engines_show_both_sections():
    """The stack demo's decode engine carries the NIXL transfer, its prefill engine the
    offloading connector (``formats_vllm``), read through the real parser and window."""
    p, d = _demo_engine("prefill"), _demo_engine("decode")
    s = store_with(target("p", 8001, "vllm"), target("d", 8002, "vllm"))
    for t in (0.0, 10.0):
        feed(s, "p", t, formats_vllm.render(p).decode())
        feed(s, "d", t, formats_vllm.render(d).decode())
        p.stats.inc("prompt_tokens", 4000)  # prefilled: stored to CPU by the connector
        d.stats.inc("prompt_tokens", 4000)
        d.stats.inc("prompt_tokens_external", 4000)
        for _ in range(20):
            d.stats.obs("nixl_xfer", 0.004)
            d.stats.obs("nixl_bytes", 4000 / 20 * DEFAULT_PROFILE.kv_bytes_per_token)
    rows = {r.target: r for r in s.snapshot(30.0).engines}
    dec = [" ".join(ln.split()) for ln in _text(kv_section(rows["d"]))]
    assert "KV transfer (window; P/D prefill → decode)" in dec
    assert any(w.startswith("time p50 / p95 / mean ") and w != "time p50 / p95 / mean –"
               for w in dec)
    assert "prompt tokens external_kv_transfer 400/s" in dec
    pre = [" ".join(ln.split()) for ln in _text(kv_section(rows["p"]))]
    per_s = 4000 * DEFAULT_PROFILE.kv_bytes_per_token / 10
    assert "KV offload tiers (window)" in pre
    assert f"offload {fmt_bytes(per_s)}/s" in pre and "load back 0B/s" in pre
    assert "time p50 / p95 / mean –" in pre  # NIXL families, no transfer in the window


def test_demo_offload_families_are_the_sources():
    """The prefill engine's offloading connector families: names, types, labels and HELP as
    vLLM's own classes render them (``tests/fixtures/stack/vllm-kv-offload-SYNTHETIC.txt``);
    plain and decode engines have none."""
    from tests.conftest import fixture_text
    from tests.demo.test_formats import helps, shape

    names = {"vllm:kv_offload_store_bytes", "vllm:kv_offload_load_bytes",
             "vllm:kv_offload_allocation_failure"}
    body = formats_vllm.render(_demo_engine("prefill")).decode()
    real = fixture_text("stack/vllm-kv-offload-SYNTHETIC.txt")
    got, want = shape(body), shape(real)
    assert {n: got[n] for n in names} == {n: want[n] for n in names}
    hb, hr = helps(body), helps(real)
    assert {n: hb[n + "_total"] for n in names} == {n: hr[n + "_total"] for n in names}
    for role in ("decode", None):
        assert not names & set(shape(formats_vllm.render(_demo_engine(role)).decode()))
