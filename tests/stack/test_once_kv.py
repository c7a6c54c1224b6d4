"""``--once`` text: one ``kv`` line (two past 80 columns) per engine with a KV transfer or
offload tiers, naming only the numbers the row has (``–`` for a present unknown), none for
other engines."""

from __future__ import annotations

import io

from llmtop.console.once_kv import kv_lines
from llmtop.console.once_table import print_once
from llmtop.model import EngineRow, KvTier, KvTiers, KvTransfer, Quantiles, Snapshot


def _row(target: str, **kv) -> EngineRow:
    return EngineRow(key=f"{target}|m", target=target, engine="vllm", model="m", state="ok",
                     **kv)


SNAP = Snapshot(time=0.0, window_s=10.0, engines=[
    _row("127.0.0.1:8002", kv_transfer=KvTransfer.of(time_s=Quantiles(p50=0.03, p95=0.075),
                                                     bytes_per_s=60e6, failures_per_s=0.2,
                                                     expired_per_s=None),
         kv_tiers=KvTiers(hit_rate=0.6, offload_tokens_per_s=4000.0)),
    _row("127.0.0.1:8003", kv_tiers=KvTiers.of(offload_bytes_per_s=4e8,
                                               load_back_bytes_per_s=None,
                                               tiers={"1:fs": KvTier()})),
    _row("127.0.0.1:8004")])


def test_one_line_per_engine_with_kv():
    assert kv_lines(SNAP) == [
        "  kv 127.0.0.1:8002: xfer p95 75ms · 60MB/s · fail 0.2/s · exp –",
        "  kv 127.0.0.1:8002: tiers hit 60% · out 4k tok/s",  # one line would pass 80
        "  kv 127.0.0.1:8003: tiers out 400MB/s · back – · 1 tier"]
    short = Snapshot(time=0.0, window_s=10.0, engines=[_row(
        "b:1", kv_transfer=KvTransfer(failures_per_s=0.0), kv_tiers=KvTiers.of(hit_rate=None))])
    assert kv_lines(short) == ["  kv b:1: xfer fail 0/s | tiers hit –"]
    assert all(len(ln) <= 80 for ln in kv_lines(SNAP))


def test_printed_under_the_table():
    out = io.StringIO()
    print_once(SNAP, file=out)
    text = out.getvalue()
    assert "kv 127.0.0.1:8002: xfer p95 75ms" in text and "kv 127.0.0.1:8004" not in text
    assert kv_lines(Snapshot(time=0.0, window_s=1.0, engines=[_row("x")])) == []
