"""Engine log lines -> ``LogEvent``s: one assembler per followed log, by format and envelope.

- ``assembler(fmt, envelope, keep_prompts=False)``: a stateful reader for one log. ``feed``
  takes one raw line as read (with its envelope: a Docker json-file object, a CRI line, a
  journal JSON object, or plain text; ``str`` or ``bytes``) and answers the events it
  completed; ``flush`` answers a pending multi-line event once its log has been quiet
  (``QUIET_S`` of read time).
- ``fmt``: the engine's line format (``FORMATS``: ``vllm``, ``sglang``, ``triton``,
  ``llamacpp``, ``tgi``, ``lmdeploy``, ``ollama``, ``trtllm``) or None / an unknown name
  (generic: level words, leading stamps, JSON lines, Python tracebacks).
- ``envelope``: ``plain`` | ``docker`` | ``cri`` | ``journal``.
- Every kept line is redacted (``redact``): secrets always, prompts unless ``keep_prompts``.
- One module per format and per envelope; ``assemble`` joins lines into events, ``clean``
  makes a line safe, ``stamps`` reads times, ``docs/logs.md`` says what each format is.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from llmtop.model import LogEvent
from llmtop.parse.logs import (
    generic,
    llamacpp,
    lmdeploy,
    ollama,
    sglang,
    tgi,
    triton,
    trtllm,
    vllm,
)
from llmtop.parse.logs.assemble import MAX_LINES, QUIET_S
from llmtop.parse.logs.assemble import Assembler as _Assembler
from llmtop.parse.logs.cri import Cri
from llmtop.parse.logs.docker import Docker
from llmtop.parse.logs.journal import Journal
from llmtop.parse.logs.parsed import Parsed
from llmtop.parse.logs.plain import Plain

__all__ = ["ENVELOPES", "FORMATS", "MAX_LINES", "QUIET_S", "Assembler", "assembler"]

ENVELOPES = ("plain", "docker", "cri", "journal")

FORMATS: dict[str, Callable[[str, float], Parsed]] = {
    "vllm": vllm.parse,
    "sglang": sglang.parse,
    "triton": triton.parse,
    "llamacpp": llamacpp.parse,
    "tgi": tgi.parse,
    "lmdeploy": lmdeploy.parse,
    "ollama": ollama.parse,
    "trtllm": trtllm.parse,
}
"""Format name -> its line parser; any other name (or None) reads lines generically."""

_ALIASES = {"llama.cpp": "llamacpp", "llama-server": "llamacpp", "llama_cpp": "llamacpp",
            "text-generation-inference": "tgi", "tensorrt-llm": "trtllm",
            "tensorrt_llm": "trtllm"}


class Assembler(Protocol):
    """Turns one log's raw lines into events, keeping a multi-line event open across reads."""

    def feed(self, raw: str | bytes, read_time: float) -> list[LogEvent]:
        """The events ``raw`` (one line as read, no newline) completed."""
        ...

    def flush(self, now: float) -> list[LogEvent]:
        """The pending event, when the log has been quiet long enough to close it."""
        ...


def assembler(fmt: str | None, envelope: str = "plain", *, keep_prompts: bool = False,
              max_lines: int = MAX_LINES, quiet_s: float = QUIET_S) -> Assembler:
    """A fresh assembler for one log of format ``fmt`` inside ``envelope``."""
    if envelope not in ENVELOPES:
        raise ValueError(f"unknown log envelope {envelope!r}")
    name = (fmt or "").lower()
    parse = FORMATS.get(_ALIASES.get(name, name), generic.parse)
    unwrap = {"plain": Plain, "docker": Docker, "cri": Cri, "journal": Journal}[envelope]()
    return _Assembler(parse, unwrap, keep_prompts=keep_prompts, max_lines=max_lines,
                      quiet_s=quiet_s)
