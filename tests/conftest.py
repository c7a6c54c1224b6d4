"""Shared test helpers."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"

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


HOSTILE_SKIP = pytest.mark.skip(
    reason="hostile to the box (starves a CPU for ~15 s): it runs alone, "
    "`pytest -n 0 -m hostile` (.ci/run does), never beside other tests")


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the groups
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Put each test that shares a server or a module-wide run in its xdist group; skip the
    ``hostile`` tests when other tests run beside them (xdist workers)."""
    beside_others = bool(os.environ.get("PYTEST_XDIST_WORKER")) or (
        getattr(config.option, "numprocesses", None) not in (None, 0))
    for item in items:
        if beside_others and item.get_closest_marker("hostile") is not None:
            item.add_marker(HOSTILE_SKIP)
        if item.get_closest_marker("xdist_group") is not None:
            continue
        group = _xdist_group(item)
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))
