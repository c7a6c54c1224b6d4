"""The values of the Prometheus text parser: ``Family``, ``Sample`` and ``ParseError``."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["Family", "ParseError", "Sample"]


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
