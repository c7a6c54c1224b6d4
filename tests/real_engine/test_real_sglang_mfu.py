"""The engine's own FLOP/byte count on a REAL SGLang 0.5.23 (CPU, tiny local model) started
with ``--enable-metrics --enable-mfu-metrics`` (``.ci/run``'s real-SGLang step starts its
server with both).

Skipped unless ``LLMTOP_REAL_SGLANG_URL`` points at it (failed under
``LLMTOP_REQUIRE_REAL_ENGINES=1``).

(a) Under three streaming clients, llmtop's live path (the real ``Monitor``/``Scraper``, the
    store) gives achieved bytes/s and FLOP/s equal to the counters' own rate computed by hand
    from the same two scrapes, and no hint.

(b) Idle and off told apart. An idle SGLang that counts (its counters stand still) reads
    0 B/s and 0 FLOP/s with no hint; a second real SGLang started without
    ``--enable-mfu-metrics`` (it exports no ``sglang:estimated_*`` series; ``/server_info``
    says ``enable_mfu_metrics: false``) reads ``None`` with the hint naming the flags. That
    one starts its own server (30-55 s here), so it runs only with
    ``LLMTOP_REAL_SGLANG_INCIDENTS=1`` (``.ci/run``'s SGLang incidents step, whose tests
    each start their own); ``tests/history/test_mfu.py`` checks the same hint on text
    captured from a real SGLang without the flag.

(c) Bytes per decode step against ``config.json``. SGLang's estimate
    (``srt/managers/scheduler_components/metrics_reporter.py``, ``_estimate_decode_perf``)
    is analytic and differs from the physical count that vLLM's test checks:

    * it bills the weights **per token**, not per step: a decode step of a batch of B reads
      B x the layer weights (the GPU reads them once);
    * its weights are the layers' q, k, v, o and three MLP matrices only: no unembedding
      (lm_head; here 1 MiB of the model's 2.25 MiB, in an 8B model ~6 %);
    * it adds activation bytes per token: ``hidden + (heads + 2 kv) head_dim + heads head_dim
      + hidden`` values a layer for q/k/v/o, plus the decode query (``heads head_dim`` a
      layer);
    * KV: ``2 x layers x kv_heads x head_dim x 4`` bytes (float32) for each token of every
      running request's context (``seq_lens``; the k-th decode step of a P-token prompt has
      P + k).

    One request alone, 200 tokens minus 100 tokens (same prompt, prefix cached for both):
    100 decode steps at contexts P+100..P+199. Their bytes equal that formula computed from
    ``config.json`` to 0.1 % (measured: exact, it is the same arithmetic in floats), and are
    the physical count (weights with the unembedding, read once, plus KV) less the
    unembedding plus the activations. Four such requests at once bill exactly four times one
    alone (to 1 %): the weights per token, so at batch B SGLang's bytes (and an MBU from them)
    count B x the weights a GPU reads.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path

import httpx
import pytest

from llmtop.history.derive import MFU_HINTS
from llmtop.parse.exposition import parse
from tests.real_engine.incidents import served
from tests.real_engine.mfu_load import assert_rates_match, live_window, stream_one
from tests.real_engine.servers import need_env

pytestmark = [pytest.mark.real_engine]
MODEL = "tiny-llama"
MODEL_DIR = Path.home() / ".cache" / "llmtop" / "tiny-llama"
EST = {"est_flops": "sglang:estimated_flops_per_gpu",
       "est_read_bytes": "sglang:estimated_read_bytes_per_gpu",
       "est_write_bytes": "sglang:estimated_write_bytes_per_gpu"}


@pytest.fixture(scope="module")
def url() -> str:
    u = need_env("LLMTOP_REAL_SGLANG_URL", "a real SGLang started with --enable-mfu-metrics, "
                 "see scripts/real_sglang and .ci/run")
    info = httpx.get(f"{u}/server_info", timeout=10).json()
    if info.get("enable_mfu_metrics") is not True:
        pytest.fail(f"{u} was started without --enable-mfu-metrics (/server_info says "
                    f"{info.get('enable_mfu_metrics')!r})")
    return u


def _counters(url: str, text: str | None = None) -> dict[str, float]:
    """The server's own counters, summed over their series, from the exposition text."""
    body = text if text is not None else httpx.get(f"{url}/metrics", timeout=10).text
    fams = parse(body)

    def total(family: str) -> float:
        fam = fams.get(family)
        return sum(s.value for s in fam.samples if s.name == family + "_total") if fam else 0.0

    out = {k: total(f) for k, f in EST.items()}
    out["generation_tokens"] = total("sglang:generation_tokens")
    return out


def _wait_idle(url: str) -> dict[str, float]:
    last = _counters(url)
    for _ in range(240):
        time.sleep(0.25)
        cur = _counters(url)
        if cur == last:
            return cur
        last = cur
    raise AssertionError("the server never went idle")


def test_achieved_rates_equal_the_counters_own_rate(url):
    _wait_idle(url)
    a, b, row = live_window(url, MODEL, 3.0, clients=3)
    assert row.engine == "sglang" and row.model == MODEL and row.state == "ok"
    ca, cb = _counters(url, a.body), _counters(url, b.body)
    hand = assert_rates_match("SGLang", row, ca, cb, b.t_mono - a.t_mono)
    assert 1e8 < hand["est_read_bytes"] < 1e10  # ~0.5-1 GB/s seen on this CPU


def test_idle_while_counting_reads_zero_with_no_hint(url):
    _wait_idle(url)
    a, b, row = live_window(url, MODEL, 1.0)
    assert _counters(url, a.body) == _counters(url, b.body)  # idle: nothing moved
    assert _counters(url, b.body)["est_read_bytes"] > 0  # it has counted (warm-up, tests)
    assert row.engine == "sglang"
    assert row.achieved_read_bytes_per_s == 0.0 and row.achieved_flops_per_s == 0.0
    assert row.achieved_bytes_per_s == 0.0 and row.mfu_hint is None
    assert row.info.get("enable_mfu_metrics") == "true"  # /server_info, read by the monitor


@pytest.mark.skipif(os.environ.get("LLMTOP_REAL_SGLANG_INCIDENTS") != "1", reason=(
    "starts its own SGLang (~30-55 s here): set LLMTOP_REAL_SGLANG_INCIDENTS=1 after "
    "scripts/real_sglang/setup.sh (.ci/run's real SGLang incidents step)"))
def test_started_without_the_flag_says_how_to_turn_it_on(tmp_path):
    """A second real SGLang, started without ``--enable-mfu-metrics``: no
    ``sglang:estimated_*`` series, ``/server_info`` says so, and the row is ``None`` with
    the hint naming the flags (it has served tokens, so not "none counted yet")."""
    with served("scripts/real_sglang/serve.sh", tmp_path / "off", "--max-running-requests",
                "4") as state:
        off = (state / "url").read_text().strip()
        assert httpx.get(f"{off}/server_info", timeout=10).json()["enable_mfu_metrics"] is False

        async def serve_some() -> dict:
            async with httpx.AsyncClient(timeout=120) as client:
                return await stream_one(client, off, MODEL, 8)

        assert asyncio.run(serve_some())["completion_tokens"] == 8
        _wait_idle(off)
        assert "sglang:estimated_" not in httpx.get(f"{off}/metrics", timeout=10).text
        _, _, row = live_window(off, MODEL, 1.0)
    assert row.engine == "sglang" and row.state == "ok"
    assert row.generation_tokens_per_s is not None  # scraped and derived, not a dead row
    assert row.achieved_read_bytes_per_s is None and row.achieved_flops_per_s is None
    assert row.achieved_bytes_per_s is None
    assert row.mfu_hint == MFU_HINTS["sglang"] == (
        "start SGLang with --enable-metrics --enable-mfu-metrics")


def _model() -> dict[str, float]:
    """SGLang 0.5.23's per-token terms (``_init_estimated_perf_constants``) and the
    physical weights, from ``config.json``; the server runs ``--dtype float32``."""
    cfg = json.loads((MODEL_DIR / "config.json").read_text())
    d, inter = cfg["hidden_size"], cfg["intermediate_size"]
    layers, heads = cfg["num_hidden_layers"], cfg["num_attention_heads"]
    kv = cfg.get("num_key_value_heads", heads)
    hd = cfg.get("head_dim") or d // heads
    b = 4  # float32
    layer_w = (d * hd * (heads + 2 * kv) + d * hd * heads + 3 * d * inter) * b * layers
    act = ((d + (heads + 2 * kv) * hd + hd * heads + d) + heads * hd) * b * layers
    return {"layer_weights": layer_w, "unembedding": d * cfg["vocab_size"] * b,
            "act": act, "kv_per_token": 2 * layers * kv * hd * b}


def _run(url: str, n: int, max_tokens: int) -> tuple[dict[str, float], list[dict]]:
    before = _wait_idle(url)

    async def go() -> list[dict]:
        async with httpx.AsyncClient(timeout=120) as client:
            return await asyncio.gather(*(stream_one(client, url, MODEL, max_tokens)
                                          for _ in range(n)))

    usages = asyncio.run(go())
    after = _wait_idle(url)
    return {k: after[k] - before[k] for k in after}, usages


def test_bytes_per_decode_step_against_the_model_config(url):
    m = _model()
    _run(url, 1, 1)  # the prompt is in the prefix cache for every request below
    d200, (u200,) = _run(url, 1, 200)
    d100, (u100,) = _run(url, 1, 100)
    d4x100, u4 = _run(url, 4, 100)
    p = u200["prompt_tokens"]
    assert u200["completion_tokens"] == 200 and u100["completion_tokens"] == 100
    assert u100["prompt_tokens"] == p and [u["completion_tokens"] for u in u4] == [100] * 4
    assert d200["generation_tokens"] == 200  # nothing else ran beside it
    per_step = (d200["est_read_bytes"] - d100["est_read_bytes"]) / 100
    mean_ctx = p + 149.5  # decode steps 100..199 of the 200-token request: contexts P+k
    sglang_hand = m["layer_weights"] + m["act"] + m["kv_per_token"] * mean_ctx
    physical = m["layer_weights"] + m["unembedding"] + m["kv_per_token"] * mean_ctx
    ratio4 = d4x100["est_read_bytes"] / d100["est_read_bytes"]
    print(f"\nlayer weights {m['layer_weights']:,} B, unembedding {m['unembedding']:,} B, "
          f"activations {m['act']:,} B/token, KV {m['kv_per_token']:,} B/token, prompt {p}; "
          f"per decode step: SGLang {per_step:,.0f} B, its formula {sglang_hand:,.0f} B "
          f"({per_step / sglang_hand - 1:+.3%}), physical {physical:,.0f} B "
          f"({per_step / physical - 1:+.1%}); 4 requests at once / 1 alone: {ratio4:.4f}")
    assert per_step == pytest.approx(sglang_hand, rel=1e-3)
    assert per_step - m["act"] + m["unembedding"] == pytest.approx(physical, rel=1e-3)
    assert ratio4 == pytest.approx(4.0, rel=0.01)  # weights billed per token, not per step
