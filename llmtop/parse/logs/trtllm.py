"""TensorRT-LLM's log lines: its Python logger and its C++ runtime's.

- Sources: ``tensorrt_llm/logger.py``; ``cpp/include/tensorrt_llm/common/logger.h``.

- Python: ``[12/07/2026-09:30:00] [TRT-LLM] [I] message`` (``logging.basicConfig`` with
  ``[%(asctime)s] %(message)s`` and ``%m/%d/%Y-%H:%M:%S``; ``[MPI_Rank N]`` before the letter
  with several ranks): letters F, E, W, I, V (V: debug); local time with a year.
- C++: ``[TensorRT-LLM][INFO] message`` (``[TensorRT-LLM][RANK 0][ERROR]`` with a rank): TRACE,
  DEBUG, INFO, WARNING, ERROR; no time.
- Anything else (``trtllm-serve``'s Uvicorn lines, tracebacks): the generic parser.
"""

from __future__ import annotations

import re

from llmtop.parse.logs import generic, stamps
from llmtop.parse.logs.parsed import Parsed

__all__ = ["parse"]

_PY = re.compile(r"(?:\[(\d\d)/(\d\d)/(\d{4})-(\d\d):(\d\d):(\d\d)\] )?\[TRT-LLM\] "
                 r"(?:\[MPI_Rank \d+\] )?\[([FEWIV])\] ")
_CPP = re.compile(r"\[TensorRT-LLM\](?:\[RANK \d+\])?\[(TRACE|DEBUG|INFO|WARNING|ERROR)\] ")
_LETTERS = {"F": "critical", "E": "error", "W": "warning", "I": "info", "V": "debug"}


def parse(text: str, ref: float) -> Parsed:
    """One line of a TensorRT-LLM log."""
    m = _PY.match(text)
    if m is not None:
        t_wall = None
        if m.group(1):
            mo, d, y, h, mi, s = (int(g) for g in m.group(1, 2, 3, 4, 5, 6))
            t_wall = stamps.local(y, mo, d, h, mi, s)
        return Parsed(body=text[m.end():], severity=_LETTERS[m.group(7)], t_wall=t_wall)
    c = _CPP.match(text)
    if c is not None:
        return Parsed(body=text[c.end():], severity=generic.LEVELS[c.group(1)])
    return generic.parse(text, ref)
