"""NVML GPM: the real SM, tensor, DRAM and link activity of Hopper and newer GPUs.

- ``GpmDevice``: one GPU. Decides support once (``nvmlGpmQueryDeviceSupport``); keeps a rolling
  window per GPU and per MIG GPU instance: the last sample is the next window's ``sample1``,
  so each tick takes one sample into a spare and swaps (two samples allocated per window).
- A window shorter than ``MIN_WINDOW_S`` (NVML needs more than 100 ms) is not measured: the
  last values are answered again.
- ``METRICS``: record field, GPM metric id, scale (utilisations 0-100 -> 0..1, MiB/s -> bytes/s).
  Each result carries its own return code: one refused metric leaves only its field None.
- Unsupported GPU, a binding without GPM, a refused call: ``note`` says so in one line; the
  other GPU fields keep working. A lost GPU raises ``GpuLost`` after freeing its samples.
- Every sample is freed: ``close()`` (sampler closed, NVML shut down, GPU lost), a failed
  window, and a MIG GPU instance that is gone.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

from llmtop.gpu.errors import GpuLost, error_line, is_error, never_answers

__all__ = ["METRICS", "MIN_WINDOW_S", "GpmDevice"]

_MIB = 1024.0 * 1024.0
METRICS: tuple[tuple[str, int, float], ...] = (
    ("sm_active", 2, 0.01),  # NVML_GPM_METRIC_SM_UTIL
    ("sm_occupancy", 3, 0.01),  # NVML_GPM_METRIC_SM_OCCUPANCY
    ("tensor_active", 5, 0.01),  # NVML_GPM_METRIC_ANY_TENSOR_UTIL
    ("dram_active", 10, 0.01),  # NVML_GPM_METRIC_DRAM_BW_UTIL
    ("fp16_active", 13, 0.01),  # NVML_GPM_METRIC_FP16_UTIL
    ("pcie_tx_bytes_s", 20, _MIB),  # NVML_GPM_METRIC_PCIE_TX_PER_SEC
    ("pcie_rx_bytes_s", 21, _MIB),  # NVML_GPM_METRIC_PCIE_RX_PER_SEC
    ("nvlink_rx_bytes_s", 60, _MIB),  # NVML_GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC
    ("nvlink_tx_bytes_s", 61, _MIB),  # NVML_GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC
)
MIN_WINDOW_S = 0.1
"""NVML's floor between the two samples of a window (NVML API, ``nvmlGpmMetricsGet``)."""

Values = dict[str, float | None]


class _Window:
    """One rolling window: the last sample taken, a spare for the next, their values."""

    __slots__ = ("prev", "spare", "t", "values")

    def __init__(self) -> None:
        self.prev: Any = None
        self.spare: Any = None
        self.t = float("-inf")
        self.values: Values | None = None


class GpmDevice:
    """GPM for one GPU; ``read`` and ``read_mig`` once per tick; ``close`` frees it all."""

    def __init__(self, nvml: Any, name: str | None):
        self._nvml = nvml
        self._name = name or "this GPU"
        self.supported: bool | None = None
        """None until decided (first read), then fixed while the handle lives."""
        self.note: str | None = None
        """Why there are no GPM values, one line; None when they flow."""
        self._windows: dict[str, _Window] = {}
        self.gives_pcie = False
        """The whole GPU's last window had both PCIe rates: the sampler need not ask NVML's
        blocking ``nvmlDeviceGetPcieThroughput``."""

    # -- support ------------------------------------------------------------------------------

    def _decide(self, handle: Any) -> None:
        query = getattr(self._nvml, "nvmlGpmQueryDeviceSupport", None)
        if query is None or not hasattr(self._nvml, "c_nvmlGpmMetricsGet_t"):
            self._refuse("GPM: not in this nvidia-ml-py (upgrade it for GPM)")
            return
        try:
            got = query(handle)
        except Exception as e:
            if is_error(self._nvml, e, "NVMLError_GpuIsLost"):
                raise GpuLost("nvmlGpmQueryDeviceSupport") from e
            self._refuse(f"GPM: not supported on {self._name}" if never_answers(self._nvml, e)
                         else f"GPM: refused ({error_line(e)})")
            return
        if not getattr(got, "isSupportedDevice", 0):
            self._refuse(f"GPM: not supported on {self._name}")
            return
        self.supported, self.note = True, None

    def _refuse(self, note: str) -> None:
        self.supported, self.note, self.gives_pcie = False, note, False
        self.close()

    # -- sampling -----------------------------------------------------------------------------

    def read(self, handle: Any, now: float) -> Values | None:
        """The whole GPU's values over the last window; None before the first window closes,
        or when GPM is unsupported or refused (``note`` says which)."""
        if self.supported is None:
            self._decide(handle)
        if not self.supported:
            return None
        n = self._nvml
        return self._step("", now, lambda s: n.nvmlGpmSampleGet(handle, s), whole=True)

    def read_mig(self, handle: Any, gpu_instances: Iterable[int], now: float) -> dict[str, Values]:
        """Per MIG GPU instance (``nvmlGpmMigSampleGet``), keyed by the instance id as text;
        the windows of instances not named are freed (the instance is gone)."""
        if self.supported is None:
            self._decide(handle)
        if not self.supported:
            return {}
        n = self._nvml
        out: dict[str, Values] = {}
        keep = {""}
        for gi in gpu_instances:
            key = str(gi)
            keep.add(key)

            def get(s: Any, gi: int = gi) -> Any:
                return n.nvmlGpmMigSampleGet(handle, gi, s)

            got = self._step(key, now, get, whole=False)
            if got is not None:
                out[key] = got
        for key in [k for k in self._windows if k not in keep]:
            self._free(self._windows.pop(key))
        return out

    def _step(
        self, key: str, now: float, get: Callable[[Any], Any], *, whole: bool
    ) -> Values | None:
        w = self._windows.get(key)
        if w is None:
            w = self._windows[key] = _Window()
        if w.prev is not None and now - w.t <= MIN_WINDOW_S:
            return w.values
        n = self._nvml
        try:
            if w.spare is None:
                w.spare = n.nvmlGpmSampleAlloc()
            get(w.spare)
            if w.prev is None:
                w.prev, w.spare, w.t = w.spare, None, now
                return None
            values = self._metrics(w.prev, w.spare)
        except Exception as e:
            self._free(self._windows.pop(key))
            self.gives_pcie = self.gives_pcie and not whole
            if is_error(n, e, "NVMLError_GpuIsLost"):
                self.close()
                raise GpuLost("GPM") from e
            if whole and never_answers(n, e):
                self._refuse(f"GPM: not supported on {self._name} ({error_line(e)})")
            elif whole:
                self.note = f"GPM: {error_line(e)}"
            return None
        w.prev, w.spare, w.t, w.values = w.spare, w.prev, now, values
        if whole:
            self.note = None
            self.gives_pcie = None not in (values["pcie_tx_bytes_s"], values["pcie_rx_bytes_s"])
        return values

    def _metrics(self, sample1: Any, sample2: Any) -> Values:
        n = self._nvml
        req = n.c_nvmlGpmMetricsGet_t()
        req.version = n.NVML_GPM_METRICS_GET_VERSION
        req.numMetrics = len(METRICS)
        req.sample1, req.sample2 = sample1, sample2
        for i, (_, metric_id, _) in enumerate(METRICS):
            req.metrics[i].metricId = metric_id
        n.nvmlGpmMetricsGet(req)
        out: Values = {}
        for i, (name, metric_id, scale) in enumerate(METRICS):
            m = req.metrics[i]
            v = float(m.value)
            if m.nvmlReturn != 0 or m.metricId != metric_id or not math.isfinite(v) or v < 0:
                out[name] = None
            else:
                out[name] = min(v * scale, 1.0) if scale < 1 else v * scale
        return out

    # -- freeing ------------------------------------------------------------------------------

    def _free(self, w: _Window) -> None:
        free = getattr(self._nvml, "nvmlGpmSampleFree", None)
        for s in (w.prev, w.spare):
            if s is not None and free is not None:
                try:
                    free(s)
                except Exception:
                    pass  # host memory of a sample: nothing more to do
        w.prev = w.spare = None

    def close(self) -> None:
        """Free every sample (safe to call twice)."""
        for w in self._windows.values():
            self._free(w)
        self._windows.clear()
