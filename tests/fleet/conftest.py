"""Real Prometheus and VictoriaMetrics on loopback, scraping demo engines every second.

Package fixtures (the servers start once per run, on the worker that runs the
``fleet-servers`` xdist group, and end when that worker leaves ``tests/fleet``):

- ``demo_fleet``: a :class:`llmtop.demo.fleet.DemoFleet` -- demo vLLM and SGLang engines of two
  models (``MODEL_A``, ``MODEL_B``), one vLLM in trouble (``kv-pressure``), one vLLM that
  restarts every 20 s (first after 8 s), one dead target (``up == 0``), one ``stale``
  target (samples stamped 60 s old, ``up == 1``) and a DCGM exporter per demo process.
  Jobs: ``vllm``, ``sglang``, ``dcgm``. ``demo_fleet.engines`` lists them with their labels.
- ``prometheus_bin`` / ``victoria_bin``: the binaries' paths.
- ``prometheus_server`` / ``victoria_server``: the running :class:`ServerProcess` (Prometheus
  runs with ``--web.enable-lifecycle``, so a test may ``POST /-/reload``).
- ``prometheus_url`` / ``victoria_url``: base URLs, yielded once every target has three or
  more ``up`` samples. VictoriaMetrics runs with ``-search.latencyOffset=1s``
  (``VICTORIA_LATENCY_OFFSET_S``; its default is 30 s).
- ``fleet_backend``: parametrized over both, a ``Backend(kind, url, server)``;
  ``latency_params(kind)``: the ``PrometheusConfig.params`` that go with it.
- ``promql``: ``promql(url, expr, time=None, **params) -> list`` of ``{metric, value}``
  (the server's own answer, for comparisons at the same ``time``).
- ``refresh_once(url, **prom)`` (a function): ``(monitor, snapshot)`` of one refresh.
- ``fleet_fixture(name)``: path of a recorded Thanos/Mimir/VictoriaMetrics envelope in
  ``tests/fleet/fixtures/`` (see the README there).

Binaries are looked up by :func:`llmtop.demo.fleet.find_binary` (``LLMTOP_PROMETHEUS_BIN``,
``LLMTOP_VICTORIA_BIN``, ``.cache/fleet-bin/``, ``PATH``); ``bash scripts/fleet_servers.sh``
fetches them. Without them the tests skip, saying so; with ``LLMTOP_FLEET_REQUIRE_SERVERS=1``
(set by ``.ci/run``) they fail instead.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from llmtop.demo import fleet as demo_fleet_mod
from llmtop.demo.fleet import DemoFleet, ServerProcess

SCRAPE_INTERVAL_S = 1.0
VICTORIA_LATENCY_OFFSET_S = 1.0
FIXTURES = Path(__file__).parent / "fixtures"


@dataclass(frozen=True)
class Backend:
    """One running backend: ``kind`` is ``prometheus`` or ``victoriametrics``."""

    kind: str
    url: str
    server: ServerProcess


def latency_params(kind: str) -> tuple[tuple[str, str], ...]:
    """``PrometheusConfig.params`` for a backend: the test VictoriaMetrics' 1 s latency offset
    (unsaid, llmtop assumes its default 30 s and refreshes 30 s in the past)."""
    if kind != "victoriametrics":
        return ()
    return (("latency_offset", f"{VICTORIA_LATENCY_OFFSET_S:g}s"),)


def _missing(name: str) -> None:
    msg = f"no {name} binary: {demo_fleet_mod.INSTALL_HINT}"
    if os.environ.get("LLMTOP_FLEET_REQUIRE_SERVERS") == "1":
        pytest.fail(msg)
    pytest.skip(msg)


def promql(url: str, expr: str, time: float | None = None, **params: str) -> list[dict[str, Any]]:
    """The server's own instant-query result (``data.result``) for ``expr`` at ``time``."""
    body = demo_fleet_mod.query(url, expr, time, **params)
    result: list[dict[str, Any]] = body["data"]["result"]
    return result


def refresh_once(url: str, **prom: Any) -> tuple[Any, Any]:
    """``(monitor, snapshot)`` of one fleet refresh against ``url`` (``prom``: more
    ``PrometheusConfig`` fields, e.g. ``window_s``); the client is closed after."""
    import asyncio

    from llmtop.config import Config, PrometheusConfig
    from llmtop.fleet.monitor import FleetMonitor

    async def go() -> tuple[Any, Any]:
        mon = FleetMonitor(Config(prometheus=PrometheusConfig(url=url, **prom)))
        try:
            return mon, await mon.tick()
        finally:
            await mon.aclose()

    return asyncio.run(go())


@pytest.fixture(autouse=True)
def _fleet_servers_run_in_their_group(request: pytest.FixtureRequest) -> Iterator[None]:
    """Fail a test that reached the demo fleet outside the ``fleet-servers`` xdist group: on
    another worker it would start a second fleet and its servers (~60 s of CPU a run)."""
    yield
    if "demo_fleet" not in request.fixturenames or not os.environ.get("PYTEST_XDIST_WORKER"):
        return
    mark = request.node.get_closest_marker("xdist_group")
    group = (mark.args[0] if mark.args else mark.kwargs.get("name")) if mark else None
    assert group == "fleet-servers", (
        f"{request.node.nodeid} uses the demo fleet but runs in xdist group {group!r}: "
        "name the fixture it reaches it through in XDIST_GROUPS (tests/conftest.py)")


@pytest.fixture(scope="package")
def demo_fleet() -> Iterator[DemoFleet]:
    fl = demo_fleet_mod.start_fleet(5, down=1, restarting=True, restart_after_s=8.0,
                                    restart_every_s=20.0, stale=True, dcgm=True)
    try:
        yield fl
    finally:
        fl.stop()


def _serve(kind: str, demo_fleet: DemoFleet, tmp: Path) -> Iterator[ServerProcess]:
    cfg = demo_fleet.scrape_config(SCRAPE_INTERVAL_S)
    if kind == "prometheus":
        srv = demo_fleet_mod.start_prometheus(cfg, str(tmp), extra_args=["--web.enable-lifecycle"])
    else:
        srv = demo_fleet_mod.start_victoria(cfg, str(tmp),
                                            latency_offset=f"{VICTORIA_LATENCY_OFFSET_S:g}s")
    try:
        demo_fleet_mod.wait_scraped(srv.url, demo_fleet.instances, min_samples=3)
        yield srv
    finally:
        srv.stop()


@pytest.fixture(scope="session")
def prometheus_bin() -> str:
    """Path of the prometheus binary (skips, or fails in CI, without one)."""
    path = demo_fleet_mod.find_binary("prometheus")
    if not path:
        _missing("prometheus")
    return str(path)


@pytest.fixture(scope="session")
def victoria_bin() -> str:
    """Path of the victoria-metrics binary (skips, or fails in CI, without one)."""
    path = demo_fleet_mod.find_binary("victoria-metrics")
    if not path:
        _missing("victoria-metrics")
    return str(path)


@pytest.fixture(scope="package")
def prometheus_server(prometheus_bin: str, demo_fleet: DemoFleet,
                      tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    yield from _serve("prometheus", demo_fleet, tmp_path_factory.mktemp("prometheus"))


@pytest.fixture(scope="package")
def victoria_server(victoria_bin: str, demo_fleet: DemoFleet,
                    tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    yield from _serve("victoriametrics", demo_fleet, tmp_path_factory.mktemp("victoria"))


@pytest.fixture(scope="package")
def prometheus_url(prometheus_server: ServerProcess) -> str:
    return prometheus_server.url


@pytest.fixture(scope="package")
def victoria_url(victoria_server: ServerProcess) -> str:
    return victoria_server.url


@pytest.fixture(scope="package", params=["prometheus", "victoriametrics"])
def fleet_backend(request: pytest.FixtureRequest) -> Backend:
    name = "prometheus_server" if request.param == "prometheus" else "victoria_server"
    srv: ServerProcess = request.getfixturevalue(name)
    return Backend(request.param, srv.url, srv)


@pytest.fixture(name="promql", scope="session")
def promql_fixture() -> Any:
    return promql


@pytest.fixture(scope="session")
def fleet_fixture() -> Any:
    def path(name: str) -> Path:
        p = FIXTURES / name
        assert p.exists(), f"no fleet fixture {name}"
        return p
    return path


def query_role(q: str) -> str:
    """The refresh role of a fleet query's text, as a fake server answers it."""
    if "count by (__name__, job)" in q:
        return "discovery"
    if "DCGM_FI_" in q:
        return "gpus"
    if "last_over_time(" in q or "timestamp(" in q:
        return "state"
    if "_bucket{" in q:
        return "buckets"
    if "rate(" in q:
        return "counters"
    return "gauges"
