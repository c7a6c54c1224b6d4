"""The requests screen (``r``) on spans written by the demo vLLM's encoder
(``demo/formats_spans.py``), through llmtop's own decoder and store: rows, on the demo row."""

from __future__ import annotations

import random

from llmtop.config import Config, Target
from llmtop.demo.formats_spans import SCOPE_VLLM, encode_export, vllm_resource, vllm_span
from llmtop.demo.sim import Request
from llmtop.history.store import Store
from llmtop.model import RawSpans
from llmtop.ui.fake import FROZEN_TIME, FakeSource
from llmtop.ui.screens.requests import RequestsScreen
from llmtop.ui.textshot import screen_lines

from .conftest import first_paint, make_app

TARGET = "vllm@127.0.0.1:8000"


def _request(i: int) -> Request:
    r = Request(i, 100 + 10 * i, [], 64, 20 + i, stream=True, ignore_eos=False,
                background=True, arrival=FROZEN_TIME - 30 + i)
    r.admitted_t = r.arrival + 0.01 * i
    r.first_token_t = r.admitted_t + 0.05
    r.last_token_t = r.finish_t = r.first_token_t + 0.5
    r.output = 20 + i
    return r


async def test_the_requests_screen_lists_the_demo_spans():
    rng = random.Random(3)
    spans = [vllm_span(_request(i), rng) for i in range(6)]
    body = encode_export([(vllm_resource(TARGET, 1, "i"), SCOPE_VLLM, spans)])
    store = Store(Config(targets=(Target(name=TARGET, base_url="http://127.0.0.1:8000",
                                         engine="vllm"),)))
    store.ingest_spans(RawSpans(t_wall=FROZEN_TIME, t_mono=1.0, body=body, peer="127.0.0.1"))
    app = make_app(source=FakeSource.demo("ok", requests=store.requests))
    async with app.run_test(size=(80, 24)) as pilot:
        await first_paint(app, pilot)
        await pilot.press("r")
        await pilot.pause()
        app.paint()
        await pilot.pause()
        scr = app.screen
        assert isinstance(scr, RequestsScreen)
        assert len(scr.shown) == 6 and {r.target for r in scr.shown} == {TARGET}
        assert sorted(r.prompt_tokens for r in scr.shown) == [100, 110, 120, 130, 140, 150]
        assert "6 requests in 1 min" in "\n".join(screen_lines(app))
