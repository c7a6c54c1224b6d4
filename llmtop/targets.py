"""Target strings -> ``Target`` values.

Accepted forms (engine hint and path optional)::

    host:port            :port (= 127.0.0.1)        [::1]:8000
    http://host:port/path   https://host[:port][/path][?query]
    vllm@host:8000       vllm@http://host:8000/metrics     host:8000/prometheus/metrics

The default scheme is http. The name is ``engine@host:port`` with a hint, else ``host:port``.
Credentials inside URLs are refused (use ``api_key_env`` in the config file); error messages
never echo such a string. Every error is a one-line ``ConfigError``.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from llmtop.config import Target
from llmtop.errors import ConfigError
from llmtop.model import ENGINES, Container
from llmtop.model.stack import ROUTERS
from llmtop.urls import default_port, netloc

__all__ = ["ENGINE_DEFAULT_PORTS", "NO_TARGETS_HINTS", "NO_TARGETS_MESSAGE", "make_target",
           "parse_target"]

ENGINE_DEFAULT_PORTS: dict[str, int] = {
    "vllm": 8000,
    "sglang": 30000,
    "triton": 8002,  # the metrics port; HTTP is 8000
    "trtllm": 8000,
    "tgi": 3000,
    "llamacpp": 8080,
    "lmdeploy": 23333,
    "ollama": 11434,
    "dcgm": 9400,
    "dynamo_worker": 8081,  # DYN_SYSTEM_PORT in Dynamo's docs (9090 in Kubernetes)
    "vllm-router": 29000,  # --prometheus-port (vllm-project/router router_args.py)
    "sglang-router": 29000,  # PrometheusConfig::default (sgl-model-gateway metrics.rs)
    "gie-epp": 9090,  # the EPP's metrics port (GIE / llm-d guides)
    "llm-d-epp": 9090,
    "dynamo": 8000,  # the frontend's HTTP port serves /metrics
    "litellm": 4000,  # the LiteLLM proxy's default --port
}
"""Where each engine listens by default (``vllm@host`` without a port uses this)."""

_HINT_RE = re.compile(r"^([A-Za-z][A-Za-z0-9_.-]*)@(.*)$", re.S)
_SCHEME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


def make_target(
    host: str,
    port: int,
    *,
    engine: str | None = None,
    scheme: str = "http",
    metrics_path: str | None = None,
    name: str | None = None,
    timeout_s: float = 2.0,
    verify_tls: bool = True,
    headers: tuple[tuple[str, str], ...] = (),
    api_key: str | None = None,
    container: Container | None = None,
    api_url: str | None = None,
) -> Target:
    """Build a ``Target`` from parts (used by the parser and by autodiscovery)."""
    hp = netloc(host, port)
    if name is None:
        name = f"{engine}@{hp}" if engine else hp
    return Target(
        name=name,
        base_url=f"{scheme}://{hp}",
        engine=engine,
        metrics_path=metrics_path,
        headers=headers,
        api_key=api_key,
        verify_tls=verify_tls,
        timeout_s=timeout_s,
        host=host,
        port=port,
        container=container,
        api_url=api_url,
    )


def _check_engine(engine: str, spec: str) -> str:
    e = engine.lower()
    if e not in ENGINES and e not in ROUTERS:
        raise ConfigError(
            f"unknown engine {engine!r} in target {spec!r} (expected one of: "
            f"{', '.join(ENGINES + ROUTERS)})"
        )
    return e


def parse_target(spec: str, *, timeout_s: float = 2.0, verify_tls: bool = True) -> Target:
    """Parse one target string (see the module docstring); raises ``ConfigError``."""
    if not isinstance(spec, str) or not spec.strip():
        raise ConfigError("empty target")
    s = spec.strip()
    if any(c.isspace() for c in s):
        raise ConfigError(f"target {s!r} contains whitespace")

    engine: str | None = None
    m = _HINT_RE.match(s)
    if m and not _SCHEME_RE.match(s):
        # "vllm@host:8000" or "vllm@http://...": the part before '@' is a hint, not userinfo.
        engine = _check_engine(m.group(1), s)
        s = m.group(2)
        if not s:
            raise ConfigError(f"target {spec.strip()!r} has no host after the engine hint")

    if s.startswith(":"):
        s = "127.0.0.1" + s
    had_scheme = bool(_SCHEME_RE.match(s))
    url = s if had_scheme else "http://" + s
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        raise ConfigError(f"invalid port in target {spec.strip()!r}") from None
    if "@" in parts.netloc:
        raise ConfigError(
            "credentials in target URLs are not supported; use api_key_env in the config file"
        )
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https"):
        raise ConfigError(f"unsupported scheme {scheme!r} in target {spec.strip()!r}")
    host = parts.hostname or ""
    if not host:
        raise ConfigError(f"no host in target {spec.strip()!r}")
    if port is None:
        if had_scheme:
            port = default_port(scheme)
        elif engine is not None:
            port = ENGINE_DEFAULT_PORTS[engine]
        else:
            raise ConfigError(
                f"target {spec.strip()!r} needs a port (host:port) or an engine hint (vllm@host)"
            )
    if not 0 < port < 65536:
        raise ConfigError(f"port out of range in target {spec.strip()!r}")
    path = parts.path or ""
    if parts.query:
        path = (path or "/") + "?" + parts.query
    metrics_path = path if path not in ("", "/") else None
    if metrics_path is not None and not metrics_path.startswith("/"):
        metrics_path = "/" + metrics_path
    return make_target(
        host,
        port,
        engine=engine,
        scheme=scheme,
        metrics_path=metrics_path,
        timeout_s=timeout_s,
        verify_tls=verify_tls,
    )


NO_TARGETS_MESSAGE = (
    "no inference engines found on localhost; give a TARGET such as 127.0.0.1:8000"
)

NO_TARGETS_HINTS = (
    ("llmtop 127.0.0.1:8000", "watch a server: give a TARGET (host:port or URL)"),
    ("llmtop --demo", "try it on simulated engines"),
    ("llmtop --prometheus URL", "watch a fleet through Prometheus"),
)
"""What to do when nothing was found: (command, what it does); the TUI shows them centred,
``--once`` after its one-line message."""
