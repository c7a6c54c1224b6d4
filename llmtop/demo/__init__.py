"""llmtop.demo: simulated vLLM, SGLang and Triton/TRT-LLM engines (see ``docs/demo.md``).

Entry points: ``llmtop.demo.launcher.start_demo`` (separate process) and
``llmtop.cli.demo.main`` (``llmtop demo serve``). Importing this package imports nothing else.
"""

from __future__ import annotations

__all__: list[str] = []
