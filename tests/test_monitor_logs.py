"""The monitor follows each target's log: found off the loop when targets come, followed,
forgotten when they go, drained every tick into the sink and ``Store.add_log``; a log that
cannot be read is said once; the follower is closed with the monitor. Flags and the config
file: ``--log TARGET=PATH``, ``--no-logs``, a target's ``log``, ``log_lines``."""

from __future__ import annotations

import asyncio
import dataclasses
import os
from pathlib import Path

import pytest

from llmtop.cli import build_parser
from llmtop.config import Config, Target
from llmtop.discovery.logs import LogRoots
from llmtop.errors import ConfigError
from llmtop.history.store import Store
from llmtop.model import Container, LogLocation, RawLog
from llmtop.monitor import Monitor
from llmtop.settings import build_config
from tests.history.fakes import fake_detect, fake_normalize
from tests.monitor_fakes import FakeLogs
from tests.test_monitor import FakeClock, FakeScraper


def _t(name: str, port: int, **kw: object) -> Target:
    return Target(name=name, base_url=f"http://127.0.0.1:{port}", host="127.0.0.1", port=port,
                  **kw)  # type: ignore[arg-type]


def _monitor(tmp_path: Path, *targets: Target, sink: object = None
             ) -> tuple[Monitor, FakeLogs, FakeClock]:
    clock = FakeClock()
    cfg = Config(targets=targets, interval_s=1.0)
    store = Store(cfg, normalize=fake_normalize, detect=fake_detect)
    logs = FakeLogs()
    (tmp_path / "proc").mkdir(exist_ok=True)
    mon = Monitor(cfg, scraper=FakeScraper(clock), gpu_sampler=None, store=store,
                  tick_timeout_s=1.0, logs=logs, sink=sink,  # type: ignore[arg-type]
                  log_roots=LogRoots(proc=str(tmp_path / "proc"), journalctl=None))
    return mon, logs, clock


async def _ticks_until(mon: Monitor, clock: FakeClock, done, n: int = 50) -> None:
    for _ in range(n):
        clock.step()
        await mon.tick()
        if done():
            return
        await asyncio.sleep(0.02)  # the finding thread
    raise AssertionError("not reached")


async def test_each_targets_log_is_found_off_the_loop_and_followed(tmp_path: Path) -> None:
    log = tmp_path / "a.log"
    d = tmp_path / "proc" / "4711" / "fd"
    d.mkdir(parents=True)
    os.symlink("/dev/pts/3", d / "1")
    os.symlink("/dev/pts/3", d / "2")
    mon, logs, clock = _monitor(tmp_path, _t("a", 1, log=str(log), engine="vllm"),
                                _t("b", 2, pid=4711, engine="vllm"), _t("c", 3))
    await _ticks_until(mon, clock, lambda: len(logs.following) == 2)
    assert logs.following["a"] == LogLocation("file", str(log), path=str(log), fmt="vllm")
    assert logs.following["b"].error == f"{tmp_path}/proc/4711/fd/1 is a terminal"
    assert "c" not in logs.following  # nothing known to look at (no pid, no log)
    for _ in range(3):
        clock.step()
        await mon.tick()
    said = [e.text for e in mon.store.events if "log of" in e.text]
    assert said == [f"log of b: {tmp_path}/proc/4711/fd/1 is a terminal"]  # once
    await mon.aclose()
    assert logs.closed


async def test_every_tick_drains_into_the_sink_and_the_store(tmp_path: Path) -> None:
    seen: list[object] = []
    mon, logs, clock = _monitor(tmp_path, _t("a", 1), sink=seen.append)
    where = LogLocation("file", "/x.log", path="/x.log")
    raw = RawLog("a", 1.0, 1.0, where, [], dropped=3)
    logs.queued.append(raw)
    clock.step()
    await mon.tick()
    assert raw in seen
    kept = mon.store.logs.get("a")
    assert kept is not None and kept.location == where and kept.dropped == 3
    clock.step()
    await mon.tick()
    assert [x for x in seen if isinstance(x, RawLog)] == [raw]  # drained once


async def test_a_log_found_before_its_engine_is_known_gets_its_format_later(
        tmp_path: Path) -> None:
    mon, logs, clock = _monitor(tmp_path, _t("a", 1, log=str(tmp_path / "a.log")))
    await _ticks_until(mon, clock, lambda: "a" in logs.following)
    await _ticks_until(mon, clock, lambda: logs.following["a"].fmt is not None)
    assert logs.following["a"].fmt == mon.store.engine_of("a")


async def test_found_targets_are_followed_and_dropped_ones_forgotten(tmp_path: Path) -> None:
    mon, logs, _clock = _monitor(tmp_path)
    c = Container(runtime="docker", id="f" * 64, name="v")
    found = _t("vllm@127.0.0.1:9", 9, engine="vllm", container=c)
    ts = mon.target_set
    ts.add_found([found], [])
    assert [t.name for t in ts.logs_wanted()] == ["vllm@127.0.0.1:9"]
    assert ts.logs_wanted() == []  # taken once
    moved = dataclasses.replace(found, base_url="http://127.0.0.1:10", port=10)
    ts.add_found([moved], [])
    assert [t.base_url for t in ts.logs_wanted()] == ["http://127.0.0.1:10"]  # again
    ts._drop("vllm@127.0.0.1:9", "test")
    assert logs.calls[-1] == ("forget", "vllm@127.0.0.1:9")
    await mon.aclose()


def test_from_config_follows_unless_no_logs() -> None:
    mon = Monitor.from_config(Config(targets=(_t("a", 1),)))
    try:
        assert mon.logs is not None and mon.logs.lines == 2000  # type: ignore[attr-defined]
    finally:
        asyncio.run(mon.aclose())
    off = Monitor.from_config(Config(targets=(_t("a", 1),), logs=False))
    assert off.logs is None
    asyncio.run(off.aclose())


def _cfg(tmp_path: Path, *argv: str, toml: str = "") -> Config:
    p = tmp_path / "config.toml"
    p.write_text(toml)
    args = build_parser().parse_args(["--config", str(p), *argv])
    return build_config(args, environ={})


def test_log_flags_name_given_targets_and_keep_the_rest_for_the_search(tmp_path: Path) -> None:
    cfg = _cfg(tmp_path, "vllm@127.0.0.1:8000", "127.0.0.1:9000", "--log",
               ":8000=/var/log/vllm.log", "--log", "sglang@127.0.0.1:30000=cmd:journalctl -f")
    assert [t.log for t in cfg.targets] == ["/var/log/vllm.log", None]
    assert cfg.log_paths == (("sglang@127.0.0.1:30000", "cmd:journalctl -f"),)
    assert cfg.logs and cfg.log_lines == 2000
    assert not _cfg(tmp_path, "--no-logs").logs
    with pytest.raises(ConfigError, match="expected TARGET=PATH"):
        _cfg(tmp_path, "--log", "/var/log/vllm.log")


def test_the_config_file_names_logs(tmp_path: Path) -> None:
    cfg = _cfg(tmp_path, toml='log_lines = 200\nlogs = true\n[[targets]]\n'
               'url = "vllm@10.0.0.5:8000"\nlog = "cmd:ssh gpu1 tail -F /var/log/vllm.log"\n')
    assert cfg.log_lines == 200
    assert cfg.targets[0].log == "cmd:ssh gpu1 tail -F /var/log/vllm.log"
    flag = _cfg(tmp_path, "--log", "vllm@10.0.0.5:8000=/tmp/x.log",
                toml='[[targets]]\nurl = "vllm@10.0.0.5:8000"\nlog = "/var/log/a.log"\n')
    assert flag.targets[0].log == "/tmp/x.log"  # the flag wins
    for bad in ("log_lines = 0\n", "log_lines = true\n", "logs = 1\n"):
        with pytest.raises(ConfigError):
            _cfg(tmp_path, toml=bad)


async def test_the_second_tick_already_has_the_lines_as_once_needs(tmp_path: Path) -> None:
    """``--once`` ticks twice, a second apart: the given targets' logs are found from the
    start and followed by the first tick, so the second drains their last lines."""
    from llmtop.parse.logs import assembler
    from llmtop.sources.logs import Follower

    log = tmp_path / "vllm.log"
    log.write_text("(APIServer pid=20852) INFO 12-07 04:47:19 [api_server.py:1] ready\n")
    cfg = Config(targets=(_t("a", 1, log=str(log), engine="vllm"),), interval_s=1.0)
    store = Store(cfg, normalize=fake_normalize, detect=fake_detect)
    clock = FakeClock()
    mon = Monitor(cfg, scraper=FakeScraper(clock), gpu_sampler=None, store=store,
                  tick_timeout_s=1.0, logs=Follower(assembler, poll_s=0.05))
    try:
        await mon.tick()
        await asyncio.sleep(1.0)  # --once's window
        clock.step()
        await mon.tick()
        kept = mon.store.logs.get("a")
        assert kept is not None and any("ready" in " ".join(e.lines) for e in kept.events)
    finally:
        await mon.aclose()
