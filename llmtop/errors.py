"""Exceptions.

    LlmtopError              any error shown to the user as one clear line (exit 2)
     +-- ConfigError         bad flags, target strings or config file
     +-- GpuRequiredError    --gpu-required and the GPU cannot be read
     +-- RecordingError      a recording cannot be read or written
"""

from __future__ import annotations

__all__ = ["ConfigError", "GpuRequiredError", "LlmtopError", "RecordingError"]


class LlmtopError(Exception):
    """An error with a message fit for the user; never shown as a traceback."""


class ConfigError(LlmtopError):
    """Bad flags, target strings or config file."""


class GpuRequiredError(LlmtopError):
    """``--gpu-required`` was given and no GPU could be read."""


class RecordingError(LlmtopError):
    """A recording cannot be read or written."""
