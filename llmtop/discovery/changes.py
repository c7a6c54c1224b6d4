"""Which targets a search found are new, and which are a watched engine at a new address.

- ``new_targets(have, found)``: found targets whose name and base URL are not watched.
- ``moved_targets(have, found)``: an engine in a container or pod that comes back at a new
  address (a restarted pod gets a new IP) is the same engine when its identity says so (the
  same pod, container name, or named network namespace): it keeps its row and is scraped at
  the new address. A new pod is a new row.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from llmtop.config import Target

__all__ = ["moved_targets", "new_targets"]


def new_targets(have: Iterable[Target], found: Sequence[Target]) -> list[Target]:
    """The targets of ``found`` whose name and base URL are not among ``have``."""
    have = list(have)
    names = {t.name for t in have}
    urls = {t.base_url.rstrip("/") for t in have}
    out: list[Target] = []
    for t in found:
        if t.name in names or t.base_url.rstrip("/") in urls:
            continue
        names.add(t.name)
        urls.add(t.base_url.rstrip("/"))
        out.append(t)
    return out


def _same_engine_key(t: Target) -> tuple[str | None, ...] | None:
    """What names an engine across restarts: its pod and container, its container name, or
    its ``ip netns`` name (None: nothing stable, e.g. only a namespace inode)."""
    c = t.container
    if c is None:
        return None
    if c.pod or c.name:
        return (c.runtime, c.namespace, c.pod, c.name)
    if c.netns and not c.netns.isdigit():
        return ("netns", c.netns)
    return None


def moved_targets(have: Iterable[Target], found: Sequence[Target]
                  ) -> list[tuple[Target, Target]]:
    """``(watched, found)`` pairs: the same engine by its container identity, now at another
    address (its pod restarted with a new IP)."""
    have = list(have)
    by_key: dict[tuple[str | None, ...], Target] = {}
    for t in have:
        k = _same_engine_key(t)
        if k is not None:
            by_key.setdefault(k, t)
    urls = {t.base_url.rstrip("/") for t in have}
    out: list[tuple[Target, Target]] = []
    for t in found:
        k = _same_engine_key(t)
        old = by_key.get(k) if k is not None else None
        if old is not None and t.base_url.rstrip("/") not in urls and (
                old.base_url.rstrip("/") != t.base_url.rstrip("/")):
            out.append((old, t))
            by_key.pop(k)  # type: ignore[arg-type]
    return out
