"""Stores fed with real router fixtures and real vLLM captures (no server, no clock)."""

from __future__ import annotations

import re

from llmtop.config import Config, Target
from llmtop.history.store import Store
from llmtop.model import RawScrape
from tests.conftest import fixture_text

_SAMPLE = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)(\{[^}]*\})? (\S+)$")
_CUMULATIVE = ("_total", "_bucket", "_sum", "_count")


def scaled(text: str, k: float, urls: dict[str, str] | None = None,
           gauges: dict[str, float] | None = None) -> str:
    """A fixture's text with its counters and histograms multiplied by ``k`` (a later scrape
    of the same process), worker URLs renamed by ``urls`` and gauge lines whose
    ``name{labels}`` is in ``gauges`` set to that value."""
    out = []
    for line in text.splitlines():
        if urls:
            line = re.sub("|".join(map(re.escape, urls)), lambda m: urls[m.group(0)], line)
        m = _SAMPLE.match(line)
        if m and not line.startswith("#"):
            name, labels, value = m.group(1), m.group(2) or "", float(m.group(3))
            if (name + labels) in (gauges or {}):
                value = (gauges or {})[name + labels]
            elif name.endswith(_CUMULATIVE):
                value *= k
            line = f"{name}{labels} {value!r}"
        out.append(line)
    return "\n".join(out) + "\n"


def target(name: str, port: int, engine: str | None = None) -> Target:
    return Target(name=name, base_url=f"http://127.0.0.1:{port}", host="127.0.0.1", port=port,
                  engine=engine)


def store_with(*targets: Target, interval: float = 1.0) -> Store:
    return Store(Config(targets=tuple(targets), interval_s=interval))


def feed(store: Store, name: str, t: float, body: str) -> None:
    store.ingest(RawScrape(target=name, url=f"http://{name}/metrics", t_wall=1.7e9 + t,
                           t_mono=t, status="ok", http_status=200, body=body))


def engine_pair(kind: str) -> tuple[str, str]:
    """Scrapes a and b (5 s apart) of a real vLLM CPU incident capture."""
    return (fixture_text(f"vllm-real-cpu-v0.32.0-{kind}-a.txt"),
            fixture_text(f"vllm-real-cpu-v0.32.0-{kind}-b.txt"))


def round_robin_store(busy: str = "queueing", calm: str = "calm") -> Store:
    """The issue's case: a vLLM router sharing requests evenly (round robin) between a
    backend that queues (``busy`` capture: 2 seats, 10 waiting) and one that idles."""
    router = fixture_text("routers/vllm-router-SYNTHETIC-metrics-rs.txt")
    s = store_with(target("router", 29000), target("a", 8001), target("b", 8002))
    ba, bb = engine_pair(busy)
    ca, cb = engine_pair(calm)
    for t, k, busy_body, calm_body in ((0.0, 1.0, ba, ca), (5.0, 2.0, bb, cb)):
        feed(s, "router", t, scaled(router, k))  # each gets half; b (8002) queues
        feed(s, "b", t, busy_body)
        feed(s, "a", t, calm_body)
        s.commit(t, 1.7e9 + t)
    return s
