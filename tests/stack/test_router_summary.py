"""The vLLM router's decode-pending summary: its own p95 (the router's rolling window), shown
under its own name, never as llmtop's windowed p95."""

from __future__ import annotations

import pytest

from llmtop.parse import registry
from tests.conftest import fixture_text

from .build import feed, scaled, store_with, target

REAL = fixture_text("routers/real/vllm-router-pd.txt")
P95 = 'vllm_router_pd_decode_pending_seconds{quantile="0.95"} 0.0129494751645868'


def _rs(text):
    return registry.normalize("vllm-router", text).extra["router"]


def test_the_real_summary_p95_is_read():
    assert _rs(REAL).decode_pending_p95_router_window_s == pytest.approx(0.0129494751645868)


def test_missing_or_bad_quantile_is_none():
    assert _rs(REAL.replace(P95 + "\n", "")).decode_pending_p95_router_window_s is None
    nan = REAL.replace(P95, P95.rsplit(" ", 1)[0] + " NaN")
    assert _rs(nan).decode_pending_p95_router_window_s is None


def _row(*bodies):
    s = store_with(target("r", 35789))
    for i, body in enumerate(bodies):
        feed(s, "r", 5.0 * i, body)
    [r] = s.snapshot(10.0).routers
    return r


def test_row_keeps_the_router_window_p95_apart_from_the_windowed_one():
    r = _row(REAL, scaled(REAL, 2.0))
    lat = r.to_json()["latency"]
    assert lat["decode_pending_p95_s"] is None  # no buckets: llmtop cannot window a p95
    assert lat["decode_pending_p95_router_window_s"] == pytest.approx(0.0129494751645868)
    later = REAL.replace(P95, P95.rsplit(" ", 1)[0] + " 0.5")
    assert _row(REAL, later).decode_pending_p95_router_window_s == 0.5  # the newest value
    bare = _row(REAL.replace(P95 + "\n", ""))
    assert bare.to_json()["latency"]["decode_pending_p95_router_window_s"] is None
