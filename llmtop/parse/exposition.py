"""Prometheus text exposition -> families. Pure: no I/O, no clock.

Family names follow ``prometheus_client.parser``: a counter family drops its ``_total``;
samples keep their full names (``x_total``, ``x_created``, ``x_bucket``...).

PLACEHOLDER implementation delegating to prometheus_client; the fast parser replaces it
with the same API.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = ["Family", "ParseError", "Sample", "parse"]


class ParseError(ValueError):
    """The payload is not Prometheus text (HTML, garbage, truncated mid-line...)."""


@dataclass(slots=True)
class Sample:
    """One sample line."""

    name: str
    labels: dict[str, str]
    value: float


@dataclass(slots=True)
class Family:
    """One metric family."""

    name: str
    type: str
    help: str = ""
    samples: list[Sample] = field(default_factory=list)


def parse(text: str, want: Callable[[str], bool] | None = None) -> dict[str, Family]:
    """Parse exposition text. ``want(family_name)`` may skip families (None keeps all)."""
    from prometheus_client.parser import text_string_to_metric_families

    out: dict[str, Family] = {}
    try:
        for fam in text_string_to_metric_families(text):
            if want is not None and not want(fam.name):
                continue
            f = out.setdefault(fam.name, Family(fam.name, fam.type, fam.documentation))
            f.samples.extend(Sample(s.name, dict(s.labels), float(s.value)) for s in fam.samples)
    except Exception as exc:
        raise ParseError(str(exc)[:200]) from exc
    return out
