"""The diagnosis signals in the history: phase-time and token-length quantiles over a window,
spec-decode acceptance (reset-aware, gauge fallback, None without drafts), lifetime values,
llama.cpp's prefix cache end to end, and the rows <-> target import cycle staying broken."""

from __future__ import annotations

import ast
import math
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from llmtop.config import Config, Target
from llmtop.history import derive
from llmtop.history.store import Store
from llmtop.model import Hist, ModelSample
from tests.conftest import fixture_text

from .fakes import body, fake_detect, fake_normalize, raw

INF = "inf"
SEC = [0.1, 0.5, 1.0, 5.0, INF]
TOK = [128, 512, 2048, 8192, INF]


def make_store(*names, interval=1.0, normalize=fake_normalize, detect=fake_detect, engine=None):
    targets = tuple(Target(name=n, base_url=f"http://127.0.0.1:{i + 1}", host="127.0.0.1",
                           engine=engine) for i, n in enumerate(names))
    return Store(Config(targets=targets, interval_s=interval), normalize=normalize,
                 detect=detect)


def hists(i):
    """Per second: 2 prefills <= 0.1 s and 1 in (0.5, 1]; decodes in (1, 5]; prompts of
    (128, 512] tokens; generations <= 128; steps of (512, 2048] tokens."""
    return {
        "prefill": [SEC, [2 * i, 2 * i, 3 * i, 3 * i, 3 * i], 0.9 * i, 3 * i],
        "decode": [SEC, [0, 0, 0, 3 * i, 3 * i], 9.0 * i, 3 * i],
        "inference": [SEC, [0, 0, 0, 3 * i, 3 * i], 9.9 * i, 3 * i],
        "prompt_len": [TOK, [0, 3 * i, 3 * i, 3 * i, 3 * i], 900.0 * i, 3 * i],
        "gen_len": [TOK, [3 * i, 3 * i, 3 * i, 3 * i, 3 * i], 150.0 * i, 3 * i],
        "iteration_tokens": [TOK, [0, 0, 10 * i, 10 * i, 10 * i], 9000.0 * i, 10 * i],
    }


def feed(store, target, t0, t1, *, counters=None, gauges=None, with_hists=True, start=100.0):
    for t in range(t0, t1 + 1):
        c = counters(t) if counters else {"requests": 3.0 * t}
        store.ingest(raw(target, float(t), body(start=start, counters=c,
                                                gauges=gauges or {"running": 1.0},
                                                hists=hists(t) if with_hists else {})))
        store.commit(float(t), 1_700_000_000.0 + t)


def spec(t, *, accepted=3.0, drafted=4.0):
    return {"requests": 3.0 * t, "spec_drafts": 1.0 * t, "spec_draft_tokens": drafted * t,
            "spec_accepted_tokens": accepted * t}


def only_row(store, window=10.0):
    (r,) = store.snapshot(window).engines
    return r


# --------------------------------------------------------------------------- derive


def test_spec_accept_rate_is_delta_accepted_over_delta_drafted():
    pts = [(0.0, 100.0, 200.0), (5.0, 130.0, 240.0), (10.0, 160.0, 280.0)]
    assert derive.spec_accept_rate(pts) == pytest.approx(60.0 / 80.0)


def test_spec_accept_rate_none_without_drafts_in_the_window():
    pts = [(0.0, 50.0, 80.0), (10.0, 50.0, 80.0)]  # spec configured, nothing drafted
    assert derive.spec_accept_rate(pts) is None
    assert derive.spec_accept_rate(pts[:1]) is None  # one point: no window


def test_spec_accept_rate_after_a_counter_reset_is_not_negative():
    pts = [(0.0, 900.0, 1000.0), (1.0, 950.0, 1060.0), (2.0, 10.0, 20.0), (3.0, 40.0, 60.0)]
    assert derive.spec_accept_rate(pts) == pytest.approx(30.0 / 40.0)  # after the reset only


def test_spec_accept_rate_gauge_only_without_counters():
    assert derive.spec_accept_rate([], gauge=0.62) == 0.62
    assert derive.spec_accept_rate([(0.0, 1.0, 2.0), (1.0, 2.0, 4.0)], gauge=0.1) == 0.5


def _m(t, **counters):
    return t, ModelSample("m", counters=counters)


def test_derive_window_quantiles_only_for_the_keys_asked():
    h0 = Hist((1.0, math.inf), (0.0, 0.0), 0.0, 0.0)
    h1 = Hist((1.0, math.inf), (4.0, 4.0), 2.0, 4.0)
    a = ModelSample("m", hists={"prefill": h0, "decode": h0})
    b = ModelSample("m", hists={"prefill": h1, "decode": h1})
    w = derive.derive_window([(0.0, a), (1.0, b)], {"prefill"})
    assert set(w.quantiles) == {"prefill"}
    assert w.quantiles["prefill"].count == 4.0 and w.quantiles["prefill"].mean == 0.5


def test_derive_window_spec_from_counters_and_gauge_fallback():
    w = derive.derive_window([_m(0.0, spec_accepted_tokens=0.0, spec_draft_tokens=0.0),
                              _m(2.0, spec_accepted_tokens=6.0, spec_draft_tokens=8.0)])
    assert w.spec_accept_rate == pytest.approx(0.75)
    g = ModelSample("m", gauges={"spec_accept_rate_gauge": 0.4})
    assert derive.derive_window([(0.0, g), (1.0, g)]).spec_accept_rate == 0.4
    assert derive.derive_window([_m(0.0, requests=1.0), _m(1.0, requests=2.0)]
                                ).spec_accept_rate is None


def test_lifetime_token_hists_keep_their_names_and_spec_rate():
    h = Hist((128.0, math.inf), (3.0, 4.0), 400.0, 4.0)
    m = ModelSample("m", counters={"spec_accepted_tokens": 30.0, "spec_draft_tokens": 40.0},
                    hists={"prompt_len": h, "iteration_tokens": h, "prefill": h})
    life = derive.derive_lifetime(m)
    assert {"prompt_len", "iteration_tokens", "prefill_s"} <= set(life)
    assert "iteration_tokens_s" not in life
    assert life["spec_accept_rate"] == 0.75 and life["spec_draft_tokens"] == 40.0
    none = derive.derive_lifetime(ModelSample("m", counters={"spec_accepted_tokens": 0.0,
                                                             "spec_draft_tokens": 0.0}))
    assert none["spec_accept_rate"] is None  # no drafts since start: not 0 %


# --------------------------------------------------------------------------- store rows


def test_row_phase_and_length_quantiles_over_the_window():
    s = make_store("a")
    feed(s, "a", 0, 20)
    r = only_row(s)
    # 10 s: 20 prefills <= 0.1 s, 10 in (0.5, 1]: p50 interpolates inside the lowest bucket
    assert r.prefill_s.count == 30.0 and r.prefill_s.p50 == 0.1 and "p50" in r.prefill_s.below
    assert r.prefill_s.p95 == pytest.approx(0.5 + 0.5 * (28.5 - 20) / 10)
    assert r.prefill_s.mean == pytest.approx(9.0 / 30)
    assert r.decode_s.p50 == pytest.approx(1.0 + 4.0 * 15 / 30)
    assert r.inference_s.mean == pytest.approx(99.0 / 30)
    assert r.prompt_len.p50 == pytest.approx(128 + 384 * 15 / 30)
    assert r.prompt_len.p90 == pytest.approx(128 + 384 * 27 / 30)
    assert r.gen_len.p50 == 128.0 and r.gen_len.below == ("p50", "p90", "p95", "p99")
    assert r.iteration_tokens.count == 100.0 and r.iteration_tokens.mean == 900.0
    j = r.to_json()
    assert j["prompt_len"]["p90"] == pytest.approx(r.prompt_len.p90)
    assert j["prefill_s"]["count"] == 30.0


def test_row_without_the_signals_has_none_and_json_null():
    s = make_store("a")
    feed(s, "a", 0, 12, with_hists=False)
    r = only_row(s)
    for f in ("queue_s", "prefill_s", "decode_s", "inference_s", "prompt_len", "gen_len",
              "iteration_tokens", "spec_accept_rate"):
        assert getattr(r, f) is None, f
        assert r.to_json()[f] is None, f
    assert r.lifetime["spec_accept_rate"] is None


def test_row_spec_accept_rate_windowed():
    s = make_store("a")
    feed(s, "a", 0, 20, counters=spec, with_hists=False)
    assert only_row(s).spec_accept_rate == pytest.approx(0.75)
    assert only_row(s).to_json()["spec_accept_rate"] == pytest.approx(0.75)


def test_row_spec_accept_rate_none_when_no_drafts_in_the_window():
    s = make_store("a")
    frozen = spec(5)
    feed(s, "a", 0, 5, counters=spec, with_hists=False)
    feed(s, "a", 6, 30, counters=lambda t: {**frozen, "requests": 3.0 * t}, with_hists=False)
    assert only_row(s, 10.0).spec_accept_rate is None  # drafts stopped 25 s ago
    assert only_row(s, 60.0).spec_accept_rate == pytest.approx(0.75)  # the minute saw them
    assert only_row(s, 10.0).lifetime["spec_accept_rate"] == pytest.approx(0.75)


def test_row_spec_accept_rate_across_a_restart_is_never_negative():
    s = make_store("a")
    feed(s, "a", 0, 10, counters=lambda t: spec(t + 1000), with_hists=False)
    # a new process (start time moved): counters from 0 again, acceptance 1/4 now
    feed(s, "a", 11, 25, counters=lambda t: spec(t - 11, accepted=1.0), with_hists=False,
         start=500.0)
    r = only_row(s, 300.0)
    assert r.spec_accept_rate == pytest.approx(0.25)


def test_row_spec_accept_rate_gauge_fallback():
    s = make_store("a")
    feed(s, "a", 0, 3, gauges={"running": 1.0, "spec_accept_rate_gauge": 0.463},
         with_hists=False)
    assert only_row(s).spec_accept_rate == 0.463


# --------------------------------------------------------------------------- llama.cpp


def _llamacpp_body(computed, cached, drafts, draft_tokens, accepted):
    text = fixture_text("llamacpp-SYNTHETIC-from-server-task-cpp-cached-spec.txt")
    for name, v in (("prompt_tokens_total", computed), ("prompt_tokens_cached_total", cached),
                    ("spec_decode_num_drafts_total", drafts),
                    ("spec_decode_num_draft_tokens_total", draft_tokens),
                    ("spec_decode_num_accepted_tokens_total", accepted)):
        lines = text.split("\n")
        text = "\n".join(f"llamacpp:{name} {v:g}" if ln.startswith(f"llamacpp:{name} ") else ln
                         for ln in lines)
    return text


def _feed_llamacpp(store, t0, t1, step):
    for t in range(t0, t1 + 1):
        store.ingest(raw("l", float(t), _llamacpp_body(*step(t)), engine_hint="llamacpp"))
        store.commit(float(t), 1_700_000_000.0 + t)


def test_llamacpp_prefix_hit_rate_prompt_rate_and_spec_acceptance():
    s = make_store("l", normalize=None, detect=None, engine="llamacpp")
    # per second: 100 prompt tokens computed, 300 reused; 10 drafts of 4, 28 accepted
    _feed_llamacpp(s, 0, 12, lambda t: (100 * t, 300 * t, 10 * t, 40 * t, 28 * t))
    r = only_row(s)
    assert r.engine == "llamacpp"
    assert r.prefix_hit_rate == pytest.approx(300 / 400)
    assert r.prompt_tokens_per_s == pytest.approx(400.0)  # computed + cached, as vLLM counts
    assert r.spec_accept_rate == pytest.approx(28 / 40)


def test_llamacpp_without_drafts_shows_no_acceptance():
    s = make_store("l", normalize=None, detect=None, engine="llamacpp")
    _feed_llamacpp(s, 0, 12, lambda t: (100 * t, 0, 0, 0, 0))  # no draft model: all zero
    r = only_row(s)
    assert r.spec_accept_rate is None
    assert r.prefix_hit_rate == 0.0  # the cache is there and missed: a real 0
    assert r.prompt_tokens_per_s == pytest.approx(100.0)


# --------------------------------------------------------------------------- structure


def _imports(path: Path) -> set[str]:
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
    return out


def test_rows_does_not_import_target():
    root = Path(__file__).resolve().parents[2] / "llmtop" / "history"
    assert "llmtop.history.target" not in _imports(root / "rows.py")  # not even TYPE_CHECKING
    assert "llmtop.history.rows" in _imports(root / "target.py")  # the one arrow left


def test_an_idle_histogram_is_one_kept_object_and_its_window_counts_zero():
    s = make_store("a")
    feed(s, "a", 0, 5)
    frozen = hists(5)
    for t in range(6, 20):  # no request finishes any more: the histograms stand still
        s.ingest(raw("a", float(t), body(counters={"requests": 15.0}, gauges={"running": 0.0},
                                         hists=frozen)))
        s.commit(float(t), 1_700_000_000.0 + t)
    entries = s._targets["a"].entries(19.0)
    assert entries[-1].by_model["m"].hists["prefill"] is entries[-9].by_model["m"].hists[
        "prefill"]
    r = only_row(s)
    assert r.prefill_s is not None and r.prefill_s.count == 0.0 and r.prefill_s.p50 is None
    assert only_row(s, 60.0).prefill_s.count == 15.0  # the minute still holds 0-5 s


_step = st.tuples(st.integers(0, 50), st.integers(0, 50), st.booleans())


@given(st.lists(_step, min_size=1, max_size=30))
def test_spec_accept_rate_is_a_fraction_or_none_whatever_the_counters_do(steps):
    """Random draft/accept increments (accepted <= drafted) with resets anywhere."""
    pts, acc, dr = [], 0.0, 0.0
    for t, (d_draft, d_acc, reset) in enumerate(steps):
        if reset:
            acc, dr = 0.0, 0.0
        dr += d_draft
        acc += min(d_acc, d_draft)
        pts.append((float(t), acc, dr))
    r = derive.spec_accept_rate(pts)
    assert r is None or 0.0 <= r <= 1.0
    after = pts[max(i for i in range(len(steps)) if i == 0 or steps[i][2]):]  # last reset
    if r is None:
        assert len(after) < 2 or after[-1][2] - after[0][2] <= 0
