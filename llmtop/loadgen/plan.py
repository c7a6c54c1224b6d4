"""The bake-off plan: which engines, how to start them, which probe options (TOML).

```toml
[probe]                 # probe options: the command-line names with _ for -
levels = [1, 4, 16]
output_tokens = 128
ttft_slo = 0.5
gpu_hour_price = 2.50   # USD per GPU-hour (each engine may set its own)

[[engine]]
name = "vllm"
url = "http://127.0.0.1:8000"
start = "vllm serve meta-llama/Llama-3.1-8B-Instruct --port 8000"  # optional
env = { VLLM_LOGGING_LEVEL = "INFO" }                              # optional
ready_timeout_s = 900                                              # optional (default 600)
gpus = 1                # GPUs it holds (for the cost), optional (default 1)
gpu_hour_price = 2.50   # optional
```

The command line wins over ``[probe]``; engines run in the order written.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Any

from llmtop.errors import ConfigError
from llmtop.loadgen.options import split_url

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

__all__ = ["DEFAULT_READY_TIMEOUT_S", "EngineSpec", "Plan", "engines_from_urls", "load_toml",
           "parse_plan", "probe_table", "read_plan", "read_text"]

DEFAULT_READY_TIMEOUT_S = 600.0
_ENGINE_KEYS = {"name", "url", "start", "env", "ready_timeout_s", "gpus", "gpu_hour_price",
                "stop_timeout_s", "cuda_visible_devices", "traces"}


@dataclass(frozen=True, slots=True)
class EngineSpec:
    """One engine of a bake-off."""

    name: str
    url: str
    start: str | None = None
    """A shell command that starts the engine in the foreground (llmtop stops it)."""
    env: dict[str, str] = field(default_factory=dict)
    ready_timeout_s: float = DEFAULT_READY_TIMEOUT_S
    gpus: float = 1.0
    """GPUs the engine holds (the cost multiplies the GPU-hour price by this)."""
    gpu_hour_price: float | None = None
    stop_timeout_s: float = 30.0
    cuda_visible_devices: str | None = None
    traces: bool | None = None
    """Whether the started engine sends its start-up spans to the bake-off (its cold start
    broken down, ``loadgen/coldstart.py``): None, when its command runs vLLM itself; true,
    whatever the command (a script that starts vLLM); false: its command is left as
    written."""


@dataclass(frozen=True, slots=True)
class Plan:
    """A parsed plan file: the engines in order and the ``[probe]`` options."""

    engines: tuple[EngineSpec, ...]
    probe: dict[str, Any] = field(default_factory=dict)
    """``[probe]``: option name (``_`` form) -> value."""


def _num(e: dict[str, Any], key: str, default: float | None, where: str) -> float | None:
    v = e.get(key, default)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0:
        raise ConfigError(f"{where}: {key} must be a number >= 0, got {v!r}")
    return float(v)


def _engine(e: Any, i: int, seen: set[str]) -> EngineSpec:
    where = f"[[engine]] #{i + 1}"
    if not isinstance(e, dict):
        raise ConfigError(f"{where} is not a table")
    unknown = sorted(set(e) - _ENGINE_KEYS)
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {', '.join(unknown)} "
                          f"(known: {', '.join(sorted(_ENGINE_KEYS))})")
    url = e.get("url")
    if not isinstance(url, str) or not url:
        raise ConfigError(f"{where} needs url = \"http://host:port\"")
    split_url(url)
    name = e.get("name") or url
    if not isinstance(name, str):
        raise ConfigError(f"{where}: name must be a string")
    if name in seen:
        raise ConfigError(f"{where}: the name {name!r} is used twice")
    seen.add(name)
    start = e.get("start")
    if start is not None and (not isinstance(start, str) or not start.strip()):
        raise ConfigError(f"{where}: start must be a shell command (a string)")
    env = e.get("env") or {}
    if not isinstance(env, dict) or not all(isinstance(k, str) for k in env):
        raise ConfigError(f"{where}: env must be a table of NAME = \"value\"")
    cvd = e.get("cuda_visible_devices")
    traces = e.get("traces")
    if traces is not None and not isinstance(traces, bool):
        raise ConfigError(f"{where}: traces must be true or false")
    return EngineSpec(
        name=name, url=url, start=start, env={k: str(v) for k, v in env.items()},
        ready_timeout_s=_num(e, "ready_timeout_s", DEFAULT_READY_TIMEOUT_S, where) or 1.0,
        gpus=_num(e, "gpus", 1.0, where) or 0.0,
        gpu_hour_price=_num(e, "gpu_hour_price", None, where),
        stop_timeout_s=_num(e, "stop_timeout_s", 30.0, where) or 0.0,
        cuda_visible_devices=None if cvd is None else str(cvd), traces=traces)


def load_toml(text: str, source: str = "plan") -> dict[str, Any]:
    """TOML text -> dict; raises ``ConfigError`` with the problem."""
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{source}: not valid TOML: {exc}") from None


def probe_table(data: dict[str, Any], source: str = "plan") -> dict[str, Any]:
    """The ``[probe]`` table: option name (``_`` form) -> value."""
    probe = data.get("probe") or {}
    if not isinstance(probe, dict):
        raise ConfigError(f"{source}: [probe] must be a table")
    return {k.replace("-", "_"): v for k, v in probe.items()}


def read_text(path: str) -> str:
    """A plan file's text; raises ``ConfigError``."""
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except OSError as exc:
        raise ConfigError(f"cannot read plan {path}: {exc.strerror or exc}") from None


def parse_plan(text: str, source: str = "plan") -> Plan:
    """TOML text -> ``Plan``; raises ``ConfigError`` with the problem."""
    data = load_toml(text, source)
    unknown = sorted(set(data) - {"engine", "probe"})
    if unknown:
        raise ConfigError(f"{source}: unknown table(s) {', '.join(unknown)} "
                          "(expected [probe] and [[engine]])")
    engines = data.get("engine")
    if not isinstance(engines, list) or not engines:
        raise ConfigError(f"{source}: no [[engine]] tables")
    probe = probe_table(data, source)
    seen: set[str] = set()
    return Plan(tuple(_engine(e, i, seen) for i, e in enumerate(engines)), probe)


def read_plan(path: str) -> Plan:
    """Read a plan file; raises ``ConfigError``."""
    return parse_plan(read_text(path), path)


def engines_from_urls(urls: list[str]) -> tuple[EngineSpec, ...]:
    """``llmtop probe URL1 URL2 ...``: engines named by host:port (already running)."""
    out, seen = [], set()
    for u in urls:
        base, _host, _ep = split_url(u)
        name = base.split("://", 1)[1]
        while name in seen:
            name += "'"
        seen.add(name)
        out.append(EngineSpec(name=name, url=u))
    return tuple(out)
