"""Configuration values: targets, thresholds and run options.

Frozen dataclasses only; loading (CLI flags, TOML at ``$XDG_CONFIG_HOME/llmtop/config.toml``,
environment) lives in ``llmtop.targets`` / ``llmtop.settings``. Secrets are kept out of
``repr`` so they can never be printed or logged by accident.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from llmtop.model import Container

__all__ = ["DEFAULT_INTERVAL_S", "DEFAULT_LOG_LINES", "Config", "GpuPeak", "PrometheusConfig",
           "Target", "Thresholds"]

DEFAULT_INTERVAL_S = 1.0
DEFAULT_LOG_LINES = 2000
"""Log events kept per engine unless the config says otherwise (``log_lines``)."""


@dataclass(frozen=True, slots=True)
class Target:
    """One endpoint to monitor."""

    name: str
    """Display name and stable id, e.g. ``vllm@127.0.0.1:8000`` or a config name."""
    base_url: str
    """Scheme, host and port: ``http://127.0.0.1:8000``."""
    engine: str | None = None
    """Engine id from a hint (``vllm@host:port``), config, or detection; None = detect."""
    metrics_path: str | None = None
    """Metrics path; None = the engine's default (``/metrics``, ``/api/ps``...)."""
    headers: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    """Extra request headers from the config (never recorded)."""
    api_key: str | None = field(default=None, repr=False)
    """Bearer token; sent only when set. Never printed, logged or recorded."""
    verify_tls: bool = True
    timeout_s: float = 2.0
    host: str = "127.0.0.1"
    """Host part, used to name remote GPUs and to decide loopback-only actions."""
    port: int | None = None
    container: Container | None = None
    """Where discovery found the engine: its container, pod or network namespace (None: the
    host's own network, or a target the user named)."""
    log: str | None = None
    """The engine's log as the user named it (config ``log``, ``--log TARGET=PATH``): a file
    path, or ``cmd:<command>`` whose output is followed; None: found by discovery, if it can."""
    pid: int | None = field(default=None, compare=False)
    """The engine's listening process on this machine, when discovery found it (finding its
    log); None: not known."""
    api_url: str | None = None
    """A router's serving URL when its metrics are on another port (sglang-router's
    ``--port`` beside ``--prometheus-port``), for its worker list; discovery sets it from the
    router's command line. None: not known."""


@dataclass(frozen=True, slots=True)
class Thresholds:
    """Colour thresholds and SLOs. Fractions are 0..1, latencies in seconds."""

    kv_warn: float = 0.90
    kv_crit: float = 0.98
    util_warn: float = 0.80
    util_crit: float = 0.95
    ttft_slo_s: float = 1.0
    itl_slo_s: float = 0.1
    queue_growth_warn: float = 5.0
    """Waiting requests growing faster than this per minute is flagged."""


@dataclass(frozen=True, slots=True)
class GpuPeak:
    """A GPU's peak, the denominator of MBU and MFU: a datasheet row (``gpu.peaks``) or
    what the user gave (``--gpu-peak GBPS,TFLOPS``, config ``gpu_peak``)."""

    bytes_per_s: float | None
    """Peak memory bandwidth, bytes/s (None: not known)."""
    flops: float | None
    """Dense BF16 peak, FLOP/s (None: not known)."""
    source: str
    """Where the numbers come from (a datasheet, ``--gpu-peak``, the config file)."""
    gpu: str | None = None
    """The GPU model the row is for (None: an override, for whatever GPU)."""


@dataclass(frozen=True, slots=True)
class PrometheusConfig:
    """Fleet mode: where the Prometheus-compatible server is and how to ask it.

    Credentials are only ever file paths or header values kept out of ``repr``."""

    url: str
    """Base URL, path prefix allowed (``/prometheus``, ``/select/0/prometheus``)."""
    match: str | None = None
    """Label matchers added to every query, e.g. ``namespace=~"prod-.*"``."""
    group_by: tuple[str, ...] | None = None
    """Labels that make a row (None: ``instance``, or ``namespace,pod`` when series have pod)."""
    window_s: float | None = None
    """Rate window (None: max(4 x scrape interval, 60 s))."""
    at: float | None = None
    """Evaluate at this unix time instead of now (``--at``)."""
    scrape_interval_s: float = 30.0
    """Scrape interval when the server has no ``/api/v1/targets``."""
    bearer_token_file: str | None = None
    basic_user: str | None = None
    basic_password_file: str | None = None
    headers: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    """Extra request headers (``X-Scope-OrgID``, ``THANOS-TENANT``, ``AccountID``)."""
    params: tuple[tuple[str, str], ...] = ()
    """Extra query parameters (``dedup``, ``partial_response``, ``nocache``)."""
    ca_file: str | None = None
    insecure: bool = False
    timeout_s: float = 10.0
    """Per-query timeout (also sent to the server as ``timeout``)."""
    refresh_s: float | None = None
    """Refresh interval asked for (``--interval``); never faster than the scrape interval."""
    kind: str | None = None
    """Backend override: prometheus | victoriametrics | thanos | mimir (None: detect)."""


@dataclass(frozen=True, slots=True)
class Config:
    """Everything a run needs."""

    targets: tuple[Target, ...] = ()
    interval_s: float = DEFAULT_INTERVAL_S
    timeout_s: float = 2.0
    body_cap_bytes: int = 32 * 1024 * 1024
    thresholds: Thresholds = field(default_factory=Thresholds)
    theme: str = "dark"
    gpu_required: bool = False
    discover: bool = True
    """Autodiscover on localhost when no targets are given."""
    verify_tls: bool = True
    api_key: str | None = field(default=None, repr=False)
    prometheus: PrometheusConfig | None = None
    """Fleet mode (``--prometheus URL``); None = direct mode."""
    history_s: float = 330.0
    """How much history the store keeps: the longest window and sparkline (5 min) plus
    margin. Nothing on screen reads older samples, and memory on the box being watched must
    not grow with time (long history is what ``--record`` is for)."""
    gpu_peak: GpuPeak | None = None
    """``--gpu-peak GBPS,TFLOPS`` or config ``gpu_peak``: the peak every engine's MBU/MFU
    divides by, instead of the table's row for its GPU (None: the table)."""
    capacity_file: str | None = None
    """``--capacity FILE``: the capacity profiles of that report or profile only, instead
    of the ones saved in the state folder (``docs/capacity.md``)."""
    logs: bool = True
    """Find and follow each engine's log (``--no-logs``, config ``logs = false``: off)."""
    log_lines: int = DEFAULT_LOG_LINES
    """Log events kept per engine (config ``log_lines``): the bound of what is queued between
    ticks and of what the store keeps."""
    log_paths: tuple[tuple[str, str], ...] = ()
    """``--log TARGET=PATH`` naming no given target: (TARGET, PATH) for the engines a search
    finds (``discovery.logs.override_for``)."""
