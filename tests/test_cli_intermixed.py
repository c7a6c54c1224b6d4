"""Options anywhere: every command accepts its options before, between and after its
positionals, and before the subcommand word (issue 15, "Command line").

Each test calls the real entry point and stops it where the parsed arguments are used, so
it checks what the command would do, not a parser in isolation.
"""

from __future__ import annotations

import argparse
import importlib
from typing import Any

import pytest

demo_cli = importlib.import_module("llmtop.cli.demo")
main_cli = importlib.import_module("llmtop.cli.main")  # llmtop.cli.main is also a function
probe_cli = importlib.import_module("llmtop.cli.probe")
record_cli = importlib.import_module("llmtop.cli.record")


class _Stop(Exception):
    """Raised by a stub where the command would start working."""


@pytest.fixture(autouse=True)
def _no_user_config(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    for var in ("LLMTOP_CONFIG", "LLMTOP_API_KEY"):
        monkeypatch.delenv(var, raising=False)


def _capture_monitor(monkeypatch) -> dict[str, Any]:
    seen: dict[str, Any] = {}

    def run(args: argparse.Namespace) -> int:
        seen["args"] = args
        return 0

    monkeypatch.setattr(main_cli, "_run_monitor", run)
    return seen


def test_main_takes_targets_around_options(monkeypatch):
    seen = _capture_monitor(monkeypatch)
    rc = main_cli.main(["127.0.0.1:8000", "--once", "vllm@127.0.0.1:8001", "--json",
                        "--window", "2"])
    assert rc == 0
    args = seen["args"]
    assert args.targets == ["127.0.0.1:8000", "vllm@127.0.0.1:8001"]
    assert args.once and args.json and args.window == 2.0


def _capture_record(monkeypatch) -> dict[str, Any]:
    seen: dict[str, Any] = {}

    async def fake_record(config, path, retention_s, max_bytes, duration, demo, **kw):
        seen.update(config=config, path=path, duration=duration)
        return 0

    monkeypatch.setattr(record_cli, "_record", fake_record)
    return seen


def test_record_duration_after_file_then_target(monkeypatch):
    seen = _capture_record(monkeypatch)
    rc = main_cli.main(["record", "out.llrec", "--duration", "2", "127.0.0.1:8000"])
    assert rc == 0
    assert seen["path"] == "out.llrec" and seen["duration"] == 2.0
    assert [t.name for t in seen["config"].targets] == ["127.0.0.1:8000"]


def test_record_api_key_between_file_and_target(monkeypatch):
    seen = _capture_record(monkeypatch)
    rc = main_cli.main(["record", "out.llrec", "--api-key", "K", "127.0.0.1:8000"])
    assert rc == 0
    config = seen["config"]
    assert [t.name for t in config.targets] == ["127.0.0.1:8000"]
    assert config.api_key == "K" or config.targets[0].api_key == "K"


def test_record_options_before_the_subcommand_word(monkeypatch):
    seen = _capture_record(monkeypatch)
    rc = main_cli.main(["--insecure", "record", "out.llrec", "127.0.0.1:8000",
                        "--duration", "3"])
    assert rc == 0
    assert seen["duration"] == 3.0 and seen["config"].verify_tls is False


def _capture_replay(monkeypatch) -> dict[str, Any]:
    """Replay of a stub recording; ``snapshot_at`` records the window and stops."""
    import llmtop.record.reader as reader
    import llmtop.record.replay as replay

    seen: dict[str, Any] = {}

    class FakeRecording:
        header: dict = {}
        problem = None
        start = 100.0
        end = 200.0

    def fake_open(path):
        seen["path"] = str(path)
        return FakeRecording()

    def fake_snapshot_at(rec, at, window, config=None):
        seen.update(at=at, window=window)
        raise _Stop

    monkeypatch.setattr(reader.Recording, "open", staticmethod(fake_open))
    monkeypatch.setattr(replay, "snapshot_at", fake_snapshot_at)
    return seen


def test_replay_options_after_file(monkeypatch):
    seen = _capture_replay(monkeypatch)
    with pytest.raises(_Stop):
        record_cli.replay_main(["rec.llrec", "--once", "--window", "5", "--speed", "10"])
    assert seen == {"path": "rec.llrec", "at": 200.0, "window": 5.0}


def test_replay_options_before_the_subcommand_word(monkeypatch):
    seen = _capture_replay(monkeypatch)
    monkeypatch.setenv("LLMTOP_DEBUG", "1")  # let _Stop through main's catch-all
    with pytest.raises(_Stop):
        main_cli.main(["--once", "replay", "rec.llrec", "--window", "4"])
    assert seen["window"] == 4.0


def _capture_probe(monkeypatch) -> dict[str, Any]:
    seen: dict[str, Any] = {}

    def fake_run(options, ns):
        seen.update(options=options, ns=ns)
        return 0

    monkeypatch.setattr(probe_cli, "run", fake_run)
    return seen


def test_probe_options_after_url(monkeypatch):
    seen = _capture_probe(monkeypatch)
    rc = probe_cli.main(["http://127.0.0.1:9/v1/completions", "--concurrency", "4",
                         "--max-requests", "7", "--api-key", "K"])
    assert rc == 0
    assert seen["options"].concurrency == 4 and seen["options"].max_requests == 7
    assert seen["ns"].url == "http://127.0.0.1:9/v1/completions"


def test_probe_options_before_the_subcommand_word(monkeypatch):
    seen = _capture_probe(monkeypatch)
    rc = main_cli.main(["--api-key", "K", "probe", "http://127.0.0.1:9", "--max-requests",
                        "3"])
    assert rc == 0
    assert seen["ns"].url == "http://127.0.0.1:9" and seen["options"].max_requests == 3
    assert seen["options"].api_key == "K"


def _capture_demo(monkeypatch) -> dict[str, Any]:
    seen: dict[str, Any] = {}

    async def fake_serve(args):
        seen["args"] = args
        return 0

    monkeypatch.setattr(demo_cli, "_serve", fake_serve)
    return seen


def test_demo_options_before_serve(monkeypatch):
    seen = _capture_demo(monkeypatch)
    rc = demo_cli.main(["--seed", "3", "--quiet", "serve", "--engines", "vllm"])
    assert rc == 0
    args = seen["args"]
    assert args.cmd == "serve" and args.seed == 3 and args.quiet and args.engines == "vllm"


def test_demo_option_value_is_not_taken_for_the_subcommand(monkeypatch):
    seen = _capture_demo(monkeypatch)
    rc = main_cli.main(["demo", "--ready-file", "serve", "serve", "--quiet"])
    assert rc == 0
    assert seen["args"].ready_file == "serve" and seen["args"].quiet


def test_a_target_named_like_an_option_value_stays_a_target(monkeypatch):
    seen = _capture_monitor(monkeypatch)
    rc = main_cli.main(["--theme", "demo", "127.0.0.1:8000"])
    assert rc == 0
    assert seen["args"].theme == "demo" and seen["args"].targets == ["127.0.0.1:8000"]


def test_replay_speed_after_file_is_any_positive_number(monkeypatch):
    """``llmtop replay FILE --speed 2`` opens the replay at x2 (was: invalid choice)."""
    import llmtop.record.replay as replay
    import llmtop.ui.app as app

    _capture_replay(monkeypatch)
    seen: dict[str, Any] = {}

    class FakeSource:
        config = host = None

        def __init__(self, rec, config=None):
            self.speed = 1.0

    def fake_run_source(source, config, **kw):
        seen["speed"] = source.speed
        return 0

    monkeypatch.setattr(replay, "ReplaySource", FakeSource)
    monkeypatch.setattr(app, "run_source", fake_run_source)
    assert main_cli.main(["replay", "rec.llrec", "--speed", "2"]) == 0
    assert seen == {"speed": 2.0}
    with pytest.raises(SystemExit) as exc:
        record_cli.replay_main(["rec.llrec", "--speed", "0"])
    assert exc.value.code == 2
