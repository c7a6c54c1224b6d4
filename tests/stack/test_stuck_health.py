"""``stuck`` rests on the engine's own health endpoint (vLLM #53130: no token while ``/health``
answers 200). The monitor asks it only for a row that may be stuck; the answer is kept in the
store and the recording; the rule words 2xx, unhealthy and not-checked apart.

Cases: a fake scraper serving real vLLM CPU captures (``queueing``: 2 running, 10 waiting),
frozen for the stuck engine and advancing for a busy healthy one (no clock, no server); rows
built in code; and ``Scraper.health`` against a counting test server on 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import json

from llmtop.config import Config, Target
from llmtop.diagnose.context import RowCtx
from llmtop.diagnose.rules.stuck import stuck, wants_health
from llmtop.model import RawScrape
from llmtop.monitor import Monitor
from llmtop.once import snapshot_json
from llmtop.record.live import RecordingMonitor
from llmtop.record.reader import Recording
from llmtop.record.recorder import Recorder
from llmtop.record.replay import diagnosis_at, snapshot_at
from llmtop.sources.health import health_status
from tests.diagnose.rows import healthy
from tests.monitor_fakes import FakeScraperBase

from .build import engine_pair, scaled, store_with, target

BUSY = target("busy", 8001, engine="vllm")
STUCK = target("stuck", 8002, engine="vllm")
CONFIG = Config(targets=(BUSY, STUCK), discover=False, interval_s=1.0)
T0 = 1_800_000_000.0
TICKS = 26  # the stuck engine frozen 25 s: past STUCK_IDLE_S and the diagnosis' cadence


class HealthScraper(FakeScraperBase):
    """``busy`` holds 2 running and 10 waiting and makes tokens every tick; ``stuck`` holds
    the same and makes none. Health answers ``answer`` (a code, ``timeout`` or ``down``);
    ``path=False``: no health path known (as Ollama). Counts every health request."""

    def __init__(self, answer: int | str = 200, *, path: bool = True) -> None:
        self.n = 0
        self.asked: list[tuple[int, str]] = []
        self.answer, self.path = answer, path
        self.body = engine_pair("queueing")[0]

    async def scrape(self, t: Target) -> RawScrape:
        if t.name == "busy":
            self.n += 1
        body = scaled(self.body, 1.0 + self.n) if t.name == "busy" else self.body
        return RawScrape(target=t.name, url=t.base_url + "/metrics", t_wall=T0 + self.n,
                         t_mono=100.0 + self.n, status="ok", http_status=200,
                         content_type="text/plain", body=body)

    def health_url(self, t: Target, engine: str | None) -> str | None:
        return t.base_url + "/health" if self.path else None

    async def health(self, t: Target, url: str) -> RawScrape:
        self.asked.append((self.n, t.name))
        a, when = self.answer, {"t_wall": T0 + self.n + 0.1, "t_mono": 100.0 + self.n + 0.1}
        if isinstance(a, int):
            return RawScrape(target=t.name, url=url, status="ok" if a < 300 else "http_error",
                             http_status=a, kind="health", **when)
        err = "timeout after 2.0s" if a == "timeout" else "cannot connect: connection refused"
        return RawScrape(target=t.name, url=url, status="down", error=err, kind="health",
                         **when)

    async def identify(self, t: Target) -> dict:
        return {"host": "127.0.0.1"}

    async def aclose(self) -> None:
        return None


async def _watch(scraper: HealthScraper, path=None) -> tuple[dict, list]:
    mon: Monitor | RecordingMonitor = Monitor(CONFIG, scraper=scraper)
    if path is not None:
        mon = RecordingMonitor(mon, Recorder(path, CONFIG))
    for _ in range(TICKS):
        await mon.tick()
    doc = json.loads(snapshot_json(mon.store.snapshot(10.0)))
    found = [f for f in mon.store.diagnoser.findings if f.rule == "stuck"]
    await mon.aclose()
    return doc, found


def _health(doc: dict) -> dict[str, object]:
    return {e["target"]: e["health_status"] for e in doc["engines"]}


def test_only_the_stuck_candidate_is_asked_once_per_tick_and_200_is_the_stall():
    sc = HealthScraper(200)
    doc, [f] = asyncio.run(_watch(sc))
    assert {name for _, name in sc.asked} == {"stuck"}  # the busy engine: no /health traffic
    ticks = [n for n, _ in sc.asked]
    assert len(ticks) == len(set(ticks))  # at most once per tick
    assert ticks[0] == 10  # idle 8 s (>= STUCK_HEALTH_PROBE_S) after tick 9's commit
    assert f.target == "stuck" and f.severity == "critical"
    assert "/health answers 200: the scheduler admits nothing" in f.summary
    assert "2 running, 10 waiting" in f.summary
    assert {e.signal: e.value for e in f.evidence}["health"] == 200
    assert _health(doc) == {"busy": None, "stuck": 200}


def test_503_or_no_answer_is_named_unhealthy_not_the_stall():
    for answer, said in ((503, "answers 503"), ("timeout", "does not answer (timeout)"),
                         ("down", "does not answer (down)")):
        doc, [f] = asyncio.run(_watch(HealthScraper(answer)))
        assert f"/health {said} while its metrics endpoint answers" in f.summary, f.summary
        assert "unhealthy" in f.summary and "admits nothing" not in f.summary
        assert "fails its own health check" in f.action
        assert _health(doc)["stuck"] == answer


def test_no_health_path_falls_back_to_the_metrics_endpoint_wording():
    sc = HealthScraper(path=False)
    doc, [f] = asyncio.run(_watch(sc))
    assert sc.asked == []
    assert "yet its metrics endpoint answers (/health not checked)" in f.summary
    assert {e.signal: e.value for e in f.evidence}["health"] == "not checked"
    assert _health(doc) == {"busy": None, "stuck": None}


def test_record_then_replay_gives_the_same_finding(tmp_path):
    path = tmp_path / "stuck.llrec"
    doc, [live] = asyncio.run(_watch(HealthScraper(200), path))
    rec = Recording.open(path)
    [again] = [f for f in diagnosis_at(rec, rec.end) if f.rule == "stuck"]
    assert (again.target, again.summary) == (live.target, live.summary)
    replayed = json.loads(snapshot_json(snapshot_at(rec, rec.end, 10.0)))
    assert _health(replayed) == _health(doc) == {"busy": None, "stuck": 200}


# ------------------------------------------------------------------ rows built in code


def _row(health, engine="vllm", **kw):
    r = healthy(**{"running": 4.0, "waiting": 12.0, "tokens_idle_s": 40.0,
                   "generation_tokens_per_s": 0.0, "kv_cache_usage": 0.2, **kw})
    r.engine, r.health_status = engine, health
    return r


def _summary(row) -> str:
    [f] = stuck(RowCtx(row=row, base=None, window_s=30.0))
    return f.summary


def test_rule_wording_rows_built_in_code():
    assert "no token generated for 40 s while it holds 4 running, 12 waiting, KV 20 %; " \
        "/health answers 200: the scheduler admits nothing" in _summary(_row(200))
    assert "/v2/health/ready answers 200" in _summary(_row(200, engine="triton"))
    assert "unhealthy" in _summary(_row(500))
    for code in (401, 404):  # the key, or no such path: says nothing of its health
        s = _summary(_row(code))
        assert f"/health answered {code}, which says nothing" in s and "unhealthy" not in s
    assert "(/health not checked)" in _summary(_row(None))


def test_rule_and_probe_quiet_on_a_healthy_or_idle_row():
    assert not stuck(RowCtx(row=_row(200, tokens_idle_s=0.0), base=None, window_s=30.0))
    assert not wants_health(healthy(running=4.0, tokens_idle_s=0.0))  # busy, making tokens
    assert not wants_health(healthy(running=0.0, waiting=0.0, tokens_idle_s=60.0))
    assert not wants_health(healthy(running=4.0, tokens_idle_s=7.0))
    assert wants_health(healthy(running=4.0, tokens_idle_s=7.5))
    assert not wants_health(healthy(running=4.0, tokens_idle_s=60.0, state="down"))


def test_store_keeps_health_in_its_window_and_ignores_unknown_targets():
    s = store_with(target("e", 8000))
    body = engine_pair("queueing")[0]
    for t in (0.0, 5.0, 10.0):
        s.ingest(RawScrape(target="e", url="http://e/metrics", t_wall=T0 + t, t_mono=t,
                           status="ok", http_status=200, body=body))
    s.ingest(RawScrape(target="e", url="http://e/health", t_wall=T0 + 10.5, t_mono=10.5,
                       status="ok", http_status=200, kind="health"))
    s.ingest(RawScrape(target="x", url="http://x/health", t_wall=T0, t_mono=10.5,
                       status="ok", http_status=200,
                       kind="health"))  # never scraped: no row made for it
    [row] = s.snapshot(10.0).engines
    assert row.target == "e" and row.health_status == 200
    assert s.snapshot(10.0, t_mono=10.0).engines[0].health_status is None  # asked after
    assert s.snapshot(5.0, t_mono=20.0).engines[0].health_status is None  # out of window


def test_health_status_of_each_answer():
    def raw(**kw):
        return RawScrape(target="e", url="http://e/health", t_wall=T0, t_mono=0.0,
                         kind="health", **kw)

    assert health_status(raw(status="ok", http_status=200)) == 200
    assert health_status(raw(status="bad_payload", http_status=200, error="HTML page")) == 200
    assert health_status(raw(status="http_error", http_status=503)) == 503
    assert health_status(raw(status="down", error="timeout after 0.3s")) == "timeout"
    assert health_status(raw(status="down", error="invalid HTTP response")) == "down"
