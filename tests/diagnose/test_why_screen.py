"""The TUI face of the diagnosis: the Why screen (``w``) at 80x24, the STATE badge naming
an engine's top finding, and the verdict line naming it first."""

from __future__ import annotations

from types import SimpleNamespace

from llmtop.config import Config
from llmtop.diagnose import diagnose
from llmtop.diagnose.live import LiveDiagnosis
from llmtop.ui.app import LlmtopApp
from llmtop.ui.fake import FROZEN_TIME, LLAMA, FakeSource
from llmtop.ui.screens.why import WhyScreen
from llmtop.ui.textshot import screen_lines
from tests.diagnose.rows import base, healthy

TARGET = "vllm@127.0.0.1:8000"


def _findings():
    r = healthy(TARGET, model=LLAMA, kv_cache_usage=0.99, waiting=31.0, preemptions_per_s=2.5)
    return diagnose([r], baselines={r.key: base()})


def _app(findings) -> LlmtopApp:
    src = FakeSource.demo("ok")
    live = LiveDiagnosis(None)  # type: ignore[arg-type]
    live.diagnoser.findings = list(findings)
    src.store = SimpleNamespace(diagnoser=live)  # type: ignore[attr-defined]
    return LlmtopApp(src, Config(), autopoll=False, clock=lambda: FROZEN_TIME)


async def _paint(app, pilot):
    await app.poll_once()
    await pilot.pause()
    app.paint()
    await pilot.pause()


async def test_why_screen_shows_finding_evidence_and_action_at_80x24():
    app = _app(_findings())
    async with app.run_test(size=(80, 24)) as pilot:
        await _paint(app, pilot)
        text = "\n".join(screen_lines(app))
        assert "KV PRESSURE" in text  # the engines table's STATE cell names the cause
        # the verdict names the top finding first and takes its severity
        assert app.verdict.text.startswith("CRITICAL \u2014 vllm@:8000 kv_pressure")
        await pilot.press("w")
        await pilot.pause()
        assert isinstance(app.screen, WhyScreen)
        lines = screen_lines(app)
        assert all(len(line) <= 80 for line in lines)
        text = "\n".join(lines)
        assert "CRITICAL kv_pressure" in text and "KV cache 99 % full" in text
        assert "evidence:" in text and "--gpu-memory-utilization" in text
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, WhyScreen)


async def test_why_screen_says_when_there_is_nothing():
    app = _app([])
    async with app.run_test(size=(80, 24)) as pilot:
        await _paint(app, pilot)
        assert "KV PRESSURE" not in "\n".join(screen_lines(app))
        await pilot.press("w")
        await pilot.pause()
        assert "No findings" in "\n".join(screen_lines(app))


async def test_the_footer_shows_w_why_at_80x24():
    """The Why screen's entry point is in the footer, whole, next to the other keys."""
    app = _app(_findings())
    async with app.run_test(size=(80, 24)) as pilot:
        await _paint(app, pilot)
        footer = screen_lines(app)[-1]
        assert "w Why" in footer and "l Probe" in footer and "? Help" in footer, footer
        assert len(footer.rstrip()) <= 80


def test_help_lists_the_why_screens_keys():
    from llmtop.ui.screens.help import binding_sections

    sections = dict(binding_sections(LlmtopApp.BINDINGS))
    (title,) = [t for t in sections if t.startswith("Why")]
    assert {b.id for b in sections[title]} == {b.id for b in WhyScreen.BINDINGS}


def test_the_why_header_names_the_fleet_window_in_fleet_mode():
    """Fleet rows are judged over the fleet's rate window (its monitor's diagnosis says
    which), not the direct mode's 30 s."""
    from llmtop.fleet.diagnosis import FleetDiagnosis
    from llmtop.model import Snapshot
    from llmtop.ui.screens.why import diagnosis_window_s, why_renderable

    fd = FleetDiagnosis()
    fd.on_refresh(Snapshot(time=FROZEN_TIME, window_s=120.0, engines=[healthy()]))
    fleet_view = SimpleNamespace(source=SimpleNamespace(monitor=SimpleNamespace(diagnoser=fd)))
    assert diagnosis_window_s(fleet_view) == 120.0
    assert diagnosis_window_s(SimpleNamespace(source=SimpleNamespace(monitor=None))) == 30.0
    text = "".join(str(p) for p in why_renderable([], window_s=120.0).renderables)
    assert "over the last 120 s" in text


def test_queue_shares_read_as_percentages():
    """Either share of the queue (of TTFT, or of the request time on Triton) is a percent."""
    from llmtop.diagnose.findings import Evidence
    from llmtop.ui.screens.why import fmt_evidence

    for name in ("queue_share_of_ttft", "queue_share_of_e2e"):
        e = Evidence(name, 0.94, "5s", None, 0.5)
        assert fmt_evidence(e) == f"{name} 94% (limit 50%) [5s]"


def test_request_citations_read_in_their_units():
    """The evidence of single requests (``diagnose.request_citations``): seconds, tokens, a
    share."""
    from llmtop.diagnose.findings import Evidence
    from llmtop.ui.screens.why import fmt_evidence

    assert fmt_evidence(Evidence("longest_queue_s", 7.9, "30s")) == "longest_queue_s 7.90 s [30s]"
    assert fmt_evidence(Evidence("slowest_prompt_max", 90_000.0, "30s")) == \
        "slowest_prompt_max 90000 tok [30s]"
    assert fmt_evidence(Evidence("slowest_queue_share_of_ttft", 0.88, "30s")) == \
        "slowest_queue_share_of_ttft 88% [30s]"
