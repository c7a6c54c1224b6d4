"""One log file read like ``tail -F``: from its last few KB, through rotation and truncation.

- ``FileTail(path, resolve=None)``: ``read()`` answers the complete lines written since the
  last call (``TailRead``); ``close()`` lets the file go.
- Starts from the last ``START_BYTES`` (the first, partial line dropped), never the whole
  file. A file that grows faster than it is read is skipped ahead (``TailRead.skipped``).
- Rotation: the name now names another file (rename + new file: Docker's ``-json.log.1``,
  the kubelet's ``0.log.<time>``): the old file is read to its end, then the new one from
  its start. Truncation (copytruncate): read again from the start. ``resolve`` names the
  file to follow now (a pod container's newest ``<N>.log`` after a restart).
- Bounded: at most ``READ_BUDGET`` bytes per call; a line longer than ``MAX_LINE`` is cut
  there (the rest of it dropped); past a call's ``limit`` lines only the lines with a mark
  of trouble are kept (``SERIOUS``), the others counted, never decoded. Bytes become text
  safely: invalid UTF-8 replaced, control characters (except tab and escape) replaced by
  U+FFFD.
- A file that cannot be opened is an ``error`` (retried with back-off, ``next_try``); one
  that vanished is followed while it is open and said after ``VANISHED_S``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from llmtop import clock

__all__ = ["MAX_LINE", "READ_BUDGET", "SERIOUS", "SKIP_BYTES", "START_BYTES", "FileTail",
           "LineSplitter", "TailRead", "clean", "newest_cri", "retry_after"]

START_BYTES = 16 * 1024
"""How much of an existing file is read when following starts: the last few KB."""
MAX_LINE = 64 * 1024
"""A longer line is cut here (a binary file, a huge JSON dump)."""
READ_BUDGET = 4 * 1024 * 1024
"""Bytes read from one file per call (4 calls a second: 16 MB/s before it falls behind)."""
SKIP_BYTES = 32 * 1024 * 1024
"""A backlog larger than this is skipped: the log is read from its last ``START_BYTES``."""
VANISHED_S = 5.0
"""A followed name missing this long is said (its open file is still read)."""
_CHUNK = 64 * 1024
_GLOG_START = re.compile(rb"[EF][01]\d{3} ")
SERIOUS = re.compile(rb"ERROR|CRITICAL|FATAL|Traceback|Exception|Error|\n[EF][01]\d{3} "
                     rb"|error\"|level=error")
"""Marks of trouble in a line, in any engine's format (a severity word, an exception's name,
a traceback, glog's ``E``/``F`` letter at a line's start, a JSON or logfmt level): the lines
still read under a flood. No ``^`` and no per-line loop: one scan at C speed."""
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1a\x1c-\x1f\x7f]")


def clean(raw: bytes) -> str:
    """Bytes of one line -> safe text: UTF-8 (invalid bytes replaced), no trailing CR, control
    characters other than tab and escape replaced by U+FFFD."""
    text = raw.decode("utf-8", "replace")
    if text.endswith("\r"):
        text = text[:-1]
    return _CONTROL.sub("\ufffd", text)


def retry_after(failures: int) -> float:
    """Seconds before the next try after ``failures`` failed ones: 1, 2, 4 ... 30."""
    return min(30.0, 2.0 ** max(0, failures - 1))


@dataclass(slots=True)
class TailRead:
    """What one ``read`` found."""

    lines: list[str] = field(default_factory=list)
    rotated: bool = False
    """Rotated, truncated or replaced since the last read (and followed on)."""
    error: str | None = None
    """Why the file cannot be read now (it is tried again later)."""
    skipped: int = 0
    """Bytes skipped because the file grew faster than it was read."""
    skimmed: int = 0
    """Lines past the read's ``limit`` left out (no mark of trouble in them)."""


class LineSplitter:
    """Bytes as read -> complete lines, each cut at ``max_line`` (the rest of it dropped).

    ``allow``: how many more lines may be made into text (None: all). Past it, only the
    lines with a mark of trouble (``SERIOUS``) are, found by one scan of the bytes; the
    others are counted in ``skimmed``, never decoded (a flood costs a scan, not a parse).
    """

    def __init__(self, max_line: int = MAX_LINE) -> None:
        self.max_line = max_line
        self._buf = bytearray()
        self.cutting = False
        """Dropping bytes up to the next newline (a cut line, or a partial first line)."""
        self.allow: int | None = None
        self.skimmed = 0

    def clear(self, *, cutting: bool = False) -> None:
        """Forget the partial line; ``cutting``: also drop what comes up to the next newline."""
        self._buf.clear()
        self.cutting = cutting

    def feed(self, data: bytes, lines: list[str]) -> None:
        """Append the lines ``data`` completes to ``lines``."""
        start = 0
        cap = self.max_line
        while True:
            if self.allow is not None and self.allow <= 0:
                start = self._skim(data, start, lines)
                break
            nl = data.find(b"\n", start)
            if nl < 0:
                break
            if self.cutting:
                self.cutting = False
                self._buf.clear()
            elif self._buf:
                self._buf += data[start:min(nl, start + cap)]
                self._take(clean(bytes(self._buf[:cap])), lines)
                self._buf.clear()
            else:
                self._take(clean(data[start:min(nl, start + cap)]), lines)
            start = nl + 1
        if start < len(data) and not self.cutting:
            self._buf += data[start:start + cap + 1]
            if len(self._buf) > cap:  # a huge line: keep its start, drop the rest
                self._take(clean(bytes(self._buf[:cap])), lines)
                self._buf.clear()
                self.cutting = True

    def _take(self, line: str, lines: list[str]) -> None:
        lines.append(line)
        if self.allow is not None:
            self.allow -= 1

    def _skim(self, data: bytes, start: int, lines: list[str]) -> int:
        """Past ``allow``: the complete lines in ``data[start:]`` with a mark of trouble as
        text, the others counted; returns where the last complete line ends."""
        end = data.rfind(b"\n", start) + 1
        if end <= start:
            return start
        if self._buf or self.cutting:  # the end of a line begun earlier
            first = data.find(b"\n", start) + 1
            if self._buf:
                line = bytes(self._buf) + data[start:min(first - 1, start + self.max_line)]
                if SERIOUS.search(line) or _GLOG_START.match(line):
                    lines.append(clean(line[: self.max_line]))
                else:
                    self.skimmed += 1
            self._buf.clear()
            self.cutting = False
            start = first
        total = data.count(b"\n", start, end)
        starts = {start} if start < end and _GLOG_START.match(data, start, end) else set()
        for m in SERIOUS.finditer(data, max(0, start - 1), end):
            at = m.start() + (1 if data[m.start()] == 10 else 0)  # "\nE1207 ": the line after
            if start <= at < end:
                starts.add(max(start, data.rfind(b"\n", start, at) + 1))
        for begin in sorted(starts):
            stop = data.find(b"\n", begin, end)
            lines.append(clean(data[begin:min(stop, begin + self.max_line)]))
        kept = len(starts)
        self.skimmed += total - kept
        return end

    def flush(self, lines: list[str]) -> None:
        """The partial last line is complete (its file was left behind, its writer ended)."""
        if self._buf and not self.cutting:
            lines.append(clean(bytes(self._buf)))
        self.clear()


class FileTail:
    """One followed file (see the module docstring); not thread-safe: one reader calls it."""

    def __init__(self, path: str, *, resolve: Callable[[], str | None] | None = None,
                 start_bytes: int = START_BYTES, max_line: int = MAX_LINE,
                 budget: int = READ_BUDGET, skip_bytes: int = SKIP_BYTES) -> None:
        self.path = path
        self._resolve = resolve
        self.start_bytes = start_bytes
        self.budget, self.skip_bytes = budget, skip_bytes
        self._fd: int | None = None
        self._id: tuple[int, int] | None = None
        self._pos = 0
        self._lines = LineSplitter(max_line)
        self._first = True
        """No open tried yet: an existing file is read from its end (later ones from the
        start: a file that appears while followed is new)."""
        self._error: str | None = None
        self.failures = 0
        self.next_try = 0.0
        """Monotonic time of the next open after a failure."""
        self._missing_since: float | None = None

    # ------------------------------------------------------------------ reading
    def read(self, limit: int | None = None) -> TailRead:
        """The complete lines written since the last call (see the module docstring); past
        ``limit`` lines, only those with a mark of trouble (``LineSplitter``)."""
        out = TailRead()
        now = clock.monotonic()
        self._lines.allow, self._lines.skimmed = limit, 0
        if self._fd is None:
            if now < self.next_try:
                out.error = self._error
                return out
            first, self._first = self._first, False
            if not self._open(out, from_end=first):
                return out
        self._read_fd(out)
        self._check_name(out, now)
        out.skimmed = self._lines.skimmed
        return out

    def _open(self, out: TailRead, *, from_end: bool) -> bool:
        path = self._current()
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
            st = os.fstat(fd)
        except OSError as exc:
            self.failures += 1
            self.next_try = clock.monotonic() + retry_after(self.failures)
            self._error = _why(path, exc)
            out.error = self._error
            return False
        self._fd, self._id, self.path = fd, (st.st_dev, st.st_ino), path
        self.failures, self._error, self._missing_since = 0, None, None
        self._pos = 0
        self._lines.clear()
        if from_end and st.st_size > self.start_bytes:
            self._seek_tail(st.st_size)
        return True

    def _seek_tail(self, size: int) -> None:
        """Start at the last ``start_bytes`` of a ``size``-byte file, its partial first line
        dropped."""
        self._pos = size - self.start_bytes
        self._lines.clear(cutting=True)

    def _read_fd(self, out: TailRead) -> None:
        assert self._fd is not None
        try:
            size = os.fstat(self._fd).st_size
        except OSError:
            size = self._pos
        if size < self._pos:  # truncated in place: read it again from the start
            self._pos = 0
            self._lines.clear()
            out.rotated = True
        if size - self._pos > self.skip_bytes:
            out.skipped += size - self._pos - self.start_bytes
            self._seek_tail(size)
        left = self.budget
        while left > 0:
            try:
                data = os.pread(self._fd, min(_CHUNK, left), self._pos)
            except OSError as exc:
                out.error = _why(self.path, exc)
                return
            if not data:
                return
            self._pos += len(data)
            left -= len(data)
            self._lines.feed(data, out.lines)

    # ------------------------------------------------------------------ rotation
    def _current(self) -> str:
        if self._resolve is not None:
            try:
                found = self._resolve()
            except OSError:
                found = None
            if found:
                return found
        return self.path

    def _check_name(self, out: TailRead, now: float) -> None:
        """After reading to the end: does the name still name the open file?"""
        path = self._current()
        try:
            st = os.stat(path)
        except FileNotFoundError:
            if self._missing_since is None:
                self._missing_since = now
            elif now - self._missing_since >= VANISHED_S:
                out.error = f"{path} vanished (still reading the file it named)"
            return
        except OSError as exc:
            out.error = _why(path, exc)
            return
        self._missing_since = None
        if (st.st_dev, st.st_ino) == self._id and path == self.path:
            return
        # rotated or replaced: the old file's last lines, then the new file from its start
        self._read_fd(out)
        self._lines.flush(out.lines)
        self._close_fd()
        self.path = path
        out.rotated = True
        if self._open(out, from_end=False):
            self._read_fd(out)

    def _close_fd(self) -> None:
        if self._fd is not None:
            try:
                os.close(self._fd)
            except OSError:
                pass
        self._fd, self._id = None, None

    def close(self) -> None:
        """Let the file go (idempotent)."""
        self._close_fd()


def newest_cri(folder: str) -> str | None:
    """The ``<N>.log`` with the highest N in a pod container's folder (its latest restart)."""
    try:
        names = os.listdir(folder)
    except OSError:
        return None
    counts = [int(n[:-4]) for n in names if n.endswith(".log") and n[:-4].isdigit()]
    return os.path.join(folder, f"{max(counts)}.log") if counts else None


def _why(path: str, exc: OSError) -> str:
    if isinstance(exc, PermissionError):
        return f"{path}: permission denied: run as root or join group adm/docker"
    if isinstance(exc, FileNotFoundError):
        return f"{path} not found (following when it appears)"
    if isinstance(exc, IsADirectoryError):
        return f"{path} is a folder, not a log file"
    return f"{path}: {exc.strerror or exc}"
