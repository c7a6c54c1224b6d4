"""The monitor's collaborators keep their contracts (``monitor.ports``): every real scraper,
GPU sampler, span receiver and log follower, and the test bases, have each method of their
Protocol, async where the Protocol's is."""

from __future__ import annotations

import inspect

import pytest

from llmtop.gpu import GpuSampler, NullSampler
from llmtop.gpu.demo import DemoGpuSampler
from llmtop.gpu.nvml import NvmlSampler
from llmtop.monitor.ports import LogFollower, Scraper, SpanReceiver
from llmtop.sources.logs import Follower
from llmtop.sources.otlp import OtlpReceiver
from llmtop.sources.scrape import Scraper as HttpScraper
from tests.monitor_fakes import FakeLogs, FakeSamplerBase, FakeScraperBase


def _methods(proto: type) -> dict[str, bool]:
    """Method name -> whether it is async, as the Protocol declares them."""
    return {n: inspect.iscoroutinefunction(f) for n, f in vars(proto).items()
            if inspect.isfunction(f) and not n.startswith("_")}


@pytest.mark.parametrize(("proto", "cls"), [
    (Scraper, HttpScraper), (Scraper, FakeScraperBase),
    (GpuSampler, NullSampler), (GpuSampler, DemoGpuSampler), (GpuSampler, NvmlSampler),
    (GpuSampler, FakeSamplerBase),
    (SpanReceiver, OtlpReceiver),
    (LogFollower, Follower), (LogFollower, FakeLogs),
])
def test_each_collaborator_has_every_method_of_its_protocol(proto: type, cls: type):
    want = _methods(proto)
    assert want  # the Protocol declares something
    for name, is_async in want.items():
        impl = getattr(cls, name, None)
        assert impl is not None, f"{cls.__name__} lacks {name}"
        assert inspect.iscoroutinefunction(impl) == is_async, f"{cls.__name__}.{name}"
