"""Flags, environment and the TOML config file -> one ``Config``.

Precedence, lowest first: built-in defaults < config file < environment < command-line flags.
The file is ``--config FILE``, else ``$LLMTOP_CONFIG``, else
``$XDG_CONFIG_HOME/llmtop/config.toml`` (``~/.config`` when unset); a missing default file is
fine, a missing explicit file or a malformed one is a ``ConfigError`` naming the file (and
line). The schema is documented in ``docs/config.md``.

Secrets (API keys, header values) never appear in a repr, a log line or an error message.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from llmtop.config import DEFAULT_INTERVAL_S, DEFAULT_LOG_LINES, Config, GpuPeak, Target, Thresholds
from llmtop.errors import ConfigError
from llmtop.model import ENGINES
from llmtop.model.stack import ROUTERS
from llmtop.targets import parse_target

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

__all__ = ["ENV_API_KEY", "build_config", "default_config_path", "load_file"]

ENV_API_KEY = "LLMTOP_API_KEY"
"""Environment variable holding a bearer token for all targets."""

_TOP_KEYS = {
    "prometheus",
    "interval",
    "timeout",
    "theme",
    "ttft_slo",
    "itl_slo",
    "kv_warn",
    "kv_crit",
    "api_key_env",
    "api_key",
    "insecure",
    "discover",
    "targets",
    "logs",
    "log_lines",
    "gpu_peak",
}
_TARGET_KEYS = {
    "name",
    "url",
    "engine",
    "metrics_path",
    "headers",
    "api_key_env",
    "api_key",
    "insecure",
    "timeout",
    "log",
}


def default_config_path(environ: Mapping[str, str] | None = None) -> Path:
    """``$XDG_CONFIG_HOME/llmtop/config.toml``, with ``~/.config`` when XDG is unset."""
    env = os.environ if environ is None else environ
    base = env.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "llmtop" / "config.toml"


def load_file(path: Path, *, required: bool) -> dict[str, Any]:
    """Read one TOML file; ``{}`` when it is absent and not ``required``."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        if required:
            raise ConfigError(f"config file {path} not found") from None
        return {}
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror or exc}") from None
    try:
        return tomllib.loads(data.decode("utf-8"))
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not UTF-8 text") from None
    except tomllib.TOMLDecodeError as exc:
        # the message carries "(at line N, column M)"
        raise ConfigError(f"{path}: invalid TOML: {exc}") from None


def _num(where: str, key: str, value: Any, *, positive: bool = True, unit: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ConfigError(f"{where}: {key!r} must be a number")
    v = float(value)
    if positive and v <= 0:
        raise ConfigError(f"{where}: {key!r} must be > 0")
    if unit and not 0 < v <= 1:
        raise ConfigError(f"{where}: {key!r} must be a fraction in (0, 1]")
    return v


def _str(where: str, key: str, value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise ConfigError(f"{where}: {key!r} must be a non-empty string")
    return value


def _bool(where: str, key: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(f"{where}: {key!r} must be true or false")
    return value


def _key_from_env(where: str, var: Any, env: Mapping[str, str]) -> str:
    name = _str(where, "api_key_env", var)
    val = env.get(name)
    if not val:
        raise ConfigError(f"{where}: environment variable {name} (api_key_env) is not set")
    return val


def _check_keys(where: str, table: Mapping[str, Any], allowed: set[str]) -> None:
    unknown = sorted(set(table) - allowed)
    if unknown:
        raise ConfigError(
            f"{where}: unknown key {unknown[0]!r} (known: {', '.join(sorted(allowed))})"
        )


def _file_target(
    where: str, raw: Any, env: Mapping[str, str], timeout_s: float, verify: bool
) -> tuple[Target, bool, bool]:
    """One ``[[targets]]`` entry -> (Target, has own timeout, has own insecure)."""
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: each [[targets]] entry must be a table")
    _check_keys(where, raw, _TARGET_KEYS)
    if "url" not in raw:
        raise ConfigError(f"{where}: 'url' is required")
    url = _str(where, "url", raw["url"])
    own_timeout = "timeout" in raw
    if own_timeout:
        timeout_s = _num(where, "timeout", raw["timeout"])
    own_insecure = "insecure" in raw
    if own_insecure:
        verify = not _bool(where, "insecure", raw["insecure"])
    try:
        t = parse_target(url, timeout_s=timeout_s, verify_tls=verify)
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    changes: dict[str, Any] = {}
    if "engine" in raw:
        engine = _str(where, "engine", raw["engine"]).lower()
        if engine not in ENGINES and engine not in ROUTERS:  # a router is a target too
            raise ConfigError(
                f"{where}: unknown engine {raw['engine']!r} (expected one of: "
                f"{', '.join(ENGINES + ROUTERS)})"
            )
        if t.engine is not None and t.engine != engine:
            raise ConfigError(f"{where}: engine {engine!r} contradicts the hint in 'url'")
        changes["engine"] = engine
        if not t.name.startswith(f"{engine}@"):
            changes["name"] = f"{engine}@{t.name}"
    if "metrics_path" in raw:
        mp = _str(where, "metrics_path", raw["metrics_path"])
        changes["metrics_path"] = mp if mp.startswith("/") else "/" + mp
    if "name" in raw:
        changes["name"] = _str(where, "name", raw["name"])
    if "log" in raw:
        changes["log"] = _str(where, "log", raw["log"])
    if "headers" in raw:
        hdrs = raw["headers"]
        if not isinstance(hdrs, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in hdrs.items()
        ):
            raise ConfigError(f"{where}: 'headers' must be a table of strings")
        changes["headers"] = tuple(hdrs.items())
    if "api_key_env" in raw:
        changes["api_key"] = _key_from_env(where, raw["api_key_env"], env)
    elif "api_key" in raw:
        if not isinstance(raw["api_key"], str) or not raw["api_key"]:
            raise ConfigError(f"{where}: 'api_key' must be a non-empty string")
        changes["api_key"] = raw["api_key"]
    return replace(t, **changes), own_timeout, own_insecure


def _dedupe(targets: list[Target]) -> tuple[Target, ...]:
    """Drop exact repeats (same URL and path); make clashing names unique with the path."""
    seen_ep: set[tuple[str, str | None]] = set()
    names: set[str] = set()
    out: list[Target] = []
    for t in targets:
        ep = (t.base_url, t.metrics_path)
        if ep in seen_ep:
            continue
        if t.name in names and t.metrics_path:
            t = replace(t, name=t.name + t.metrics_path)
        if t.name in names:
            raise ConfigError(f"two targets are named {t.name!r}; give one a different name")
        seen_ep.add(ep)
        names.add(t.name)
        out.append(t)
    return tuple(out)


def _gpu_peak(where: str, data: Mapping[str, Any], flag: str | None) -> GpuPeak | None:
    """``--gpu-peak GBPS,TFLOPS`` over the config file's ``gpu_peak = "GBPS,TFLOPS"``."""
    from llmtop.gpu.peaks import parse_gpu_peak  # only where asked

    if flag is not None:
        try:
            return parse_gpu_peak(flag)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
    if "gpu_peak" in data:
        try:
            return parse_gpu_peak(_str(where, "gpu_peak", data["gpu_peak"]),
                                  source="config gpu_peak")
        except ValueError as exc:
            raise ConfigError(f"{where}: {exc}") from None
    return None


def build_config(
    args: argparse.Namespace, *, environ: Mapping[str, str] | None = None
) -> Config:
    """Merge defaults < config file < environment < flags into a ``Config``.

    ``args`` may come from any subcommand parser: missing attributes count as "not given".
    """
    env = os.environ if environ is None else environ

    def arg(name: str, default: Any = None) -> Any:
        return getattr(args, name, default)

    # --- file -------------------------------------------------------------------------
    explicit = arg("config") or env.get("LLMTOP_CONFIG")
    path = Path(explicit).expanduser() if explicit else default_config_path(env)
    data = load_file(path, required=bool(explicit))
    where = str(path)
    _check_keys(where, data, _TOP_KEYS)

    interval = DEFAULT_INTERVAL_S
    timeout = 2.0
    theme = "dark"
    th = Thresholds()
    verify = True
    discover = True
    api_key: str | None = None
    if "interval" in data:
        interval = _num(where, "interval", data["interval"])
    if "timeout" in data:
        timeout = _num(where, "timeout", data["timeout"])
    if "theme" in data:
        theme = _str(where, "theme", data["theme"])
    if "ttft_slo" in data:
        th = replace(th, ttft_slo_s=_num(where, "ttft_slo", data["ttft_slo"]))
    if "itl_slo" in data:
        th = replace(th, itl_slo_s=_num(where, "itl_slo", data["itl_slo"]))
    if "kv_warn" in data:
        th = replace(th, kv_warn=_num(where, "kv_warn", data["kv_warn"], unit=True))
    if "kv_crit" in data:
        th = replace(th, kv_crit=_num(where, "kv_crit", data["kv_crit"], unit=True))
    if th.kv_warn > th.kv_crit:
        raise ConfigError(f"{where}: 'kv_warn' must not exceed 'kv_crit'")
    if "insecure" in data:
        verify = not _bool(where, "insecure", data["insecure"])
    if "discover" in data:
        discover = _bool(where, "discover", data["discover"])
    logs = _bool(where, "logs", data["logs"]) if "logs" in data else True
    log_lines = _log_lines(where, data["log_lines"]) if "log_lines" in data else \
        DEFAULT_LOG_LINES
    if "api_key_env" in data:
        api_key = _key_from_env(where, data["api_key_env"], env)
    elif "api_key" in data:
        if not isinstance(data["api_key"], str) or not data["api_key"]:
            raise ConfigError(f"{where}: 'api_key' must be a non-empty string")
        api_key = data["api_key"]

    # --- environment ------------------------------------------------------------------
    if env.get(ENV_API_KEY):
        api_key = env[ENV_API_KEY]

    # --- flags ------------------------------------------------------------------------
    if arg("api_key"):
        api_key = arg("api_key")
    if arg("interval") is not None:
        interval = _num("--interval", "interval", arg("interval"))
    flag_timeout = arg("timeout")
    if flag_timeout is not None:
        timeout = _num("--timeout", "timeout", flag_timeout)
    if arg("theme"):
        theme = arg("theme")
    if arg("ttft_slo") is not None:
        th = replace(th, ttft_slo_s=_num("--ttft-slo", "ttft_slo", arg("ttft_slo")))
    if arg("itl_slo") is not None:
        th = replace(th, itl_slo_s=_num("--itl-slo", "itl_slo", arg("itl_slo")))
    insecure_flag = bool(arg("insecure", False))
    if insecure_flag:
        verify = False
    if arg("no_discover", False):
        discover = False
    if arg("no_logs", False):
        logs = False

    # --- targets ----------------------------------------------------------------------
    raw_targets = data.get("targets", [])
    if not isinstance(raw_targets, list):
        raise ConfigError(f"{where}: 'targets' must be an array of tables ([[targets]])")
    targets: list[Target] = []
    for i, raw in enumerate(raw_targets, 1):
        t, own_timeout, own_insecure = _file_target(
            f"{where}: targets[{i}]", raw, env, timeout, verify
        )
        if flag_timeout is not None and own_timeout:
            t = replace(t, timeout_s=timeout)
        if insecure_flag and own_insecure:
            t = replace(t, verify_tls=False)
        targets.append(t)
    for spec in arg("targets") or ():
        targets.append(parse_target(spec, timeout_s=timeout, verify_tls=verify))
    targets, log_paths = _log_flags(arg("log") or (), targets)

    prometheus = None
    if arg("prometheus") or "prometheus" in data:  # fleet mode's modules only where asked
        from llmtop.fleet.config import prometheus_config

        prometheus = prometheus_config(
            data, arg, where, timeout=flag_timeout, insecure=insecure_flag,
            interval=arg("interval"))
    gpu_peak = _gpu_peak(where, data, arg("gpu_peak"))
    capacity_file = arg("capacity")
    if capacity_file:  # a bad --capacity FILE stops here, before any scrape
        from llmtop.capacity import load_profile_file

        load_profile_file(capacity_file)
    return Config(
        gpu_peak=gpu_peak,
        capacity_file=capacity_file,
        prometheus=prometheus,
        targets=_dedupe(targets),
        interval_s=interval,
        timeout_s=timeout,
        thresholds=th,
        theme=theme,
        gpu_required=bool(arg("gpu_required", False)),
        discover=discover,
        verify_tls=verify,
        api_key=api_key,
        logs=logs,
        log_lines=log_lines,
        log_paths=log_paths,
    )


def _log_lines(where: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 1_000_000:
        raise ConfigError(f"{where}: 'log_lines' must be a whole number from 1 to 1000000")
    return value


def _log_flags(specs: Any, targets: list[Target]) -> tuple[list[Target], tuple[tuple[str, str],
                                                                                ...]]:
    """``--log TARGET=PATH``: the given target it names gets the log; the others are kept
    for the engines a search finds."""
    if not specs:
        return targets, ()
    from llmtop.discovery.logs import override_for

    pairs: list[tuple[str, str]] = []
    for spec in specs:
        name, eq, path = str(spec).partition("=")
        if not eq or not name.strip() or not path.strip():
            raise ConfigError(f"--log {spec!r}: expected TARGET=PATH (or TARGET=cmd:COMMAND)")
        pairs.append((name.strip(), path.strip()))
    used: set[int] = set()
    out = []
    for t in targets:
        for i, pair in enumerate(pairs):
            if override_for(t, (pair,)) is not None:
                t = replace(t, log=pair[1])
                used.add(i)
                break
        out.append(t)
    return out, tuple(p for i, p in enumerate(pairs) if i not in used)
