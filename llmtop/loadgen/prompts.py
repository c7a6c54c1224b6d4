"""Prompts of a target token length, with no tokenizer download (pure, seeded).

Text is drawn from a pool of common short English words. ``Calibration`` says how many
tokens a prompt of ``w`` words costs on this server: ``tokens = overhead + ratio * w``,
measured by ``prepare.calibrate`` with the server's ``/tokenize`` (vLLM, SGLang) or from
``usage.prompt_tokens`` of two probe requests, else assumed (1.3 tokens per word).

Every prompt starts with a unique request number, so prompts never share a cached prefix by
accident. In shared-prefix mode (``N:P``) each prompt is one of N fixed prefixes of P tokens
followed by a unique suffix of ``prompt_tokens`` tokens. With ``prefix_share`` h (to match an
engine's prefix hit rate) each prompt of L tokens starts with the first h x L tokens of one
shared document, then the request number and unique words.

Lengths come from ``length_dist`` around the given means, or from ``LengthDist`` histograms
(``--lengths-from``), capped so that prompt + output fit the model's context. A dataset
(``--dataset``) replaces the synthetic text: records are drawn with the seeded generator and
sent as written. ``last_asked`` is the (prompt, output) length asked for by the last payload
(prompt None for a dataset: the server's ``usage`` tells).
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass
from typing import Any

from llmtop.loadgen.client import dumps
from llmtop.loadgen.dataset import Record
from llmtop.loadgen.shape import LengthDist

__all__ = ["Calibration", "PromptFactory", "new_digest", "sample_length", "sample_text"]

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


def new_digest() -> Any:
    """The hash of a request list: sha256 over ``[prompt or messages, max_tokens]`` per
    request, in send order (model name and sampling flags left out)."""
    return hashlib.sha256()


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
                 seed: int = 0, prompt_dist: LengthDist | None = None,
                 output_dist: LengthDist | None = None, context: int | None = None,
                 prefix_share: float | None = None,
                 dataset: list[Record] | None = None, min_tokens: bool = False) -> None:
        self.model = model
        self.chat = endpoint == "chat"
        self.cal = calibration
        self.prompt_tokens = prompt_tokens
        self.output_tokens = output_tokens
        self.dist = length_dist
        self.ignore_eos = ignore_eos
        self.min_tokens = min_tokens
        """Also ask ``min_tokens = max_tokens`` (with ``ignore_eos``): exact output lengths."""
        self.digest: Any = None
        """A ``hashlib.sha256()`` to feed (prompt, max_tokens) of every payload, in order."""
        self.rng = random.Random(seed)
        self._pool = [self.rng.choice(_WORDS) for _ in range(self.POOL_WORDS)]
        self._n = 0
        self.prompt_dist = prompt_dist
        self.output_dist = output_dist
        self.context = context
        self.prefix_share = prefix_share
        self.dataset = dataset
        self.last_asked: tuple[int | None, int] = (None, output_tokens)
        self._shared: list[str] = []
        if prefix_share:
            r = random.Random(seed * 1_000_003)
            self._shared = [r.choice(_WORDS) for _ in range(self.POOL_WORDS)]
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

    def _lengths(self) -> tuple[int, int]:
        """(prompt, output) tokens for the next request, fitted into the context."""
        ctx = self.context
        if self.output_dist is not None:
            out = self.output_dist.sample(self.rng, ctx // 2 if ctx else None)
        else:
            out = sample_length(self.rng, self.output_tokens, self.dist)
        cap = max(1, ctx - out - 16) if ctx else None  # room for the chat template
        if self.prompt_dist is not None:
            prompt = self.prompt_dist.sample(self.rng, cap)
        else:
            prompt = sample_length(self.rng, self.prompt_tokens, self.dist)
            prompt = min(prompt, cap) if cap else prompt
        return prompt, out

    def text(self, toks: int | None = None) -> str:
        """The next prompt text (``toks`` tokens; drawn when not given)."""
        self._n += 1
        if toks is None:
            toks = self._lengths()[0]
        if self._shared and self.prefix_share:
            k = round(self.prefix_share * toks)
            shared = " ".join(self._shared[:self.cal.words_for(k)]) if k > 0 else ""
            rest = self._words(self.cal.words_for(max(1, toks - k)))
            return f"{shared}\nRequest {self._n}: {rest}" if shared else f"{self._n} {rest}"
        if self.prefixes:
            prefix = self.prefixes[self._n % len(self.prefixes)]
            return f"{prefix}\nRequest {self._n}: {self._words(self.cal.words_for(toks))}"
        return f"{self._n} {self._words(self.cal.words_for(toks))}"

    def payload(self, text: str, max_tokens: int,
                messages: tuple[dict[str, str], ...] | None = None,
                ignore_eos: bool | None = None) -> bytes:
        body: dict[str, Any] = {"model": self.model, "max_tokens": max_tokens, "stream": True,
                                "stream_options": {"include_usage": True}}
        if self.chat:
            body["messages"] = list(messages) if messages else [{"role": "user",
                                                                  "content": text}]
        else:
            body["prompt"] = text if not messages else "\n".join(m["content"]
                                                                  for m in messages)
        if self.ignore_eos if ignore_eos is None else ignore_eos:
            body["ignore_eos"] = True
            if self.min_tokens:
                body["min_tokens"] = max_tokens
        if self.digest is not None:
            self.digest.update(dumps([body.get("messages") or body.get("prompt"), max_tokens]))
        return dumps(body)

    def _record_payload(self) -> bytes:
        assert self.dataset is not None
        rec = self.rng.choice(self.dataset)
        out = rec.max_tokens
        if out is None and rec.reply_words:
            out = max(1, round(self.cal.ratio * rec.reply_words))
        out = out or self.output_tokens
        self.last_asked = (None, out)
        return self.payload(rec.prompt or "", out, rec.messages, ignore_eos=False)

    def next_payload(self) -> bytes:
        """JSON bytes of the next request."""
        if self.dataset:
            return self._record_payload()
        prompt, out = self._lengths()
        self.last_asked = (prompt, out)
        return self.payload(self.text(prompt), out)
