"""Is an engine answering here? A quick ``GET /metrics`` and a look at its first bytes.

- ``sniff_engine(head)``: the family the first 64 KiB of a metrics body names (the one prefix
  table, ``llmtop.families``), trtllm-serve's JSON list, or None.
- ``probe(candidate, key)``: the candidate with its engine filled when an engine answers
  (llama.cpp's 501 "start it with --metrics", Ollama's ``/api/version`` on a 404), else None.
  A certain candidate (its own listening socket) is kept even when the probe fails.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json

from llmtop.discovery.candidates import Candidate
from llmtop.families import family_of
from llmtop.urls import netloc

__all__ = ["HEAD_CAP", "get_head", "probe", "sniff_engine"]

HEAD_CAP = 64 * 1024
"""Bytes of a body read to tell what answers."""


def sniff_engine(head: str) -> str | None:
    """Engine or router family from the first bytes of a metrics body, or None."""
    if head.lstrip().startswith("["):
        return "trtllm"  # trtllm-serve /metrics: a JSON list of iteration stats
    return family_of(head.lstrip())


async def get_head(host: str, port: int, path: str, key: str | None) -> tuple[int, str, bytes]:
    """(status, content type, first 64 KiB of body) of a tiny HTTP/1.0 GET."""
    reader, writer = await asyncio.open_connection(host, port)
    try:
        hp = netloc(host, port)
        auth = f"Authorization: Bearer {key}\r\n" if key else ""
        writer.write(
            f"GET {path} HTTP/1.0\r\nHost: {hp}\r\nUser-Agent: llmtop-discover\r\n"
            f"Accept: text/plain, */*\r\n{auth}Connection: close\r\n\r\n".encode()
        )
        await writer.drain()
        data = b""
        while len(data) < HEAD_CAP:
            chunk = await reader.read(HEAD_CAP - len(data))
            if not chunk:
                break
            data += chunk
    finally:
        writer.close()
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split()
    status = int(parts[1]) if len(parts) >= 2 and parts[1].isdigit() else 0
    ctype = ""
    for line in lines[1:]:
        k, _, v = line.partition(":")
        if k.strip().lower() == "content-type":
            ctype = v.strip().lower()
    return status, ctype, body


async def probe(c: Candidate, key: str | None) -> Candidate | None:
    """Is an engine answering at ``c``? Returns the candidate (engine filled) or None."""
    try:
        status, ctype, body = await get_head(c.host, c.port, "/metrics", key)
    except (OSError, ValueError, asyncio.IncompleteReadError):
        return c if c.certain else None
    text = body.decode("utf-8", "replace")
    html = "text/html" in ctype or text.lstrip()[:16].lower().startswith(("<!doctype", "<html"))
    if status == 200 and not html:
        engine = sniff_engine(text) or c.engine
        if engine is not None:
            return dataclasses.replace(c, engine=c.engine or engine, certain=True)
    elif status == 501 and "--metrics" in text:
        # shows the hint as its error
        return dataclasses.replace(c, engine="llamacpp", certain=True, api_port=None)
    elif status == 404:
        with contextlib.suppress(OSError, ValueError, asyncio.IncompleteReadError):
            status, _, body = await get_head(c.host, c.port, "/api/version", key)
            if status == 200:
                obj = json.loads(body.decode("utf-8", "replace"))
                if isinstance(obj, dict) and "version" in obj:
                    return dataclasses.replace(c, engine="ollama", certain=True,
                                               api_port=None)
    if c.certain or (c.engine is not None and status in (200, 401, 403)):
        return c
    return None
