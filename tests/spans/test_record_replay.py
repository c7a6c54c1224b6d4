"""Span bodies recorded as received and replayed through the same path (record/, replay)."""

from __future__ import annotations

import asyncio
import json

from llmtop.model import RawSpans
from llmtop.monitor import Monitor
from llmtop.parse.spans import parse_spans
from llmtop.record import recorder as recorder_mod
from llmtop.record.live import RecordingMonitor
from llmtop.record.reader import Recording
from llmtop.record.recorder import Recorder
from llmtop.record.replay import snapshot_at
from llmtop.sources.otlp_decode import decode
from tests.record.test_replay import CONFIG, FakeScraper
from tests.spans.spanfix import bodies

REQ = [s for b in bodies("requests") for s in decode(b, "protobuf")]
END = max(r.t_end for r in parse_spans(REQ).requests)


class FakeReceiver:
    """Hands the monitor the real vLLM bodies at its third tick, as ``OtlpReceiver`` would."""

    def __init__(self, scraper: FakeScraper) -> None:
        self.scraper, self.closed = scraper, False

    def drain(self) -> list[RawSpans]:
        n = self.scraper.n
        if n != 3:
            return []
        return [RawSpans(t_wall=self.scraper.t0 + n, t_mono=100.0 + n, body=b, peer="127.0.0.1")
                for b in [*bodies("requests"), b"\x00junk"]]

    def stats(self) -> dict:
        return {"bodies": 2}

    def close(self) -> None:
        self.closed = True


async def _record(path) -> tuple[dict, FakeReceiver]:
    scraper = FakeScraper(t0=END - 2)  # the requests end within the last 5 s
    mon = Monitor(CONFIG, scraper=scraper, receiver=FakeReceiver(scraper))
    rm = RecordingMonitor(mon, Recorder(path, CONFIG))
    for _ in range(6):
        await rm.tick()
    live = mon.store.snapshot(6.0).to_json("x")
    rx = mon.receiver
    await rm.aclose()
    return live, rx


def test_replay_gives_the_requests_live_had(tmp_path, capsys):
    path = tmp_path / "rec.llmtop"
    live, rx = asyncio.run(_record(path))
    assert rx.closed  # the monitor's aclose closed the receiver
    assert len(live["requests"]) == 3 and live["requests_window"]["receiver"] == {"bodies": 2}
    rec = Recording.open(path)
    assert sum(1 for r in rec.records if r.get("k") == "o") == 2  # kept as received
    snap = snapshot_at(rec, rec.end, 5.0).to_json("x")
    assert snap["requests"] == live["requests"]
    assert snap["requests_window"]["bad_bodies"] == 1  # the junk body: counted again
    from llmtop.cli.record import replay_main

    assert replay_main([str(path), "--at", "end", "--once", "--json", "--window", "5"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [r["id"] for r in doc["requests"]] == [r["id"] for r in live["requests"]]
    assert {r["prompt_tokens"] for r in doc["requests"]} == {60, 150, 15}
    assert {r["source"] for r in doc["requests"]} == {"traffic"}


def test_span_bodies_beyond_a_segments_budget_are_counted_not_written(tmp_path, monkeypatch):
    monkeypatch.setattr(recorder_mod, "SPAN_BYTES_PER_SEGMENT", 5000)
    rec = Recorder(tmp_path / "r.llmtop", CONFIG, segment_s=10.0)
    body = bodies("burst")[1]  # 2.5 kB: one fits, the next does not
    for i in range(4):
        rec(RawSpans(t_wall=1000.0 + i, t_mono=float(i), body=body))
    assert rec.spans_dropped == 3
    rec(RawSpans(t_wall=1020.0, t_mono=20.0, body=body))  # a new segment: a new budget
    rec.close()
    r = Recording.open(tmp_path / "r.llmtop")
    kinds = [x["k"] for x in r.records]
    assert kinds.count("o") == 2 and {"k": "od", "w": 1020.0, "n": 3} in r.records
