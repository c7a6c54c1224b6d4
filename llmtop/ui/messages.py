"""Messages from the poll worker to the app (data reaches the UI only through messages)."""

from __future__ import annotations

from textual.message import Message

from llmtop.model import Snapshot

__all__ = ["PollFailed", "SnapshotReady"]


class SnapshotReady(Message):
    """A tick finished; ``snapshot`` is what to paint."""

    def __init__(self, snapshot: Snapshot) -> None:
        super().__init__()
        self.snapshot = snapshot


class PollFailed(Message):
    """A tick raised; the poller carries on. ``text`` becomes an event-log line."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text
