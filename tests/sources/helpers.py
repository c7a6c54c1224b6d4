"""Tiny loopback servers for scraper and discovery tests (127.0.0.1, port 0)."""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from pathlib import Path

from aiohttp import web

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@contextlib.asynccontextmanager
async def http_server(routes: dict[str, Handler]) -> AsyncIterator[int]:
    """An aiohttp server with GET ``routes``; yields its port."""
    app = web.Application()
    for path, handler in routes.items():
        app.router.add_get(path, handler)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield port
    finally:
        await runner.cleanup()


@contextlib.asynccontextmanager
async def raw_server(
    on_conn: Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]],
) -> AsyncIterator[int]:
    """A raw asyncio TCP server; yields its port."""

    async def wrapped(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        try:
            await on_conn(r, w)
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            w.close()

    server = await asyncio.start_server(wrapped, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield port
    finally:
        server.close()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(server.wait_closed(), 1)


def free_port() -> int:
    """A port that nothing listens on (bound then released)."""
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


HEADER = (
    "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout"
    " inode\n"
)


def proc_row(local: str, st: str, inode: int) -> str:
    """One /proc/net/tcp line: local address as kernel hex, state (0A = LISTEN), inode."""
    return f"   0: {local} 00000000:0000 {st} 00000000:00000000 00:00000000 00000000  1000        0 {inode} 1 0000000000000000 100 0 0 10 0\n"  # noqa: E501


def fake_proc(root: Path, procs: dict[int, tuple[list[str], list[int]]],
              tcp: Sequence[str], tcp6: Sequence[str] = ()) -> Path:
    """procs: pid -> (argv, socket inodes)."""
    (root / "net").mkdir(parents=True)
    (root / "net" / "tcp").write_text(HEADER + "".join(tcp))
    (root / "net" / "tcp6").write_text(HEADER + "".join(tcp6))
    for pid, (argv, inodes) in procs.items():
        d = root / str(pid)
        (d / "fd").mkdir(parents=True)
        (d / "cmdline").write_bytes(b"\0".join(a.encode() for a in argv) + b"\0")
        for i, inode in enumerate(inodes):
            os.symlink(f"socket:[{inode}]", d / "fd" / str(i + 3))
        os.symlink("/dev/null", d / "fd" / "0")
    return root
