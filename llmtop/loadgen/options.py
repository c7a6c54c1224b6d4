"""Probe options: one frozen dataclass shared by the CLI, the TUI and the worker process.

``ProbeOptions.to_json()`` is what reports store: it never contains the API key.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from llmtop.errors import ConfigError
from llmtop.urls import netloc as join_netloc

__all__ = [
    "DEFAULT_DURATION_S",
    "DEFAULT_SWEEP_DURATION_S",
    "ProbeOptions",
    "parse_cpus",
    "parse_levels",
    "parse_shared_prefix",
    "split_url",
]

DEFAULT_DURATION_S = 60.0
"""Bound of a fixed-load run when neither --duration nor --max-requests is given."""
DEFAULT_SWEEP_DURATION_S = 600.0
"""Total time budget of a sweep when --duration is not given."""


@dataclass(frozen=True, slots=True)
class ProbeOptions:
    """Everything one probe run needs. Times in seconds, SLOs in seconds."""

    url: str
    """Server URL: ``http://host:port``, optionally ending in ``/v1`` or the endpoint path."""
    concurrency: int | None = None
    """Closed loop: this many requests in flight. With ``rate``: a cap on requests in flight."""
    rate: float | None = None
    """Open loop: requests per second (the first rung of the ladder with ``sweep``)."""
    poisson: bool = False
    """Poisson arrivals instead of constant spacing (with ``rate``)."""
    sweep: bool = False
    """Concurrency ladder 1, 2, 4, ... up to ``max_concurrency`` (or a rate ladder R, 2R, ...)."""
    max_concurrency: int = 256
    duration: float | None = None
    """Total time bound (seconds). None: 60 s for a fixed load, 600 s for a sweep."""
    max_requests: int | None = None
    """Total request bound (requests sent, warm-up included)."""
    prompt_tokens: int = 256
    output_tokens: int = 128
    length_dist: str = "fixed"
    """``fixed`` | ``uniform`` (0.5x..1.5x) | ``normal`` (sd 0.2x), for prompt and output."""
    shared_prefix: tuple[int, int] | None = None
    """``(N, P)``: N shared prefixes of P tokens, each prompt = prefix + unique suffix."""
    endpoint: str | None = None
    """``completions`` | ``chat`` | None (detect)."""
    model: str | None = None
    api_key: str | None = field(default=None, repr=False)
    """Bearer token. Never written to reports, logs or the screen."""
    ttft_slo: float | None = None
    itl_slo: float | None = None
    tpot_slo: float | None = None
    max_error_rate: float = 0.5
    """Stop when a step's (or a fixed run's) error rate exceeds this fraction."""
    warmup: float | None = None
    """Warm-up per step (excluded from stats). None: 3 s in a sweep, 0 otherwise."""
    step_duration: float = 10.0
    """Measurement window per sweep step."""
    insecure: bool = False
    request_timeout: float = 300.0
    """Per-request timeout (seconds); also the longest gap allowed between two chunks / 5."""
    seed: int = 0
    progress_interval: float = 0.5
    client: str = "raw"
    """Hot-path HTTP client: ``raw`` (asyncio protocol, the default) or ``aiohttp``."""
    traffic: dict[str, Any] | None = None
    """Production shape read before the run (``loadgen.traffic.build_traffic``): length
    histograms ``prompt``/``output`` and/or ``prefix_hit_rate``, with its ``window``."""
    dataset: str | None = None
    """A JSONL / ShareGPT file of prompts, sent as written (``loadgen.dataset``)."""
    context: int | None = None
    """The model's context in tokens (caps drawn lengths); None: from /v1/models."""
    target_rate: float | None = None
    """Requests per second to plan replicas for (the capacity sentence)."""
    levels: tuple[int, ...] | None = None
    """Sweep concurrency levels as given (e.g. ``(1, 10, 50, 100)``) instead of 1, 2, 4, ..."""
    requests_per_step: int | None = None
    """Bake-off steps: each level is a fixed list of max(this, 4 x concurrency) requests
    (after a warm-up of one request per slot unless ``warmup == 0``), every level runs
    (no early stop on SLO, plateau or errors) and the request list is hashed."""
    cpu_pin: tuple[int, ...] | None = None
    """Pin the load generator's process to these CPUs (``--cpu-pin``; Linux)."""
    nice: int | None = None
    """Set the load generator's nice value (``--nice``; below 0 needs privilege)."""
    calibration: dict[str, Any] | None = None
    """A fixed prompt calibration (``Calibration.to_json()``) instead of measuring one, so
    several engines get byte-identical prompts."""

    # ----- derived -------------------------------------------------------------------------
    @property
    def total_duration(self) -> float | None:
        """The effective time bound (default bounds applied)."""
        if self.duration is not None:
            return self.duration
        if self.sweep:
            return DEFAULT_SWEEP_DURATION_S
        if self.max_requests is not None:
            return None
        return DEFAULT_DURATION_S

    @property
    def effective_warmup(self) -> float:
        if self.warmup is not None:
            return self.warmup
        return 3.0 if self.sweep else 0.0

    def validate(self) -> ProbeOptions:
        """Raise ``ConfigError`` on inconsistent options; return self."""
        split_url(self.url)
        if self.concurrency is not None and self.concurrency < 1:
            raise ConfigError("--concurrency must be >= 1")
        if self.rate is not None and self.rate <= 0:
            raise ConfigError("--rate must be > 0")
        if self.poisson and self.rate is None:
            raise ConfigError("--poisson needs --rate")
        if self.max_concurrency < 1:
            raise ConfigError("--max-concurrency must be >= 1")
        if self.duration is not None and self.duration <= 0:
            raise ConfigError("--duration must be > 0")
        if self.max_requests is not None and self.max_requests < 1:
            raise ConfigError("--max-requests must be >= 1")
        if self.prompt_tokens < 1 or self.output_tokens < 1:
            raise ConfigError("--prompt-tokens and --output-tokens must be >= 1")
        if self.length_dist not in ("fixed", "uniform", "normal"):
            raise ConfigError("--length-dist must be fixed, uniform or normal")
        if self.endpoint not in (None, "completions", "chat"):
            raise ConfigError("--endpoint must be completions or chat")
        if not 0 <= self.max_error_rate <= 1:
            raise ConfigError("--max-error-rate must be between 0 and 1")
        if self.client not in ("raw", "aiohttp"):
            raise ConfigError("client must be raw or aiohttp")
        if self.step_duration <= 0:
            raise ConfigError("--step-duration must be > 0")
        if self.dataset is not None and (self.shared_prefix or self.traffic
                                         or self.length_dist != "fixed"):
            raise ConfigError("--dataset sends its prompts as written: it does not combine "
                              "with --lengths-from, --prefix-hit-from, --shared-prefix or "
                              "--length-dist")
        if self.traffic and self.traffic.get("prefix_hit_rate") is not None \
                and self.shared_prefix:
            raise ConfigError("--prefix-hit-from and --shared-prefix both set the prefix; "
                              "choose one")
        if self.context is not None and self.context < 2:
            raise ConfigError("--context must be >= 2")
        if self.target_rate is not None and self.target_rate <= 0:
            raise ConfigError("--target-rate must be > 0")
        if self.levels is not None and (not self.levels or min(self.levels) < 1):
            raise ConfigError("--levels wants concurrencies >= 1, e.g. 1,10,50,100")
        if self.requests_per_step is not None:
            if self.requests_per_step < 1:
                raise ConfigError("--requests-per-step must be >= 1")
            if self.rate is not None and (self.sweep or self.levels):
                raise ConfigError("fixed request lists at a rate are one level each "
                                  "(the tuner's rate levels): not with --sweep or --levels")
        return self

    def to_json(self) -> dict[str, Any]:
        """Options as stored in reports: no API key, the URL without credentials."""
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            if f.name == "api_key":
                continue
            v = getattr(self, f.name)
            out[f.name] = list(v) if isinstance(v, tuple) else v
        out["url"] = redact_url(self.url)
        if self.traffic:  # the whole shape is the report's "traffic"; here only its origin
            out["traffic"] = {k: self.traffic.get(k) for k in ("source", "window")}
        out["api_key_set"] = self.api_key is not None
        out["total_duration"] = self.total_duration
        out["effective_warmup"] = self.effective_warmup
        return out

    def to_dict(self) -> dict[str, Any]:
        """All fields (API key included) for handing to the worker process; never log it."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ProbeOptions:
        names = {f.name for f in dataclasses.fields(cls)}
        kw = {k: v for k, v in d.items() if k in names}
        for name in ("shared_prefix", "levels", "cpu_pin"):
            if kw.get(name) is not None:
                kw[name] = tuple(kw[name])
        return cls(**kw)


def parse_cpus(text: str) -> tuple[int, ...]:
    """``"0"``, ``"2,3"`` or ``"0-3"`` -> CPU numbers; raises ``ConfigError``."""
    cpus: set[int] = set()
    try:
        for part in text.split(","):
            lo, _, hi = part.strip().partition("-")
            cpus.update(range(int(lo), int(hi or lo) + 1))
    except ValueError:
        raise ConfigError(f"--cpu-pin wants CPUs like 0, 2,3 or 0-3, got {text!r}") from None
    if not cpus or min(cpus) < 0:
        raise ConfigError(f"--cpu-pin wants CPUs like 0, 2,3 or 0-3, got {text!r}")
    return tuple(sorted(cpus))


def parse_shared_prefix(text: str) -> tuple[int, int]:
    """``"N:P"`` -> ``(N, P)``; raises ``ConfigError``."""
    try:
        n, p = (int(x) for x in text.split(":"))
    except ValueError:
        raise ConfigError(f"--shared-prefix wants N:P (e.g. 4:512), got {text!r}") from None
    if n < 1 or p < 1:
        raise ConfigError("--shared-prefix N:P needs N >= 1 and P >= 1")
    return n, p


def parse_levels(text: str) -> tuple[int, ...]:
    """``"1,10,50"`` -> ``(1, 10, 50)`` (sorted, unique); raises ``ConfigError``."""
    try:
        levels = sorted({int(x) for x in text.split(",") if x.strip()})
    except ValueError:
        raise ConfigError(f"--levels wants concurrencies like 1,10,50,100, got {text!r}") \
            from None
    if not levels or levels[0] < 1:
        raise ConfigError("--levels wants concurrencies >= 1, e.g. 1,10,50,100")
    return tuple(levels)


def redact_url(url: str) -> str:
    """The URL without user:password."""
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    host = join_netloc(parts.hostname or "", parts.port or None)
    return urlunsplit((parts.scheme, host, parts.path, parts.query, parts.fragment))


_ENDPOINT_SUFFIXES = (
    ("/v1/chat/completions", "chat"),
    ("/v1/completions", "completions"),
    ("/chat/completions", "chat"),
    ("/completions", "completions"),
)


def split_url(url: str) -> tuple[str, str, str | None]:
    """``url`` -> ``(base_url, host, endpoint_from_path)``.

    ``base_url`` is scheme://host:port plus any path prefix before ``/v1``; raises
    ``ConfigError`` when the URL is not http(s).
    """
    if "://" not in url:
        url = "http://" + url
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"not an http(s) URL: {redact_url(url)!r}")
    path = parts.path.rstrip("/")
    endpoint = None
    for suffix, ep in _ENDPOINT_SUFFIXES:
        if path.endswith(suffix):
            path = path[: -len(suffix)]
            endpoint = ep
            break
    if path.endswith("/v1"):
        path = path[:-3]
    netloc = join_netloc(parts.hostname, parts.port or None)
    return urlunsplit((parts.scheme, netloc, path, "", "")), parts.hostname, endpoint


