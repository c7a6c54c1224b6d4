"""GPUs: local NVML sampling, process-to-engine attribution and the demo GPU sampler.

    make_sampler(config, *, demo_gpu_url=None) -> GpuSampler
    GpuSampler.held_sample() -> GpuSample | None   at once, or None: ask the driver
    GpuSampler.sample_async() -> GpuSample         on the loop; never raises
    GpuSampler.sample() -> GpuSample               blocking (a thread), never raises
    GpuSampler.set_targets(targets)                what GPU processes are attributed to
    GpuSampler.close() / aclose()                  shuts NVML down once

A GPU the tool cannot read is a state: ``GpuSample.error`` carries one line with reason and
hint (see ``llmtop.gpu.reasons``). GPU payloads of remote targets (DCGM, Triton) are parsed
in ``llmtop.parse``, not here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from llmtop import clock
from llmtop.config import Config, Target
from llmtop.model import GpuSample

__all__ = ["GpuSampler", "NullSampler", "make_sampler"]


class GpuSampler(Protocol):
    """What the monitor calls once per tick: first ``held_sample()``, a sample it can give
    at once without asking the driver (no GPU to ask), else ``sample_async()`` on the event
    loop (blocking work in a worker thread of its own). ``sample`` blocks: the monitor's
    start-up prefetch calls it in its own thread. Never raises."""

    def held_sample(self) -> GpuSample | None: ...

    def sample(self) -> GpuSample: ...

    async def sample_async(self) -> GpuSample: ...

    def set_targets(self, targets: Sequence[Target]) -> None:
        """The targets GPU processes are attributed to (engines a later search found)."""
        ...

    def close(self) -> None: ...

    async def aclose(self) -> None: ...


class NullSampler:
    """No GPU sampling (the user disabled it); every sample carries ``reason`` as its error."""

    def __init__(self, reason: str = "GPU sampling disabled"):
        self.reason = reason

    def sample(self) -> GpuSample:
        return GpuSample(t_wall=clock.time(), t_mono=clock.monotonic(), error=self.reason,
                         cost_s=0.0)

    async def sample_async(self) -> GpuSample:
        return self.sample()

    def held_sample(self) -> GpuSample:
        """Always answered at once: the monitor feeds it without a task."""
        return self.sample()

    def set_targets(self, targets: Sequence[Target]) -> None:
        """Nothing to attribute."""

    def close(self) -> None:
        return None

    async def aclose(self) -> None:
        return None


def make_sampler(config: Config, *, demo_gpu_url: str | None = None) -> GpuSampler:
    """The demo sampler when ``demo_gpu_url`` is given, else NVML with attribution."""
    if demo_gpu_url:
        from llmtop.gpu.demo import DemoGpuSampler

        return DemoGpuSampler(demo_gpu_url)
    from llmtop.gpu.nvml import NvmlSampler

    return NvmlSampler(config.targets)
