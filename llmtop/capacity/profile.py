"""One capacity profile: the engine, the SLOs, the capacity at the SLA boundary and the
traffic shape it was measured with; saved as JSON under ``$XDG_STATE_HOME/llmtop/capacity``."""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from llmtop.capacity.ceiling import boundary_bounded
from llmtop.errors import ConfigError

__all__ = ["Profile", "load_profile_file", "load_profiles", "profile_dir",
           "profile_from_report", "profiles_from_bakeoff", "profiles_from_json", "save_profile"]

VERSION = 1


@dataclass(frozen=True, slots=True)
class Profile:
    """What one run measured. ``shape`` keys: ``prompt_mean``, ``prompt_p90``,
    ``output_mean``, ``output_p90``, ``prefix_hit_rate`` (None where unknown)."""

    url: str
    requests_per_s: float
    output_tokens_per_s: float | None
    measured_unix: float
    model: str | None = None
    engine: str | None = None
    gpu: str | None = None
    settings: dict[str, Any] = field(default_factory=dict)
    slo: dict[str, float | None] = field(default_factory=dict)
    shape: dict[str, float | None] = field(default_factory=dict)
    source: str = "probe"
    path: str | None = None

    @property
    def netloc(self) -> str:
        """``host:port`` of the measured URL (what a live target is matched on)."""
        return urlsplit(self.url if "//" in self.url else f"//{self.url}").netloc

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("path")
        d["version"] = VERSION
        d["measured"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.measured_unix))
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any], path: str | None = None) -> Profile:
        rps = d.get("requests_per_s")
        if not isinstance(rps, (int, float)) or rps <= 0 or not d.get("url"):
            raise ValueError("no url or no positive requests_per_s")
        return cls(url=str(d["url"]), requests_per_s=float(rps),
                   output_tokens_per_s=d.get("output_tokens_per_s"),
                   measured_unix=float(d.get("measured_unix") or 0.0),
                   model=d.get("model"), engine=d.get("engine"), gpu=d.get("gpu"),
                   settings=dict(d.get("settings") or {}), slo=dict(d.get("slo") or {}),
                   shape=dict(d.get("shape") or {}), source=str(d.get("source") or "probe"),
                   path=path)


def profile_dir() -> Path:
    """``$XDG_STATE_HOME/llmtop/capacity`` (``~/.local/state/llmtop/capacity``)."""
    state = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"),
                                                              ".local", "state")
    return Path(state) / "llmtop" / "capacity"


def _mean_p90(q: dict[str, Any] | None) -> tuple[float | None, float | None]:
    q = q or {}
    return q.get("mean"), q.get("p90")


def profile_from_report(report: dict[str, Any], *, engine: str | None = None,
                        gpu: str | None = None, settings: dict[str, Any] | None = None,
                        source: str = "probe") -> Profile | None:
    """The profile of a probe report (``loadgen.report``'s dict; a bake-off or tuner passes
    one engine's report) whose SLA boundary was met and is a ceiling (a step above it the
    generator could drive failed the SLOs: ``ceiling.boundary_bounded``); None without one."""
    sla = report.get("sla_boundary") or {}
    rps = sla.get("requests_per_s")
    if not sla.get("met") or not rps or rps <= 0 or not report.get("target"):
        return None
    if not boundary_bounded(report.get("steps") or [], sla):
        return None
    actual = (report.get("lengths") or {}).get("actual") or {}
    pm, p90 = _mean_p90(actual.get("prompt"))
    om, o90 = _mean_p90(actual.get("output"))
    hit = (report.get("traffic") or {}).get("prefix_hit_rate")
    started = report.get("started_unix")
    return Profile(url=str(report["target"]), requests_per_s=float(rps),
                   output_tokens_per_s=sla.get("output_tokens_per_s"),
                   measured_unix=float(started) if started else time.time(),
                   model=report.get("model"), engine=engine or report.get("engine"),
                   gpu=gpu, settings=dict(settings or {}), slo=dict(sla.get("slo") or {}),
                   shape={"prompt_mean": pm, "prompt_p90": p90, "output_mean": om,
                          "output_p90": o90, "prefix_hit_rate": hit},
                   source=source)


def profiles_from_bakeoff(report: dict[str, Any]) -> list[Profile]:
    """One profile per bake-off engine whose SLA boundary was found."""
    out = []
    for e in report.get("endpoints") or []:
        if isinstance(e, dict) and e.get("error") is None:
            p = profile_from_report(e, engine=e.get("engine"), settings=e.get("settings"),
                                    source="bakeoff")
            if p is not None:
                out.append(p)
    return out


def save_profile(profile: Profile, folder: Path | None = None) -> Path:
    """Write ``profile`` as ``<folder>/<host_port>-<model>-<time>.json`` and return its path."""
    folder = folder or profile_dir()
    folder.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(profile.measured_unix))
    name = "-".join(_safe(p) for p in (profile.netloc, profile.model or "any", stamp))
    path = folder / f"{name}.json"
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(profile.to_json(), indent=2), encoding="utf-8")
    tmp.replace(path)
    return path


def _safe(s: str) -> str:
    return "".join(c if c.isalnum() or c in "._" else "_" for c in s)


def load_profile_file(path: str) -> list[Profile]:
    """The profiles of one file: a saved profile, or a probe / bake-off JSON report (each
    engine whose SLA boundary was met). Raises ``ConfigError`` when it gives none."""
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"--capacity {path}: cannot read it ({exc})") from None
    out: list[Profile] = []
    if isinstance(doc, dict) and "requests_per_s" in doc:
        try:
            out.append(Profile.from_json(doc, path))
        except (ValueError, TypeError) as exc:
            raise ConfigError(f"--capacity {path}: not a capacity profile ({exc})") from None
    elif isinstance(doc, dict) and doc.get("kind") == "bakeoff":
        out = profiles_from_bakeoff(doc)
    elif isinstance(doc, dict):
        p = profile_from_report(doc, engine=doc.get("engine"), source="report")
        out = [p] if p is not None else []
    if not out:
        raise ConfigError(f"--capacity {path}: no SLA boundary met in it (run the probe "
                          "with --ttft-slo over a --sweep that reaches a load failing it; a "
                          "client-bound step does not count)")
    return out


def profiles_from_json(docs: list[Any]) -> list[Profile]:
    """Profiles from their JSON (a recording's header), invalid ones skipped, newest first."""
    out: list[Profile] = []
    for d in docs:
        try:
            out.append(Profile.from_json(d))
        except (ValueError, TypeError, AttributeError):
            continue
    return sorted(out, key=lambda p: p.measured_unix, reverse=True)


def load_profiles(capacity_file: str | None = None, folder: Path | None = None
                  ) -> list[Profile]:
    """``capacity_file``'s profiles when given, else every profile saved in the state
    folder (unreadable files skipped), newest first."""
    if capacity_file:
        found = load_profile_file(capacity_file)
    else:
        found = []
        folder = folder or profile_dir()
        try:
            files = sorted(folder.glob("*.json"))
        except OSError:
            files = []
        for f in files:
            try:
                found.append(Profile.from_json(json.loads(f.read_text(encoding="utf-8")),
                                               str(f)))
            except (OSError, ValueError, TypeError, AttributeError):
                continue
    return sorted(found, key=lambda p: p.measured_unix, reverse=True)
