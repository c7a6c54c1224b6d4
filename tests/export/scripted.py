"""A scraper that answers from a script of raw scrapes (times included), for exporter tests."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from llmtop.config import Config, Target
from llmtop.export.run import direct_store
from llmtop.export.state import ExportState
from llmtop.model import RawScrape
from llmtop.monitor import Monitor
from tests.monitor_fakes import FakeScraperBase


def raw(target: Target, t: float, body: str | None, status: str = "ok",
        error: str | None = None) -> RawScrape:
    return RawScrape(target=target.name, url=target.base_url + "/metrics", t_wall=1.8e9 + t,
                     t_mono=t, status=status, http_status=200 if status == "ok" else None,
                     content_type="text/plain; version=0.0.4", body=body, error=error,
                     elapsed_s=0.004, engine_hint=target.engine)


class ScriptedScraper(FakeScraperBase):
    """Each target's scrapes in order; ``None`` in a script hangs that scrape (forever)."""

    def __init__(self, script: dict[str, Sequence[RawScrape | None]]) -> None:
        self.script = {k: list(v) for k, v in script.items()}

    async def scrape(self, target: Target) -> RawScrape:
        item = self.script[target.name].pop(0)
        if item is None:
            await asyncio.Event().wait()  # a target that hangs
        assert item is not None
        return item

    async def identify(self, target: Target) -> dict:
        return {"host": target.host}


def exporter_monitor(config: Config, script: dict[str, Sequence[RawScrape | None]],
                     **kw: object) -> tuple[Monitor, ExportState]:
    """A monitor wired as ``llmtop export`` wires it, reading ``script``."""
    state = ExportState("direct", process_metrics=False)
    mon = Monitor(config, scraper=ScriptedScraper(script), store=direct_store(config),
                  sink=state.observe, **kw)  # type: ignore[arg-type]
    return mon, state
