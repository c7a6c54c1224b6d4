"""NvmlSampler against the scripted fake pynvml: fields, per-field failures, absence, retry."""

from __future__ import annotations

import os
import sys

import pytest

from llmtop.gpu import proc as procfs
from llmtop.gpu import reasons
from llmtop.gpu.nvml import NOT_VISIBLE, GpuLost, NvmlSampler, nvml_query

from . import fake_pynvml as fk
from .fake_pynvml import FakeDevice, FakeMigDevice, FakeNvml, FakeProc

GiB = 1024**3


class Clock:
    def __init__(self, t: float = 1000.0):
        self.t = t

    def __call__(self) -> float:
        return self.t


def make(devices=None, **kw):
    fake = FakeNvml(
        devices, **{k: kw.pop(k) for k in ("init_error", "count_error", "missing") if k in kw}
    )
    clock = kw.pop("clock", Clock())
    kw.setdefault("host_pid_namespace", True)  # as on a host, wherever the tests run
    return fake, NvmlSampler(nvml=fake, clock=clock, hostname="box", **kw), clock


def test_full_device_fields_and_units():
    fake, s, _ = make([FakeDevice(clock_events=0x004 | 0x020)])
    out = s.sample()
    assert out.error is None
    assert out.cost_s is not None and out.cost_s >= 0
    (g,) = out.gpus
    assert (g.host, g.index, g.source) == ("box", 0, "nvml")
    assert g.uuid == "GPU-00000000-1111-2222-3333-444444444444"
    assert g.name == "NVIDIA H100 80GB HBM3"
    assert g.pci_bus_id == "00000000:17:00.0"
    assert g.util == pytest.approx(0.87) and g.mem_util == pytest.approx(0.41)
    assert g.mem_total_bytes == 80 * GiB and g.mem_used_bytes == 60 * GiB
    assert g.mem_reserved_bytes == 512 * 1024**2
    assert g.mem_free_bytes == 80 * GiB - 60 * GiB - 512 * 1024**2
    assert g.power_w == pytest.approx(412.345) and g.power_limit_w == pytest.approx(700.0)
    assert g.energy_j == pytest.approx(123456.789)
    assert (g.temp_c, g.temp_slowdown_c, g.temp_shutdown_c) == (61, 87, 92)
    assert g.fan_pct == 35
    assert (g.sm_clock_mhz, g.sm_clock_max_mhz) == (1755, 1980)
    assert (g.mem_clock_mhz, g.mem_clock_max_mhz) == (2619, 2619)
    assert g.throttle == ["power cap", "thermal slowdown (sw)"]
    assert g.pcie_tx_bytes_s == 2000 * 1024 and g.pcie_rx_bytes_s == 30000 * 1024
    assert (g.ecc_corrected, g.ecc_uncorrected) == (3, 0)
    assert g.mig_mode is False and g.mig_instances == []
    assert g.processes == [] and g.error is None
    assert fake.initialized == 1


def test_no_throttle_is_empty_list_not_none():
    _, s, _ = make([FakeDevice(clock_events=0)])
    assert s.sample().gpus[0].throttle == []


# function name -> the GpuRecord fields it feeds
PER_FIELD = {
    "nvmlDeviceGetUUID": ["uuid"],
    "nvmlDeviceGetName": ["name"],
    "nvmlDeviceGetPciInfo": ["pci_bus_id"],
    "nvmlDeviceGetUtilizationRates": ["util", "mem_util"],
    "nvmlDeviceGetPowerUsage": ["power_w"],
    "nvmlDeviceGetEnforcedPowerLimit": ["power_limit_w"],
    "nvmlDeviceGetTotalEnergyConsumption": ["energy_j"],
    "nvmlDeviceGetTemperatureThreshold": ["temp_slowdown_c", "temp_shutdown_c"],
    "nvmlDeviceGetFanSpeed": ["fan_pct"],
    "nvmlDeviceGetClockInfo": ["sm_clock_mhz", "mem_clock_mhz"],
    "nvmlDeviceGetMaxClockInfo": ["sm_clock_max_mhz", "mem_clock_max_mhz"],
    "nvmlDeviceGetPcieThroughput": ["pcie_tx_bytes_s", "pcie_rx_bytes_s"],
    "nvmlDeviceGetTotalEccErrors": ["ecc_corrected", "ecc_uncorrected"],
    "nvmlDeviceGetMigMode": ["mig_mode"],
}
# functions with a fallback: both must fail for the field to go None
PAIRS = {
    ("nvmlDeviceGetMemoryInfo_v2", "nvmlDeviceGetMemoryInfo"): [
        "mem_total_bytes",
        "mem_used_bytes",
        "mem_free_bytes",
        "mem_reserved_bytes",
    ],
    ("nvmlDeviceGetTemperatureV", "nvmlDeviceGetTemperature"): ["temp_c"],
    (
        "nvmlDeviceGetCurrentClocksEventReasons",
        "nvmlDeviceGetCurrentClocksThrottleReasons",
    ): ["throttle"],
}
ALL_FIELDS = sorted({f for fs in [*PER_FIELD.values(), *PAIRS.values()] for f in fs})
ERRORS = [fk.NVMLError_NotSupported, fk.NVMLError_NoPermission, fk.NVMLError_Unknown]


def _baseline():
    _, s, _ = make([FakeDevice(clock_events=0x1)])
    return s.sample().gpus[0]


@pytest.mark.parametrize("error", ERRORS, ids=lambda e: e.__name__)
@pytest.mark.parametrize("fns", [*[(f,) for f in PER_FIELD], *PAIRS], ids=lambda t: "+".join(t))
def test_each_field_failure_gives_none_and_keeps_the_others(fns, error):
    fields = PER_FIELD.get(fns[0]) if len(fns) == 1 else PAIRS[fns]
    base = _baseline()
    dev = FakeDevice(clock_events=0x1)
    for fn in fns:
        dev.fail(fn, error)
    _, s, _ = make([dev])
    out = s.sample()
    assert out.error is None
    g = out.gpus[0]
    assert g.error is None
    for f in fields:
        assert getattr(g, f) is None, f
    for f in ALL_FIELDS:
        if f not in fields:
            assert getattr(g, f) == getattr(base, f), f
            assert getattr(g, f) is not None, f


def test_fallbacks_are_used_when_the_newer_call_fails():
    dev = FakeDevice(clock_events=0x8)
    for fn in (
        "nvmlDeviceGetMemoryInfo_v2",
        "nvmlDeviceGetTemperatureV",
        "nvmlDeviceGetCurrentClocksEventReasons",
    ):
        dev.fail(fn, fk.NVMLError_NotSupported)
    _, s, _ = make([dev])
    g = s.sample().gpus[0]
    assert g.mem_total_bytes == 80 * GiB and g.mem_used_bytes == 60 * GiB
    assert g.mem_reserved_bytes is None  # v1 has no reserved field
    assert g.temp_c == 61
    assert g.throttle == ["hw slowdown"]


def test_older_pynvml_without_newer_functions():
    missing = {"nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetTemperatureV"}
    _fake, s, _ = make([FakeDevice(clock_events=0x10)], missing=missing)
    g = s.sample().gpus[0]
    assert g.temp_c == 61 and g.throttle == ["sync boost"]


def test_not_supported_is_not_asked_again_but_other_errors_are():
    dev = FakeDevice()
    dev.fail("nvmlDeviceGetFanSpeed", fk.NVMLError_NotSupported)
    dev.fail("nvmlDeviceGetPowerUsage", fk.NVMLError_NoPermission)
    fake, s, _ = make([dev])
    for _ in range(3):
        s.sample()
    assert fake.calls["nvmlDeviceGetFanSpeed"] == 1
    assert fake.calls["nvmlDeviceGetPowerUsage"] == 3
    dev.ok("nvmlDeviceGetPowerUsage")  # permission granted later: picked up
    assert s.sample().gpus[0].power_w == pytest.approx(412.345)


def test_static_fields_are_read_once():
    fake, s, _ = make()
    for _ in range(3):
        s.sample()
    assert fake.calls["nvmlDeviceGetUUID"] == 1
    assert fake.calls["nvmlDeviceGetMaxClockInfo"] == 2  # sm + mem, once each
    assert fake.calls["nvmlDeviceGetUtilizationRates"] == 3


def test_pcie_is_read_at_most_every_pcie_every_s_and_held():
    dev = FakeDevice()
    fake, s, clock = make([dev], pcie_every_s=5.0)
    assert s.sample().gpus[0].pcie_rx_bytes_s == 30000 * 1024
    dev.pcie_rx_kbs = 1
    clock.t += 1
    assert s.sample().gpus[0].pcie_rx_bytes_s == 30000 * 1024
    assert fake.calls["nvmlDeviceGetPcieThroughput"] == 2
    clock.t += 5
    assert s.sample().gpus[0].pcie_rx_bytes_s == 1024
    assert fake.calls["nvmlDeviceGetPcieThroughput"] == 4


def test_non_nvml_exception_in_a_field_is_contained():
    dev = FakeDevice()
    dev.fail("nvmlDeviceGetFanSpeed", fk.NVMLError_NotSupported)
    dev.errors["nvmlDeviceGetPowerUsage"] = RuntimeError("ctypes blew up")  # type: ignore[assignment]
    _, s, _ = make([dev])
    g = s.sample().gpus[0]
    assert g.power_w is None and g.util is not None


# --- graceful absence --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("error", "line"),
    [
        (fk.NVMLError_LibraryNotFound, reasons.LIBRARY_NOT_FOUND),
        (fk.NVMLError_DriverNotLoaded, reasons.DRIVER_NOT_LOADED),
        (fk.NVMLError_LibRmVersionMismatch, reasons.VERSION_MISMATCH),
        (fk.NVMLError_NoPermission, reasons.NO_PERMISSION),
    ],
    ids=lambda x: getattr(x, "__name__", "line"),
)
def test_init_failures_become_one_line(error, line):
    _, s, _ = make(init_error=error)
    out = s.sample()
    assert out.gpus == [] and out.error == line
    assert out.error.startswith("GPU unavailable: ")
    s.close()  # nothing to shut down, must not raise


def test_version_mismatch_line_has_the_hint():
    assert "reboot or reload the nvidia kernel module after a driver upgrade" in (
        reasons.VERSION_MISMATCH
    )
    assert reasons.LIBRARY_NOT_FOUND == (
        "GPU unavailable: NVML library not found (is the NVIDIA driver installed?)"
    )


def test_unknown_init_error_keeps_nvml_text():
    _, s, _ = make(init_error=fk.NVMLError_Unknown)
    assert s.sample().error == "GPU unavailable: NVML failed (Unknown Error)"


def test_pynvml_import_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # makes `import pynvml` raise ImportError
    s = NvmlSampler(hostname="box")
    out = s.sample()
    assert out.error == reasons.LIBRARY_NOT_FOUND and out.gpus == []
    s.close()


def test_real_pynvml_classes_map_to_the_same_lines():
    pynvml = pytest.importorskip("pynvml")
    assert reasons.init_error_reason(pynvml.NVMLError_LibraryNotFound()) == (
        reasons.LIBRARY_NOT_FOUND
    )
    assert reasons.init_error_reason(pynvml.NVMLError(pynvml.NVML_ERROR_DRIVER_NOT_LOADED)) == (
        reasons.DRIVER_NOT_LOADED
    )
    assert reasons.init_error_reason(pynvml.NVMLError_LibRmVersionMismatch()) == (
        reasons.VERSION_MISMATCH
    )
    assert reasons.init_error_reason(pynvml.NVMLError_NoPermission()) == reasons.NO_PERMISSION


def test_no_gpus():
    fake, s, _ = make([])
    out = s.sample()
    assert out.error == reasons.NO_GPUS and out.gpus == []
    assert fake.initialized == 0  # shut down again, retried later


def test_driver_gone_mid_run_then_back():
    fake, s, clock = make()
    assert s.sample().error is None
    fake.count_error = fk.NVMLError_DriverNotLoaded
    assert s.sample().error == reasons.DRIVER_NOT_LOADED
    assert fake.initialized == 0
    fake.count_error = None
    clock.t += 10
    assert s.sample().error == reasons.DRIVER_NOT_LOADED  # not retried before 30 s
    clock.t += 20
    out = s.sample()
    assert out.error is None and len(out.gpus) == 1


def test_init_retry_at_most_every_30s_with_injected_clock():
    fake, s, clock = make(init_error=fk.NVMLError_DriverNotLoaded)
    assert s.sample().error == reasons.DRIVER_NOT_LOADED
    for dt in (1, 5, 10, 29.9):
        clock.t = 1000 + dt
        assert s.sample().error == reasons.DRIVER_NOT_LOADED
    assert fake.calls["nvmlInit"] == 1 and s.init_attempts == 1
    clock.t = 1030
    s.sample()
    assert fake.calls["nvmlInit"] == 2
    fake.init_error = None  # the driver comes back
    clock.t = 1059
    assert s.sample().error == reasons.DRIVER_NOT_LOADED
    clock.t = 1060
    out = s.sample()
    assert out.error is None and out.gpus[0].util == pytest.approx(0.87)
    assert fake.calls["nvmlInit"] == 3
    for _ in range(3):
        s.sample()
    assert fake.calls["nvmlInit"] == 3  # once initialized, never again


def test_sample_async_answers_a_held_error_on_the_loop_and_nvml_calls_in_a_thread():
    """No driver: the error is answered without a worker thread until the retry is due;
    the retry (and every sample of a working NVML) runs in a worker thread."""
    import asyncio
    import threading

    fake, s, clock = make(init_error=fk.NVMLError_DriverNotLoaded)
    threads: list[str] = []
    sample = s.sample
    s.sample = lambda: threads.append(threading.current_thread().name) or sample()

    async def run(n: int = 1):
        return [await s.sample_async() for _ in range(n)]

    main = threading.current_thread().name
    assert asyncio.run(run())[0].error == reasons.DRIVER_NOT_LOADED  # first init: a thread
    assert len(threads) == 1 and threads[0] != main
    clock.t += 10
    outs = asyncio.run(run(5))
    assert [o.error for o in outs] == [reasons.DRIVER_NOT_LOADED] * 5
    assert outs[0].t_mono == clock.t and outs[0].gpus == []
    assert len(threads) == 1 and fake.calls["nvmlInit"] == 1  # no thread, no NVML call
    assert s.held_sample().error == reasons.DRIVER_NOT_LOADED
    fake.init_error = None
    clock.t += 20  # retry due: in a thread, and it works
    assert s.held_sample() is None
    out = asyncio.run(run())[0]
    assert out.error is None and len(out.gpus) == 1 and len(threads) == 2
    asyncio.run(run())
    assert len(threads) == 3 and threads[-1] != main
    s.close()
    assert asyncio.run(run())[0].error == "GPU unavailable: GPU sampler closed"


def test_close_shuts_down_once_and_sample_after_close_is_an_error():
    fake, s, _ = make()
    s.sample()
    s.sample()
    assert fake.calls["nvmlInit"] == 1
    s.close()
    s.close()
    assert fake.calls["nvmlShutdown"] == 1 and fake.initialized == 0
    out = s.sample()
    assert out.gpus == [] and out.error is not None


def test_close_without_sampling_does_not_touch_nvml():
    fake, s, _ = make()
    s.close()
    assert fake.calls["nvmlInit"] == 0 and fake.calls["nvmlShutdown"] == 0


# --- GPU lost ------------------------------------------------------------------------------------


def test_gpu_lost_mid_run_marks_only_that_gpu():
    d0, d1 = FakeDevice(uuid="GPU-a"), FakeDevice(uuid="GPU-b")
    _fake, s, clock = make([d0, d1])
    assert [g.error for g in s.sample().gpus] == [None, None]
    d0.lost = True
    clock.t += 1
    out = s.sample()
    assert out.error is None
    g0, g1 = out.gpus
    assert g0.error == "GPU is lost (fell off the bus?)" == reasons.GPU_LOST
    assert g0.uuid == "GPU-a" and g0.name == "NVIDIA H100 80GB HBM3"  # identity kept
    assert g0.util is None and g0.processes == []
    assert g1.error is None and g1.util == pytest.approx(0.87)
    # all lost -> one line for the whole panel
    d1.lost = True
    clock.t += 1
    out = s.sample()
    assert out.error == reasons.GPU_LOST_ALL
    assert all(g.error == reasons.GPU_LOST for g in out.gpus)
    # recovered (after a reset) -> picked up on the next retry
    d0.lost = d1.lost = False
    clock.t += 31
    out = s.sample()
    assert out.error is None and [g.error for g in out.gpus] == [None, None]


def test_lost_gpu_is_not_queried_every_tick():
    dev = FakeDevice()
    fake, s, clock = make([dev])
    s.sample()
    dev.lost = True
    s.sample()
    before = fake.calls.total()
    clock.t += 1
    assert s.sample().error == reasons.GPU_LOST_ALL
    assert fake.calls.total() - before == 1  # nvmlDeviceGetCount only


def test_gpu_lost_on_handle():
    d0 = FakeDevice()
    d0.fail("nvmlDeviceGetHandleByIndex", fk.NVMLError_GpuIsLost)
    _, s, clock = make([d0, FakeDevice(uuid="GPU-b")])
    out = s.sample()
    assert out.gpus[0].error == reasons.GPU_LOST and out.gpus[1].error is None
    d0.ok("nvmlDeviceGetHandleByIndex")
    clock.t += 5
    assert s.sample().gpus[0].error == reasons.GPU_LOST  # waits for the retry interval
    clock.t += 30
    assert s.sample().gpus[0].error is None


def test_nvml_query_helper():
    fake = FakeNvml([FakeDevice()])
    fake.nvmlInit()
    dev = fake.devices[0]
    assert nvml_query(fake, "nvmlDeviceGetFanSpeed", dev) == 35
    assert nvml_query(fake, "nvmlNoSuchFunction", dev, default="x") == "x"
    dev.fail("nvmlDeviceGetFanSpeed", fk.NVMLError_NotSupported)
    assert nvml_query(fake, "nvmlDeviceGetFanSpeed", dev) is None
    dev.lost = True
    with pytest.raises(GpuLost):
        nvml_query(fake, "nvmlDeviceGetFanSpeed", dev)


# --- throttle, MIG, processes ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("mask", "words"),
    [
        (0x0, []),
        (0x1, ["gpu idle"]),
        (0x2, ["applications clocks setting"]),
        (0x4, ["power cap"]),
        (0x8, ["hw slowdown"]),
        (0x10, ["sync boost"]),
        (0x20, ["thermal slowdown (sw)"]),
        (0x40, ["hw thermal slowdown"]),
        (0x80, ["hw power brake"]),
        (0x100, ["display clocks setting"]),
        (0x4 | 0x40 | 0x80, ["power cap", "hw thermal slowdown", "hw power brake"]),
        (0x1000, ["other (0x1000)"]),
    ],
)
def test_clock_event_decoding(mask, words):
    assert reasons.decode_clock_events(mask) == words
    _, s, _ = make([FakeDevice(clock_events=mask)])
    assert s.sample().gpus[0].throttle == words


def test_clock_event_decoding_none():
    assert reasons.decode_clock_events(None) is None


def test_real_pynvml_bits_match_the_decoder():
    pynvml = pytest.importorskip("pynvml")
    assert reasons.decode_clock_events(pynvml.nvmlClocksEventReasonSwPowerCap) == ["power cap"]
    assert reasons.decode_clock_events(pynvml.nvmlClocksEventReasonHwPowerBrakeSlowdown) == [
        "hw power brake"
    ]
    assert reasons.decode_clock_events(pynvml.nvmlClocksThrottleReasonSwThermalSlowdown) == [
        "thermal slowdown (sw)"
    ]
    assert "other" not in " ".join(reasons.decode_clock_events(pynvml.nvmlClocksEventReasonAll))


def test_mig_instances_listed_and_their_processes_collected():
    me = os.getpid()
    dev = FakeDevice(
        mig_mode=(1, 1),
        mig=[
            FakeMigDevice("MIG-aaaa", "NVIDIA H100 80GB HBM3 MIG 3g.40gb", [FakeProc(me, 2 * GiB)]),
            None,
            FakeMigDevice("MIG-bbbb", "NVIDIA H100 80GB HBM3 MIG 1g.10gb"),
        ],
    )
    dev.fail("nvmlDeviceGetComputeRunningProcesses", fk.NVMLError_NoPermission)
    _, s, _ = make([dev])
    g = s.sample().gpus[0]
    assert g.mig_mode is True
    assert g.mig_instances == [
        "NVIDIA H100 80GB HBM3 MIG 3g.40gb MIG-aaaa",
        "NVIDIA H100 80GB HBM3 MIG 1g.10gb MIG-bbbb",
    ]
    assert [(p.pid, p.used_bytes) for p in g.processes] == [(me, 2 * GiB)]


def test_mig_disabled():
    _, s, _ = make([FakeDevice(mig_mode=(0, 1))])
    g = s.sample().gpus[0]
    assert g.mig_mode is False and g.mig_instances == []


def test_processes_dedupe_names_cmdline_and_not_visible_pid():
    me = os.getpid()
    ghost = 2**30  # above any pid_max: never in our /proc
    dev = FakeDevice(
        compute=[FakeProc(me, 3 * GiB), FakeProc(ghost, 5 * GiB)],
        graphics=[FakeProc(me, None)],
    )
    _, s, _ = make([dev])
    procs = s.sample().gpus[0].processes
    assert [p.pid for p in procs] == [ghost, me]  # largest memory first
    gp, mine = procs
    assert gp.visible is False and gp.name == NOT_VISIBLE == "pid not visible from this namespace"
    assert gp.cmdline is None and gp.used_bytes == 5 * GiB and gp.engine_target is None
    assert mine.visible is True and mine.used_bytes == 3 * GiB
    with open(f"/proc/{me}/comm") as f:
        assert mine.name == f.read().strip()
    assert mine.cmdline
    assert mine.to_json() == {
        "pid": me,
        "name": mine.name,
        "used_bytes": 3 * GiB,
        "engine_target": None,
        "user": procfs.read_owner(me),
        "sm_util": None,
    }
    assert mine.user and mine.user == procfs.read_owner(me) and gp.user is None


def test_process_listing_failure_gives_empty_list():
    dev = FakeDevice(compute=[FakeProc(1, 1)])
    dev.fail("nvmlDeviceGetComputeRunningProcesses", fk.NVMLError_NoPermission)
    _, s, _ = make([dev])
    assert s.sample().gpus[0].processes == []


def test_to_json_shape():
    _, s, _ = make([FakeDevice(clock_events=0x4)])
    j = s.sample().gpus[0].to_json()
    assert j["source"] == "nvml" and j["throttle"] == ["power cap"]
    assert j["mem_total_bytes"] == 80 * GiB and j["processes"] == []


def test_process_names_are_cached_across_ticks(monkeypatch):
    from llmtop.gpu import nvml as nvml_mod

    reads = {"n": 0}
    real = nvml_mod.procfs.read_cmdline

    def counting(pid, proc="/proc"):
        reads["n"] += 1
        return real(pid, proc)

    monkeypatch.setattr(nvml_mod.procfs, "read_cmdline", counting)
    me = os.getpid()
    _, s, _ = make(
        [FakeDevice(compute=[FakeProc(me, GiB)]), FakeDevice(compute=[FakeProc(me, GiB)])]
    )
    for _ in range(3):
        out = s.sample()
    assert reads["n"] == 1
    assert all(g.processes[0].cmdline for g in out.gpus)


def test_inside_a_container_pid_namespace_no_pid_is_trusted():
    """NVML reports host pids; inside a nested PID namespace /proc/<pid> is someone else."""
    me = os.getpid()
    _, s, _ = make([FakeDevice(compute=[FakeProc(me, GiB)])], host_pid_namespace=False)
    (p,) = s.sample().gpus[0].processes
    assert p.visible is False and p.name == NOT_VISIBLE and p.cmdline is None
    assert p.pid == me and p.used_bytes == GiB


def test_pid_namespace_detection(tmp_path):
    from llmtop.gpu import proc as procfs

    assert procfs.in_initial_pid_namespace() in (True, False, None)
    (tmp_path / "self" / "ns").mkdir(parents=True)
    (tmp_path / "self" / "ns" / "pid").symlink_to("pid:[4026531836]")
    assert procfs.in_initial_pid_namespace(str(tmp_path)) is True
    (tmp_path / "self" / "ns" / "pid").unlink()
    (tmp_path / "self" / "ns" / "pid").symlink_to("pid:[4026532198]")
    assert procfs.in_initial_pid_namespace(str(tmp_path)) is False
    assert procfs.in_initial_pid_namespace(str(tmp_path / "nope")) is None


def test_fake_follows_the_real_pynvml_names_and_signatures():
    """Every fake function exists in nvidia-ml-py with the same positional parameters."""
    import inspect

    pynvml = pytest.importorskip("pynvml")
    checked = 0
    for name in dir(FakeNvml):
        if not name.startswith("nvml") or not callable(getattr(FakeNvml, name)):
            continue
        real = getattr(pynvml, name, None)
        assert real is not None, f"{name} is not in pynvml"
        fake_params = list(inspect.signature(getattr(FakeNvml, name)).parameters)[1:]
        real_params = list(inspect.signature(real).parameters)
        assert len(fake_params) == len(real_params), (name, fake_params, real_params)
        checked += 1
    for name in dir(fk):
        if name.startswith("NVMLError_"):
            real_cls = getattr(pynvml, name)
            assert getattr(fk, name).code == real_cls().value, name
        if name.startswith(("NVML_", "nvmlClocksEventReason", "nvmlMemory_v2")):
            assert getattr(fk, name) == getattr(pynvml, name), name
    assert checked >= 25


def test_close_during_an_in_flight_sample_does_not_block():
    import threading

    fake, s, _ = make()
    s.sample()
    entered, release = threading.Event(), threading.Event()
    real = fake.nvmlDeviceGetUtilizationRates

    def slow(h):
        entered.set()
        release.wait(5)
        return real(h)

    fake.nvmlDeviceGetUtilizationRates = slow  # type: ignore[method-assign]
    t = threading.Thread(target=s.sample)
    t.start()
    assert entered.wait(5)
    s.close()  # returns at once although the sample holds the lock
    assert fake.calls["nvmlShutdown"] == 0
    release.set()
    t.join(5)
    assert fake.calls["nvmlShutdown"] == 1 and fake.initialized == 0
    assert s.sample().error is not None
    assert fake.calls["nvmlShutdown"] == 1


def test_handle_refused_for_one_gpu_is_a_record_error_and_retried():
    d0 = FakeDevice()
    d0.fail("nvmlDeviceGetHandleByIndex", fk.NVMLError_NoPermission)
    _fake, s, _ = make([d0, FakeDevice(uuid="GPU-b")])
    out = s.sample()
    assert out.error is None
    assert out.gpus[0].error == "no permission to open this GPU (check access to /dev/nvidia*)"
    assert out.gpus[1].error is None
    d0.ok("nvmlDeviceGetHandleByIndex")
    assert s.sample().gpus[0].error is None  # retried on the next tick


def test_every_handle_refused_gives_one_line():
    d0 = FakeDevice()
    d0.fail("nvmlDeviceGetHandleByIndex", fk.NVMLError_Unknown)
    _, s, _ = make([d0])
    out = s.sample()
    assert out.error == "GPU unavailable: cannot open this GPU (Unknown Error)"


def test_old_driver_process_listing_falls_back_to_v2():
    me = os.getpid()
    dev = FakeDevice(compute=[FakeProc(me, GiB)])
    dev.fail("nvmlDeviceGetComputeRunningProcesses", fk.NVMLLibraryMismatchError("use _v2"))
    fake, s, _ = make([dev])
    for _ in range(3):
        procs = s.sample().gpus[0].processes
        assert [p.pid for p in procs] == [me]
    assert fake.calls["nvmlDeviceGetComputeRunningProcesses"] == 1
    assert fake.calls["nvmlDeviceGetComputeRunningProcesses_v2"] == 3


def test_energy_and_mig_mode_are_read_at_most_every_slow_every_s_and_held():
    # benchmarks/nvml_calls.py on an H100 VM: total energy ~3 ms of CPU per call, where most
    # queries take ~2 us; the MIG mode changes only with a GPU reset.
    dev = FakeDevice()
    fake, s, clock = make([dev], slow_every_s=30.0)
    assert s.sample().gpus[0].energy_j == pytest.approx(123456.789)
    dev.energy_mj = 200_000_000
    clock.t += 29
    g = s.sample().gpus[0]
    assert g.energy_j == pytest.approx(123456.789) and g.mig_mode is False
    assert fake.calls["nvmlDeviceGetTotalEnergyConsumption"] == 1
    assert fake.calls["nvmlDeviceGetMigMode"] == 1
    clock.t += 1
    assert s.sample().gpus[0].energy_j == pytest.approx(200000.0)
    assert fake.calls["nvmlDeviceGetTotalEnergyConsumption"] == 2
    assert fake.calls["nvmlDeviceGetMigMode"] == 2


def test_a_failed_energy_read_is_held_like_an_answer_then_asked_again():
    dev = FakeDevice()
    dev.fail("nvmlDeviceGetTotalEnergyConsumption", fk.NVMLError_Unknown)
    fake, s, clock = make([dev], slow_every_s=30.0)
    assert s.sample().gpus[0].energy_j is None
    dev.ok("nvmlDeviceGetTotalEnergyConsumption")
    clock.t += 1
    assert s.sample().gpus[0].energy_j is None  # not asked again within the period
    assert fake.calls["nvmlDeviceGetTotalEnergyConsumption"] == 1
    clock.t += 30
    assert s.sample().gpus[0].energy_j == pytest.approx(123456.789)


def test_unavailable_line_says_gpu_unavailable_once():
    assert reasons.unavailable_line(reasons.LIBRARY_NOT_FOUND) == reasons.LIBRARY_NOT_FOUND
    assert reasons.unavailable_line("GPU sampling disabled") == (
        "GPU unavailable: GPU sampling disabled")
    assert reasons.unavailable_line(None) == "GPU unavailable: no GPUs reported"


def test_without_the_driver_library_pynvml_is_not_imported(monkeypatch):
    """No libnvidia-ml.so.1: the honest 'library not found' state, and pynvml's ~1.3 MB of
    code is never loaded (issue 25's memory)."""
    import ctypes
    import sys

    from llmtop.gpu import nvml as nvml_mod

    def no_lib(name, *a, **k):
        raise OSError(f"{name}: cannot open shared object file")

    monkeypatch.delitem(sys.modules, "pynvml", raising=False)
    monkeypatch.setattr(ctypes, "CDLL", no_lib)
    monkeypatch.setattr(sys, "platform", "linux")
    s = nvml_mod.NvmlSampler()
    assert s._try_init(0.0) == reasons.LIBRARY_NOT_FOUND
    assert "pynvml" not in sys.modules


def test_with_the_driver_library_pynvml_is_loaded(monkeypatch):
    import ctypes
    import sys

    from llmtop.gpu import nvml as nvml_mod

    monkeypatch.delitem(sys.modules, "pynvml", raising=False)
    monkeypatch.setattr(ctypes, "CDLL", lambda name, *a, **k: object())
    s = nvml_mod.NvmlSampler()
    assert s._load() is sys.modules["pynvml"]


def test_a_binding_without_gpm_says_so_and_nothing_else_changes():
    """An nvidia-ml-py without the GPM functions (this fake has none): a note, no crash."""
    _fake, s, _ = make([FakeDevice()])
    g = s.sample().gpus[0]
    assert g.error is None and g.util is not None
    assert g.activity_note == "GPM: not in this nvidia-ml-py (upgrade it for GPM)"
    assert g.activity_source is None and g.sm_active is None and g.throttle_time is None
