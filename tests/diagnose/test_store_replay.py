"""The diagnosis as the store runs it, fast (no demo): a real vLLM capture served with its
counters advancing; from tick 60 to 100 its KV cache is full and it preempts. The live store
logs the finding's start and end; a recording replayed with ``--at`` names it first."""

from __future__ import annotations

import contextlib
import io
import json
import re

from llmtop.cli.record import replay_main
from llmtop.config import Config, Target
from llmtop.diagnose.live import findings_of
from llmtop.model import RawScrape
from llmtop.monitor import Monitor
from llmtop.record.live import RecordingMonitor
from llmtop.record.reader import Recording
from llmtop.record.recorder import Recorder
from llmtop.record.replay import diagnosis_at
from tests.conftest import fixture_text
from tests.monitor_fakes import FakeScraperBase
from tests.record.test_delta import _bump

TARGET = Target(name="vllm@127.0.0.1:9", base_url="http://127.0.0.1:9", engine="vllm",
                host="127.0.0.1", port=9)
CONFIG = Config(targets=(TARGET,), discover=False)
BASE = fixture_text("vllm-real-cpu-v0.32.0-under-load.txt")
T0 = 1_800_000_000.0
FULL = range(60, 100)


def _body(n: int) -> str:
    body = _bump(BASE, n)
    preempted = 2.0 * max(0, min(n, FULL.stop) - FULL.start)
    body = re.sub(r"^(vllm:num_preemptions_total\{[^}]*\}) [0-9.e+]+$",
                  lambda m: f"{m.group(1)} {preempted!r}", body, flags=re.M)
    if n in FULL:
        body = re.sub(r"^(vllm:kv_cache_usage_perc\{[^}]*\}) [0-9.e+-]+$",
                      lambda m: f"{m.group(1)} 0.99", body, flags=re.M)
    return body


class Scraper(FakeScraperBase):
    def __init__(self) -> None:
        self.n = 0

    async def scrape(self, target: Target) -> RawScrape:
        self.n += 1
        return RawScrape(target=target.name, url=target.base_url + "/metrics",
                         t_wall=T0 + self.n, t_mono=100.0 + self.n, status="ok",
                         http_status=200, content_type="text/plain", body=_body(self.n),
                         engine_hint="vllm")

    async def identify(self, target: Target) -> dict:
        return {"version": "0.32.0", "host": "127.0.0.1"}

    async def aclose(self) -> None:
        return None


def kv_events(mon) -> list[tuple[float, str, str]]:
    return [(e.t_wall - T0, e.level, e.text) for e in mon.store.events
            if e.text.startswith("kv_pressure")]


async def test_store_logs_start_and_end_and_replay_names_it(tmp_path):
    path = tmp_path / "kv.rec"
    mon = RecordingMonitor(Monitor(CONFIG, scraper=Scraper()), Recorder(path, CONFIG))
    during = []
    for n in range(1, 170):
        await mon.tick()
        if n == 59:
            assert kv_events(mon) == []
        if n == 90:
            during = [f.rule for f in findings_of(mon.store)]
    events = kv_events(mon)
    await mon.aclose()
    assert during and during[0] == "kv_pressure"
    assert [(lvl, text.split(":")[0].split(" after")[0]) for _, lvl, text in events] == [
        ("error", "kv_pressure (critical)"), ("info", "kv_pressure ended")]
    started, ended = events[0][0], events[1][0]
    # preemptions stay in the 30 s window until ~128 s (rules run every 5 s); then the
    # finding is held 15 s (hysteresis)
    assert 60 <= started <= 66 and 123 + 15 <= ended <= 130 + 15 + 6

    rec = Recording.open(path)
    # (_bump advances every counter, errors and aborts too: those rules fire all along)
    assert "kv_pressure" not in [f.rule for f in diagnosis_at(rec, T0 + 50)]
    got = diagnosis_at(rec, T0 + 95)
    assert got[0].rule == "kv_pressure" and got[0].severity == "critical"
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert replay_main([str(path), "--at", "95", "--once", "--json"]) == 0
    doc = json.loads(out.getvalue())
    assert doc["diagnosis"][0]["rule"] == "kv_pressure"
    assert {e["signal"] for e in doc["diagnosis"][0]["evidence"]} >= {"kv", "preemptions_per_s"}
