"""Replay long after DOWN cites the log line the live store cites, and nothing it does not.

- The recording goes on for half an hour after the engine died (the 3 a.m. crash, replayed
  the next morning at the end of the night's recording): ``replay --once`` at its end and the
  TUI's replay sought there (and back a minute) show ``DOWN`` with the EngineDeadError line,
  as live still does.
- An error logged minutes before the engine was last seen good explains nothing of a later
  silent death: replay cites it no more than live does (no false claim).
"""

from __future__ import annotations

import asyncio

from llmtop.model import RawScrape
from llmtop.monitor import Monitor
from llmtop.record.live import RecordingMonitor
from llmtop.record.reader import Recording
from llmtop.record.recorder import Recorder
from llmtop.record.replay import LOG_LOOKBACK_S, ReplaySource, snapshot_at
from tests.log_fakes import DEAD_HEADLINE, burst, event, raw_log
from tests.monitor_fakes import FakeScraperBase
from tests.record.test_delta import _bump
from tests.record.test_replay import BASE, CONFIG, TARGET

T0 = 1_800_000_000.0


class DiesScraper(FakeScraperBase):
    """The real vLLM capture once a second until scrape ``dies_at``, then connection refused
    once every ``step`` seconds (a recording that goes on for long after)."""

    def __init__(self, dies_at: int, step: float) -> None:
        self.n = 0
        self.dies_at = dies_at
        self.step = step

    def at(self, n: int) -> float:
        """Seconds after ``T0`` of scrape ``n``."""
        return float(n) if n < self.dies_at else self.dies_at + (n - self.dies_at) * self.step

    async def scrape(self, target):
        self.n += 1
        dt = self.at(self.n)
        if self.n < self.dies_at:
            return RawScrape(target=target.name, url=target.base_url + "/metrics",
                             t_wall=T0 + dt, t_mono=100.0 + dt, status="ok", http_status=200,
                             content_type="text/plain", body=_bump(BASE, self.n),
                             engine_hint="vllm")
        return RawScrape(target=target.name, url=target.base_url + "/metrics", t_wall=T0 + dt,
                         t_mono=100.0 + dt, status="down", error="connection refused")

    async def identify(self, target):
        return {"version": "0.32.0", "host": "127.0.0.1"}

    async def aclose(self) -> None:
        return None


async def _record(path, scraper: DiesScraper, ticks: int, logs: dict[int, list],
                  damaged: dict[int, dict] | None = None) -> str | None:
    """Record ``ticks`` refreshes; ``logs[i]``: the events read just before refresh ``i``;
    ``damaged[i]``: a record written as is just before it. Returns the row's reason in the
    live store at the end."""
    rec = Recorder(path, CONFIG, clock=lambda: T0)
    mon = RecordingMonitor(Monitor(CONFIG, scraper=scraper), rec)
    for i in range(ticks):
        if damaged and i in damaged:
            rec.record({**damaged[i], "w": T0 + scraper.at(i) + 0.4})
        if i in logs:
            t = T0 + scraper.at(i) + 0.5
            raw = raw_log(TARGET.name, t, logs[i], t_mono=100.0 + t - T0)
            rec(raw)
            mon.store.add_log(raw)
        await mon.tick()
    (row,) = mon.store.snapshot(10.0).engines
    await mon.aclose()
    assert row.state == "down", row
    return row.error


def _replayed(path) -> tuple[str | None, ...]:
    """The row's reason at the recording's end (``replay --once``; the TUI sought there),
    and a minute before it (the TUI sought back: a store rebuilt from a lookback)."""
    rec = Recording.open(path)
    (once,) = snapshot_at(rec, rec.end, 1.0).engines
    src = ReplaySource(rec, clock=lambda: 0.0)
    src.seek("end")
    (tui,) = src.store.snapshot(10.0).engines
    src.seek("-1m")
    (back,) = src.store.snapshot(10.0).engines
    assert once.state == tui.state == back.state == "down", (once, tui, back)
    return once.error, tui.error, back.error


def test_down_replayed_half_an_hour_later_still_carries_the_engine_dead_error(tmp_path):
    path = tmp_path / "night.llrec"
    scraper = DiesScraper(dies_at=8, step=60.0)  # 33 refreshes after the crash: 33 min
    live = _record(path, scraper, 40, {6: burst(T0 + 6.2)})
    want = f"log: {DEAD_HEADLINE} (connection refused)"
    assert asyncio.run(live) == want
    assert scraper.at(40) - 8 > LOG_LOOKBACK_S  # the burst is older than the log lookback
    assert _replayed(path) == (want, want, want)


def test_an_error_before_the_engine_was_last_good_is_not_cited_in_replay_either(tmp_path):
    path = tmp_path / "silent.llrec"
    scraper = DiesScraper(dies_at=100, step=30.0)  # good for 96 s after the error, then dies
    oom = event(T0 + 3.2, "error", "torch.OutOfMemoryError: CUDA out of memory")
    live = asyncio.run(_record(path, scraper, 110, {3: [oom]}))
    assert live == "connection refused"  # live: that error says nothing of this DOWN
    assert _replayed(path) == (live, live, live)


def test_damaged_log_records_long_before_are_passed_over(tmp_path):
    path = tmp_path / "damaged.llrec"
    scraper = DiesScraper(dies_at=8, step=60.0)
    bad = {"k": "l", "t": TARGET.name, "m": 0.0, "ev": [
        [1.0, ["error"], ["x"], "x", None, None, True], ["not", "an", "event"], "error", 7]}
    damaged = {7: bad, 9: {**bad, "ev": "error"}, 10: {"k": "l", "t": TARGET.name}}
    live = asyncio.run(_record(path, scraper, 40, {6: burst(T0 + 6.2)}, damaged))
    assert live == f"log: {DEAD_HEADLINE} (connection refused)"
    assert _replayed(path) == (live, live, live)
