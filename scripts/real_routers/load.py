"""Closed-loop load through a router: C clients for S seconds (stdlib only).

Usage: python load.py URL [--clients C] [--seconds S] [--max-tokens N] [--model M]
Alternates /v1/completions and streaming /v1/chat/completions (``ignore_eos``, so each
request makes exactly ``max_tokens``); prints counts as JSON.
"""
from __future__ import annotations

import argparse
import json
import threading
import time
import urllib.error
import urllib.request

__all__ = ["run_load"]


def _one(url: str, model: str, max_tokens: int, i: int) -> int:
    if i % 2:
        path = "/v1/chat/completions"
        body = {"model": model, "max_tokens": max_tokens, "stream": True, "ignore_eos": True,
                "messages": [{"role": "user", "content": f"Say hello number {i}"}]}
    else:
        path = "/v1/completions"
        body = {"model": model, "max_tokens": max_tokens, "ignore_eos": True,
                "prompt": f"Count to ten, take {i}:"}
    req = urllib.request.Request(url + path, data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            r.read()
            return r.status
    except urllib.error.HTTPError as e:
        return e.code
    except OSError:
        return 0


def run_load(url: str, clients: int = 2, seconds: float = 5.0, max_tokens: int = 8,
             model: str = "tiny-llama") -> dict:
    """Run the closed loop; return {"ok": n, "failed": n, "codes": {...}}."""
    end = time.monotonic() + seconds
    codes: dict[str, int] = {}
    lock = threading.Lock()
    counter = [0]

    def client() -> None:
        while time.monotonic() < end:
            with lock:
                counter[0] += 1
                i = counter[0]
            code = _one(url, model, max_tokens, i)
            with lock:
                codes[str(code)] = codes.get(str(code), 0) + 1

    threads = [threading.Thread(target=client) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    ok = codes.get("200", 0)
    return {"ok": ok, "failed": sum(codes.values()) - ok, "codes": codes}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("url")
    p.add_argument("--clients", type=int, default=2)
    p.add_argument("--seconds", type=float, default=5.0)
    p.add_argument("--max-tokens", type=int, default=8)
    p.add_argument("--model", default="tiny-llama")
    a = p.parse_args()
    print(json.dumps(run_load(a.url.rstrip("/"), a.clients, a.seconds, a.max_tokens, a.model)))


if __name__ == "__main__":
    main()
