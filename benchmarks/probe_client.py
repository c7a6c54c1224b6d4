"""Which streaming client should the probe use? Measure, then check the issue's targets.

Starts its own mock OpenAI streaming servers (tests/loadgen/mock_server.py, a separate
process on 127.0.0.1), then:

1. Zero-delay server, 256 output tokens per request, 64 streams: each client variant runs in
   its own process (pinned to one core with taskset where available; the server on the other)
   and reports output tok/s and tok/s per client core (tokens / client CPU seconds).
2. The probe itself (``llmtop.loadgen.api.start_probe``, separate process) against
   - the zero-delay server at c=64 (target >= 60,000 output tok/s on one client core);
   - a TTFT 200 ms / ITL 20 ms server at c=256 (target: mean TTFT error <= 30 ms, achieved
     concurrency >= 95 %);
   - the same server at c=1 (target: client CPU <= 0.05 core).

Run: ``.venv/bin/python benchmarks/probe_client.py [--quick]``. Timings are noisy on a shared
2-core machine; the script prints numbers and never fails on them.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "loadgen"))

from mock_server import start_mock  # noqa: E402

VARIANTS = ("llmtop-raw", "llmtop-aiohttp", "llmtop-aiohttp-json-asyncio",
            "aiohttp-lines-json", "httpx-lines-json", "httpx-raw-orjson")
PIN = bool(shutil.which("taskset")) and (os.cpu_count() or 1) >= 2


def _split_events(buf: bytes, chunk: bytes, loads, on_event) -> bytes:
    chunk = buf + chunk if buf else chunk
    evs = chunk.split(b"\n\n")
    rest = evs.pop()
    for ev in evs:
        if ev.startswith(b"data:"):
            d = ev[5:].lstrip()
            if d != b"[DONE]":
                on_event(loads(d))
    return rest


async def _variant(name: str, url: str, conc: int, seconds: float, ntok: int) -> dict:
    body = json.dumps({"model": "mock-model", "prompt": "hello world", "max_tokens": ntok,
                       "stream": True, "stream_options": {"include_usage": True},
                       "ignore_eos": True}).encode()
    ep = url + "/v1/completions"
    headers = {"Content-Type": "application/json"}
    close = None
    if name.startswith("llmtop"):
        from llmtop.loadgen import client as lc
        from llmtop.loadgen.rawhttp import RawStreamClient

        if name == "llmtop-aiohttp-json-asyncio":
            lc._loads = json.loads  # what the probe does when orjson is missing
        c = RawStreamClient(ep) if name == "llmtop-raw" else lc.StreamClient(ep)
        close = c.aclose

        async def one() -> int:
            r = await c.request(body)
            return r.tokens if r.ok else 0
    elif name == "aiohttp-lines-json":
        import aiohttp

        s = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0))
        close = s.close

        async def one() -> int:
            n = 0
            async with s.post(ep, data=body, headers=headers) as resp:
                async for line in resp.content:
                    if line.startswith(b"data:") and not line.startswith(b"data: [DONE]"):
                        o = json.loads(line[5:])
                        if o.get("choices") and o["choices"][0].get("text"):
                            n += 1
            return n
    else:
        import httpx

        h = httpx.AsyncClient(limits=httpx.Limits(max_connections=None,
                                                  max_keepalive_connections=None),
                              timeout=60)
        close = h.aclose
        if name == "httpx-lines-json":
            async def one() -> int:
                n = 0
                async with h.stream("POST", ep, content=body, headers=headers) as resp:
                    async for line in resp.aiter_lines():
                        if line.startswith("data:") and not line.startswith("data: [DONE]"):
                            o = json.loads(line[5:])
                            if o.get("choices") and o["choices"][0].get("text"):
                                n += 1
                return n
        else:
            import orjson

            async def one() -> int:
                cnt = [0]

                def on(o: dict) -> None:
                    if o.get("choices") and o["choices"][0].get("text"):
                        cnt[0] += 1

                buf = b""
                async with h.stream("POST", ep, content=body, headers=headers) as resp:
                    async for chunk in resp.aiter_raw():
                        buf = _split_events(buf, chunk, orjson.loads, on)
                return cnt[0]

    tokens = 0
    end = time.perf_counter() + seconds

    async def worker() -> None:
        nonlocal tokens
        while time.perf_counter() < end:
            n = await one()  # not `tokens += await one()`: that reads tokens before awaiting
            tokens += n

    await one()  # connect once before measuring
    cpu0, t0 = time.process_time(), time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(conc)))
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - t0
    await close()
    return {"variant": name, "tok_s": tokens / wall, "client_cores": cpu / wall,
            "tok_per_core_s": tokens / cpu if cpu else None}


def _child(args: argparse.Namespace) -> None:
    if args.variant in ("llmtop-raw", "llmtop-aiohttp"):
        import uvloop

        loop = uvloop.new_event_loop()
    else:
        loop = asyncio.new_event_loop()
    res = loop.run_until_complete(_variant(args.variant, args.url, args.conc, args.seconds,
                                           args.tokens))
    print(json.dumps(res))


def run_variant(name: str, url: str, conc: int, seconds: float, ntok: int) -> dict:
    cmd = [sys.executable, __file__, "--child", name, "--url", url, "--conc", str(conc),
           "--seconds", str(seconds), "--tokens", str(ntok)]
    if PIN:
        cmd = ["taskset", "-c", "0", *cmd]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds + 120)
    if out.returncode != 0:
        return {"variant": name, "error": out.stderr.strip().splitlines()[-1:]}
    return json.loads(out.stdout.strip().splitlines()[-1])


def shaped_traffic() -> dict:
    """Production-shaped load for 2d: prompt lengths from a real vLLM's histogram
    (tests/fixtures/metrics), outputs of 200-300 tokens (comparable with 2a), half of each
    prompt from a shared document."""
    from pathlib import Path

    from llmtop.loadgen.shape import LengthDist, window_dist
    from llmtop.parse.registry import normalize

    fix = Path(__file__).resolve().parents[1] / "tests/fixtures/metrics"
    sample = normalize("vllm", (fix / "vllm-real-cpu-v0.32.0-under-load.txt").read_text())
    prompt, _ = window_dist(sample.models[0].hists["prompt_len"])
    out = LengthDist((200.0, 300.0, float("inf")), (0.0, 1.0, 0.0), 250.0)
    return {"source": "fixture", "engine": "vllm", "window": "lifetime (fixture)",
            "prompt": prompt.describe(), "output": out.describe(), "prefix_hit_rate": 0.5}


def payload_costs(n: int = 20_000) -> dict[str, float]:
    """Per-request cost of ``PromptFactory.next_payload`` in each load mode (µs)."""
    import time

    from llmtop.loadgen.dataset import Record
    from llmtop.loadgen.prompts import Calibration, PromptFactory
    from llmtop.loadgen.traffic import dists

    tr = shaped_traffic()
    p, o = dists(tr)
    kw = {"model": "m", "endpoint": "completions", "calibration": Calibration("assumed"),
          "prompt_tokens": 320, "output_tokens": 256}
    modes = {
        "fixed (--prompt-tokens 320)": PromptFactory(**kw),
        "--lengths-from + prefix": PromptFactory(**kw, prompt_dist=p, output_dist=o,
                                                 context=4096, prefix_share=0.5),
        "--dataset": PromptFactory(**kw, dataset=[Record(prompt="word " * 300, max_tokens=256)
                                                  for _ in range(100)]),
    }
    out = {}
    for name, f in modes.items():
        t = time.perf_counter()
        for _ in range(n):
            f.next_payload()
        out[name] = (time.perf_counter() - t) / n * 1e6
    return out


def run_probe(url: str, conc: int, duration: float, ntok: int, warmup: float,
              client: str = "raw", traffic: dict | None = None) -> dict:
    from llmtop.loadgen.api import start_probe
    from llmtop.loadgen.options import ProbeOptions

    h = start_probe(ProbeOptions(url=url, concurrency=conc, duration=duration, warmup=warmup,
                                 output_tokens=ntok, prompt_tokens=32, client=client,
                                 traffic=traffic))
    if PIN:  # the probe's worker on core 0, the mock on core 1: "one client core"
        os.sched_setaffinity(h.pid, {0})
    h.wait(duration + 60)
    rep = h.result()
    if rep is None:
        return {"error": h.errors}
    s = rep["steps"][0]
    return {"concurrency": conc, "achieved_concurrency": s["achieved_concurrency"],
            "output_tokens_per_s": s["output_tokens_per_s"], "client_cpu": s["client_cpu"],
            "tok_per_core_s": (s["output_tokens_per_s"] / s["client_cpu"]
                               if s["client_cpu"] else None),
            "ttft_mean_s": s["ttft_s"]["mean"], "ttft_p50_s": s["ttft_s"]["p50"],
            "itl_p50_s": s["itl_s"]["p50"], "loop_lag_ms": s["loop_lag_ms"],
            "client_bound": s["client_bound"], "errors": s["errors"],
            "requests": s["requests"]}


def _ttft_line(url: str, r: dict) -> None:
    if r.get("ttft_mean_s") is None:
        return
    import httpx

    late = httpx.get(url + "/stats").json()["first_late_mean_s"] or 0.0  # cumulative mean
    err = r["ttft_mean_s"] - 0.2
    print(f"mean TTFT error {1000 * err:+.1f} ms (the mock itself wrote first tokens "
          f"{1000 * late:.1f} ms late on average so far); achieved "
          f"{r['achieved_concurrency']:.1f}/256 = {r['achieved_concurrency'] / 256:.1%}; "
          f"loop lag {r['loop_lag_ms']:.1f} ms; client {r['client_cpu']:.2f} cores")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--child", default=None)
    ap.add_argument("--url", default="")
    ap.add_argument("--conc", type=int, default=64)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--tokens", type=int, default=256)
    ap.add_argument("--quick", action="store_true", help="shorter runs")
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--only", default="1,2a,2d,3,2b,2c", help="sections to run")
    args = ap.parse_args()
    if args.child:
        args.variant = args.child
        _child(args)
        return
    secs = 3.0 if args.quick else 6.0
    print(f"# pinned: {PIN} (client core 0, mock core 1); cpus={os.cpu_count()}")
    only = set(args.only.split(","))
    with start_mock(cpu=1 if PIN else None) as m:
        if "1" in only:
            print("## 1. client variants, zero-delay mock, c=64, 256 tokens/request")
        for v in args.variants.split(",") if "1" in only else ():
            r = run_variant(v, m.url, 64, secs, 256)
            if "error" in r:
                print(f"{v:22s} error {r['error']}")
                continue
            print(f"{v:22s} {r['tok_s']:>9,.0f} tok/s  client {r['client_cores']:.2f} cores  "
                  f"{r['tok_per_core_s']:>9,.0f} tok/s per client core")
        if "2a" in only:
            print("## 2a. the probe (worker process), zero-delay mock, c=64 (target >= 60,000 "
                  "tok/s per client core)")
            r = run_probe(m.url, 64, secs + 1, 256, 1.0)
            print(json.dumps(r))
        if "2d" in only:
            print("## 2d. the probe with production-shaped load (--lengths-from histogram, "
                  "prefix share 0.5), zero-delay mock, c=64, 200-300 output tokens")
            r = run_probe(m.url, 64, secs + 1, 256, 1.0, traffic=shaped_traffic())
            print(json.dumps(r))
    if "3" in only:
        print("## 3. request building in the worker: microseconds per payload (fixed lengths, "
              "lengths drawn from a histogram + prefix share, a dataset)")
        for name, us in payload_costs().items():
            print(f"{name:28s} {us:6.1f} us per request")
    if not only & {"2b", "2c"}:
        return
    print("## 2b. the probe, TTFT 200 ms / ITL 20 ms mock, c=256 (targets: mean TTFT error "
          "<= 30 ms, achieved >= 95 %)")
    with start_mock(ttft=0.2, itl=0.02, cpu=1 if PIN else None) as m:
        for client in ("raw", "aiohttp") if "2b" in only else ():
            r = run_probe(m.url, 256, secs + 4, 64, 2.0, client)
            print(f"client={client}", json.dumps(r))
            _ttft_line(m.url, r)
        print("## 2c. idle cost: the probe at c=1 (target <= 0.05 core)")
        r = run_probe(m.url, 1, secs + 1, 64, 0.5)
        print(json.dumps(r))


if __name__ == "__main__":
    main()
