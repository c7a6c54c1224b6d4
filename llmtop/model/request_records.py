"""Value types of single requests, from the engines' spans and live slots.

Contract as in ``model``: ``None`` means "the engine did not say", never zero. Durations
are seconds, times Unix seconds. Nothing here does I/O or reads a clock.

Flow::

    OtlpReceiver --RawSpans--> parse.spans --RequestRecord / ColdStart--> history.request_window
    llama-server /slots --parse.slots--> InflightRequest --> history.request_window
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from typing import Any

__all__ = ["PROBE_TRACE_PREFIX", "REQUEST_JSON_KEYS", "SOURCES", "ColdStart", "InflightRequest",
           "RequestRecord", "probe_traceparent", "source_of"]

SOURCES = ("probe", "traffic")
"""``probe``: sent by ``llmtop probe`` (its trace id); ``traffic``: anyone else's."""

PROBE_TRACE_PREFIX = "6c6c6d746f70"
"""``llmtop`` in ASCII hex: the first 6 bytes of every trace id the probe sends. The engines
keep a caller's W3C trace id on their spans, so any llmtop process (a recorder, another
machine's TUI) can tell the probe's requests from the users' traffic."""


def probe_traceparent() -> str:
    """A W3C ``traceparent`` header value with a fresh probe trace id."""
    return f"00-{PROBE_TRACE_PREFIX}{secrets.token_hex(10)}-{secrets.token_hex(8)}-01"


def source_of(trace_id: str | None) -> str:
    """``probe`` for the probe's trace ids, else ``traffic``."""
    return "probe" if trace_id and trace_id.startswith(PROBE_TRACE_PREFIX) else "traffic"

REQUEST_JSON_KEYS = ("id", "engine", "target", "prompt_tokens", "output_tokens", "queue_s",
                     "prefill_s", "decode_s", "ttft_s", "e2e_s", "finish_reason", "source",
                     "trace_id", "t_start", "t_end")


@dataclass(slots=True)
class RequestRecord:
    """One finished request, as its engine's span told it."""

    id: str
    engine: str
    """Engine id (``vllm``, ``sglang``, ``triton``) from the span's shape."""
    target: str | None = None
    """The row's target it was matched to (None: no row matched)."""
    prompt_tokens: int | None = None
    output_tokens: int | None = None
    queue_s: float | None = None
    """Waiting to be scheduled (vLLM ``time_in_queue``, Triton queue, SGLang waiting)."""
    prefill_s: float | None = None
    decode_s: float | None = None
    ttft_s: float | None = None
    e2e_s: float | None = None
    finish_reason: str | None = None
    source: str = "traffic"
    trace_id: str | None = None
    t_start: float | None = None
    """When the engine got it (the span's start)."""
    t_end: float | None = None
    """When it finished (the span's end); the window is over this time."""
    model: str | None = None
    service: str | None = None
    """The sender's ``service.name``."""

    def get(self, key: str) -> Any:
        """A field by name (``ttft_s``, ``e2e_s``...), for sorting and filters."""
        return getattr(self, key)

    def to_json(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in REQUEST_JSON_KEYS}


@dataclass(slots=True)
class InflightRequest:
    """A request still running, from an engine that shows them live (llama-server /slots)."""

    target: str
    engine: str
    id: str
    """The slot's task id (or the slot id when the engine gives no task id)."""
    slot: int | None = None
    age_s: float | None = None
    """Seconds since llmtop first saw it running (the engine gives no start time)."""
    prompt_tokens: int | None = None
    output_tokens: int | None = None
    """Tokens decoded so far."""
    remaining_tokens: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {"target": self.target, "engine": self.engine, "id": self.id,
                "slot": self.slot, "age_s": self.age_s, "prompt_tokens": self.prompt_tokens,
                "output_tokens": self.output_tokens,
                "remaining_tokens": self.remaining_tokens}


@dataclass(slots=True)
class ColdStart:
    """Where an engine's start-up went, from its start-up spans (vLLM ``Load weights``...)."""

    engine: str
    target: str | None = None
    stages: dict[str, float] = field(default_factory=dict)
    """Stage -> seconds: ``weights``, ``kv_cache``, ``model_init``, ``total`` and any other
    span by its own name."""
    t_wall: float | None = None
    """When the last start-up span ended."""

    def to_json(self) -> dict[str, Any]:
        return {"engine": self.engine, "target": self.target, "stages": dict(self.stages),
                "t_wall": self.t_wall}
