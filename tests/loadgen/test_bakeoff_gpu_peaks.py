"""The bake-off's GPU peaks: the engine's own processes where NVML attributes them."""

from __future__ import annotations

from llmtop.loadgen.server_side import ServerWatch
from llmtop.model import GpuProcess, GpuRecord

GIB = 2**30


def _watch() -> ServerWatch:
    return ServerWatch("http://127.0.0.1:18000", new_monitor=lambda config: None)


def _gpu(index: int, used: int, util: float, procs: list[GpuProcess]) -> GpuRecord:
    return GpuRecord(host="h", index=index, source="nvml", mem_used_bytes=used, util=util,
                     processes=procs)


def test_attributed_processes_give_the_engines_own_memory_and_gpus():
    w = _watch()
    me, other = w.target.name, "sglang@127.0.0.1:30000"
    gpus = [_gpu(0, 70 * GIB, 0.9, [GpuProcess(pid=1, used_bytes=20 * GIB, engine_target=me),
                                    GpuProcess(pid=2, used_bytes=50 * GIB, engine_target=other)]),
            _gpu(1, 60 * GIB, 1.0, [GpuProcess(pid=3, used_bytes=60 * GIB, engine_target=other)])]
    w._fold_gpus(gpus)
    assert w.server["gpu_memory_of"] == "engine"
    assert w.server["gpu_memory_peak_bytes"] == 20 * GIB  # not the GPU's 70, not GPU 1's 60
    assert w.server["gpu_util_peak"] == 0.9  # GPU 1 (another engine's, 100 %) is not counted
    w._fold_gpus([_gpu(0, 5 * GIB, 0.1, [])])  # a sample without its processes adds nothing
    assert w.server["gpu_memory_peak_bytes"] == 20 * GIB
    assert w.server["gpu_util_peak"] == 0.9


def test_without_attribution_the_whole_gpus_are_named_as_such():
    w = _watch()
    w._fold_gpus([_gpu(0, 12 * GIB, 0.4, [GpuProcess(pid=9, used_bytes=12 * GIB)])])
    assert w.server["gpu_memory_of"] == "gpu"
    assert w.server["gpu_memory_peak_bytes"] == 12 * GIB
    assert w.server["gpu_util_peak"] == 0.4


def test_no_gpus_leave_the_peaks_missing():
    w = _watch()
    w._fold_gpus([])
    assert w.server["gpu_memory_peak_bytes"] is None
    assert w.server["gpu_util_peak"] is None
    assert w.server["gpu_memory_of"] is None
