"""``llmtop --demo``: the TUI starts its OTLP receiver on a free loopback port and tells the
demo engines (``--otlp-traces-endpoint``); a given ``--otlp-listen`` is used instead;
``--once`` is left as it was. No terminal, no demo process: both are stood in for."""

from __future__ import annotations

import re
from typing import Any

import pytest

from llmtop.cli import monitor as cli_monitor
from llmtop.demo import launcher


class _FakeDemo:
    targets: list = []

    def apply(self, config: Any) -> Any:
        return config

    def stop(self) -> None:
        pass


class _Source:
    spans: Any = None
    """The receiver ``make_source`` was given (its monitor's)."""

    def made(self, receiver: Any = None, **_kw: Any) -> tuple[_Source, list]:
        self.spans = receiver
        return self, []


@pytest.fixture
def wired(monkeypatch):
    import llmtop.once
    import llmtop.ui.app
    import llmtop.ui.live

    seen: dict[str, Any] = {}

    def start_demo(**kw: Any) -> _FakeDemo:
        seen["endpoint"] = kw.get("otlp_endpoint")
        return _FakeDemo()

    src = _Source()
    monkeypatch.setattr(launcher, "start_demo", start_demo)
    monkeypatch.setattr(llmtop.ui.live, "make_source", lambda *a, **k: src.made(**k))
    monkeypatch.setattr(llmtop.ui.app, "run_tui", lambda *a, **k: 0)
    monkeypatch.setattr(llmtop.once, "run_once", lambda *a, **k: 0)
    yield seen, src
    if src.spans is not None:
        src.spans.close()


def test_demo_tui_receives_the_demo_spans_on_a_free_loopback_port(wired):
    seen, src = wired
    assert cli_monitor.run(["--demo"]) == 0
    assert src.spans is not None, "the TUI's source got no receiver"
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+/v1/traces", seen["endpoint"])
    assert seen["endpoint"] == src.spans.url and src.spans.port != 0


def test_a_given_otlp_listen_is_the_one_the_demo_is_told(wired):
    seen, src = wired
    assert cli_monitor.run(["--demo", "--otlp-listen", "127.0.0.1:0"]) == 0
    assert seen["endpoint"] == src.spans.url


def test_once_is_left_as_it_was(wired):
    seen, src = wired
    assert cli_monitor.run(["--demo", "--once"]) == 0
    assert seen["endpoint"] is None and src.spans is None


def test_launcher_passes_the_endpoint_to_demo_serve(monkeypatch):
    cmds: list[list[str]] = []

    def spawn(cmd, **_kw):
        cmds.append(cmd)
        raise RuntimeError("stop here")

    monkeypatch.setattr(launcher.children, "spawn", spawn)
    with pytest.raises(RuntimeError):
        launcher.start_demo(otlp_endpoint="http://127.0.0.1:9/v1/traces")
    i = cmds[0].index("--otlp-traces-endpoint")
    assert cmds[0][i + 1] == "http://127.0.0.1:9/v1/traces"


def test_demo_serve_refuses_an_endpoint_that_is_not_a_url(capsys):
    from llmtop.cli.demo import main

    assert main(["serve", "--otlp-traces-endpoint", "127.0.0.1:4318"]) == 2
    err = capsys.readouterr().err
    assert "give an http(s):// URL" in err and "Traceback" not in err


def test_record_demo_with_otlp_listen_tells_the_demo(monkeypatch, tmp_path):
    import asyncio

    import llmtop.cli.record as cli_record

    seen: dict[str, Any] = {}

    def start_demo(**kw: Any) -> _FakeDemo:
        seen["endpoint"] = kw.get("otlp_endpoint")
        return _FakeDemo()

    def fake_run(coro: Any) -> int:
        coro.close()
        return 0

    import llmtop.cli.otlp as cli_otlp

    started: list[Any] = []
    real = cli_otlp.start_receiver

    def start_receiver(args: Any) -> Any:
        rx = real(args)
        started.append(rx)
        return rx

    monkeypatch.setattr(launcher, "start_demo", start_demo)
    monkeypatch.setattr(asyncio, "run", fake_run)
    monkeypatch.setattr(cli_otlp, "start_receiver", start_receiver)
    try:
        assert cli_record.record_main([str(tmp_path / "r.llmtop"), "--demo", "--otlp-listen",
                                       "127.0.0.1:0"]) == 0
    finally:
        for rx in started:
            if rx is not None:
                rx.close()
    assert seen["endpoint"] == started[0].url
    seen.clear()
    assert cli_record.record_main([str(tmp_path / "s.llmtop"), "--demo"]) == 0
    assert seen["endpoint"] is None  # no receiver asked for: none started
