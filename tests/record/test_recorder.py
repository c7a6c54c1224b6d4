"""Recording round-trips raw inputs exactly; survives truncation; honours bounds; no secrets."""

from __future__ import annotations

import os

import pytest

from llmtop.config import Config, Target
from llmtop.errors import RecordingError
from llmtop.model import GpuProcess, GpuRecord, GpuSample, RawScrape
from llmtop.record.reader import Recording, Tick
from llmtop.record.recorder import Recorder, parse_size, safe_url
from tests.conftest import fixture_text
from tests.record.test_delta import _bump

SECRET = "sk-very-secret-token-123"


def _config() -> Config:
    t = Target(name="vllm@127.0.0.1:8000", base_url="http://u:pw@127.0.0.1:8000",
               engine="vllm", api_key=SECRET, headers=(("X-Api-Key", SECRET),))
    return Config(targets=(t,), api_key=SECRET)


def _scrape(i: int, body: str | None, status: str = "ok") -> RawScrape:
    return RawScrape(target="vllm@127.0.0.1:8000", url="http://u:pw@127.0.0.1:8000/metrics",
                     t_wall=1000.0 + i, t_mono=50.0 + i, status=status, http_status=200,
                     content_type="text/plain", body=body, elapsed_s=0.01,
                     error=None if status == "ok" else "connection refused",
                     engine_hint="vllm", identity={"version": "0.32.0"} if i == 0 else None)


def _gpu(i: int) -> GpuSample:
    g = GpuRecord(host="box", index=0, source="demo", name="H100", util=0.5 + i / 100,
                  mem_used_bytes=10**9 * i, throttle=["power cap"],
                  processes=[GpuProcess(pid=42, name="python", used_bytes=10**9,
                                        engine_target="vllm@127.0.0.1:8000")])
    return GpuSample(t_wall=1000.0 + i, t_mono=50.0 + i, gpus=[g], cost_s=0.001)


def _items(n: int) -> list:
    base = fixture_text("vllm-real-cpu-v0.32.0-under-load.txt")
    out: list = []
    for i in range(n):
        status = "down" if i == 3 else "ok"
        out.append(_scrape(i, _bump(base, i) if status == "ok" else None, status))
        out.append(_gpu(i))
        out.append(Tick(t_mono=50.0 + i, t_wall=1000.0 + i))
    return out


def _record(path, items, **kw) -> Recorder:
    rec = Recorder(path, _config(), clock=lambda: 1000.0, **kw)
    for it in items:
        if isinstance(it, Tick):
            rec.tick(it.t_mono, it.t_wall)
        else:
            rec(it)
    rec.close()
    return rec


def test_roundtrip_is_exact(tmp_path):
    items = _items(12)
    path = tmp_path / "r.llrec"
    _record(path, items, flush_s=3.0, segment_s=5.0)
    rec = Recording.open(path)
    assert rec.problem is None
    assert rec.header["schema"] == 1 and rec.header["targets"][0]["engine"] == "vllm"
    back = list(rec.items())
    expected = [
        x if not isinstance(x, RawScrape) else
        x.__class__(**{**{f: getattr(x, f) for f in x.__slots__}, "url": safe_url(x.url)})
        for x in items
    ]
    assert back == expected


def test_seek_from_the_middle_rebuilds_bodies(tmp_path):
    items = _items(12)
    path = tmp_path / "r.llrec"
    _record(path, items, segment_s=4.0)
    rec = Recording.open(path)
    start = rec.index_at(1007.0)
    first = next(x for x in rec.items(start) if isinstance(x, RawScrape))
    assert first.body == items[7 * 3].body


def test_compact_size(tmp_path):
    path = tmp_path / "r.llrec"
    _record(path, _items(30))
    body = len(fixture_text("vllm-real-cpu-v0.32.0-under-load.txt"))
    assert os.path.getsize(path) < 30 * body / 20


def test_truncated_recording_opens_and_says_where_it_ends(tmp_path):
    path = tmp_path / "r.llrec"
    _record(path, _items(12), flush_s=2.0)
    full = path.read_bytes()
    cut = tmp_path / "cut.llrec"
    cut.write_bytes(full[: len(full) - 50])
    rec = Recording.open(cut)
    assert rec.problem is not None and "recording ends at" in rec.problem
    assert "incomplete final frame" in rec.problem
    assert rec.records and rec.end < Recording.open(path).end
    assert all(x.body for x in rec.items() if isinstance(x, RawScrape) and x.status == "ok")


def test_resume_appends_after_dropping_an_incomplete_tail(tmp_path):
    path = tmp_path / "r.llrec"
    _record(path, _items(4))
    with open(path, "ab") as f:
        f.write(b"F\x00\x10")  # a frame header cut short by a crash
    more = [x for x in _items(8)[12:]]
    _record(path, more)
    rec = Recording.open(path)
    assert rec.problem is None
    assert len([x for x in rec.items() if isinstance(x, RawScrape)]) == 8


def test_no_secrets_in_the_file(tmp_path):
    path = tmp_path / "r.llrec"
    _record(path, _items(3))
    import zlib

    from llmtop.record.frames import FrameScan, scan_frames

    raw = path.read_bytes()
    assert SECRET.encode() not in raw
    text = ""
    with open(path, "rb") as f:
        for _, recs in scan_frames(f, FrameScan(0, 0)):
            text += repr(recs)
    assert SECRET not in text and "pw@" not in text and "u:pw" not in text
    assert zlib  # decompressed content checked above


def test_retention_drops_oldest_segments(tmp_path):
    path = tmp_path / "r.llrec"
    _record(path, _items(30), segment_s=5.0, retention_s=8.0)
    rec = Recording.open(path)
    # whole segments are dropped at each segment roll: at most retention + 2 segments stay
    assert rec.start > 1000.0
    assert rec.start >= rec.end - 8.0 - 2 * 5.0
    assert rec.end == 1029.0


def test_max_size_is_enforced(tmp_path):
    path = tmp_path / "r.llrec"
    _record(path, _items(40), segment_s=5.0, max_bytes=30_000)
    rec = Recording.open(path)
    assert rec.start > 1000.0
    # bounded: at most the cap plus the newest segment still being written
    assert os.path.getsize(path) < 30_000 + 40_000
    assert next(x.body is not None for x in rec.items() if isinstance(x, RawScrape))


def test_not_a_recording(tmp_path):
    p = tmp_path / "x"
    p.write_text("hello")
    with pytest.raises(RecordingError, match="not an llmtop recording"):
        Recording.open(p)
    with pytest.raises(RecordingError, match="no such file"):
        Recording.open(tmp_path / "missing")


def test_parse_size():
    assert parse_size("200M") == 200 * 1024**2
    assert parse_size("1G") == 1024**3
    assert parse_size("512K") == 512 * 1024
    assert parse_size(None) is None
    with pytest.raises(RecordingError):
        parse_size("lots")


def test_a_stop_during_compaction_leaves_no_half_copy(tmp_path, monkeypatch):
    import shutil

    path = tmp_path / "r.llrec"
    _record(path, _items(12), segment_s=5.0)
    before = Recording.open(path).end

    def interrupted(src, dst):
        dst.write(src.read(100))
        raise KeyboardInterrupt  # Ctrl-C, or SIGTERM/SIGHUP's SystemExit, mid-copy

    monkeypatch.setattr(shutil, "copyfileobj", interrupted)
    with pytest.raises(KeyboardInterrupt):
        _record(path, _items(30)[36:], segment_s=5.0, max_bytes=1)
    assert sorted(os.listdir(tmp_path)) == ["r.llrec"]
    assert Recording.open(path).end >= before


def test_container_identity_is_recorded_and_replayed(tmp_path):
    import dataclasses

    from llmtop.model import Container
    from llmtop.record.replay import config_from_header, snapshot_at

    pod = Container("containerd", "1207db63", "vllm", "vllm-0", "prod", "4026532178", pid=9)
    cfg = _config()
    cfg = dataclasses.replace(cfg, targets=(dataclasses.replace(cfg.targets[0], container=pod),))
    path = tmp_path / "r.llrec"
    rec = Recorder(path, cfg, clock=lambda: 1000.0)
    for it in _items(4):
        rec.tick(it.t_mono, it.t_wall) if isinstance(it, Tick) else rec(it)
    rec.close()
    back = Recording.open(path)
    assert back.header["targets"][0]["container"] == pod.to_json()  # no pid recorded
    [t] = config_from_header(back).targets
    assert t.container == pod  # pid is not compared: it is this machine's, not the record's
    snap = snapshot_at(back, 1003.0, 10.0)
    assert [r.container.label for r in snap.engines] == ["pod prod/vllm-0"]
