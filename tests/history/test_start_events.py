"""The event log says only what happened: no "recovered (was STALE)" for a target that was
never stale (only not scraped yet), and one "GPU unavailable:" however the sampler words it."""

from __future__ import annotations

from .fakes import body, gpu_sample, raw
from .test_store import feed, make_store


def texts(store, target=None):
    return [e.text for e in store.events if target is None or e.target == target]


def test_first_scrape_after_an_unscraped_tick_is_first_seen_only():
    s = make_store("a")
    s.commit(0.0, 1.0)  # a tick before the first answer: stale, not scraped yet
    s.commit(1.0, 2.0)
    s.ingest(raw("a", 2.0, body(version="0.33.0")))
    s.commit(2.0, 3.0)
    feed(s, "a", 3, 5)
    assert texts(s, "a") == ["first seen: detected as vllm 0.33.0"]


def test_recovered_still_logged_after_a_real_outage():
    s = make_store("a")
    s.commit(0.0, 1.0)
    feed(s, "a", 1, 3)
    s.ingest(raw("a", 4.0, status="down", error="refused"))
    s.commit(4.0, 5.0)
    feed(s, "a", 5, 5)
    assert texts(s, "a")[1:] == ["DOWN: refused", "recovered (was DOWN)"]


def test_gpu_unavailable_said_once():
    s = make_store("a")
    line = "GPU unavailable: NVML library not found (is the NVIDIA driver installed?)"
    s.ingest_gpus(gpu_sample(0.0, error=line))  # the NVML sampler's own words
    s.commit(0.0, 1.0)
    assert texts(s) == [line]
    s.ingest_gpus(gpu_sample(1.0, error="no DCGM exporter series"))  # a bare reason
    s.commit(1.0, 2.0)
    assert texts(s)[-1] == "GPU unavailable: no DCGM exporter series"
