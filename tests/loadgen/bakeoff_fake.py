"""A fake vLLM-like engine of known speed for the bake-off tests (127.0.0.1 only).

It decodes at most ``--max-batch`` requests at once (others wait in a queue), each at one
token every ``--itl`` seconds after ``--ttft``; so its output throughput saturates at
``max_batch / itl`` tok/s, a known ranking between fakes. It records, per request, the
sha256 of ``[prompt or messages, max_tokens]`` (the bake-off's own request-list hash, one
line per request in ``--hash-log``), and counts what it served (``GET /stats``): requests,
tokens, peak running and waiting. ``/metrics`` is a real vLLM 0.32 capture
(tests/fixtures/metrics/vllm-real-cpu-v0.32.0-under-load.txt) with the values of its
running / waiting / KV / preemption / token series replaced by the fake's own counts.
``--short`` ignores ``max_tokens`` (every request ends at half of it with ``stop``);
``--boot-delay S`` waits S seconds before listening (a cold start); ``--fail-boot`` exits 3.

Run: ``python tests/loadgen/bakeoff_fake.py --port 0 --itl 0.01`` prints ``PORT <n>``.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import re
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from llmtop.loadgen.client import dumps

MODEL = "fake-model"
_FIXTURE = (Path(__file__).resolve().parents[1] / "fixtures" / "metrics"
            / "vllm-real-cpu-v0.32.0-under-load.txt")


class Fake:
    def __init__(self, a: argparse.Namespace) -> None:
        self.a = a
        self.sem = asyncio.Semaphore(a.max_batch)
        self.running = 0
        self.waiting = 0
        self.peak_running = 0
        self.peak_waiting = 0
        self.requests = 0
        self.tokens = 0
        self.short = 0
        self.finished = {"stop": 0, "length": 0}
        """Finished requests by reason: ``vllm:request_success_total{finished_reason}``."""
        self.hashes: list[str] = []
        self.log = open(a.hash_log, "a", encoding="utf-8") if a.hash_log else None  # noqa: SIM115
        self.metrics_text = _FIXTURE.read_text(encoding="utf-8")

    def metrics(self) -> bytes:
        vals = {"vllm:num_requests_running": self.running,
                "vllm:num_requests_waiting": self.waiting,
                "vllm:kv_cache_usage_perc": self.running / self.a.max_batch,
                "vllm:num_preemptions_total": 0.0,
                "vllm:generation_tokens_total": float(self.tokens)}
        out = []
        for line in self.metrics_text.splitlines():
            m = re.match(r"^([a-zA-Z_:]+)(\{[^}]*\})? (\S+)$", line)
            if m and m.group(1) == "vllm:request_success_total":
                why = re.search(r'finished_reason="([a-z]+)"', m.group(2) or "")
                n = self.finished.get(why.group(1), 0) if why else 0
                line = f"{m.group(1)}{m.group(2) or ''} {float(n)!r}"
            elif m and vals.get(m.group(1)) is not None:
                line = f"{m.group(1)}{m.group(2) or ''} {float(vals[m.group(1)])!r}"
            out.append(line)
        return ("\n".join(out) + "\n").encode()

    def record(self, req: dict) -> None:
        key = req.get("messages") or req.get("prompt")
        h = hashlib.sha256(dumps([key, req.get("max_tokens")])).hexdigest()
        self.hashes.append(h)
        if self.log is not None:
            self.log.write(h + "\n")
            self.log.flush()


def _head(status: str, ctype: str, length: int | None = None) -> bytes:
    h = f"HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\n"
    h += "Transfer-Encoding: chunked\r\n" if length is None else f"Content-Length: {length}\r\n"
    return (h + "Connection: keep-alive\r\n\r\n").encode()


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def _json(status: str, obj: object) -> bytes:
    body = json.dumps(obj).encode()
    return _head(status, "application/json", len(body)) + body


async def _stream(w: asyncio.StreamWriter, fake: Fake, req: dict, chat: bool) -> None:
    a = fake.a
    asked = int(req.get("max_tokens") or 16)
    n = max(1, asked // 2) if a.short else asked
    fake.waiting += 1
    fake.peak_waiting = max(fake.peak_waiting, fake.waiting)
    w.write(_head("200 OK", "text/event-stream"))
    async with fake.sem:
        fake.waiting -= 1
        fake.running += 1
        fake.peak_running = max(fake.peak_running, fake.running)
        try:
            loop = asyncio.get_running_loop()
            t0 = loop.time()
            obj = "chat.completion.chunk" if chat else "text_completion"
            for i in range(n):
                delay = t0 + a.ttft + i * a.itl - loop.time()
                if delay > 0:
                    await asyncio.sleep(delay)
                fin = ("stop" if a.short else "length") if i == n - 1 else None
                ch = {"index": 0, "finish_reason": fin}
                ch.update({"delta": {"content": f" t{i}"}} if chat else {"text": f" t{i}"})
                ev = {"id": "x", "object": obj, "model": MODEL, "choices": [ch]}
                w.write(_chunk(b"data: " + json.dumps(ev).encode() + b"\n\n"))
                if fake.tokens == 0:  # the engine's own clock for the cold start's end
                    print(f"FIRST_TOKEN {time.monotonic()!r}", flush=True)
                fake.tokens += 1
            usage = {"prompt_tokens": 10, "completion_tokens": n, "total_tokens": 10 + n}
            tail = {"id": "x", "object": obj, "model": MODEL, "choices": [], "usage": usage}
            w.write(_chunk(b"data: " + json.dumps(tail).encode() + b"\n\ndata: [DONE]\n\n")
                    + b"0\r\n\r\n")
            await w.drain()
            fake.short += n < asked
            fake.finished["stop" if a.short else "length"] += 1
        finally:
            fake.running -= 1


async def _route(w: asyncio.StreamWriter, fake: Fake, method: str, path: str,
                 body: bytes) -> None:
    if method == "GET" and path in ("/health", "/ping"):
        w.write(_head("200 OK", "text/plain", 0))
    elif method == "GET" and path == "/v1/models":
        w.write(_json("200 OK", {"object": "list", "data": [
            {"id": MODEL, "object": "model", "max_model_len": 4096}]}))
    elif method == "GET" and path == "/version":
        w.write(_json("200 OK", {"version": "0.32.0"}))
    elif method == "GET" and path == "/metrics":
        text = fake.metrics()
        w.write(_head("200 OK", "text/plain; version=0.0.4", len(text)) + text)
    elif method == "GET" and path == "/stats":
        w.write(_json("200 OK", {
            "requests": fake.requests, "tokens": fake.tokens, "short": fake.short,
            "peak_running": fake.peak_running, "peak_waiting": fake.peak_waiting,
            "hashes": fake.hashes}))
    elif method == "POST" and path in ("/v1/completions", "/v1/chat/completions"):
        req = json.loads(body)
        if fake.requests < 2:  # the first two arrivals bracket llmtop's first token
            print(f"POST {time.monotonic()!r}", flush=True)
        fake.requests += 1
        fake.record(req)
        await _stream(w, fake, req, path.endswith("chat/completions"))
    else:
        w.write(_json("404 Not Found", {"error": "not found"}))


async def _handle(r: asyncio.StreamReader, w: asyncio.StreamWriter, fake: Fake) -> None:
    try:
        while True:
            head = await r.readuntil(b"\r\n\r\n")
            lines = head.split(b"\r\n")
            method, path, _ = lines[0].decode("latin-1").split(" ", 2)
            length = 0
            for ln in lines[1:]:
                if ln[:15].lower() == b"content-length:":
                    length = int(ln[15:].strip())
            body = await r.readexactly(length) if length else b""
            await _route(w, fake, method, path.split("?")[0], body)
            await w.drain()
    except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
        return
    finally:
        w.close()


async def serve(a: argparse.Namespace) -> None:
    fake = Fake(a)
    server = await asyncio.start_server(lambda r, w: _handle(r, w, fake), "127.0.0.1", a.port)
    print(f"PORT {server.sockets[0].getsockname()[1]}", flush=True)
    print(f"LISTENING {time.monotonic()!r}", flush=True)  # CLOCK_MONOTONIC: system-wide
    async with server:
        await server.serve_forever()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--ttft", type=float, default=0.005)
    ap.add_argument("--itl", type=float, default=0.005)
    ap.add_argument("--max-batch", type=int, default=64)
    ap.add_argument("--short", action="store_true")
    ap.add_argument("--boot-delay", type=float, default=0.0)
    ap.add_argument("--fail-boot", action="store_true")
    ap.add_argument("--hash-log", default=None)
    a = ap.parse_args()
    print(f"fake engine booting (pid {__import__('os').getpid()})", flush=True)
    print(f"BOOTING {time.monotonic()!r}", flush=True)
    if a.fail_boot:
        print("fake engine: CUDA out of memory (simulated boot failure)", flush=True)
        sys.exit(3)
    time.sleep(a.boot_delay)
    try:
        asyncio.run(serve(a))
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
