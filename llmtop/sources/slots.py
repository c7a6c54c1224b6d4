"""llama-server's ``GET /slots``: its requests in flight, reduced to what llmtop keeps.

Each slot of the answer (``server_slot::to_json`` in llama.cpp's tools/server/
server-context.cpp) carries ``id``, ``is_processing``, and while it has a task ``id_task``,
``n_prompt_tokens``, ``next_token[0].n_decoded`` / ``n_remain`` beside the prompt and the
generated text. Only the numbers are kept (``reduce_slots``): users' prompts never reach the
store or a recording.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["SLOT_FIELDS", "reduce_slots"]

SLOT_FIELDS = ("id", "id_task", "is_processing", "n_prompt_tokens", "n_decoded", "n_remain")


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def reduce_slots(text: str | None) -> str | None:
    """The ``/slots`` answer as compact JSON of ``SLOT_FIELDS`` per slot; None when it is
    not a list of slots (an error object, HTML, garbage)."""
    try:
        doc = json.loads(text or "")
    except (ValueError, RecursionError):
        return None
    if not isinstance(doc, list) or not all(isinstance(s, dict) for s in doc):
        return None
    out = []
    for s in doc:
        nxt = s.get("next_token")
        nxt = nxt[0] if isinstance(nxt, list) and nxt and isinstance(nxt[0], dict) else {}
        out.append({"id": _int(s.get("id")), "id_task": _int(s.get("id_task")),
                    "is_processing": s.get("is_processing") is True,
                    "n_prompt_tokens": _int(s.get("n_prompt_tokens")),
                    "n_decoded": _int(nxt.get("n_decoded")),
                    "n_remain": _int(nxt.get("n_remain"))})
    return json.dumps(out, separators=(",", ":"))
