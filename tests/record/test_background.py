"""The TUI's ``--record`` (``record.live.attach``): span bodies are encoded, compressed and
written on the recorder's own thread, never on the monitor's loop; what was handed over
comes back from the recording in order; span bodies waiting for the thread are bounded."""

from __future__ import annotations

import threading
from types import SimpleNamespace

import llmtop.record.recorder as recorder_mod
from llmtop.model import RawScrape, RawSpans
from llmtop.record.background import PENDING_SPAN_BYTES, BackgroundRecorder
from llmtop.record.live import attach
from llmtop.record.reader import Recording, Tick
from llmtop.record.recorder import Recorder
from tests.record.test_recorder import _config, _gpu, _scrape


class _Monitor:
    """Hands a scrape, a span body and a GPU sample to its sink each tick, as Monitor does."""

    def __init__(self) -> None:
        self.sink = None
        self.store = SimpleNamespace(now_mono=None, now_wall=None)
        self.n = 0
        self.handed: list = []

    async def tick(self) -> None:
        i = self.n
        self.n += 1
        for item in (_scrape(i, f"vllm:num_requests_running {i}\n"),
                     RawSpans(t_wall=1000.0 + i, t_mono=50.0 + i, body=bytes([i]) * 100,
                              peer="127.0.0.1"), _gpu(i)):
            self.sink(item)
            self.handed.append(item)
        self.store.now_mono, self.store.now_wall = 50.0 + i, 1000.0 + i
        self.handed.append(Tick(t_mono=50.0 + i, t_wall=1000.0 + i))

    async def aclose(self) -> None:
        pass


async def test_span_bodies_are_encoded_and_written_off_the_loop(tmp_path, monkeypatch):
    threads: dict[str, set[str]] = {"encode": set(), "write": set()}
    encode, write = recorder_mod.base64.b64encode, recorder_mod.append_frame

    def spy_encode(data: bytes) -> bytes:
        threads["encode"].add(threading.current_thread().name)
        return encode(data)

    def spy_write(fd, records):
        threads["write"].add(threading.current_thread().name)
        return write(fd, records)

    monkeypatch.setattr(recorder_mod, "base64", SimpleNamespace(b64encode=spy_encode))
    monkeypatch.setattr(recorder_mod, "append_frame", spy_write)
    path = tmp_path / "r.llmtop"
    mon = _Monitor()
    wrapped = attach(mon, str(path), _config())
    loop_thread = threading.current_thread().name
    threads["write"].clear()  # the header, written when the file is opened
    for _ in range(5):
        await wrapped.tick()
    await wrapped.aclose()
    assert threads["encode"] and loop_thread not in threads["encode"]
    assert threads["write"] and loop_thread not in threads["write"]
    back = list(Recording.open(path).items())
    want = [x if not isinstance(x, RawScrape) else
            x.__class__(**{**{f: getattr(x, f) for f in x.__slots__},
                           "url": recorder_mod.safe_url(x.url)})
            for x in mon.handed]
    assert [type(x).__name__ for x in back] == [type(x).__name__ for x in want]
    assert [x.body for x in back if isinstance(x, RawSpans)] == \
        [x.body for x in want if isinstance(x, RawSpans)]
    assert [x for x in back if not isinstance(x, RawSpans)] == \
        [x for x in want if not isinstance(x, RawSpans)]


def test_span_bodies_waiting_for_the_thread_are_bounded_by_bytes(tmp_path):
    rec = Recorder(tmp_path / "r.llmtop", _config(), clock=lambda: 1000.0)
    hold = threading.Event()
    spans = rec.spans

    def slow_spans(raw):
        hold.wait(10)
        return spans(raw)

    rec.spans = slow_spans
    bg = BackgroundRecorder(rec)
    body = b"x" * (PENDING_SPAN_BYTES // 4)
    for i in range(7):  # four fit (the one the thread holds counts); three do not
        bg(RawSpans(t_wall=1000.0 + i, t_mono=float(i), body=body))
    assert bg.dropped == 3
    hold.set()
    bg.close()
    assert rec.spans_dropped == 3
    assert len([x for x in Recording.open(tmp_path / "r.llmtop").items()
                if isinstance(x, RawSpans)]) == 4
