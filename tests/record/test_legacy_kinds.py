"""Recordings made before ``RawScrape.kind`` existed still replay: their side polls are known
by URL at load (``record.legacy``); new recordings carry the kind of each side poll."""

from __future__ import annotations

import json

from llmtop.config import Config, Target
from llmtop.model import SCRAPE_HEALTH, SCRAPE_METRICS, SCRAPE_SLOTS, SCRAPE_WORKERS, RawScrape
from llmtop.record.frames import MAGIC, encode_frame
from llmtop.record.reader import Recording
from llmtop.record.recorder import Recorder
from llmtop.record.replay import replay_store
from tests.conftest import fixture_text

LLAMA = "llamacpp@127.0.0.1:8080"
ROUTER = "sglang-router@127.0.0.1:29000"
BODY = fixture_text("llamacpp-SYNTHETIC-from-server-context-cpp.txt")
WORKERS = json.dumps({"http://127.0.0.1:8001": "prefill"})


def _old_records() -> list[dict]:
    """Records as a recorder wrote them before kinds: a header without the flag, no ``kd``."""
    def s(t: float, target: str, url: str, st: str = "ok", **more: object) -> dict:
        return {"k": "s", "t": target, "w": 1.7e9 + t, "m": t, "st": st, "u": url, **more}

    return [
        {"k": "header", "schema": 1, "llmtop": "0.0-old", "host": "box", "interval": 1.0,
         "started": 1.7e9, "targets": [{"name": LLAMA, "url": "http://127.0.0.1:8080",
                                        "engine": "llamacpp"}]},
        s(1.0, LLAMA, "http://127.0.0.1:8080/metrics", hs=200, b=BODY),
        s(1.1, LLAMA, "http://127.0.0.1:8080/slots", "http_error", hs=501, er="HTTP 501"),
        s(1.2, LLAMA, "http://127.0.0.1:8080/health", hs=200),
        s(1.3, ROUTER, "http://127.0.0.1:30000/workers", hs=200, b=WORKERS),
        {"k": "tick", "w": 1.7e9 + 1.5, "m": 1.5},
    ]


def test_an_old_recording_replays_its_side_polls_by_url(tmp_path):
    path = tmp_path / "old.llmtop"
    path.write_bytes(MAGIC + encode_frame(_old_records()))
    rec = Recording.open(path)
    kinds = [(x.target, x.kind) for x in rec.items() if isinstance(x, RawScrape)]
    assert kinds == [(LLAMA, SCRAPE_METRICS), (LLAMA, SCRAPE_SLOTS), (LLAMA, SCRAPE_HEALTH),
                     (ROUTER, SCRAPE_WORKERS)]
    store = replay_store(rec, Config(targets=(Target(name=LLAMA, base_url="http://x"),)))
    for x in rec.items():
        if isinstance(x, RawScrape):
            store.ingest(x)
    assert store.requests.slots_errors == 1  # the 501 went to the request window
    ts = store.history_of(LLAMA)
    assert ts is not None and list(ts.health) == [(1.2, 200)] and ts.status == "ok"
    assert store.routers.roles == {ROUTER: {"http://127.0.0.1:8001": "prefill"}}


def test_a_new_recording_keeps_each_kind_whatever_the_url(tmp_path):
    path = tmp_path / "new.llmtop"
    r = Recorder(str(path), Config(targets=(Target(name=LLAMA, base_url="http://x"),)),
                 clock=lambda: 1.7e9)
    odd = "http://127.0.0.1:8080/slots"  # a metrics path that looks like a side poll's
    for i, kind in enumerate((SCRAPE_METRICS, SCRAPE_SLOTS, SCRAPE_HEALTH, SCRAPE_WORKERS)):
        r(RawScrape(target=LLAMA, url=odd, t_wall=1.7e9 + i, t_mono=float(i), status="down",
                    kind=kind))
    r.close()
    got = [x.kind for x in Recording.open(path).items() if isinstance(x, RawScrape)]
    assert got == [SCRAPE_METRICS, SCRAPE_SLOTS, SCRAPE_HEALTH, SCRAPE_WORKERS]
