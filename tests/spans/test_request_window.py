"""history/request_window.py: the window of requests, slowest first, its summary, row matching."""

from __future__ import annotations

import pytest

from llmtop.config import Config, Target
from llmtop.history.request_window import RequestWindow, match_target
from llmtop.history.store import Store
from llmtop.model import RawSpans
from llmtop.model.request_records import RequestRecord
from tests.spans.spanfix import bodies

T = 1_796_000_000.0


def _req(i: int, ttft: float | None, *, end: float = T, prompt: int | None = 100,
         queue: float | None = 0.01, target: str | None = "a", source: str = "traffic"
         ) -> RequestRecord:
    return RequestRecord(id=f"r{i}", engine="vllm", target=target, prompt_tokens=prompt,
                         queue_s=queue, ttft_s=ttft, e2e_s=None if ttft is None else ttft + 1,
                         t_end=end, source=source)


def test_slowest_first_with_missing_values_last_and_filters():
    w = RequestWindow()
    w.add([_req(1, 0.2), _req(2, None), _req(3, 0.9, source="probe"), _req(4, 0.5, target="b")])
    assert [r.id for r in w.slowest(60, T)] == ["r3", "r4", "r1", "r2"]
    assert [r.id for r in w.slowest(60, T, by="e2e_s", n=2)] == ["r3", "r4"]
    assert [r.id for r in w.slowest(60, T, source="traffic")] == ["r4", "r1", "r2"]
    assert [r.id for r in w.slowest(60, T, target="b")] == ["r4"]
    with pytest.raises(ValueError):
        w.slowest(60, T, by="color")


def test_the_window_is_by_end_time_and_bounded():
    w = RequestWindow(keep_s=100, max_requests=5)
    w.add([_req(i, 0.1, end=T - 50 + i) for i in range(4)])
    assert len(w.window(10, T)) == 0 and len(w.window(60, T)) == 4
    w.add([_req(1, 0.1, end=T - 49)])  # the same request again (a retried export): once
    assert len(w) == 4
    w.add([_req(10 + i, 0.1, end=T) for i in range(3)])
    assert len(w) == 5  # the oldest went first
    w.trim(T + 60)
    assert {r.id for r in w.window(1000, T + 60)} == {"r10", "r11", "r12"}


def test_summary_says_how_the_slow_differ():
    w = RequestWindow()
    fast = [_req(i, 0.1, prompt=1000, queue=0.01) for i in range(18)]
    slow = [_req(100, 8.0, prompt=90000, queue=7.0, target="b"),
            _req(101, 6.0, prompt=61000, queue=5.0, target="b")]
    w.add(fast + slow + [_req(200, None, prompt=None)])
    s = w.summary(60, T)
    assert (s.count, s.traffic, s.probe, s.slow_count) == (21, 21, 0, 2)
    assert s.slow_prompt_median == 75500 and s.rest_prompt_median == 1000
    assert s.slow_queue_median_s == 6.0 and s.rest_queue_median_s == 0.01
    assert s.slow_queue_share == pytest.approx(12 / 14)
    assert s.slow_targets == {"b": 2} and s.rest_targets == {"a": 18}
    assert s.slow_min_s == 6.0 and s.ttft_p95_s == 6.0 and s.ttft_p50_s == 0.1
    assert RequestWindow().summary(60, T).slow_count == 0  # empty: nothing, no error


def test_match_target():
    ts = [("vllm-a", "127.0.0.1", "vllm"), ("vllm-b", "10.0.0.2", "vllm"),
          ("sgl", "127.0.0.1", "sglang")]
    assert match_target("vllm", "vllm-b", "127.0.0.1", ts) == "vllm-b"  # by service name
    assert match_target("vllm", "vllm", "localhost", ts) == "vllm-a"  # by the sender's host
    assert match_target("vllm", None, "10.0.0.2", ts) == "vllm-b"
    assert match_target("vllm", None, "10.9.9.9", ts) is None  # two candidates: not guessed
    assert match_target("sglang", None, None, ts) == "sgl"  # the only one of its engine
    assert match_target("triton", None, None, ts) is None
    # a sender on a Unix socket has no address: it is on this machine
    assert match_target("vllm", None, "", ts) == "vllm-a"


def test_store_turns_bodies_into_matched_requests_and_counts_bad_ones():
    cfg = Config(targets=(Target(name="tiny", base_url="http://127.0.0.1:8000",
                                 engine="vllm"),))
    store = Store(cfg)
    assert store.snapshot(10).requests is None  # no spans: no "requests" in the JSON
    for b in bodies("requests"):
        store.ingest_spans(RawSpans(t_wall=2e9, t_mono=100.0, body=b, peer="127.0.0.1"))
    store.ingest_spans(RawSpans(t_wall=T, t_mono=100.0, body=b"\xffjunk"))
    for b in bodies("startup"):
        store.ingest_spans(RawSpans(t_wall=2e9, t_mono=100.0, body=b, peer="127.0.0.1"))
    w = store.requests
    assert len(w) == 3 and all(r.target == "tiny" for r in w.window(1e10, 2e9))
    assert w.bad_bodies == 1 and "protobuf" in w.last_error
    assert w.cold_starts["tiny"].stages["weights"] > 0
    reqs = w.slowest(1e10, 2e9)
    snap = store.snapshot(1e10)
    assert [r.id for r in snap.requests] == [r.id for r in reqs]
    doc = snap.to_json("x")
    assert list(doc["requests"][0])[:11] == [
        "id", "engine", "target", "prompt_tokens", "output_tokens", "queue_s", "prefill_s",
        "decode_s", "ttft_s", "e2e_s", "finish_reason"]
    assert doc["requests_window"]["bad_bodies"] == 1
    assert doc["requests_window"]["cold_starts"][0]["target"] == "tiny"


def _as_sent_by(body: bytes, clock_off_s: float, *, no_end: bool = False) -> list:
    """``body``'s spans as an engine whose clock is ``clock_off_s`` off would send them
    (``no_end``: the spans say no end time)."""
    from llmtop.sources.otlp_decode import decode

    spans = decode(body, "protobuf")
    off = int(clock_off_s * 1e9)
    for s in spans:
        s.start_ns += off
        s.end_ns = 0 if no_end else s.end_ns + off
        s.events = [(name, t + off, attrs) for name, t, attrs in s.events]
    return spans


_TWO_HOSTS = [("a", "127.0.0.1", "vllm"), ("b", "10.0.0.9", "vllm")]


def _burst_then(w: RequestWindow, later: list, peer: str) -> float:
    """The real burst from host ``a`` received as it ended, then ``later`` spans from
    ``peer`` a second after; returns that second."""
    from llmtop.history.request_window import ingest_body

    burst = bodies("burst")
    end = max(s.end_ns for b in burst for s in _as_sent_by(b, 0)) / 1e9
    for b in burst:
        ingest_body(w, RawSpans(t_wall=end + 0.5, t_mono=0.0, body=b, peer="127.0.0.1"),
                    _TWO_HOSTS)
    ingest_body(w, RawSpans(t_wall=end + 1, t_mono=0.0, body=b"", peer=peer, spans=later),
                _TWO_HOSTS)
    return end + 1


@pytest.mark.parametrize("clock_off_s", [-300.0, -70.0, 90.0, 3600.0])
def test_an_engine_with_a_skewed_clock_neither_empties_the_window_nor_leaves_it(clock_off_s):
    """The window and its trimming go by when llmtop received a request, where the
    engine's clock is further off than spans are late; the request keeps its own times."""
    w = RequestWindow(keep_s=600)
    now = _burst_then(w, _as_sent_by(bodies("requests")[0], clock_off_s), "10.0.0.9")
    got = w.window(60, now)
    assert sorted(r.target for r in got) == ["a"] * 6 + ["b"] * 3
    assert len(w.slowest(60, now)) == 9 and w.summary(60, now).count == 9
    skewed = [r for r in got if r.target == "b"]
    assert min(r.t_end for r in skewed) > now + clock_off_s - 60  # as the engine said
    w.trim(now + 590)  # both arrived within the last 600 s: both kept
    assert sorted(r.target for r in w.window(600, now + 590)) == ["a"] * 6 + ["b"] * 3
    w.trim(now + 610)
    assert len(w) == 0


def test_a_request_without_an_end_time_does_not_stop_trimming():
    from llmtop.history.request_window import ingest_body

    w = RequestWindow(keep_s=100)
    t0 = 1_796_173_400.0
    ingest_body(w, RawSpans(t_wall=t0, t_mono=0.0, body=b"", peer="10.0.0.9",
                            spans=_as_sent_by(bodies("requests")[0], 0, no_end=True)),
                _TWO_HOSTS)
    assert len(w) == 3 and w.window(1e10, t0 + 1) == []  # kept, but no end to list them by
    now = _burst_then(w, [], "10.0.0.9")
    assert len(w) == 9
    w.trim(t0 + 101)  # the three without an end came at t0: gone; the burst stays
    assert len(w) == 6 and len(w.window(60, now)) == 6
    w.trim(now + 101)
    assert len(w) == 0


def test_a_request_added_without_an_end_time_does_not_stop_trimming():
    w = RequestWindow(keep_s=100, max_requests=50)
    w.add([_req(1, 0.1, end=T - 50)])
    w.add([RequestRecord(id="open", engine="vllm", target="a", t_end=None)])
    w.add([_req(2 + i, 0.1, end=T - 10 + i) for i in range(5)])
    w.trim(T + 80)  # r1 ended at T - 50 and "open" came after it, before the rest
    assert sorted(r.id for r in w.window(1000, T + 80)) == ["r2", "r3", "r4", "r5", "r6"]
    assert len(w) == 5
    w.trim(T + 200)
    assert len(w) == 0


def test_a_collector_forwarding_a_skewed_and_a_true_engine_in_one_body_places_each():
    """One body (a collector's) with the real burst from a true clock and the real requests
    from another service whose clock is 5 minutes behind: only the latter are moved."""
    from llmtop.history.request_window import ingest_body

    burst = [s for b in bodies("burst") for s in _as_sent_by(b, 0)]
    skewed = _as_sent_by(bodies("requests")[0], -300)
    for s in skewed:
        s.resource = {**s.resource, "service.name": "b"}
    came = max(s.end_ns for s in burst) / 1e9 + 1
    w = RequestWindow()
    ingest_body(w, RawSpans(t_wall=came, t_mono=0.0, body=b"", peer="10.0.0.9",
                            spans=burst + skewed), _TWO_HOSTS)
    got = w.window(60, came)
    assert sorted(r.service for r in got) == ["b"] * 3 + ["vllm-tiny"] * 6
    # the true engine's requests stay at their own ends (the last 1 s before the body came);
    # the skewed ones are placed when the body came
    assert sorted(r.service for r in w.window(2.5, came - 1)) == ["vllm-tiny"] * 6
    assert sorted(r.service for r in w.window(0.99, came)) == ["b"] * 3
