"""Fleet-mode settings: the ``[prometheus]`` config table and flags -> ``PrometheusConfig``.

``llmtop.settings.build_config`` calls ``prometheus_config``; flags win over the file.
``parse_time`` reads ``--at`` (unix seconds, RFC 3339, or relative such as ``-2h``).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping
from datetime import datetime, timezone
from typing import Any

from llmtop.config import PrometheusConfig
from llmtop.errors import ConfigError
from llmtop.fleet.queries import parse_duration
from llmtop.sources.prometheus import BACKENDS

__all__ = ["PROMETHEUS_KEYS", "parse_time", "prometheus_config"]

PROMETHEUS_KEYS = {"url", "match", "group_by", "window", "scrape_interval", "bearer_token_file",
                   "basic_user", "basic_password_file", "headers", "params", "ca_file",
                   "insecure", "timeout", "kind"}


def parse_time(text: str, now: float | None = None) -> float:
    """``--at``: unix seconds (fractions allowed), RFC 3339, ``-2h``/``-30m`` (relative to
    now) or a local clock time ``03:12`` (its latest past occurrence). Raises ConfigError."""
    s = text.strip()
    now = time.time() if now is None else now
    if s.startswith("-") and parse_duration(s[1:]) is not None \
            and not s[1:].replace(".", "").isdigit():
        return now - float(parse_duration(s[1:]) or 0.0)
    try:
        return float(s)
    except ValueError:
        pass
    clock = re.fullmatch(r"(\d{1,2}):(\d{2})(?::(\d{2}))?", s)
    if clock:  # a local clock time: the last time it was that time (today, else yesterday)
        h, m, sec = int(clock.group(1)), int(clock.group(2)), int(clock.group(3) or 0)
        local = datetime.fromtimestamp(now).replace(hour=h, minute=m, second=sec, microsecond=0)
        t = local.timestamp()
        return t if t <= now else t - 86400
    try:
        dt = datetime.fromisoformat(s.replace("Z", "+00:00"))
    except ValueError:
        raise ConfigError(f"--at: cannot read {text!r} (unix seconds, RFC 3339 such as "
                          "2026-11-25T03:12:00Z, relative such as -2h, or 03:12)") from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    return dt.timestamp()


def _pairs(where: str, value: Any, sep: str) -> tuple[tuple[str, str], ...]:
    if isinstance(value, Mapping):
        return tuple((str(k), str(v)) for k, v in value.items())
    out = []
    for item in value or ():
        if not isinstance(item, str) or sep not in item:
            raise ConfigError(f"{where}: expected 'NAME{sep}VALUE', got {item!r}")
        k, v = item.split(sep, 1)
        out.append((k.strip(), v.strip()))
    return tuple(out)


def prometheus_config(data: Mapping[str, Any], arg: Callable[[str], Any], where: str, *,
                      timeout: float | None, insecure: bool, interval: float | None
                      ) -> PrometheusConfig | None:
    """The fleet settings from the ``[prometheus]`` table (``data``) and flags (``arg``),
    or None when no URL is given (direct mode)."""
    table = data.get("prometheus", {})
    if not isinstance(table, Mapping):
        raise ConfigError(f"{where}: [prometheus] must be a table")
    unknown = sorted(set(table) - PROMETHEUS_KEYS)
    if unknown:
        raise ConfigError(f"{where}: [prometheus]: unknown key {unknown[0]!r} "
                          f"(known: {', '.join(sorted(PROMETHEUS_KEYS))})")
    url = arg("prometheus") or table.get("url")
    if not url:
        return None
    w = f"{where}: [prometheus]"

    def text(key: str) -> str | None:
        v = table.get(key)
        if v is not None and not isinstance(v, str):
            raise ConfigError(f"{w}: '{key}' must be a string")
        return v

    def num(key: str) -> float | None:
        v = table.get(key)
        if v is None:
            return None
        if isinstance(v, str):
            d = parse_duration(v)
            if d is None:
                raise ConfigError(f"{w}: '{key}' must be seconds or a duration like 30s")
            return d
        if isinstance(v, bool) or not isinstance(v, (int, float)) or v <= 0:
            raise ConfigError(f"{w}: '{key}' must be a positive number")
        return float(v)

    group = arg("group_by") or table.get("group_by")
    if isinstance(group, str):
        group = tuple(g.strip() for g in group.split(",") if g.strip())
    elif group is not None:
        group = tuple(str(g) for g in group)
    kind = text("kind")
    if kind is not None and kind not in BACKENDS:
        raise ConfigError(f"{w}: 'kind' must be one of {', '.join(BACKENDS)}")
    at_text = arg("at")
    headers = _pairs(f"{w} headers", table.get("headers"), ":") + \
        _pairs("--prometheus-header", arg("prometheus_header"), ":")
    params = _pairs(f"{w} params", table.get("params"), "=") + \
        _pairs("--prometheus-param", arg("prometheus_param"), "=")
    return PrometheusConfig(
        url=str(url),
        match=arg("match") or text("match"),
        group_by=group or None,
        window_s=arg("window") if arg("window") is not None else num("window"),
        at=parse_time(at_text) if at_text else None,
        scrape_interval_s=num("scrape_interval") or 30.0,
        bearer_token_file=arg("prometheus_token_file") or text("bearer_token_file"),
        basic_user=arg("prometheus_user") or text("basic_user"),
        basic_password_file=arg("prometheus_password_file") or text("basic_password_file"),
        headers=headers,
        params=params,
        ca_file=arg("prometheus_ca_file") or text("ca_file"),
        insecure=insecure or bool(table.get("insecure", False)),
        timeout_s=timeout or num("timeout") or 10.0,
        refresh_s=interval,
        kind=kind,
    )
