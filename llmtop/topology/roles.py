"""Roles from pod labels (fleet mode's hook): Dynamo, llm-d and KServe set them.

- Dynamo: ``nvidia.com/dynamo-component-type`` = prefill | decode | worker | frontend | ...
  (``nvidia.com/dynamo-sub-component-type`` prefill | decode refines a worker);
- llm-d: ``llm-d.ai/role`` = prefill | decode | both (also ``prefill-decode``);
- KServe: ``app.kubernetes.io/component`` = ``llminferenceservice-workload-prefill`` (prefill)
  or ``llminferenceservice-workload`` (the main workload: decode beside a prefill workload, else
  both; one pod cannot tell, so both).
Prometheus relabels ``.``, ``/`` and ``-`` into ``_`` (``label_llm_d_ai_role``): both spellings
are read. ``docs/stack.md`` ("Topology") lists the labels.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

__all__ = ["ROLE_LABELS", "role_from_labels"]

ROLE_LABELS = ("nvidia.com/dynamo-sub-component-type", "nvidia.com/dynamo-component-type",
               "llm-d.ai/role", "app.kubernetes.io/component")
"""Pod labels that name a role, most specific first."""

_WORDS = {"prefill": "prefill", "decode": "decode", "both": "both", "prefill-decode": "both",
          "prefill_decode": "both", "llminferenceservice-workload-prefill": "prefill",
          "llminferenceservice-workload": "both"}


def _norm(key: str) -> str:
    return re.sub(r"[^a-z0-9]", "_", key.lower())


_NORM = {_norm(k): k for k in ROLE_LABELS}


def role_from_labels(labels: Mapping[str, str] | None) -> str | None:
    """``prefill`` | ``decode`` | ``both`` from pod labels (raw or Prometheus-relabelled,
    with or without a ``label_`` prefix), else None."""
    if not labels:
        return None
    found: dict[str, str] = {}
    for key, value in labels.items():
        k = _norm(key).removeprefix("label_")
        if k in _NORM:
            found[_NORM[k]] = str(value).lower()
    for key in ROLE_LABELS:
        role = _WORDS.get(found.get(key, ""))
        if role is not None:
            return role
    return None
