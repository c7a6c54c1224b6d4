"""The requests screen (``r``): content, sort, filter, window, empty states, back, 80x24."""

from __future__ import annotations

from llmtop.history.request_window import RequestWindow
from llmtop.model.request_records import InflightRequest, RequestRecord
from llmtop.ui.fake import FROZEN_TIME, FakeSource, demo_requests
from llmtop.ui.screens.overview import OverviewScreen
from llmtop.ui.screens.requests import RequestsScreen
from llmtop.ui.screens.requests_cells import phase_bar, request_layout
from llmtop.ui.textshot import screen_lines

from .conftest import FakeReplay, first_paint, make_app

T = FROZEN_TIME


def _req(rid: str, ttft: float, e2e: float, *, prompt: int = 100, queue: float = 0.01,
         target: str = "vllm@127.0.0.1:8000", source: str = "traffic",
         finish: str | None = None, end: float = T - 5) -> RequestRecord:
    return RequestRecord(id=rid, engine="vllm", target=target, prompt_tokens=prompt,
                         output_tokens=50, queue_s=queue, prefill_s=ttft - queue,
                         decode_s=e2e - ttft, ttft_s=ttft, e2e_s=e2e, source=source,
                         finish_reason=finish, t_end=end)


def _window(*reqs: RequestRecord) -> RequestWindow:
    w = RequestWindow()
    w.add(reqs)
    w.spans_seen = len(reqs)
    return w


async def _open(app, pilot, size=(80, 24)):
    await first_paint(app, pilot)
    await pilot.press("r")
    await pilot.pause()
    app.paint()
    await pilot.pause()
    assert isinstance(app.screen, RequestsScreen)
    return app.screen


def _text(app) -> str:
    return "\n".join(screen_lines(app))


async def test_slowest_ttft_first_with_the_shape_and_back():
    src = FakeSource.demo("requests")
    app = make_app(source=src)
    async with app.run_test(size=(80, 24)) as pilot:
        scr = await _open(app, pilot)
        ttfts = [r.ttft_s for r in scr.shown if r.ttft_s is not None]
        assert ttfts == sorted(ttfts, reverse=True) and len(ttfts) > 20
        text = _text(app)
        assert "93 requests in 1 min (5 the probe's)" in text
        summary = src.requests.summary(60, T)  # the shape is the history's summary
        assert f"Slowest {summary.slow_count} (TTFT" in text
        assert f"{summary.slow_queue_share * 100:.0f} % of their TTFT queued" in text
        first = scr.shown[0]
        assert first.id in text  # the selected request, in full, under the table
        assert "ENGINE" in text and "TTFT" in text and "Q/P/D" in text
        assert "FINISH" not in text  # dropped at 80 columns; SRC kept
        assert "SRC" in text
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, OverviewScreen)


async def test_sort_keys_and_reverse():
    app = make_app(source=FakeSource.demo("requests"))
    async with app.run_test(size=(80, 24)) as pilot:
        scr = await _open(app, pilot)
        await pilot.press("s")  # e2e
        assert scr.by == "e2e_s"
        e2e = [r.e2e_s for r in scr.shown if r.e2e_s is not None]
        assert e2e == sorted(e2e, reverse=True)
        assert "by e2e" in _text(app)
        await pilot.press("s", "s", "s", "s")  # queue, prefill, decode, prompt tokens
        assert scr.by == "prompt_tokens"
        toks = [r.prompt_tokens for r in scr.shown if r.prompt_tokens is not None]
        assert toks == sorted(toks, reverse=True)
        await pilot.press("S")
        toks = [r.prompt_tokens for r in scr.shown if r.prompt_tokens is not None]
        assert toks == sorted(toks) and scr.reverse
        # those without the value (SGLang and Triton send no tokens) stay last
        assert all(r.prompt_tokens is None for r in scr.shown[len(toks):])


async def test_filter_by_engine_and_source_then_esc_clears():
    app = make_app(source=FakeSource.demo("requests"))
    async with app.run_test(size=(80, 24)) as pilot:
        scr = await _open(app, pilot)
        await pilot.press("slash", *"sgl")
        assert scr.shown and all(r.engine == "sglang" for r in scr.shown)
        assert len(scr.shown) == 25
        await pilot.press("enter")
        await pilot.press("escape")
        assert scr.filter_text == "" and len(scr.shown) == 93
        await pilot.press("slash", *"probe")
        assert [r.source for r in scr.shown] == ["probe"] * 5
        await pilot.press(*"zz")
        assert scr.shown == []
        assert "No request matches 'probezz'" in _text(app)
        await pilot.press("escape", "escape")
        await pilot.pause()
        assert isinstance(app.screen, OverviewScreen)


async def test_window_key_widens_and_inflight_on_top():
    old = _req("cmpl-old-0", 9.0, 12.0, end=T - 200)
    new = _req("cmpl-new-0", 1.0, 2.0)
    w = _window(old, new)
    w.set_inflight("llamacpp@127.0.0.1:8080", [InflightRequest(
        target="llamacpp@127.0.0.1:8080", engine="llamacpp", id="412", slot=0, age_s=4.2,
        prompt_tokens=812, output_tokens=140, remaining_tokens=372)])
    app = make_app(source=FakeSource.demo("ok", requests=w))
    async with app.run_test(size=(80, 24)) as pilot:
        scr = await _open(app, pilot)
        assert [r.id for r in scr.shown] == ["412", "cmpl-new-0"]
        text = _text(app)
        assert ">4.2s" in text and "running 372 left" in text
        assert "1 request in 1 min, 1 in flight" in text
        await pilot.press("v")  # 5 min: the older one too, slowest first
        assert [r.id for r in scr.shown] == ["412", "cmpl-old-0", "cmpl-new-0"]
        assert "last 5 min" in _text(app)


async def test_empty_states_say_why():
    # no receiver, nothing received: how to turn it on
    app = make_app(source=FakeSource.demo("ok"))
    async with app.run_test(size=(80, 24)) as pilot:
        await _open(app, pilot)
        text = _text(app)
        assert "llmtop receives no request spans" in text
        assert "--otlp-listen 127.0.0.1:4318" in text and "--otlp-traces-endpoint" in text
    # a receiver, no spans yet: which engines send them, with which flags
    w = RequestWindow()
    w.receiver = {"url": "http://127.0.0.1:4318/v1/traces", "bad": 0, "last_error": None}
    app = make_app(source=FakeSource.demo("ok", requests=w))
    async with app.run_test(size=(80, 24)) as pilot:
        await _open(app, pilot)
        text = _text(app)
        assert "Listening on http://127.0.0.1:4318/v1/traces: no spans yet" in text
        assert "--enable-trace" in text and "mode=opentelemetry" in text
    # spans came, but none ended in the window
    w = _window(_req("cmpl-old-0", 1.0, 2.0, end=T - 400))
    app = make_app(source=FakeSource.demo("ok", requests=w))
    async with app.run_test(size=(80, 24)) as pilot:
        await _open(app, pilot)
        assert "No request finished in the last 1 min (1 spans received" in _text(app)


async def test_replay_without_spans_and_with_them():
    app = make_app(source=FakeSource.demo("ok", replay=FakeReplay()))
    async with app.run_test(size=(80, 24)) as pilot:
        await _open(app, pilot)
        assert "This recording holds no request spans" in _text(app)
    w = _window(_req("cmpl-a-0", 3.0, 4.0, source="probe"), _req("cmpl-b-0", 1.0, 2.0))
    app = make_app(source=FakeSource.demo("ok", replay=FakeReplay(), requests=w))
    async with app.run_test(size=(80, 24)) as pilot:
        scr = await _open(app, pilot)
        assert [r.id for r in scr.shown] == ["cmpl-a-0", "cmpl-b-0"]
        assert "(1 the probe's)" in _text(app)


async def test_r_is_not_offered_on_its_own_screen_and_refresh_moved_to_R():
    app = make_app(source=FakeSource.demo("requests"))
    async with app.run_test(size=(120, 30)) as pilot:
        await _open(app, pilot)
        assert not app.check_action("requests", ())
        before = app.source.ticks
        await pilot.press("R")
        await pilot.pause()
        await pilot.pause()
        assert app.source.ticks == before + 1


def test_layout_drops_finish_then_source_and_bar_splits_the_time():
    assert [c.key for c in request_layout(160)][-2:] == ["finish", "src"]
    assert "finish" not in [c.key for c in request_layout(80)]
    assert [c.key for c in request_layout(70)][-1] == "bar"
    r = _req("x", ttft=2.0, e2e=4.0, queue=1.0)  # queue 1, prefill 1, decode 2 of 4 s
    bar = phase_bar(r, 20).plain
    assert bar == "\u2592" * 5 + "\u2593" * 5 + "\u2588" * 10
    r.e2e_s = 8.0  # 4 s the engine does not split: dotted
    assert phase_bar(r, 16).plain.endswith("\u00b7" * 8)
    r.queue_s = r.prefill_s = r.decode_s = None
    assert phase_bar(r, 8).plain.strip() == "\u2013"


def test_demo_requests_are_deterministic():
    a, b = demo_requests(), demo_requests()
    assert [r.id for r in a.slowest(60, T)] == [r.id for r in b.slowest(60, T)]


async def test_replay_of_a_recording_with_real_spans(tmp_path):
    """A recording with the real vLLM's span bodies, replayed: the screen lists them."""
    from llmtop.config import Config
    from llmtop.record.reader import Recording
    from llmtop.record.replay import ReplaySource
    from llmtop.ui.app import LlmtopApp
    from llmtop.ui.source import MonitorSource
    from tests.spans.test_record_replay import _record

    path = tmp_path / "rec.llmtop"
    await _record(path)
    replay = ReplaySource(Recording.open(path))
    replay.step(10)  # to the end: the spans came at the third tick
    app = LlmtopApp(MonitorSource(replay, host="replay"), Config(), autopoll=False)
    async with app.run_test(size=(80, 24)) as pilot:
        scr = await _open(app, pilot)
        assert {r.prompt_tokens for r in scr.shown} == {60, 150, 15}
        assert "3 requests in 1 min" in _text(app)


def _ticks(monkeypatch) -> list[float]:
    """The requests screen's throttle on a clock the test moves (``now[0]``)."""
    now = [1000.0]
    monkeypatch.setattr(RequestsScreen, "ticks", staticmethod(lambda: now[0]), raising=False)
    return now


def _count_reads(w: RequestWindow) -> dict[str, list]:
    """Count the window's summaries and rankings (each call's ``by`` and ``n``)."""
    calls: dict[str, list] = {"summary": [], "slowest": []}
    summary, slowest = w.summary, w.slowest
    w.summary = lambda *a, **k: calls["summary"].append(k.get("by")) or summary(*a, **k)
    w.slowest = lambda *a, **k: calls["slowest"].append(k.get("n")) or slowest(*a, **k)
    return calls


async def test_the_window_is_read_at_most_every_refresh_min_s_unless_a_key_changes_it(
        monkeypatch):
    from llmtop.ui.screens.requests import REFRESH_MIN_S

    now = _ticks(monkeypatch)
    w = _window(_req("cmpl-a-0", 1.0, 2.0))
    reads = _count_reads(w)["summary"]
    app = make_app(source=FakeSource.demo("ok", requests=w))
    async with app.run_test(size=(80, 24)) as pilot:
        scr = await _open(app, pilot)
        n = len(reads)
        w.add([_req("cmpl-b-0", 5.0, 6.0)])
        now[0] += REFRESH_MIN_S - 0.01
        app.paint()  # a tick within REFRESH_MIN_S: not read again
        assert len(reads) == n and [r.id for r in scr.shown] == ["cmpl-a-0"]
        now[0] += 0.01  # REFRESH_MIN_S passed
        app.paint()
        assert len(reads) == n + 1 and [r.id for r in scr.shown] == ["cmpl-b-0", "cmpl-a-0"]
        await pilot.press("s")  # a key that changes the sort: at once
        assert reads[-1] == "e2e_s"


async def test_typing_a_filter_reads_the_window_at_most_once_per_refresh_min_s(monkeypatch):
    """Each keystroke filters the last read; the window is summed up again only when
    ``REFRESH_MIN_S`` passed, and ranked whole at most once per read."""
    from llmtop.ui.screens.requests import REFRESH_MIN_S

    now = _ticks(monkeypatch)
    w = _window(*[_req(f"cmpl-{i}", 0.1 + i / 100, 1.0 + i / 100) for i in range(30)])
    calls = _count_reads(w)
    app = make_app(source=FakeSource.demo("ok", requests=w))
    async with app.run_test(size=(80, 24)) as pilot:
        scr = await _open(app, pilot)
        sums, ranks = len(calls["summary"]), len(calls["slowest"])
        await pilot.press("slash", *"cmpl-1")
        await pilot.pause()
        app.paint()  # the app's tick in between keys
        assert scr.filter_text == "cmpl-1"
        want = ["cmpl-19", *[f"cmpl-1{i}" for i in range(8, -1, -1)], "cmpl-1"]
        assert [r.id for r in scr.shown] == want
        assert len(calls["summary"]) == sums  # not summed up again
        assert calls["slowest"][ranks:] == [None]  # the whole window ranked once
        await pilot.press("enter", "S")  # fastest first: from that read
        await pilot.pause()
        assert len(calls["summary"]) == sums and len(calls["slowest"]) == ranks + 1
        assert [r.id for r in scr.shown] == want[::-1]
        now[0] += REFRESH_MIN_S  # one read more, then typing goes on that one
        await pilot.press("slash", "end", "backspace", "2")
        await pilot.pause()
        app.paint()
        assert len(calls["summary"]) == sums + 1 and len(calls["slowest"]) == ranks + 3
        assert scr.filter_text == "cmpl-2", scr.filter_text
        assert [r.id for r in scr.shown] == ["cmpl-2", *[f"cmpl-2{i}" for i in range(10)]]


async def test_fleet_mode_offers_no_requests_screen():
    from tests.ui.test_mode_keys import _source

    app = make_app(source=_source("fleet"))
    async with app.run_test(size=(120, 30)) as pilot:
        await first_paint(app, pilot)
        assert "Requests" not in screen_lines(app)[-1]
        await pilot.press("r")
        await pilot.pause()
        assert isinstance(app.screen, OverviewScreen)


def test_the_filter_reads_source_and_finish_reason_of_finished_requests_only():
    """A finished request matches by its source and finish reason; one in flight matches
    "running" and has no finish reason."""
    from llmtop.ui.screens.requests_cells import matches

    done = _req("r1", 0.5, 1.0, source="probe", finish="length")
    live = InflightRequest(target="llamacpp@127.0.0.1:8080", engine="llamacpp", id="7")
    assert matches(done, "PROBE") and matches(done, "length") and not matches(done, "running")
    assert matches(live, "running") and not matches(live, "length")
    assert matches(live, "llamacpp@127") and not matches(done, "llamacpp")
