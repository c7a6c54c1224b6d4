"""Shared test helpers."""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"
_STARTED: list[float] = []
"""When the run started (the controller's ``pytest_configure``), for the budget line."""

# Every test (and every llmtop it starts) keeps its state (capacity profiles, bake-off runs)
# in a temp folder, never the user's: a saved profile would change the rows it draws.
os.environ["XDG_STATE_HOME"] = tempfile.mkdtemp(prefix="llmtop-test-state-")


def pytest_configure(config: pytest.Config) -> None:
    """Byte-compile llmtop once, before the workers start (the controller, or a serial run).

    The suite starts hundreds of ``python -m llmtop`` children (demo engines, the CLI in a
    terminal, trial engines). Under ``PYTHONDONTWRITEBYTECODE`` (set on some machines) an
    editable install is never compiled, so each child compiled llmtop from source: about
    0.7 s of CPU each. Python still reads ``__pycache__`` under that variable."""
    if hasattr(config, "workerinput"):
        return
    _STARTED[:] = [time.monotonic()]
    import compileall

    compileall.compile_dir(str(Path(__file__).resolve().parents[1] / "llmtop"), quiet=1)
    if getattr(config.option, "numprocesses", None):
        _rewrite_tests_once(config)


def _rewrite_tests_once(config: pytest.Config) -> None:
    """Assertion-rewrite the test modules once, into pytest's own cache, for the workers.

    Each xdist worker imports every test module, and pytest rewrites their asserts on import
    (~5 s of the ~8 s of CPU a collection takes here). Under ``PYTHONDONTWRITEBYTECODE`` it
    never caches them, and in a fresh clone the workers would all rewrite at once anyway;
    they read a cached one either way. Uses pytest's private helpers: if they change, the
    workers simply rewrite as before."""
    try:
        from _pytest.assertion import rewrite as rw

        state = config.stash[rw.assertstate_key]
        for fn in sorted(Path(__file__).resolve().parent.rglob("*.py")):
            if fn.name != "conftest.py" and not fn.name.startswith("test_"):
                continue
            pyc = rw.get_cache_dir(fn) / (fn.name[:-3] + rw.PYC_TAIL)
            if rw._read_pyc(fn, pyc) is not None or not rw.try_makedirs(pyc.parent):
                continue
            stat, co = rw._rewrite_test(fn, config)
            rw._write_pyc(state, co, stat, pyc)
    except (ImportError, AttributeError, KeyError, TypeError, SyntaxError, OSError):
        return


THOROUGH = os.environ.get("LLMTOP_THOROUGH") == "1"
"""Set by ``.ci/run``'s property-test step: generated tests run their full example count."""


def examples(n: int) -> int:
    """Hypothesis examples for a generated test: ``n`` in ``.ci/run``'s thorough step, a
    third of it in the README's command (the same properties, fewer draws; CPU is the fast
    tier's bound on 2 cores)."""
    return n if THOROUGH else max(20, n // 3)


def fixture_text(name: str) -> str:
    """Text of ``tests/fixtures/metrics/NAME`` (or a path relative to ``tests/fixtures``)."""
    p = FIXTURES / "metrics" / name
    if not p.exists():
        p = FIXTURES / name
    return p.read_text(encoding="utf-8")


@pytest.fixture
def fixture_loader():
    """The ``fixture_text`` function, as a fixture."""
    return fixture_text


XDIST_GROUPS = {
    # fixture (used directly or by another fixture) -> xdist group. Every test using one of
    # these runs on the same worker (``--dist loadgroup``), so the server behind it starts once
    # per run, not once per worker. The first match wins. docs/development.md says when to
    # add a line here.
    "demo_fleet": "fleet-servers",  # real Prometheus + VictoriaMetrics over a demo fleet
    # fleet_backend reaches them through request.getfixturevalue, out of the tests' closure
    "fleet_backend": "fleet-servers",
    "linked_fleet": "fleet-gpulink",  # tests/fleet/test_gpulink.py's own Prometheus
    "traps_prom": "fleet-traps",  # tests/fleet/test_traps.py's own Prometheus
    "bare_fleet": "fleet-trtllm-bare",  # tests/fleet/test_trtllm_bare.py's servers
}


def _xdist_group(item: pytest.Item) -> str | None:
    """``XDIST_GROUPS``' group of the first shared fixture ``item`` uses; else, for a test
    using a module-scoped fixture of this project (a server or a run made once per module),
    its module: the fixture then runs once, not once in every worker."""
    names = set(getattr(item, "fixturenames", ()))
    for fixture, group in XDIST_GROUPS.items():
        if fixture in names:
            return group
    info = getattr(item, "_fixtureinfo", None)
    for defs in (info.name2fixturedefs.values() if info is not None else ()):
        d = defs[-1]
        if d.scope == "module" and str(d.baseid).startswith("tests"):
            return item.nodeid.split("::")[0]
    return None


CI_STEP_FIXTURES = (
    # fixtures that start a real Prometheus or VictoriaMetrics (tests/fleet): a test using
    # one (directly or through another fixture) is marked ``ci_step``, so a new fleet test
    # lands in .ci/run's step, not in the README's command (docs/development.md, Test tiers)
    "demo_fleet", "fleet_backend", "prometheus_bin", "victoria_bin", "prometheus_server",
    "victoria_server", "linked_fleet", "traps_prom", "bare_fleet",
    "browser",  # headless Chromium (tests/loadgen/test_bakeoff_chromium.py)
)
FAST_TIER_BUDGET_S = 190.0
"""pytest's own seconds in the README's command on a fresh clone of the 2-core machine: 240 s
with the venv and install (~50 s). Only printed: a run is never failed on the clock."""


def _uses_real_server(item: pytest.Item) -> bool:
    names = set(getattr(item, "fixturenames", ()))
    return any(f in names for f in CI_STEP_FIXTURES)


HOSTILE_SKIP = pytest.mark.skip(
    reason="hostile to the box (starves a CPU for ~15 s): it runs alone, "
    "`pytest -n 0 -m hostile` (.ci/run does), never beside other tests")


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the groups
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark ``ci_step`` each test that uses a real server's fixture (before ``-m`` reads the
    marks); put each test that shares a server or a module-wide run in its xdist group; skip
    the ``hostile`` tests when other tests run beside them (xdist workers)."""
    beside_others = bool(os.environ.get("PYTEST_XDIST_WORKER")) or (
        getattr(config.option, "numprocesses", None) not in (None, 0))
    for item in items:
        if item.get_closest_marker("ci_step") is None and _uses_real_server(item):
            item.add_marker(pytest.mark.ci_step)
        if beside_others and item.get_closest_marker("hostile") is not None:
            item.add_marker(HOSTILE_SKIP)
        if item.get_closest_marker("xdist_group") is not None:
            continue
        group = _xdist_group(item)
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    """In the README's command (``-m 'not ci_step'``): say how to run the other tier, and
    the time against the fast tier's budget (informative; docs/development.md)."""
    whole = config.args_source == pytest.Config.ArgsSource.TESTPATHS  # no path given
    if (config.option.markexpr != "not ci_step" or hasattr(config, "workerinput")
            or config.option.collectonly or not whole):
        return
    took = time.monotonic() - _STARTED[0] if _STARTED else None
    over = took is not None and took > FAST_TIER_BUDGET_S
    terminalreporter.write_line(
        "fast tier (the README's command): "
        + (f"{took:.0f} s of its {FAST_TIER_BUDGET_S:.0f} s budget" if took else "done")
        + ("; OVER BUDGET: make the slowest tests fast, or mark them ci_step" if over else "")
        + "; the ci_step tier: .venv/bin/python -m pytest -q -m ci_step",
        yellow=over)
