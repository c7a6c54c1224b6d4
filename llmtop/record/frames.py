"""The recording file: a magic line, then CRC-checked zlib frames of JSON-line records.

Layout::

    b"LLMTOP-REC 1\\n"
    frame := b"F" <u32 payload length> <u32 crc32(payload)> payload
    payload := zlib(JSON records, one per line)

Frames are only ever appended, each in one write, so a reader can open the file while
it is being written, and a crash loses at most the frame being written: the reader stops
at the first incomplete or corrupt frame and says where the recording ends.
"""

from __future__ import annotations

import json
import os
import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, BinaryIO

from llmtop.errors import RecordingError

__all__ = ["MAGIC", "FrameScan", "append_frame", "encode_frame", "scan_frames"]

MAGIC = b"LLMTOP-REC 1\n"
_HEAD = struct.Struct("<cII")
MAX_FRAME = 256 * 1024 * 1024


def encode_frame(records: list[dict[str, Any]]) -> bytes:
    """One frame holding ``records``."""
    raw = "\n".join(json.dumps(r, separators=(",", ":")) for r in records).encode()
    payload = zlib.compress(raw, 6)
    return _HEAD.pack(b"F", len(payload), zlib.crc32(payload)) + payload


def append_frame(fd: int, records: list[dict[str, Any]]) -> int:
    """Append one frame to an O_APPEND file descriptor in a single write; returns its size."""
    data = encode_frame(records)
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]
    return len(data)


@dataclass(slots=True)
class FrameScan:
    """Where a scan of the file stopped."""

    good_bytes: int
    """Offset just past the last complete frame."""
    total_bytes: int
    problem: str | None = None
    """Why the scan stopped early (incomplete or corrupt final frame), or None."""


def scan_frames(f: BinaryIO, scan: FrameScan) -> Iterator[tuple[int, list[dict[str, Any]]]]:
    """Yield (offset, records) per good frame; fill ``scan`` with where it stopped."""
    f.seek(0, os.SEEK_END)
    scan.total_bytes = f.tell()
    f.seek(0)
    if f.read(len(MAGIC)) != MAGIC:
        raise RecordingError("not an llmtop recording (bad magic)")
    offset = len(MAGIC)
    scan.good_bytes = offset
    while True:
        head = f.read(_HEAD.size)
        if not head:
            return
        if len(head) < _HEAD.size:
            scan.problem = "incomplete frame header"
            return
        tag, length, crc = _HEAD.unpack(head)
        if tag != b"F" or length > MAX_FRAME:
            scan.problem = "corrupt frame header"
            return
        payload = f.read(length)
        if len(payload) < length:
            scan.problem = f"incomplete final frame ({len(payload)} of {length} bytes)"
            return
        if zlib.crc32(payload) != crc:
            scan.problem = "frame checksum mismatch"
            return
        try:
            text = zlib.decompress(payload).decode()
            records = [json.loads(line) for line in text.split("\n") if line]
        except (zlib.error, UnicodeDecodeError, ValueError):
            scan.problem = "undecodable frame"
            return
        yield offset, records
        offset += _HEAD.size + length
        scan.good_bytes = offset
