"""The simulated KV cache: fixed-size blocks, a prefix cache keyed by chained block hashes,
LRU eviction of unreferenced cached blocks (:class:`KVPool`, :func:`prompt_hashes`)."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

__all__ = ["KVPool", "prompt_hashes"]


def prompt_hashes(words: Sequence[str], block_size: int) -> list[int]:
    """Chained hashes of the full blocks of a prompt (vLLM's block-hash scheme)."""
    out: list[int] = []
    parent = 0
    for i in range(len(words) // block_size):
        parent = hash((parent, *words[i * block_size:(i + 1) * block_size]))
        out.append(parent)
    return out


class KVPool:
    """Fixed pool of KV blocks with a prefix cache (hash -> refcount) and LRU eviction."""

    def __init__(self, num_blocks: int, block_size: int, prefix_caching: bool = True):
        self.total = num_blocks
        self.block_size = block_size
        self.prefix_caching = prefix_caching
        self.free = num_blocks
        self.cached: dict[int, int] = {}
        self.lru: OrderedDict[int, None] = OrderedDict()
        self.evictions = 0

    @property
    def used(self) -> int:
        return self.total - self.free - len(self.lru)

    def available(self) -> int:
        return self.free + len(self.lru)

    def match(self, hashes: Sequence[int]) -> int:
        if not self.prefix_caching:
            return 0
        n = 0
        for h in hashes:
            if h not in self.cached:
                break
            n += 1
        return n

    def take(self, n: int) -> bool:
        if n <= 0:
            return True
        if n > self.free + len(self.lru):
            return False
        short = n - self.free
        for _ in range(max(0, short)):
            h, _v = self.lru.popitem(last=False)
            del self.cached[h]
            self.free += 1
            self.evictions += 1
        self.free -= n
        return True

    def ref(self, h: int) -> None:
        rc = self.cached[h]
        if rc == 0:
            del self.lru[h]
        self.cached[h] = rc + 1

    def promote(self, h: int) -> bool:
        """Turn one anonymous block holding a full prompt block into a cached one.

        Returns False when the hash is already cached (the caller then references that
        block and frees its own copy).
        """
        if not self.prefix_caching:
            return True
        if h in self.cached:
            self.ref(h)
            self.free += 1
            return False
        self.cached[h] = 1
        return True

    def release(self, anon: int, hashes: Sequence[int]) -> None:
        self.free += anon
        for h in hashes:
            rc = self.cached.get(h)
            if rc is None:
                continue
            rc -= 1
            self.cached[h] = rc
            if rc == 0:
                self.lru[h] = None

    def reset(self) -> None:
        self.free = self.total
        self.cached.clear()
        self.lru.clear()
