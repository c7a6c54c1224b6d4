"""NVIDIA Dynamo's frontend (``dynamo``): ``dynamo_frontend_*`` on its HTTP port (8000).

Router level (ai-dynamo/dynamo docs and ``prometheus_names.rs``): ``requests_total``,
``time_to_first_token_seconds``, ``request_duration_seconds``, ``inflight_requests``,
``queued_requests``. Per worker, from its KV router (``worker_id``, ``dp_rank``,
``worker_type`` = prefill | decode): ``worker_active_decode_blocks``,
``worker_active_prefill_tokens``, ``worker_num_requests_waiting`` (earlier
``worker_waiting_requests``). Workers are named by id (ranks folded), not URL.
"""

from __future__ import annotations

from typing import Any

from llmtop.model import EngineSample
from llmtop.model.stack import RouterSample
from llmtop.parse.router_common import (
    Index,
    first_hist,
    make_sample,
    parse_router,
    put_backend,
    total,
)

__all__ = ["normalize", "read"]

P = "dynamo_frontend_"
_WORKER = {"worker_active_decode_blocks": "decode_blocks",
           "worker_active_prefill_tokens": "prefill_tokens",
           "worker_num_requests_waiting": "pending",
           "worker_waiting_requests": "pending"}


def read(index: Index) -> RouterSample:
    """The ``RouterSample`` of a Dynamo frontend."""
    rs = RouterSample()
    for name, key in _WORKER.items():
        for s in index.get(P + name, ()):
            wid = s.labels.get("worker_id")
            if wid is None or s.value != s.value:
                continue
            role = s.labels.get("worker_type")
            b = rs.backends.get(wid)
            prev = getattr(b, key) if b is not None else None
            put_backend(rs, wid, role=role if role in ("prefill", "decode") else None,
                        **{key: (prev or 0.0) + s.value})
    rs.requests = total(index, P + "requests")
    rs.inflight = total(index, P + "inflight_requests")
    rs.queued = total(index, P + "queued_requests")
    rs.request = first_hist(index, P + "request_duration_seconds")
    rs.ttft = first_hist(index, P + "time_to_first_token_seconds")
    return rs


def normalize(body: str, *, headers: dict[str, str] | None = None,
              identity: dict[str, Any] | None = None) -> EngineSample:
    """Parse a Dynamo frontend's ``/metrics``. Raises ``ParseError``."""
    index = parse_router(body, (P,), "is this a Dynamo frontend's metrics?")
    return make_sample("dynamo", read(index))
