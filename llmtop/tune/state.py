"""The state file of a search: one JSON line per finished trial, written as it ends, so a
stopped search resumes without re-running what is done (``--resume FILE``).

The first line names the plan (``plan_sha256``); trials are keyed by their parameters.
A trial stopped by Ctrl-C or the budget is not written (it runs again on resume).
"""

from __future__ import annotations

import json
import os
import threading
from typing import Any

from llmtop.errors import ConfigError
from llmtop.tune.space import trial_key

__all__ = ["StateFile", "read_state"]


class StateFile:
    """Append-only JSON lines, flushed and synced after each trial."""

    def __init__(self, path: str, plan_sha256: str) -> None:
        self.path = path
        self._lock = threading.Lock()
        fresh = not os.path.exists(path) or os.path.getsize(path) == 0
        if fresh:
            self._write({"kind": "tune-state", "plan_sha256": plan_sha256})

    def _write(self, obj: dict[str, Any]) -> None:
        with self._lock, open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps(obj, default=str) + "\n")
            f.flush()
            os.fsync(f.fileno())

    def add(self, trial: dict[str, Any]) -> None:
        """Keep one finished trial."""
        self._write({"kind": "trial", "trial": trial})


def read_state(path: str) -> tuple[str | None, dict[str, dict[str, Any]]]:
    """(plan hash, finished trials by key) from a state file; ``ConfigError`` if unreadable.
    A torn last line (a kill while writing) is ignored."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError as exc:
        raise ConfigError(f"cannot read the state file {path}: {exc.strerror or exc}") from None
    plan, done = None, {}
    for line in lines:
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if obj.get("kind") == "tune-state":
            plan = obj.get("plan_sha256")
        elif obj.get("kind") == "trial" and isinstance(obj.get("trial"), dict):
            t = obj["trial"]
            done[trial_key(t["params"])] = t
    if plan is None:
        raise ConfigError(f"{path} is not a tune state file (no tune-state line)")
    return plan, done
