"""The engine's own FLOP/byte count on a REAL vLLM 0.32 (CPU build, tiny local model) started
with ``--enable-mfu-metrics`` (``.ci/run`` starts its shared real vLLM with the flag).

Skipped unless ``LLMTOP_REAL_VLLM_URL`` points at it (failed under
``LLMTOP_REQUIRE_REAL_ENGINES=1``).

(a) Under three streaming clients, llmtop's live path (the real ``Scraper``, the store)
    gives achieved bytes/s and FLOP/s equal to the counters' own rate computed by hand from
    the same two scrapes, and the rates are of the size seen here (~1 GB/s read).

(b) Bytes per decode step against a hand computation from the model's ``config.json``. The
    server runs ``--dtype float32`` (4 bytes a value). One decode step reads the weights once
    (q, k, v, o and the three MLP matrices of every layer, plus the unembedding; the
    embedding is a lookup, not a read of the matrix) and each running request's KV cache:
    ``2 x layers x kv_heads x head_dim x 4`` bytes per token of context. For the tiny Llama
    (hidden 128, intermediate 256, 2 layers, 4 heads of 32, vocab 2048) that is 2,359,296
    bytes of weights and 2,048 bytes of KV per token.

    * Per decode step: one request alone, 200 tokens, minus one of 100 tokens (same prompt):
      the difference is 100 decode steps at contexts P+101..P+200, free of the prefill and
      of anything billed once per request. Hand: weights + KV at the mean context. The
      tolerance, 2 %, covers what vLLM's estimate adds and the hand leaves out: the
      activations each matmul reads (its input rows: ~9 KB a step here, 0.35 %) and the
      query of the attention read; measured within 0.5 % on this machine.
    * Per request: vLLM bills one scheduled step more than the tokens it returns (measured
      at 1, 2, 5, 20 and 200 tokens: always G + 1 weight reads; consistent with async
      scheduling, which schedules the next step before the request is seen to finish). Hand:
      (G + 1) weights + the KV of G steps; tolerance 3 % for the same activations plus the
      prefill's.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from llmtop.parse.vllm import normalize
from tests.real_engine.mfu_load import assert_rates_match, live_window, stream_one
from tests.real_engine.servers import need_env

pytestmark = [pytest.mark.real_engine]
MODEL = "tiny-llama"
MODEL_DIR = Path.home() / ".cache" / "llmtop" / "tiny-llama"
EST = ("est_flops", "est_read_bytes", "est_write_bytes")


@pytest.fixture(scope="module")
def url() -> str:
    u = need_env("LLMTOP_REAL_VLLM_URL", "a real vLLM started with --enable-mfu-metrics, "
                 "see scripts/real_vllm")
    if "est_read_bytes" not in _counters(u):
        pytest.fail(f"{u} does not export vllm:estimated_*: a vLLM older than 0.32?")
    return u


def _counters(url: str, text: str | None = None) -> dict[str, float]:
    body = text if text is not None else httpx.get(f"{url}/metrics", timeout=10).text
    (m,) = normalize(body).models
    return {k: m.counters[k] for k in (*EST, "generation_tokens") if k in m.counters}


def _wait_idle(url: str) -> dict[str, float]:
    last = _counters(url)
    for _ in range(120):
        asyncio.run(asyncio.sleep(0.5))
        cur = _counters(url)
        if cur == last:
            return cur
        last = cur
    raise AssertionError("the server never went idle")


def test_achieved_rates_equal_the_counters_own_rate(url):
    _wait_idle(url)
    a, b, row = live_window(url, MODEL, 3.0, clients=3)
    ca, cb = _counters(url, a.body), _counters(url, b.body)
    hand = assert_rates_match("vLLM", row, ca, cb, b.t_mono - a.t_mono)
    assert 1e8 < hand["est_read_bytes"] < 1e10  # ~0.4-1.4 GB/s seen on this CPU


def _model() -> dict[str, Any]:
    cfg = json.loads((MODEL_DIR / "config.json").read_text())
    d = cfg["hidden_size"]
    inter = cfg["intermediate_size"]
    layers = cfg["num_hidden_layers"]
    heads = cfg["num_attention_heads"]
    kv = cfg.get("num_key_value_heads", heads)
    hd = cfg.get("head_dim") or d // heads
    vocab = cfg["vocab_size"]
    dtype = 4  # the server runs --dtype float32
    per_layer = d * (heads + 2 * kv) * hd + heads * hd * d + 3 * d * inter
    weights = (layers * per_layer + d * vocab) * dtype  # + unembedding; not the embedding
    return {"weights": weights, "kv_per_token": 2 * layers * kv * hd * dtype}


def _alone(url: str, max_tokens: int) -> tuple[dict[str, float], dict]:
    before = _wait_idle(url)

    async def go() -> dict:
        async with httpx.AsyncClient(timeout=120) as client:
            return await stream_one(client, url, MODEL, max_tokens, "def main():")

    usage = asyncio.run(go())
    after = _wait_idle(url)
    return {k: after[k] - before[k] for k in after}, usage


def test_bytes_per_decode_step_agree_with_the_model_config(url):
    m = _model()
    w, kv = m["weights"], m["kv_per_token"]
    d200, u200 = _alone(url, 200)
    d100, u100 = _alone(url, 100)
    p = u200["prompt_tokens"]
    assert u200["completion_tokens"] == 200 and u100["completion_tokens"] == 100
    assert u100["prompt_tokens"] == p
    assert d200["generation_tokens"] == 200  # nothing else ran beside it
    per_step = (d200["est_read_bytes"] - d100["est_read_bytes"]) / 100
    hand_step = w + kv * (p + 150.5)  # contexts P+101..P+200
    g = 200
    hand_req = (g + 1) * w + kv * sum(p + j for j in range(1, g + 1))
    print(f"\nweights {w} B, KV {kv} B/token, prompt {p} tokens; per decode step: vLLM "
          f"{per_step:,.0f} B, hand {hand_step:,.0f} B ({per_step / hand_step - 1:+.2%}); "
          f"per 200-token request: vLLM {d200['est_read_bytes']:,.0f} B, hand {hand_req:,.0f} B "
          f"({d200['est_read_bytes'] / hand_req - 1:+.2%})")
    assert per_step == pytest.approx(hand_step, rel=0.02)
    assert d200["est_read_bytes"] == pytest.approx(hand_req, rel=0.03)
