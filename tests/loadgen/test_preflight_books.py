"""Every request llmtop sends is on the books: the preflight (endpoint detection and prompt
calibration, before the load) and the run together equal what a real local server counted,
exactly, with and without ``/tokenize``; a server that counted more than llmtop sent is a
warning, never ``ok``.

The server is ``mock_server.py`` (a separate process on 127.0.0.1): ``/stats`` says what it
received (streams, tokens written), its ``/metrics`` exports the same as
``vllm:generation_tokens_total`` and ``vllm:request_success_total``.
"""

from __future__ import annotations

import httpx
import pytest

from llmtop.loadgen.options import ProbeOptions
from llmtop.loadgen.reconcile import Preflight, Tally
from llmtop.loadgen.report import honesty_lines

from .conftest import probe
from .mock_server import start_mock


def _stats(url: str) -> dict:
    return httpx.get(f"{url}/stats", timeout=10).json()


@pytest.fixture(scope="module", params=[True, False], ids=["tokenize", "no-tokenize"])
def mock(request):
    with start_mock(metrics=True, tokenize=request.param) as m:
        yield m


async def test_the_books_equal_the_servers_counters_exactly(mock):
    before = _stats(mock.url)
    report, _ = await probe(ProbeOptions(url=mock.url, concurrency=4, max_requests=12,
                                         output_tokens=8, prompt_tokens=32))
    after = _stats(mock.url)
    rec, pf = report["reconciliation"], report["preflight"]
    streams = after["streams"] - before["streams"]
    tokens = after["tokens"] - before["tokens"]
    # the preflight is counted: two one-token requests (endpoint + calibration)
    assert pf["requests"] == 2 and pf["output_tokens"] == 2 and pf["prompt_tokens"] > 0
    assert (rec["preflight_requests"], rec["preflight_output_tokens"]) == (2, 2)
    # what llmtop says it sent equals what the server received and wrote, exactly
    assert rec["sent"] + pf["requests"] == streams == 14
    assert rec["output_tokens"] + pf["output_tokens"] == tokens == 12 * 8 + 2
    # ... and its counters, read before the preflight, agree
    assert rec["server_generation_tokens"] == tokens
    assert rec["server_requests"] == streams
    assert rec["ok"], rec
    line = next(ln for ln in honesty_lines(report) if ln.startswith("Counts add up"))
    assert "preflight (before the load: endpoint and calibration) 2 requests" in line
    assert f"server counted {tokens:,} tokens and {streams} finished requests" in line


def test_uncounted_requests_are_never_ok():
    """The old books: the server's counters moved by 2 requests and 2 tokens more than the
    run; without a preflight that accounts for them the counts do not add up."""
    t = Tally()
    for _ in range(4):
        t.done(_Res(), 8)
    t.server, t.server_requests = 34, 6
    rec = t.to_json(4, 4)
    assert rec["ok"] is False
    assert any("34 generated tokens" in w for w in rec["warnings"])
    assert any("6 finished requests" in w for w in rec["warnings"])
    t.preflight = Preflight(requests=2, ok=2, output_tokens=2, prompt_tokens=20)
    assert t.to_json(4, 4)["ok"] is True
    t.server_requests = 7  # one more than everything sent
    assert t.to_json(4, 4)["ok"] is False


class _Res:
    error = None
    tokens = 8
    n_content = 8


def test_the_cold_start_request_is_counted(mock):
    """The bake-off's and tuner's cold start streams one request: it is on the books."""
    from llmtop.loadgen.engines import first_token

    before = _stats(mock.url)
    books = Preflight()
    assert first_token(mock.url, "mock-model", books=books, timeout_s=10) is not None
    after = _stats(mock.url)
    assert books.requests == after["streams"] - before["streams"] == 1
    assert books.output_tokens == after["tokens"] - before["tokens"] == 1


def test_a_tuner_trial_adds_every_levels_preflight_and_its_cold_start(monkeypatch):
    from llmtop.tune.search import _warnings
    from llmtop.tune.trial import TrialRun, empty_trial

    def engine(self, k, n, spec):
        trial = self.trials[spec.name]
        trial["levels"] = [
            {"load": 2, "preflight": {"requests": 2, "output_tokens": 2, "prompt_tokens": 30},
             "counts_ok": True},
            {"load": 4, "preflight": {"requests": 1, "output_tokens": 1, "prompt_tokens": 15},
             "counts_ok": False, "counts_warnings": ["the server counted 99 generated tokens"]}]
        return {"cold_start_requests": {"requests": 1, "output_tokens": 1}}

    monkeypatch.setattr(TrialRun, "engine", engine)
    run = TrialRun.__new__(TrialRun)
    run.trials = {}
    from llmtop.tune.progress import TuneProgress

    run.progress = TuneProgress()
    spec = type("Spec", (), {"name": "t1"})()
    t = run.run_trial(spec, empty_trial({"max_num_seqs": 4}, "serve"), 0, 1)
    assert t["preflight"] == {"requests": 4, "output_tokens": 4, "prompt_tokens": 45}
    assert t["counts_ok"] is False
    assert any("counts do not add up" in w and "99 generated" in w for w in _warnings([t]))


def test_a_bakeoff_engine_says_every_request_it_was_sent():
    from llmtop.loadgen.bakeoff_summary import books_text

    e = {"requests_sent": 80, "preflight": {"requests": 2, "output_tokens": 2},
         "cold_start_requests": {"requests": 1, "output_tokens": 1},
         "reconciliation": {"ok": True}}
    assert books_text(e) == ("83 sent: 80 in the run, 2 preflight (2 tokens), 1 for the cold "
                             "start; counts add up with the server's counters")
    e["reconciliation"]["ok"] = False
    assert books_text(e).endswith("counts do NOT add up")
    assert books_text({"requests_sent": 3}).endswith("not reconciled")  # an old report
