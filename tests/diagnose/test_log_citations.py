"""``errors`` and ``stuck`` cite the engine's log lines around their start as evidence (the
error lines, else warnings, else nothing); other findings and healthy rows are unchanged; a
finding that goes on keeps the lines of its start; the live diagnosis and ``--once`` pass the
store's events."""

from __future__ import annotations

import time

from llmtop.diagnose import Diagnoser, diagnose
from llmtop.diagnose.log_citations import carry, cite_log
from llmtop.model import Snapshot
from llmtop.once import _diagnose
from tests.diagnose.rows import T, base, healthy
from tests.log_fakes import DEAD_HEADLINE, burst, event

W0 = 1_700_000_000.0


def failing():
    return healthy(finished={"stop": 40.0, "error": 20.0}, errors_per_s=20 / 30)


def stuck_row():
    return healthy(running=8.0, waiting=4.0, tokens_idle_s=40.0, generation_tokens_per_s=0.0,
                   health_status=200)


def _hhmmss(t):
    return time.strftime("%H:%M:%S", time.localtime(t))


def test_errors_cites_the_error_lines_not_the_info_after_them():
    logs = {T: [event(W0, "warning", "a warning"), *burst(W0 + 5),
                event(W0 + 8, "error", "Exception in ASGI application",
                      headline="RuntimeError: x")]}
    (f,) = [f for f in diagnose([failing()], baselines={f"{T}|llama": base()}, logs=logs)
            if f.rule == "errors"]
    assert f.summary.endswith("; log: RuntimeError: x (+1 more)")
    cited = [e.value for e in f.evidence if e.signal == "log"]
    assert cited == [f"{_hhmmss(W0 + 5)} {DEAD_HEADLINE}", f"{_hhmmss(W0 + 8)} RuntimeError: x"]
    assert all(e.window == "30s" for e in f.evidence if e.signal == "log")


def test_stuck_cites_warnings_when_there_is_no_error():
    logs = {T: [event(W0, "info", "INFO: 127.0.0.1 - GET /health 200"),
                event(W0 + 1, "warning", "No available memory for the cache blocks")]}
    (f,) = diagnose([stuck_row()], logs=logs)
    assert f.rule == "stuck"
    assert f.summary.endswith("; log: No available memory for the cache blocks")
    assert [e.signal for e in f.evidence].count("log") == 1


def test_without_log_lines_findings_are_exactly_as_before():
    plain = diagnose([failing(), stuck_row()], baselines={f"{T}|llama": base()})
    info_only = {T: [event(W0, "info", "INFO:     Shutting down")]}
    assert diagnose([failing(), stuck_row()], baselines={f"{T}|llama": base()},
                    logs=info_only) == plain
    assert diagnose([failing(), stuck_row()], baselines={f"{T}|llama": base()}, logs={}) == plain


def test_log_lines_never_make_a_finding_and_other_rules_do_not_cite():
    logs = {T: burst(W0)}
    assert diagnose([healthy()], baselines={f"{T}|llama": base()}, logs=logs) == []
    queued = healthy(waiting=20.0, queue_s=healthy().queue_s.__class__(
        p50=3.0, p90=5.0, p95=6.0, p99=6.0, mean=3.0, count=60))
    for f in diagnose([queued], baselines={f"{T}|llama": base()}, logs=logs):
        assert "log:" not in f.summary and all(e.signal != "log" for e in f.evidence)


def test_a_finding_that_goes_on_keeps_the_lines_of_its_start():
    d = Diagnoser()
    d.update(0.0, [failing()], [], logs={T: burst(W0)})
    first = next(f for f in d.findings if f.rule == "errors")
    assert first.summary.endswith(f"; log: {DEAD_HEADLINE}")
    later = {T: [event(W0 + 60, "error", "a later, unrelated error")]}
    d.update(10.0, [failing()], [], logs=lambda: later)
    again = next(f for f in d.findings if f.rule == "errors")
    assert again.summary.endswith(f"; log: {DEAD_HEADLINE}")
    assert [e.value for e in again.evidence if e.signal == "log"] == [
        e.value for e in first.evidence if e.signal == "log"]
    # a finding that cited nothing at its start takes the lines that came later
    plain = diagnose([failing()])[0]
    cited = cite_log(plain, later[T], "30s")
    assert carry(plain, cited) == cited


def test_once_passes_the_log_lines_of_the_last_30_s():
    first = Snapshot(time=W0, window_s=1.0, engines=[failing()])
    snap = Snapshot(time=W0 + 20, window_s=1.0, engines=[failing()],
                    log_events={T: (event(W0 - 60, "error", "too old"), *burst(W0 + 5))})
    f = next(f for f in _diagnose(first, snap, 1.0) if f.rule == "errors")
    assert f.summary.endswith(f"; log: {DEAD_HEADLINE}")
    assert "too old" not in str(f.evidence)


def test_the_live_diagnosis_cites_the_stores_log_lines():
    from llmtop.config import Config, Target
    from llmtop.diagnose.live import attach, findings_of
    from llmtop.history.store import Store
    from tests.history.fakes import body, fake_detect, fake_normalize, raw
    from tests.log_fakes import raw_log

    store = Store(Config(targets=(Target(name="a", base_url="http://127.0.0.1:1",
                                         host="127.0.0.1"),), interval_s=1.0),
                  normalize=fake_normalize, detect=fake_detect)
    attach(store)
    for t in range(0, 41):
        if t == 20:
            store.add_log(raw_log("a", W0 + t, burst(W0 + t - 1), t_mono=float(t)))
        store.ingest(raw("a", float(t), body(counters={"requests": 10.0 * t,
                                                        "errors": 2.0 * t}), wall0=W0))
        store.commit(float(t), W0 + t)
    (f,) = [f for f in findings_of(store) if f.rule == "errors"]
    assert f.summary.endswith(f"; log: {DEAD_HEADLINE}")
