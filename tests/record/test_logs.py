"""Engine log reads in a recording: their own record kind, prompts dropped unless asked,
bounded per segment (drops counted), replayed in place so ``DOWN`` carries the same log line
in replay (``replay --once --at`` and seeking) as live; a recording without logs still loads."""

from __future__ import annotations

import asyncio
import json

from llmtop.model import RawScrape
from llmtop.model.logs import RawLog
from llmtop.monitor import Monitor
from llmtop.once import snapshot_json
from llmtop.record import recorder as recorder_mod
from llmtop.record.live import RecordingMonitor
from llmtop.record.logs import drop_prompts, log_item, log_record
from llmtop.record.reader import Recording
from llmtop.record.recorder import Recorder
from llmtop.record.replay import ReplaySource, snapshot_at
from tests.log_fakes import DEAD_HEADLINE, burst, event, raw_log
from tests.record.test_replay import CONFIG, TARGET, FakeScraper

T0 = 1_800_000_000.0
PROMPT = ("Request cmpl-1 details: prompt: 'my secret question', prompt_token_ids: [1, 2], "
          "prompt_embeds shape: None.")
OUTPUT = "Generated response cmpl-1: output: 'the private answer', finish_reason: stop"


def test_prompts_and_outputs_dropped_request_lines_kept():
    assert drop_prompts(PROMPT) == "Request cmpl-1 details: prompt: [dropped]"
    assert drop_prompts(OUTPUT) == ("Generated response cmpl-1: output: [dropped], "
                                    "finish_reason: stop")
    assert drop_prompts('Request cmpl-2 JSON body: {"prompt": "x"}') == (
        "Request cmpl-2 JSON body: [dropped]")
    kept = "Received request cmpl-1: params: SamplingParams(n=1), lora_request: None."
    assert drop_prompts(kept) == kept


def test_record_round_trip_drops_prompts_unless_asked(tmp_path):
    events = [*burst(T0 + 1), event(T0 + 2, "info", PROMPT, request_id="cmpl-1"),
              event(T0 + 3, "info", OUTPUT, request_id="cmpl-1")]
    for keep, path in ((False, tmp_path / "a.llrec"), (True, tmp_path / "b.llrec")):
        rec = Recorder(path, CONFIG, clock=lambda: T0, keep_prompts=keep)
        rec(raw_log(TARGET.name, T0 + 4, events, dropped=2, error=None))
        rec.close()
        (item,) = [i for i in Recording.open(path).items() if isinstance(i, RawLog)]
        assert item.target == TARGET.name and item.dropped == 2
        assert item.location.label == "/tmp/vllm.log" and item.location.fmt == "vllm"
        assert item.events[0] == events[0]  # the traceback, whole
        text = " ".join(line for e in item.events for line in e.lines)
        assert ("my secret question" in text) is keep
        assert ("the private answer" in text) is keep
        assert item.events[-2].request_id == "cmpl-1"
        if not keep:
            raw = path.read_bytes()
            assert b"my secret" not in raw  # compressed, but check the decoded frames too
            assert "secret" not in json.dumps(Recording.open(path).records)


def test_log_events_bounded_per_segment_drops_counted(tmp_path, monkeypatch):
    monkeypatch.setattr(recorder_mod, "LOG_EVENTS_PER_SEGMENT", 10)
    path = tmp_path / "flood.llrec"
    rec = Recorder(path, CONFIG, clock=lambda: T0, segment_s=300.0)
    for i in range(4):
        rec(raw_log(TARGET.name, T0 + i, [event(T0 + i, "info", f"{i}-{j}") for j in range(4)],
                    dropped=1))
    rec(raw_log(TARGET.name, T0 + 400, [event(T0 + 400, "info", "next segment")]))
    rec.close()
    logs = [i for i in Recording.open(path).items() if isinstance(i, RawLog)]
    assert [len(x.events) for x in logs] == [4, 4, 2, 0, 1]
    assert [x.dropped for x in logs] == [1, 1, 3, 5, 0]  # the follower's + over the budget


def test_damaged_log_record_gives_no_events_not_an_exception():
    item = log_item({"k": "l", "t": "x", "w": T0, "loc": "?", "ev": [[1, "error"], "bad"]})
    assert item.events == [] and item.location.error == "not in the recording"
    rec = log_record(raw_log("x", T0, [event(T0, "error", "boom")]))
    assert log_item(json.loads(json.dumps(rec))).events[0].headline == "boom"


class DyingScraper(FakeScraper):
    """The real vLLM capture until tick ``dies_at``, then connection refused."""

    def __init__(self, dies_at: int) -> None:
        super().__init__(T0)
        self.dies_at = dies_at

    async def scrape(self, target):
        got = await super().scrape(target)
        if self.n < self.dies_at:
            return got
        return RawScrape(target=target.name, url=got.url, t_wall=got.t_wall, t_mono=got.t_mono,
                         status="down", error="connection refused")


async def _live_down(path):
    """Record a vLLM that writes the EngineDeadError burst and stops answering; the log
    reads reach the recorder and the store as the monitor's feeder hands them over."""
    rec = Recorder(path, CONFIG, clock=lambda: T0)
    mon = RecordingMonitor(Monitor(CONFIG, scraper=DyingScraper(dies_at=8)), rec)
    for i in range(12):
        if i == 6:  # read while the engine dies, before the first failed scrape
            raw = raw_log(TARGET.name, T0 + 6.5, burst(T0 + 6.2), t_mono=106.5)
            rec(raw)
            mon.store.add_log(raw)
        await mon.tick()
    live = mon.store.snapshot(10.0)
    once = json.loads(snapshot_json(mon.store.once_snapshot(1.0)))
    await mon.aclose()
    return live, once


def test_down_carries_the_engine_dead_error_live_and_in_replay(tmp_path):
    path = tmp_path / "dead.llrec"
    live, _ = asyncio.run(_live_down(path))
    (row,) = live.engines
    want = f"log: {DEAD_HEADLINE} (connection refused)"
    assert row.state == "down" and row.error == want
    assert row.log.last_error.headline == DEAD_HEADLINE
    rec = Recording.open(path)
    # replay --once --at: only two ticks of scrapes, the log lines from before them
    (once_row,) = snapshot_at(rec, rec.end, 1.0).engines
    assert once_row.state == "down" and once_row.error == want
    doc = json.loads(snapshot_json(snapshot_at(rec, rec.end, 1.0)))
    assert doc["engines"][0]["log"]["last_error"]["headline"] == DEAD_HEADLINE
    # the TUI's replay, seeking to the end
    src = ReplaySource(rec, clock=lambda: 0.0)
    src.seek("end")
    (seek_row,) = src.store.snapshot(10.0).engines
    assert seek_row.state == "down" and seek_row.error == want
    assert any(e.text == f"DOWN: {want}" for e in src.store.events)
    # in place: before the burst the engine is fine and its log says nothing yet
    src.seek("4")  # 4 s after the start
    (before,) = src.store.snapshot(10.0).engines
    assert before.state == "ok" and before.error is None
    assert before.log is None or before.log.last_error is None


def test_recording_without_log_records_still_replays(tmp_path):
    path = tmp_path / "old.llrec"
    rec = Recorder(path, CONFIG, clock=lambda: T0)
    mon = RecordingMonitor(Monitor(CONFIG, scraper=DyingScraper(dies_at=99)), rec)

    async def run():
        for _ in range(3):
            await mon.tick()
        await mon.aclose()

    asyncio.run(run())
    recording = Recording.open(path)
    assert not any(r.get("k") == "l" for r in recording.records)
    snap = snapshot_at(recording, recording.end, 1.0)
    assert snap.engines[0].log is None and snap.log_events == {}


def test_record_cli_keep_prompts_flag():
    from llmtop.cli.record import _record_parser

    assert _record_parser().parse_args(["f.llrec"]).keep_prompts is False
    assert _record_parser().parse_args(["f.llrec", "--keep-prompts"]).keep_prompts is True
