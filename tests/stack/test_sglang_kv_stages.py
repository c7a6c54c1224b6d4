"""SGLang's P/D stage latencies (bootstrap, KV allocation, per-stage decode waits): read into
``kv_transfer.stages`` from bucket deltas, and used as the TTFT path's transfer stage."""

from __future__ import annotations

import pytest

from llmtop.model import KvTransfer
from llmtop.model.stack import BackendRow, RouterRow
from llmtop.parse import registry
from llmtop.topology.link import link_stack
from llmtop.topology.path import ttft_path
from tests.conftest import fixture_text
from tests.diagnose.rows import healthy, q

from .build import feed, scaled, store_with, target

FIX = "stack/sglang-decode-kv-stages-SYNTHETIC.txt"


def test_stage_hists_parse_in_seconds():
    m = registry.normalize("sglang", fixture_text(FIX)).models[0]
    st = m.hists_by["kv_stage"]
    assert st["bootstrap"].sum == pytest.approx(0.32)  # 320 ms
    assert st["alloc"].count == 20.0
    assert st["decode_transferred"].sum == pytest.approx(2.8)
    assert st["decode_bootstrap"].count == 20.0
    assert "decode_waiting" not in st  # not a KV stage: the decode queue
    assert "prefill_bootstrap" not in st  # not exported by a decode instance
    assert not any(k.startswith("kv_stage") for k in m.hists)  # structure, not key prefixes
    assert m.info["kv_role"] == "decode"


def _row(*bodies):
    s = store_with(target("e", 30000, "sglang"))
    for i, body in enumerate(bodies):
        feed(s, "e", 10.0 * i, body)
    [row] = s.snapshot(30.0).engines
    return row


def test_stages_are_windowed_from_bucket_deltas_and_survive_a_reset():
    text = fixture_text(FIX)
    st = _row(text, scaled(text, 3.0)).kv_transfer.stages
    assert st["decode_transferred"].count == pytest.approx(40)  # 20 -> 60
    assert st["decode_transferred"].mean == pytest.approx(0.14)
    assert st["bootstrap"].mean == pytest.approx(0.016)
    assert st["alloc"].mean == pytest.approx(0.004)
    reset = _row(scaled(text, 3.0), text, scaled(text, 2.0)).kv_transfer.stages
    assert reset["decode_bootstrap"].count == pytest.approx(20)  # counted from the restart
    one = _row(scaled(text, 3.0), text).kv_transfer.stages
    assert one["decode_bootstrap"] is None  # one point since the restart: not known
    quiet = _row(text, text).kv_transfer.stages
    assert quiet["decode_transferred"].count == 0  # no transfer in the window: no mean
    assert quiet["decode_transferred"].mean is None


def test_engine_without_stage_series_has_no_stages():
    text = fixture_text("sglang-generated-v0.5.23-metrics_collector.txt")
    row = _row(text, text)
    assert row.kv_transfer is None or row.kv_transfer.stages is None


def _router_and_rows(dec_stages):
    p = healthy("p", queue_s=q(1.0, 2.0, 40), prefill_s=q(0.5, 0.9, 40), ttft_s=q(1.6, 3, 40))
    d = healthy("d", queue_s=q(0.01, 0.02, 40), ttft_s=q(0.4, 0.6, 40))
    d.kv_transfer = KvTransfer(stages=dec_stages)
    r = RouterRow(target="r", engine="sglang-router",
                  backends=[BackendRow("http://h:1", role="prefill", requests_per_s=1.0),
                            BackendRow("http://h:2", role="decode", requests_per_s=1.0)])
    link_stack([p, d], [r], {"p": "http://h:1", "d": "http://h:2"})
    return r, [p, d]


def test_ttft_path_transfer_from_the_decode_pool_stages():
    r, rows = _router_and_rows({"decode_bootstrap": q(0.03, 0.06, 40),
                                "decode_transferred": q(0.14, 0.3, 40)})
    stages = {s.name: s for s in ttft_path(r, rows)}
    assert stages["transfer"].seconds == pytest.approx(0.17)
    assert stages["transfer"].source == "decode pool bootstrap + KV wait"
    assert stages["first_token"].seconds == pytest.approx(0.4 - 0.01 - 0.17)
    r.decode_pending_s = q(0.2, 0.4, 40)  # the router's own number comes first
    assert {s.name: s.seconds for s in ttft_path(r, rows)}["transfer"] == pytest.approx(0.2)


def test_ttft_path_without_both_stages_has_no_transfer_from_them():
    r, rows = _router_and_rows({"decode_bootstrap": q(0.03, 0.06, 40)})
    assert "transfer" not in {s.name for s in ttft_path(r, rows)}
