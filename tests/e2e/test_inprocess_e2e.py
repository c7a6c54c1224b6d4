"""End to end in-process: the real ``Config`` -> ``Monitor`` (real ``Scraper``, ``Store``,
parsers, GPU sampler) -> ``run_once`` / snapshot path, for the cases a subprocess cannot
reach or would make slow: a body over a small configured cap, a body over the default
32 MiB cap sent chunked, a target going STALE while its scrape hangs, and a GPU sampler
that fails in every way.
"""

from __future__ import annotations

import asyncio
import dataclasses
import io
import json
import re

import pytest

from llmtop.cli import build_parser
from llmtop.config import Config
from llmtop.model import GpuSample
from llmtop.monitor import Monitor
from llmtop.once import run_once
from llmtop.settings import build_config
from tests.e2e.conftest import needs_parsers
from tests.monitor_fakes import FakeSamplerBase

_MIB = 1024 * 1024


def config_for(ports: dict[str, int], *extra: str, **changes) -> Config:
    """The ``Config`` the CLI would build for these loopback targets (no config file)."""
    args = build_parser().parse_args(
        ["--once", "--json", "--no-discover", *extra,
         *[f"127.0.0.1:{p}" for p in ports.values()]])
    cfg = build_config(args, environ={"XDG_CONFIG_HOME": "/nonexistent-llmtop-e2e"})
    return dataclasses.replace(cfg, **changes) if changes else cfg


def once_json(cfg: Config, window_s: float = 0.2) -> tuple[int, dict, str]:
    out, err = io.StringIO(), io.StringIO()
    rc = run_once(cfg, window_s=window_s, as_json=True, out=out, err=err)

    def no_constants(name: str):
        raise AssertionError(f"{name} in JSON")

    return rc, json.loads(out.getvalue(), parse_constant=no_constants), err.getvalue()


def rows(doc: dict) -> dict[str, dict]:
    out: dict[str, dict] = {}
    for r in doc["engines"]:
        out.setdefault(r["target"], r)
    return out


@needs_parsers
def test_body_over_a_small_configured_cap(servers):
    ports = servers.start(["healthy", "huge_chunked_small"])
    cfg = config_for(ports, "--timeout", "3", body_cap_bytes=_MIB)
    rc, doc, err = once_json(cfg)
    r = rows(doc)
    bad = r[f"127.0.0.1:{ports['huge_chunked_small']}"]
    assert bad["state"] == "bad_payload"
    assert bad["error"] == "body over 1 MiB"
    good = r[f"127.0.0.1:{ports['healthy']}"]  # 55 KB: under the cap, still read
    assert good["state"] == "ok" and good["generation_tokens_per_s"] > 0
    assert rc == 0, err


def test_chunked_body_over_the_default_32_mib_cap(servers):
    """33 MiB sent chunked (no Content-Length): reading stops at the cap."""
    ports = servers.start(["huge_chunked"])
    cfg = config_for(ports, "--timeout", "8")
    assert cfg.body_cap_bytes == 32 * _MIB
    rc, doc, err = once_json(cfg, window_s=0.0)
    row = doc["engines"][0]
    assert row["state"] == "bad_payload"
    assert row["error"] == "body over 32 MiB"
    assert rc == 1
    assert err.startswith("llmtop: no target could be read") and "32 MiB" in err
    assert "Traceback" not in err


@needs_parsers
def test_hanging_scrape_turns_stale_while_the_rest_stays_ok(servers):
    """A target whose scrape hangs (4 s, under its 5 s timeout) is STALE with its age once
    the last good data is older than 3 intervals; the other target stays ok meanwhile."""
    ports = servers.start(["healthy", "fast_then_slow"])
    cfg = config_for(ports, "--timeout", "5", "--interval", "0.2")
    name = f"127.0.0.1:{ports['fast_then_slow']}"

    async def go():
        mon = Monitor.from_config(cfg)
        try:
            snap = await mon.tick(timeout_s=4.0)  # first contact: both answer
            first = {r.target: r.state for r in snap.engines}
            for _ in range(30):
                await asyncio.sleep(0.2)
                snap = await mon.tick(timeout_s=0.2)
                if {r.target: r for r in snap.engines}[name].state == "stale":
                    break
            return first, snap, list(mon.store.events)
        finally:
            await mon.aclose()

    first, snap, events = asyncio.run(go())
    assert set(first.values()) == {"ok"}
    by = {r.target: r for r in snap.engines}
    stale = by[name]
    assert stale.state == "stale"
    assert stale.error and re.fullmatch(r"no fresh data for \d+s", stale.error)
    assert stale.last_ok_age_s is not None and stale.last_ok_age_s > 0.6
    assert stale.model == "tiny-llama" and stale.running == 8.0  # last good values kept
    ok = by[f"127.0.0.1:{ports['healthy']}"]
    assert ok.state == "ok" and ok.generation_tokens_per_s and ok.generation_tokens_per_s > 0
    assert any(e.target == name and "STALE" in e.text for e in events)
    # the once table shows it as "STALE <age>s"
    from llmtop.console.once_table import print_once

    buf = io.StringIO()
    print_once(snap, file=buf)
    assert re.search(r"STALE \d+s", buf.getvalue()), buf.getvalue()


class _RaisingSampler(FakeSamplerBase):
    """A GPU sampler that breaks its contract (raises) on every call."""

    def sample(self) -> GpuSample:
        raise RuntimeError("NVML exploded")

    def close(self) -> None:
        raise RuntimeError("NVML exploded on close")


class _ErrorSampler(FakeSamplerBase):
    """A GPU sampler reporting the GPU lost mid-run."""

    def __init__(self) -> None:
        self.n = 0

    def sample(self) -> GpuSample:
        import time

        self.n += 1
        return GpuSample(t_wall=time.time(), t_mono=time.monotonic(),
                         error="GPU 0 is lost (Xid 79): reboot the machine")

    def close(self) -> None:
        return None


@needs_parsers
@pytest.mark.parametrize("sampler", [_RaisingSampler, _ErrorSampler])
def test_failing_gpu_sampler_leaves_the_engines_alone(servers, sampler):
    ports = servers.start(["healthy"])
    cfg = config_for(ports, "--timeout", "3")
    from llmtop.sources.scrape import Scraper

    mon = Monitor(cfg, scraper=Scraper(cfg), gpu_sampler=sampler())
    out, err = io.StringIO(), io.StringIO()
    rc = run_once(cfg, window_s=0.2, as_json=True, monitor=mon, out=out, err=err)
    doc = json.loads(out.getvalue())
    assert rc == 0, err.getvalue()
    row = doc["engines"][0]
    assert row["state"] == "ok" and row["generation_tokens_per_s"] > 0
    assert doc["gpus"] == []
    if sampler is _ErrorSampler:
        assert doc["gpu_error"] == "GPU 0 is lost (Xid 79): reboot the machine"
    assert "Traceback" not in err.getvalue()


@needs_parsers
def test_gpu_required_with_a_failing_sampler_is_a_clear_error(servers):
    from llmtop.errors import GpuRequiredError
    from llmtop.sources.scrape import Scraper

    ports = servers.start(["healthy"])
    cfg = config_for(ports, "--timeout", "3", "--gpu-required")
    assert cfg.gpu_required
    mon = Monitor(cfg, scraper=Scraper(cfg), gpu_sampler=_ErrorSampler())
    with pytest.raises(GpuRequiredError, match="GPU 0 is lost"):
        run_once(cfg, window_s=0.0, as_json=True, monitor=mon, out=io.StringIO(),
                 err=io.StringIO())
