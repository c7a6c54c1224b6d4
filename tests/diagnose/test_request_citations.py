"""Findings cite single requests (``diagnose.request_citations``): ``queueing`` and ``long_prompts``
name the window's slowest requests where spans reached llmtop, and say exactly what the
requests show (``claims_hold`` recomputes every number from the requests); without spans,
findings are unchanged, and requests never make a finding on a healthy row."""

from __future__ import annotations

import random
import re
from collections.abc import Sequence

import pytest

from llmtop.diagnose import Diagnoser, diagnose
from llmtop.history.request_window import RequestWindow, ingest_body
from llmtop.model import RawSpans
from llmtop.model.request_records import PROBE_TRACE_PREFIX, RequestRecord
from llmtop.parse.spans import parse_spans
from llmtop.sources.otlp_decode import decode
from tests.diagnose.rows import T, base, healthy, q
from tests.spans.spanfix import bodies

QUEUE_CLAIM = re.compile(
    r"the (\d+) slowest requests spent (\d+) % of their TTFT queued"
    r"(?: \((all|\d+) of the (\d+) are the probe's\))?; longest (\S+), ([\d.]+) (ms|s) in queue")
PROMPT_CLAIM = re.compile(
    r"the (\d+) slowest had ([\d.]+[kM]?)(?:\u2013([\d.]+[kM]?))? prompt tokens"
    r"(?: \((all|\d+) of the (\d+) are the probe's\))?, the window's median ([\d.]+[kM]?)")


def _tok(v: float) -> str:
    if v >= 1e6:
        return f"{v / 1e6:.1f}M"
    return f"{v / 1000:.0f}k" if v >= 10_000 else f"{v / 1000:.1f}k" if v >= 1000 else f"{v:.0f}"


def _slowest(reqs: Sequence[RequestRecord], n: int, need: str) -> list[RequestRecord]:
    have = [r for r in reqs if r.ttft_s is not None and getattr(r, need) is not None]
    return sorted(have, key=lambda r: r.ttft_s, reverse=True)[:n]


def _probe(m_all: str | None, m_n: str | None, slow: list[RequestRecord]) -> None:
    k = sum(r.source == "probe" for r in slow)
    if not k:
        assert m_all is None, "claims probe requests where there are none"
    else:
        assert m_all == ("all" if k == len(slow) else str(k)) and int(m_n) == len(slow)


def claims_hold(summary: str, reqs: Sequence[RequestRecord]) -> None:
    """Every number a citation says, recomputed from the requests (independently of
    ``diagnose.request_citations``)."""
    m = QUEUE_CLAIM.search(summary)
    if m:
        slow = _slowest(reqs, 10, "queue_s")
        assert int(m[1]) == len(slow)
        share = sum(r.queue_s for r in slow) / sum(r.ttft_s for r in slow)
        assert int(m[2]) == round(min(share, 1.0) * 100)
        _probe(m[3], m[4], slow)
        longest = max((r for r in reqs if r.queue_s is not None), key=lambda r: r.queue_s)
        assert m[5] == longest.id
        said = float(m[6]) / (1000 if m[7] == "ms" else 1)
        assert said == pytest.approx(longest.queue_s, abs=0.051 if m[7] == "s" else 0.0006)
    m = PROMPT_CLAIM.search(summary)
    if m:
        slow = _slowest(reqs, 3, "prompt_tokens")
        assert int(m[1]) == len(slow)
        toks = [r.prompt_tokens for r in slow]
        assert m[2] == _tok(min(toks)) and (m[3] or m[2]) == _tok(max(toks))
        _probe(m[4], m[5], slow)
        every = sorted(r.prompt_tokens for r in reqs if r.prompt_tokens is not None)
        mid = len(every) // 2
        median = every[mid] if len(every) % 2 else (every[mid - 1] + every[mid]) / 2
        assert m[6] == _tok(median)


def queued(**kw):
    kw = {"waiting": 25.0, "running": 8.0, "max_running": 8.0, "kv_cache_usage": 0.62,
          "queue_s": q(2.4, 3.1, 60), "ttft_s": q(2.5, 3.2, 60), **kw}
    return healthy(**kw)


def long_prompted():
    return healthy(prompt_len=q(3200, 7000, 60, p90=6000), prefill_s=q(0.9, 1.8, 60),
                   ttft_s=q(1.0, 2.0, 60))


def _real_window() -> list[RequestRecord]:
    """The real vLLM's six requests at once on --max-num-seqs 2 (four of them queued) and
    its three one after another, matched to the row by the sender's address."""
    w = RequestWindow()
    sent = bodies("burst") + bodies("requests")
    came = 1 + max(r.t_end or 0.0 for b in sent
                   for r in parse_spans(decode(b, "protobuf")).requests)  # as they were sent
    for b in sent:
        ingest_body(w, RawSpans(t_wall=came, t_mono=0.0, body=b, peer="127.0.0.1"),
                    [(T, "127.0.0.1", "vllm")])
    return w.window(3600, came)


def test_queueing_cites_the_real_vllm_requests():
    reqs = _real_window()
    assert len(reqs) == 9 and {r.target for r in reqs} == {T}
    f = diagnose([queued()], baselines={f"{T}|llama": base()},
                 waiting_min={f"{T}|llama": 20.0}, requests=reqs)
    assert [x.rule for x in f] == ["queueing"]
    s = f[0].summary
    # 4 of the burst waited for one of the 2 seats: 0.99 s the longest
    assert "the 9 slowest requests spent 77 % of their TTFT queued; longest " \
           "cmpl-bf2930c62a2c5acf-0, 996 ms in queue" in s
    claims_hold(s, reqs)
    ev = {e.signal: e.value for e in f[0].evidence}
    assert ev["longest_queue_request"] == "cmpl-bf2930c62a2c5acf-0"
    assert ev["slowest_requests"] == 9 and ev["slowest_probe_requests"] == 0
    assert ev["slowest_queue_share_of_ttft"] == pytest.approx(0.769, abs=0.001)


def _built(seed: int, n: int = 40, probe_slow: bool = False) -> list[RequestRecord]:
    """A window built differently: the issue's shape (a few long prompts, a queue behind
    them), optionally the slowest sent by the probe."""
    rnd = random.Random(seed)
    out = []
    for i in range(n):
        slow = i < 10
        queue = rnd.uniform(3.0, 7.9) if slow else rnd.uniform(0.001, 0.05)
        prefill = rnd.uniform(0.2, 1.0)
        prompt = rnd.randint(61_000, 90_000) if i < 3 else rnd.randint(800, 1600)
        probe = probe_slow and i < 9
        out.append(RequestRecord(
            id=f"req-{rnd.getrandbits(16):04x}{i}", engine="vllm", target=T,
            prompt_tokens=prompt, output_tokens=200, queue_s=queue, prefill_s=prefill,
            ttft_s=queue + prefill + (5.0 if i < 3 else 0.0), e2e_s=queue + prefill + 6,
            source="probe" if probe else "traffic",
            trace_id=PROBE_TRACE_PREFIX + "00" * 10 if probe else None, t_end=1.0 + i))
    return out


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_citations_say_only_what_the_requests_show(seed):
    reqs = _built(seed, probe_slow=seed == 2)
    f = diagnose([queued()], baselines={f"{T}|llama": base()},
                 waiting_min={f"{T}|llama": 20.0}, requests=reqs)
    assert QUEUE_CLAIM.search(f[0].summary)
    claims_hold(f[0].summary, reqs)
    g = diagnose([long_prompted()], baselines={f"{T}|llama": base()}, requests=reqs)
    assert [x.rule for x in g] == ["long_prompts"] and PROMPT_CLAIM.search(g[0].summary)
    claims_hold(g[0].summary, reqs)


def test_the_probes_requests_are_told_apart():
    reqs = _built(2, probe_slow=True)
    f = diagnose([queued()], baselines={f"{T}|llama": base()},
                 waiting_min={f"{T}|llama": 20.0}, requests=reqs)
    assert "(9 of the 10 are the probe's)" in f[0].summary
    assert {e.signal: e.value for e in f[0].evidence}["slowest_probe_requests"] == 9


def test_long_prompts_cites_the_issues_example():
    reqs = [RequestRecord(id=f"r{i}", engine="vllm", target=T, prompt_tokens=p, ttft_s=t)
            for i, (p, t) in enumerate([(61_000, 9.0), (90_000, 8.0), (75_000, 7.0)]
                                       + [(1200, 0.2)] * 20)]
    f = diagnose([long_prompted()], baselines={f"{T}|llama": base()}, requests=reqs)
    assert "the 3 slowest had 61k\u201390k prompt tokens, the window's median 1.2k" \
        in f[0].summary
    ev = {e.signal: e.value for e in f[0].evidence}
    assert (ev["slowest_prompt_min"], ev["slowest_prompt_max"],
            ev["window_prompt_median"]) == (61_000, 90_000, 1200)


def test_million_token_prompts_are_cited_in_millions():
    reqs = [RequestRecord(id=f"r{i}", engine="vllm", target=T, prompt_tokens=p, ttft_s=t)
            for i, (p, t) in enumerate([(1_500_000, 9.0), (1_000_000, 8.0), (980_000, 7.0)]
                                       + [(1200, 0.2)] * 20)]
    f = diagnose([long_prompted()], baselines={f"{T}|llama": base()}, requests=reqs)
    assert "the 3 slowest had 980k\u20131.5M prompt tokens" in f[0].summary
    claims_hold(f[0].summary, reqs)


def test_without_spans_findings_are_exactly_as_before():
    for row, kw in ((queued(), {"waiting_min": {f"{T}|llama": 20.0}}), (long_prompted(), {})):
        before = diagnose([row], baselines={row.key: base()}, **kw)
        assert before
        assert diagnose([row], baselines={row.key: base()}, requests=(), **kw) == before
        # another engine's requests, and too few, are not cited either
        other = [RequestRecord(id=f"x{i}", engine="vllm", target="vllm@10.0.0.9:8000",
                               queue_s=5.0, ttft_s=6.0, prompt_tokens=90_000)
                 for i in range(10)]
        assert diagnose([row], baselines={row.key: base()}, requests=other, **kw) == before
        assert diagnose([row], baselines={row.key: base()}, requests=_built(1)[:2],
                        **kw) == before


def test_requests_never_make_a_finding_on_a_healthy_row():
    assert diagnose([healthy()], baselines={f"{T}|llama": base()}, requests=_built(1)) == []


def test_the_live_diagnoser_takes_the_requests_as_a_function():
    reqs = _real_window()
    d = Diagnoser()
    d.update(0.0, [queued()], [], waiting_min={f"{T}|llama": 20.0}, requests=lambda: reqs)
    assert "longest cmpl-bf2930c62a2c5acf-0" in d.findings[0].summary


def test_once_passes_the_snapshots_requests():
    from llmtop.model import Snapshot
    from llmtop.once import _diagnose

    reqs = _real_window()
    first = Snapshot(time=0.0, window_s=30.0, engines=[queued()])
    snap = Snapshot(time=30.0, window_s=30.0, engines=[queued()], requests=reqs)
    f = _diagnose(first, snap, 30.0)
    assert f and "longest cmpl-bf2930c62a2c5acf-0" in f[0].summary
    snap.requests = None  # no receiver: as before
    assert "slowest" not in _diagnose(first, snap, 30.0)[0].summary
