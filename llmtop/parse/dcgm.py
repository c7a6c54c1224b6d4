"""NVIDIA DCGM exporter (``DCGM_FI_*``, port 9400) -> ``EngineSample.gpus`` (METRICS.md §12).

One ``GpuRecord(source="dcgm")`` per GPU (``gpu`` label), in base units: utilisation 0..1,
framebuffer MiB -> bytes, energy mJ -> J. DCGM blank sentinels become None.
The profiling (DCP) fields that measure real activity land in the named activity fields
(``ACTIVITY``: ratios 0..1 as DCGM gives them, NVLink bytes/s; ``activity_source="dcgm"``);
a MIG instance's (``GPU_I_ID`` label) go to ``GpuRecord.mig_activity`` under its id, never
into the whole GPU's. Fields without a ``GpuRecord`` slot (graphics-engine and FP32/FP64
pipe activity, remapped rows...) go to ``GpuRecord.extra`` under a short lower-case name
(``gr_engine_active``, ``fp32_active``...).
Kubernetes pod mapping labels become ``GpuProcess(pid=None, name="namespace/pod/container")``.
"""

from __future__ import annotations

from typing import Any

from llmtop.model import EngineSample, GpuProcess, GpuRecord
from llmtop.parse.common import identity_host, identity_version
from llmtop.parse.exposition import ParseError, Sample, parse
from llmtop.parse.gpu_common import clean, decode_throttle

__all__ = ["ACTIVITY", "normalize"]

_MIB = 2**20

# DCGM field -> (GpuRecord attribute, scale). Integers are rounded where the slot is an int.
_FIELDS: dict[str, tuple[str, float]] = {
    "DCGM_FI_DEV_GPU_UTIL": ("util", 0.01),
    "DCGM_FI_DEV_MEM_COPY_UTIL": ("mem_util", 0.01),
    "DCGM_FI_DEV_FB_USED": ("mem_used_bytes", _MIB),
    "DCGM_FI_DEV_FB_FREE": ("mem_free_bytes", _MIB),
    "DCGM_FI_DEV_FB_RESERVED": ("mem_reserved_bytes", _MIB),
    "DCGM_FI_DEV_FB_TOTAL": ("mem_total_bytes", _MIB),
    "DCGM_FI_DEV_POWER_USAGE": ("power_w", 1.0),
    "DCGM_FI_DEV_POWER_MGMT_LIMIT": ("power_limit_w", 1.0),
    "DCGM_FI_DEV_ENFORCED_POWER_LIMIT": ("power_limit_w", 1.0),
    "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": ("energy_j", 1e-3),
    "DCGM_FI_DEV_GPU_TEMP": ("temp_c", 1.0),
    "DCGM_FI_DEV_MEMORY_TEMP": ("mem_temp_c", 1.0),
    "DCGM_FI_DEV_SLOWDOWN_TEMP": ("temp_slowdown_c", 1.0),
    "DCGM_FI_DEV_SHUTDOWN_TEMP": ("temp_shutdown_c", 1.0),
    "DCGM_FI_DEV_FAN_SPEED": ("fan_pct", 1.0),
    "DCGM_FI_DEV_SM_CLOCK": ("sm_clock_mhz", 1.0),
    "DCGM_FI_DEV_MAX_SM_CLOCK": ("sm_clock_max_mhz", 1.0),
    "DCGM_FI_DEV_MEM_CLOCK": ("mem_clock_mhz", 1.0),
    "DCGM_FI_DEV_MAX_MEM_CLOCK": ("mem_clock_max_mhz", 1.0),
    "DCGM_FI_PROF_PCIE_TX_BYTES": ("pcie_tx_bytes_s", 1.0),
    "DCGM_FI_PROF_PCIE_RX_BYTES": ("pcie_rx_bytes_s", 1.0),
    "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL": ("ecc_corrected", 1.0),
    "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL": ("ecc_uncorrected", 1.0),
    "DCGM_FI_DEV_XID_ERRORS": ("xid", 1.0),
}
# DCGM profiling field -> GpuRecord activity field (dcgm_fields.h 1002-1005, 1008, 1011,
# 1012; dcgm-exporter etc/dcp-metrics-included.csv lists them, SM_ACTIVE and SM_OCCUPANCY
# commented out by default). Ratios are 0..1 already; NVLink is bytes per second.
ACTIVITY: dict[str, str] = {
    "DCGM_FI_PROF_SM_ACTIVE": "sm_active",
    "DCGM_FI_PROF_SM_OCCUPANCY": "sm_occupancy",
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": "tensor_active",
    "DCGM_FI_PROF_DRAM_ACTIVE": "dram_active",
    "DCGM_FI_PROF_PIPE_FP16_ACTIVE": "fp16_active",
    "DCGM_FI_PROF_NVLINK_TX_BYTES": "nvlink_tx_bytes_s",
    "DCGM_FI_PROF_NVLINK_RX_BYTES": "nvlink_rx_bytes_s",
}
_INT_FIELDS = frozenset(
    {"mem_used_bytes", "mem_free_bytes", "mem_reserved_bytes", "mem_total_bytes"}
    | {"ecc_corrected", "ecc_uncorrected", "xid"}
)
_THROTTLE = ("DCGM_FI_DEV_CLOCKS_EVENT_REASONS", "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS")
# Percent fields kept in extra as fractions.
_PERCENT_EXTRA = frozenset({"DCGM_FI_DEV_ENC_UTIL", "DCGM_FI_DEV_DEC_UTIL"})
# Fields that add up across MIG instances of one GPU (others take the max).
_ADDITIVE = frozenset(
    {"mem_used_bytes", "mem_free_bytes", "mem_reserved_bytes", "mem_total_bytes"}
)


def _extra_name(field: str) -> str:
    """``DCGM_FI_PROF_PIPE_TENSOR_ACTIVE`` -> ``tensor_active``; ``DCGM_FI_DEV_X`` -> ``x``."""
    n = field.removeprefix("DCGM_FI_").removeprefix("DEV_").removeprefix("PROF_")
    n = n.removeprefix("PIPE_")
    return n.lower()


class _Gpu:
    __slots__ = ("activity", "host", "index", "instances", "labels", "pods", "values")

    def __init__(self, host: str, index: int, labels: dict[str, str]) -> None:
        self.host = host
        self.index = index
        self.labels = labels
        self.values: dict[str, float] = {}  # field -> value from the whole-GPU series
        self.instances: dict[str, dict[str, float]] = {}  # MIG instance -> field -> value
        self.activity: dict[str, dict[str, float]] = {}  # GPU_I_ID -> ACTIVITY field -> value
        self.pods: list[str] = []


def normalize(
    body: str,
    *,
    headers: dict[str, str] | None = None,
    identity: dict[str, Any] | None = None,
) -> EngineSample:
    """DCGM exporter text -> ``EngineSample(engine="dcgm", models=[], gpus=[...])``."""
    fams = parse(body, want=lambda n: n.startswith("DCGM_"))
    host_default = identity_host(identity)
    gpus: dict[tuple[str, str, str], _Gpu] = {}
    driver: str | None = None
    for fam in fams.values():
        for s in fam.samples:
            name = s.name.removesuffix("_total")  # a typed counter may come back as X_total
            if not name.startswith("DCGM_FI_"):
                continue
            gpu = _gpu_for(gpus, s, host_default)
            if gpu is None:
                continue
            driver = driver or s.labels.get("DCGM_FI_DRIVER_VERSION") or None
            pod = _pod_name(s.labels)
            if pod and pod not in gpu.pods:
                gpu.pods.append(pod)
            inst = s.labels.get("GPU_I_ID", "")
            if inst:
                prof = s.labels.get("GPU_I_PROFILE", "")
                key = f"{prof} id {inst}".strip() if prof else f"id {inst}"
                gpu.instances.setdefault(key, {})[name] = s.value
                if name in ACTIVITY:
                    gpu.activity.setdefault(inst, {})[name] = s.value
            else:
                gpu.values[name] = s.value
    if not fams:
        raise ParseError("no DCGM_* families: not a DCGM exporter payload")
    records = [_record(g) for g in sorted(gpus.values(), key=lambda g: (g.host, g.index))]
    extra: dict[str, Any] = {}
    if driver:
        extra["driver_version"] = driver
    return EngineSample(
        engine="dcgm", version=identity_version(identity), gpus=records, extra=extra
    )


def _gpu_for(gpus: dict[tuple[str, str, str], _Gpu], s: Sample, host: str) -> _Gpu | None:
    idx = s.labels.get("gpu", "")
    uuid = s.labels.get("UUID") or s.labels.get("uuid") or ""
    if not idx and not uuid:
        return None
    h = s.labels.get("Hostname") or s.labels.get("hostname") or host
    key = (h, idx, uuid)
    g = gpus.get(key)
    if g is None:
        try:
            index = int(idx)
        except ValueError:
            index = len(gpus)
        g = gpus[key] = _Gpu(h, index, dict(s.labels))
    return g


def _pod_name(labels: dict[str, str]) -> str:
    pod = labels.get("pod", "")
    if not pod:
        return ""
    parts = [labels.get("namespace", ""), pod, labels.get("container", "")]
    return "/".join(p for p in parts if p)


def _merge_instances(g: _Gpu) -> dict[str, float]:
    """Whole-GPU values, completed from MIG instance series (sum memory, max the rest)."""
    values = dict(g.values)
    merged: dict[str, float] = {}
    for inst in g.instances.values():
        for field, v in inst.items():
            c = clean(v)
            if c is None or field in ACTIVITY:  # an instance's activity is not the GPU's
                continue
            attr = _FIELDS.get(field, ("", 1.0))[0]
            if field in merged:
                merged[field] = merged[field] + c if attr in _ADDITIVE else max(merged[field], c)
            else:
                merged[field] = c
    for field, v in merged.items():
        values.setdefault(field, v)
    return values


def _record(g: _Gpu) -> GpuRecord:
    labels = g.labels
    rec = GpuRecord(
        host=g.host,
        index=g.index,
        source="dcgm",
        uuid=labels.get("UUID") or labels.get("uuid") or None,
        name=labels.get("modelName") or None,
        pci_bus_id=labels.get("pci_bus_id") or None,
    )
    values = _merge_instances(g)
    for field, raw in values.items():
        v = clean(raw)
        if field in _FIELDS:
            attr, scale = _FIELDS[field]
            if v is None or (attr == "power_limit_w" and rec.power_limit_w is not None):
                continue
            val = v * scale
            setattr(rec, attr, round(val) if attr in _INT_FIELDS else val)
        elif field in ACTIVITY:
            setattr(rec, ACTIVITY[field], _activity(field, v))
        elif field in _THROTTLE:
            if v is not None:
                rec.throttle = decode_throttle(v)
        elif v is not None and field != "DCGM_FI_DRIVER_VERSION":
            rec.extra[_extra_name(field)] = v / 100.0 if field in _PERCENT_EXTRA else v
    parts = (rec.mem_free_bytes, rec.mem_used_bytes)
    if rec.mem_total_bytes is None and None not in parts:
        rec.mem_total_bytes = sum(p for p in parts if p is not None) + (
            rec.mem_reserved_bytes or 0
        )
    for gi, fields in sorted(g.activity.items()):
        rec.mig_activity[gi] = {ACTIVITY[f]: _activity(f, clean(v)) for f, v in fields.items()}
    named = [getattr(rec, a) for a in ACTIVITY.values()]
    mig = [v for d in rec.mig_activity.values() for v in d.values()]
    if any(v is not None for v in named + mig):
        rec.activity_source = "dcgm"
    if g.instances:
        rec.mig_mode = True
        rec.mig_instances = sorted(g.instances)
    rec.processes = [GpuProcess(pid=None, name=p, visible=False) for p in g.pods]
    return rec


def _activity(field: str, v: float | None) -> float | None:
    """A DCGM activity value: ratios within 0..1 (a negative one is garbage), rates >= 0."""
    if v is None or v < 0:
        return None
    return v if field.endswith("_BYTES") else min(v, 1.0)
