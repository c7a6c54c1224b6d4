"""llama-server /slots: reduced to numbers (no prompt text), turned into in-flight requests."""

from __future__ import annotations

import json

from llmtop.config import Config, Target
from llmtop.history.store import Store
from llmtop.model import RawScrape
from llmtop.sources.slots import reduce_slots
from tests.conftest import FIXTURES

SLOTS = "\n".join((FIXTURES / "spans" / "llamacpp-slots-SYNTHETIC.txt").read_text()
                  .splitlines()[1:])
CFG = Config(targets=(Target(name="llama", base_url="http://127.0.0.1:8080",
                             engine="llamacpp"),))


def _raw(body: str | None, t: float, status: str = "ok") -> RawScrape:
    return RawScrape(target="llama", url="http://127.0.0.1:8080/slots", t_wall=t, t_mono=t,
                     status=status, body=body, kind="slots")


def test_reduce_keeps_numbers_only():
    red = reduce_slots(SLOTS)
    assert "private" not in red and "prompt\"" not in red
    a, b, c = json.loads(red)
    assert a == {"id": 0, "id_task": 41, "is_processing": True, "n_prompt_tokens": 87,
                 "n_decoded": 12, "n_remain": 52}
    assert b["is_processing"] is False and c["id_task"] is None
    for bad in ("", "<html>", '{"error": {"code": 501}}', "[1, 2]", "[[[[", None):
        assert reduce_slots(bad) is None


def test_slots_become_in_flight_requests_with_their_age():
    store = Store(CFG)
    store.ingest(_raw(reduce_slots(SLOTS), 100.0))
    store.ingest(_raw(reduce_slots(SLOTS), 103.5))
    [r] = store.requests.inflight_list()
    assert (r.id, r.slot, r.prompt_tokens, r.output_tokens, r.remaining_tokens) == (
        "41", 0, 87, 12, 52)
    assert r.age_s == 3.5  # since the first poll that saw task 41
    assert store.snapshot(10).requests_window["inflight"][0]["age_s"] == 3.5
    store.ingest(_raw("[]", 104.0))
    assert store.requests.inflight_list() == []
    store.ingest(_raw(None, 105.0, status="down"))
    store.ingest(_raw("garbage", 106.0))
    assert store.requests.slots_errors == 2
    # the /slots answers never touch the target's metrics state
    assert store.snapshot(10).engines[0].state != "bad_payload"


def test_the_real_llama_server_answer():
    real = (FIXTURES / "spans" / "llamacpp-real-11434.0.0-slots.txt").read_text()
    red = reduce_slots(real.split("\n", 1)[1])
    assert "hello" not in red  # the prompt text is gone
    store = Store(CFG)
    store.ingest(_raw(red, 10.0))
    [r] = store.requests.inflight_list()  # slot 0 holds a finished task: not in flight
    assert (r.slot, r.id, r.prompt_tokens, r.output_tokens, r.remaining_tokens) == (
        1, "414", 219, 128, 172)
