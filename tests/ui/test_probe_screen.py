"""The probe screen against a fake loadgen.api (its documented contract, no process)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import pytest

from llmtop.config import Config, Target
from llmtop.ui.fake import FakeSource
from llmtop.ui.screens.probe import ProbeScreen, bounds_text, build_options

from .conftest import first_paint, make_app


@dataclass
class Options:
    target: str
    concurrency: int = 1
    sweep: bool = False
    duration_s: float | None = None
    max_requests: int | None = None
    prompt_tokens: int = 256
    output_tokens: int = 128
    endpoint: str = "completions"
    ttft_slo_s: float | None = None
    max_concurrency: int = 256
    yes: bool = False


def _step(c: int, tps: float, ttft: float) -> dict:
    q = {"p50": ttft / 2, "p90": ttft, "p95": ttft, "p99": ttft, "mean": ttft / 2}
    return {"concurrency": c, "achieved_concurrency": c * 0.98, "requests": 10 * c,
            "output_tokens": 1000 * c, "duration_s": 10.0, "requests_per_s": c,
            "output_tokens_per_s": tps, "goodput_per_s": c, "ttft_s": q, "itl_s": q,
            "tpot_s": q, "e2e_s": q, "errors": {}, "client_bound": False, "client_cpu": 0.1,
            "loop_lag_ms": 1.0}


class FakeHandle:
    def __init__(self, options):
        self.options = options
        self.polls = 0
        self.stopped = False

    def poll(self):
        self.polls += 1
        if self.stopped:
            return [{"type": "finished", "report": self.result()}]
        if self.polls == 1:
            return [{"type": "prepared", "model": "m", "endpoint": "completions"},
                    {"type": "step_done", "step": _step(1, 100.0, 0.1)}]
        if self.polls == 2:
            return [{"type": "progress", "step": 1, "concurrency": 2,
                     "achieved_concurrency": 2.0, "requests_total": 5}]
        return []

    def stop(self):
        self.stopped = True

    def result(self):
        return {"target": self.options.target, "steps": [_step(1, 100.0, 0.1)],
                "saturation": None, "sla_boundary": None}


def test_build_options_passes_only_accepted_fields():
    o = build_options({"url": "http://127.0.0.1:8000", "concurrency": 8, "duration": 30.0,
                       "bogus": 1}, Options)
    assert o.target == "http://127.0.0.1:8000" and o.duration_s == 30.0 and o.concurrency == 8


async def test_probe_runs_charts_and_esc_stops_keeping_results():
    handles = []

    def starter(opts):
        handles.append(FakeHandle(opts))
        return handles[-1]

    cfg = Config(targets=(Target("vllm@127.0.0.1:8000", "http://127.0.0.1:8000"),))
    app = make_app(config=cfg)
    async with app.run_test(size=(80, 24)) as pilot:
        await first_paint(app, pilot)
        screen = ProbeScreen("vllm@127.0.0.1:8000", starter=starter, options_cls=Options)
        app.push_screen(screen)
        await pilot.pause()
        await pilot.press("enter")
        await pilot.pause()
        assert handles and handles[0].options.target == "http://127.0.0.1:8000"
        assert handles[0].options.concurrency == 4
        screen.poll_probe()
        screen.poll_probe()
        await pilot.pause()
        assert len(screen.steps) == 1
        await pilot.press("escape")
        await pilot.pause()
        assert handles[0].stopped
        assert app.screen is screen and screen.stopping
        screen.poll_probe()  # the partial report arrives
        await pilot.pause()
        assert screen.handle is None and screen.report is not None
        assert screen.steps and "stopped" in screen.status
        assert any("probe" in e.text for e in app.source.events())
        await pilot.press("escape")
        await pilot.pause()
        assert app.screen is not screen


async def test_probe_without_target_says_so():
    app = make_app(source=FakeSource.demo())
    async with app.run_test() as pilot:
        await first_paint(app, pilot)
        screen = ProbeScreen(None, starter=lambda o: None, options_cls=Options)
        app.push_screen(screen)
        await pilot.pause()
        await pilot.press("ctrl+r")
        assert "select a target" in screen.status


async def test_non_loopback_target_needs_a_second_start():
    started = []
    # RFC 5737 documentation address: the test checks the prompt and never sends to it
    cfg = Config(targets=(Target("vllm@gpu-box:8000", "http://192.0.2.10:8000"),))
    app = make_app(config=cfg)
    async with app.run_test() as pilot:
        await first_paint(app, pilot)
        screen = ProbeScreen("vllm@gpu-box:8000", starter=lambda o: started.append(o) or
                             FakeHandle(o), options_cls=Options)
        app.push_screen(screen)
        await pilot.pause()
        await pilot.press("ctrl+r")
        assert not started and "not this machine" in screen.status
        await pilot.press("ctrl+r")
        assert len(started) == 1


@pytest.mark.slow
async def test_probe_screen_runs_the_real_probe_against_the_demo():
    from llmtop.demo.launcher import start_demo

    demo = start_demo(engines=["vllm"])
    try:
        cfg = demo.apply(Config(discover=False))
        app = make_app(config=cfg)
        async with app.run_test(size=(100, 30)) as pilot:
            await first_paint(app, pilot)
            screen = ProbeScreen(cfg.targets[0].name)
            app.push_screen(screen)
            await pilot.pause()
            for key, value in (("concurrency", "2"), ("duration", "3"), ("output_tokens", "16")):
                screen.query_one(f"#pf-{key}").value = value
            await pilot.press("ctrl+r")
            assert screen.handle is not None, screen.status
            for _ in range(60):
                await asyncio.sleep(0.25)
                await pilot.pause()
                if screen.handle is None:
                    break
            assert screen.handle is None, screen.status
            assert screen.report is not None and screen.steps, screen.status
            assert screen.steps[0]["output_tokens_per_s"] > 0
    finally:
        demo.stop()


async def test_sweep_uses_the_probe_budget_and_the_form_shows_the_bounds():
    handles = []

    def starter(opts):
        handles.append(FakeHandle(opts))
        return handles[-1]

    cfg = Config(targets=(Target("vllm@127.0.0.1:8000", "http://127.0.0.1:8000"),))
    app = make_app(config=cfg)
    async with app.run_test(size=(80, 24)) as pilot:
        await first_paint(app, pilot)
        screen = ProbeScreen("vllm@127.0.0.1:8000", starter=starter, options_cls=Options)
        app.push_screen(screen)
        await pilot.pause()
        bounds = screen.query_one("#probe-bounds")
        assert "fixed: 4 in flight for 60 s" in str(bounds.render())
        screen.query_one("#pf-sweep").value = True
        await pilot.pause()
        assert screen.query_one("#pf-concurrency").value == "256"
        text = str(bounds.render())
        assert "1,2,4,…,256" in text and "600 s" in text, text
        screen.action_start()
        await pilot.pause()
        opts = handles[0].options
        assert opts.sweep and opts.duration_s is None and opts.max_concurrency == 256
        screen.query_one("#pf-sweep").value = False  # back to a fixed load: its default
        await pilot.pause()
        assert screen.query_one("#pf-concurrency").value == "4"


def test_bounds_text_warns_about_a_short_sweep():
    text = bounds_text({"sweep": True, "max_concurrency": 64, "duration": 60.0,
                        "prompt_tokens": 512, "output_tokens": 128})
    assert "1,2,4,…,64, 7 steps" in text and "budget 60 s: short, at most 4 steps" in text
    fixed = bounds_text({"concurrency": 8, "max_requests": 100, "prompt_tokens": 1,
                         "output_tokens": 2})
    assert fixed.startswith("fixed: 8 in flight until 100 requests")  # no time bound
    both = bounds_text({"concurrency": 8, "max_requests": 100, "duration": 30.0})
    assert both.startswith("fixed: 8 in flight for 30 s or 100 requests")


class FirstStepStopHandle(FakeHandle):
    """Stopped during its first step: the partial report holds that step, cut short."""

    def poll(self):
        self.polls += 1
        if self.stopped:
            return [{"type": "step_done", "step": self.cut()},
                    {"type": "finished", "report": self.result()}]
        return [{"type": "prepared", "model": "m", "endpoint": "completions"},
                {"type": "progress", "step": 0, "phase": "measure", "concurrency": 4}] \
            if self.polls == 1 else []

    @staticmethod
    def cut():
        return {**_step(4, 321.0, 0.2), "index": 0, "partial": True, "duration_s": 3.2}

    def result(self):
        return {"target": self.options.target, "steps": [self.cut()], "saturation": None,
                "sla_boundary": None, "max_throughput": None, "stop_reason": "stopped",
                "options": {"sweep": False}, "duration_s": 3.2}


async def test_a_probe_stopped_in_its_first_step_says_what_happened():
    """Issue 27: not "No step finished: no capacity figure" above that step's numbers."""
    from llmtop.ui.textshot import screen_lines

    cfg = Config(targets=(Target("vllm@127.0.0.1:8000", "http://127.0.0.1:8000"),))
    app = make_app(config=cfg)
    async with app.run_test(size=(80, 24)) as pilot:
        await first_paint(app, pilot)
        screen = ProbeScreen("vllm@127.0.0.1:8000", starter=FirstStepStopHandle,
                             options_cls=Options)
        app.push_screen(screen)
        await pilot.pause()
        await pilot.press("ctrl+r")
        screen.poll_probe()
        assert "step 1 measure" in screen._status_text().plain  # counted from 1, as said after
        await pilot.press("escape")
        screen.poll_probe()
        await pilot.pause()
        text = "\n".join(screen_lines(app))
        assert "No step finished" not in text
        assert "first step (c=4)" in screen.status and "3.2 s" in screen.status
        assert "partial" in screen.status and "no capacity figure" in screen.status
        assert "c=4*" in text and "partial" in text.split("Client side")[1], text


def test_a_url_without_a_scheme_is_judged_by_its_host():
    # "host:port" as typed in the form: the host decides, not a missing scheme.
    screen = ProbeScreen("t", starter=lambda o: None, options_cls=Options)
    said: list[str] = []
    screen._set_status = lambda text, **_kw: said.append(text)  # type: ignore[method-assign]
    assert screen._confirmed("127.0.0.1:8000") and screen._confirmed("localhost:8000")
    assert not screen._confirmed("192.0.2.10:8000") and "192.0.2.10" in said[-1]
    assert screen._confirmed("192.0.2.10:8000")  # the second start
