"""Loopback exporters for the demo fleet: a text target, frozen samples, DCGM from demo GPUs.

:class:`TextTarget` serves any text at ``/metrics`` from a thread; :func:`frozen_text` stamps
every sample of a scrape ``age_s`` seconds ago (a stuck exporter: the ``stale`` case);
:func:`dcgm_text` renders the demo's simulated GPUs as NVIDIA's dcgm-exporter would.
"""

from __future__ import annotations

import hashlib
import http.server
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["TextTarget", "dcgm_text", "frozen_text"]


class TextTarget:
    """A loopback ``/metrics`` endpoint (a thread) serving ``render()``'s text."""

    def __init__(self, render: Callable[[], str]):
        target = self

        class _Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                try:
                    body = target.render().encode()
                    code = 200
                except Exception as exc:  # a broken source is an HTTP 500, like a real exporter
                    body, code = f"error: {exc}\n".encode(), 500
                self.send_response(code)
                self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                try:
                    self.wfile.write(body)
                except OSError:  # the scraper hung up (timeout, shutdown)
                    pass

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.render = render
        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self._server.daemon_threads = True
        self.port = int(self._server.server_address[1])
        self.instance = f"127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True,
                                        name=f"llmtop-text-target-{self.port}")
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def frozen_text(text: str, age_s: float, now: float | None = None) -> str:
    """``text`` with every sample stamped ``age_s`` seconds ago (a stuck exporter's output).

    Prometheus keeps explicit timestamps (``honor_timestamps``), so the series stay present
    while their newest sample is always ``age_s`` old: the ``stale`` case of fleet mode.
    """
    ts = int(((time.time() if now is None else now) - age_s) * 1000)
    out = []
    for line in text.splitlines():
        if line.strip() and not line.startswith("#"):
            line = f"{line.rstrip()} {ts}"
        out.append(line)
    return "\n".join(out) + "\n"


_DCGM = (  # (name, help, type, GpuRecord key, scale)
    ("DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %).", "gauge", "util", 100.0),
    ("DCGM_FI_DEV_MEM_COPY_UTIL", "Memory utilization (in %).", "gauge", "mem_util", 100.0),
    ("DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB).", "gauge", "mem_used_bytes",
     1 / 1048576),
    ("DCGM_FI_DEV_FB_FREE", "Framebuffer memory free (in MiB).", "gauge", "mem_free_bytes",
     1 / 1048576),
    ("DCGM_FI_DEV_POWER_USAGE", "Power draw (in W).", "gauge", "power_w", 1.0),
    ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "Total energy consumption since boot (in mJ).",
     "counter", "energy_j", 1000.0),
    ("DCGM_FI_DEV_GPU_TEMP", "GPU temperature (in C).", "gauge", "temp_c", 1.0),
    ("DCGM_FI_DEV_MEMORY_TEMP", "Memory temperature (in C).", "gauge", "mem_temp_c", 1.0),
    ("DCGM_FI_DEV_SM_CLOCK", "SM clock frequency (in MHz).", "gauge", "sm_clock_mhz", 1.0),
    ("DCGM_FI_DEV_MEM_CLOCK", "Memory clock frequency (in MHz).", "gauge", "mem_clock_mhz",
     1.0),
)
_REASON_BITS = {"power cap": 0x4, "hw slowdown": 0x8, "sw thermal slowdown": 0x20,
                "thermal slowdown": 0x20, "hw thermal slowdown": 0x40}


def dcgm_text(gpus: Sequence[dict[str, Any]], hostname: str) -> str:
    """The demo's GPU records (``GET /gpus``) as a DCGM exporter would expose them.

    Units as DCGM writes them (util 0-100, memory MiB, energy mJ); labels as dcgm-exporter's
    (``gpu``, ``UUID``, ``device``, ``modelName``, ``Hostname``). The UUID is made unique per
    host, since every demo process numbers its GPUs from 0.
    """
    lines: list[str] = []
    labels = []
    for g in gpus:
        uid = hashlib.sha1(f"{hostname}/{g.get('uuid')}".encode()).hexdigest()
        uuid = f"GPU-{uid[:8]}-{uid[8:12]}-{uid[12:16]}-{uid[16:20]}-{uid[20:32]}"
        labels.append(f'gpu="{g["index"]}",UUID="{uuid}",pci_bus_id="{g.get("pci_bus_id", "")}",'
                      f'device="nvidia{g["index"]}",modelName="{g.get("name", "")}",'
                      f'Hostname="{hostname}",DCGM_FI_DRIVER_VERSION="550.54.15"')
    for name, help_, kind, key, scale in _DCGM:
        lines += [f"# HELP {name} {help_}", f"# TYPE {name} {kind}"]
        for g, lab in zip(gpus, labels, strict=True):
            v = g.get(key)
            if v is not None:
                lines.append(f"{name}{{{lab}}} {float(v) * scale:.6g}")
    name = "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS"
    lines += [f"# HELP {name} Throttling reasons bitmask.", f"# TYPE {name} gauge"]
    for g, lab in zip(gpus, labels, strict=True):
        mask = sum(_REASON_BITS.get(r, 0) for r in g.get("throttle") or [])
        lines.append(f"{name}{{{lab}}} {mask}")
    return "\n".join(lines) + "\n"
