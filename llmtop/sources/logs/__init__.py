"""Engine logs followed like ``tail -F``, off the event loop, drained by each tick.

- ``follower``: ``Follower`` (``monitor.ports.LogFollower``): one reader thread for every log,
  bounded queues, errors said once; lines become events through the assembler it is given.
- ``tail``: one file read from its last few KB through rotation and truncation, lines cut
  safely (``FileTail``, ``LineSplitter``, ``clean``).
- ``child``: a child process's output as a log (``journalctl -o json --follow``, a user's
  ``cmd:`` command), ended and reaped when forgotten (``ChildTail``).

Finding where each log is is discovery's (``llmtop.discovery.logs``).
"""

from __future__ import annotations

from llmtop.sources.logs.follower import Follower

__all__ = ["Follower"]
