"""The KV values of an engine row: its KV transfer (P/D) and its KV offload tiers.

- ``KvTransfer``, ``KvTiers``, ``KvTier``: frozen, defined once; ``to_json`` is the JSON.
- ``KV_*_FIELDS``: their field names in order, for the faces that list them.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from llmtop.model.values import Quantiles, json_number

__all__ = ["KV_TIERS_FIELDS", "KV_TIER_FIELDS", "KV_TRANSFER_FIELDS", "KvTier", "KvTiers",
           "KvTransfer"]


class _Reported:
    """What the KV values share: a field is reported when it holds a value or is named in
    ``unknown`` (exported by the engine, not known over the window: shown as ``–``, JSON
    null); the rest were not exported (no line, no JSON key)."""

    __slots__ = ()
    unknown: frozenset[str]

    def __post_init__(self) -> None:
        names = {f.name for f in fields(self)}
        if not self.unknown <= names:
            raise ValueError(f"unknown names no field: {sorted(self.unknown - names)}")

    @classmethod
    def of(cls, **values: Any) -> Any:
        """One with ``values`` set; a value given as None is exported but unknown."""
        return cls(**values, unknown=frozenset(k for k, v in values.items() if v is None))

    def reported(self, name: str) -> bool:
        """Whether field ``name`` was exported (holds a value or is unknown)."""
        return getattr(self, name) is not None or name in self.unknown

    def to_json(self) -> dict[str, Any]:
        """The reported fields, in declaration order (Quantiles as their JSON)."""
        return {f.name: _jsonable(getattr(self, f.name))
                for f in fields(self) if f.name != "unknown" and self.reported(f.name)}


@dataclass(frozen=True, slots=True)
class KvTransfer(_Reported):
    """P/D KV transfer of one engine over the window (``history.kv_rows``); JSON
    ``engines[].kv_transfer`` (``docs/json-schema.md``)."""

    time_s: Quantiles | None = None
    """Transfer time (vLLM NIXL transfer time, SGLang transfer latency)."""
    latency_now_s: float | None = None
    """SGLang's transfer-latency gauge, where it is not a histogram."""
    bytes_per_s: float | None = None
    failures_per_s: float | None = None
    """Failed transfers and notifications (vLLM), bootstrap and transfer failures (SGLang)."""
    expired_per_s: float | None = None
    """Requests whose KV expired before the decode side pulled it (vLLM NIXL)."""
    stages: dict[str, Quantiles | None] | None = None
    """SGLang's bootstrap / alloc / P/D stage latencies by stage."""
    queues: dict[str, float] | None = None
    """SGLang's P/D queues: requests by queue name."""
    prompt_tokens_by_source: dict[str, float | None] | None = None
    """Prompt tokens/s by where their KV came from, on a P/D engine."""
    unknown: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class KvTier(_Reported):
    """One secondary tier of vLLM's offloading connector (its tiering spec's ``tier``)."""

    hit_rate: float | None = None
    """From chunk hit / query deltas."""
    offload_bytes_per_s: float | None = None
    load_back_bytes_per_s: float | None = None
    failures_per_s: float | None = None
    unknown: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class KvTiers(_Reported):
    """KV offload tiers of one engine over the window (vLLM ``kv_offload_*``, LMCache,
    SGLang HiCache; ``history.kv_rows``); JSON ``engines[].kv_tiers``."""

    hit_rate: float | None = None
    """0..1 of the tokens asked of the offload tiers that they held."""
    used_bytes: float | None = None
    used_tokens: float | None = None
    usage: float | None = None
    """0..1 of the tier's token capacity in use."""
    cached_tokens_per_s: dict[str, float | None] | None = None
    """Prefix-cache hit tokens/s by the tier that served them (``device`` among them)."""
    offload_bytes_per_s: float | None = None
    """GPU → offload medium."""
    load_back_bytes_per_s: float | None = None
    failures_per_s: float | None = None
    """Store allocation failures."""
    offload_blocks_per_s: float | None = None
    load_back_blocks_per_s: float | None = None
    dropped_blocks_per_s: float | None = None
    pinned: float | None = None
    """0..1 of the offload tier pinned by transfers in flight."""
    tiers: dict[str, KvTier] | None = None
    """Each secondary tier by name."""
    offload_tokens_per_s: float | None = None
    evicted_tokens_per_s: float | None = None
    load_back_tokens_per_s: float | None = None
    unknown: frozenset[str] = frozenset()


def _names(cls: type) -> tuple[str, ...]:
    return tuple(f.name for f in fields(cls) if f.name != "unknown")


KV_TRANSFER_FIELDS = _names(KvTransfer)
"""The fields of ``KvTransfer`` (the keys of ``kv_transfer`` in JSON), in order."""
KV_TIERS_FIELDS = _names(KvTiers)
"""The fields of ``KvTiers``, in order."""
KV_TIER_FIELDS = _names(KvTier)
"""The fields of ``KvTier``, in order."""


def _jsonable(v: Any) -> Any:
    """Quantiles and KV values inside dicts become their JSON; NaN/Inf floats null."""
    if isinstance(v, (Quantiles, _Reported)):
        return v.to_json()
    if isinstance(v, float):
        return json_number(v)
    if isinstance(v, dict):
        return {k: _jsonable(x) for k, x in v.items()}
    return v
