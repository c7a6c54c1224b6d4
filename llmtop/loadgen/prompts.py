"""Prompts of a target token length, with no tokenizer download (pure, seeded).

Text is drawn from a pool of common short English words. ``Calibration`` says how many
tokens a prompt of ``w`` words costs on this server: ``tokens = overhead + ratio * w``,
measured by ``prepare.calibrate`` with the server's ``/tokenize`` (vLLM, SGLang) or from
``usage.prompt_tokens`` of two probe requests, else assumed (1.3 tokens per word).

Every prompt starts with a unique request number, so prompts never share a cached prefix by
accident. In shared-prefix mode (``N:P``) each prompt is one of N fixed prefixes of P tokens
followed by a unique suffix of ``prompt_tokens`` tokens.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from llmtop.loadgen.client import dumps

__all__ = ["Calibration", "PromptFactory", "sample_length", "sample_text"]

_WORDS = (
    "the", "of", "and", "to", "in", "is", "was", "for", "on", "that", "with", "as", "by", "at",
    "from", "his", "an", "be", "this", "which", "or", "are", "had", "not", "but", "one",
    "have", "they", "were", "all", "their", "her", "has", "been", "more", "its", "new", "who",
    "also", "two", "after", "when", "time", "first", "other", "into", "she", "some", "year",
    "there", "only", "than", "over", "many", "most", "any", "may", "such", "made", "then",
    "city", "part", "where", "later", "during", "about", "well", "used", "between", "state",
    "three", "world", "under", "work", "people", "known", "before", "while", "both", "each",
    "since", "team", "game", "back", "until", "high", "long", "end", "way", "school", "around",
    "still", "war", "down", "early", "name", "life", "film", "water", "group", "small",
    "great", "left", "house", "best", "large", "second", "local", "main", "good", "light",
    "open", "right", "real", "view", "line", "form", "power", "side", "music", "order",
    "place", "road", "sound", "town", "book", "river", "point", "case", "field", "head",
    "land", "north", "south", "east", "west", "days", "love", "home", "word", "plan", "play",
    "age", "hand", "cold", "warm", "blue", "green", "red",
)


@dataclass(frozen=True, slots=True)
class Calibration:
    """Token cost of the probe's prompts on this server."""

    method: str
    """``tokenize`` | ``usage`` | ``assumed``."""
    ratio: float = 1.3
    """Tokens per word."""
    overhead: float = 0.0
    """Tokens added around any prompt (BOS, chat template)."""

    def words_for(self, tokens: int) -> int:
        return max(1, round((tokens - self.overhead) / self.ratio))

    def to_json(self) -> dict[str, Any]:
        return {"method": self.method, "tokens_per_word": self.ratio, "overhead": self.overhead}


def sample_text(n_words: int, seed: int = 0, offset: int = 0) -> str:
    """Deterministic text of ``n_words`` words (used for calibration)."""
    rng = random.Random(seed * 7919 + offset)
    return " ".join(rng.choice(_WORDS) for _ in range(n_words))


def sample_length(rng: random.Random, mean: int, dist: str) -> int:
    """One length from ``fixed`` | ``uniform`` (0.5x..1.5x) | ``normal`` (sd 0.2x), >= 1."""
    if dist == "uniform":
        return max(1, round(rng.uniform(0.5 * mean, 1.5 * mean)))
    if dist == "normal":
        return max(1, round(rng.gauss(mean, 0.2 * mean)))
    return mean


class PromptFactory:
    """Makes request payloads (JSON bytes) for one run."""

    POOL_WORDS = 1 << 16

    def __init__(self, *, model: str, endpoint: str, calibration: Calibration,
                 prompt_tokens: int, output_tokens: int, length_dist: str = "fixed",
                 shared_prefix: tuple[int, int] | None = None, ignore_eos: bool = True,
                 seed: int = 0) -> None:
        self.model = model
        self.chat = endpoint == "chat"
        self.cal = calibration
        self.prompt_tokens = prompt_tokens
        self.output_tokens = output_tokens
        self.dist = length_dist
        self.ignore_eos = ignore_eos
        self.rng = random.Random(seed)
        self._pool = [self.rng.choice(_WORDS) for _ in range(self.POOL_WORDS)]
        self._n = 0
        self.prefixes: list[str] = []
        if shared_prefix is not None:
            n, p = shared_prefix
            words = self.cal.words_for(p)
            for j in range(n):
                r = random.Random(seed * 1_000_003 + j + 1)
                self.prefixes.append(f"Document {j}: "
                                     + " ".join(r.choice(_WORDS) for _ in range(words)))

    def _words(self, n: int) -> str:
        start = self.rng.randrange(0, self.POOL_WORDS - n) if n < self.POOL_WORDS else 0
        return " ".join(self._pool[start:start + n])

    def text(self) -> str:
        """The next prompt text."""
        self._n += 1
        toks = sample_length(self.rng, self.prompt_tokens, self.dist)
        if self.prefixes:
            prefix = self.prefixes[self._n % len(self.prefixes)]
            return f"{prefix}\nRequest {self._n}: {self._words(self.cal.words_for(toks))}"
        return f"{self._n} {self._words(self.cal.words_for(toks))}"

    def payload(self, text: str, max_tokens: int) -> bytes:
        body: dict[str, Any] = {"model": self.model, "max_tokens": max_tokens, "stream": True,
                                "stream_options": {"include_usage": True}}
        if self.chat:
            body["messages"] = [{"role": "user", "content": text}]
        else:
            body["prompt"] = text
        if self.ignore_eos:
            body["ignore_eos"] = True
        return dumps(body)

    def next_payload(self) -> bytes:
        """JSON bytes of the next request."""
        return self.payload(self.text(), sample_length(self.rng, self.output_tokens, self.dist))
