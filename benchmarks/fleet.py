"""Fleet mode against a real Prometheus holding 500 instances: queries, samples, wall, CPU.

    .venv/bin/python benchmarks/fleet.py [--instances 500] [--seconds 60] [--refresh 10]

Builds the fleet on one machine:

- two demo engines (vLLM and SGLang, ``llmtop.demo``) give live /metrics text;
- a synthetic exporter (a child process, aiohttp) serves N instances' copies of that text at
  ``/m/<i>``: 60 % vLLM, 40 % SGLang, four models, counters scaled per instance, two
  instances answering 503 (``up == 0``);
- Debian's Prometheus (``scripts/fleet_servers.sh``) scrapes N targets every 10 s, each with
  its own ``instance`` label (``10.0.x.y:8000``) and ``up`` series, as in a real fleet.

Then it measures llmtop's fleet mode:

1. ``llmtop --prometheus URL --once --json`` as a subprocess, through a recording proxy:
   wall time per call (with Python's start-up), the queries sent, rows returned; each
   recorded query is replayed with ``stats=all`` for the samples it touches and the
   server's own evaluation time;
2. in-process ``FleetMonitor.tick()`` every ``--refresh`` seconds for ``--seconds``:
   wall and CPU per refresh and llmtop's CPU as a share of one core.

Goal (issue 17): under 1 s wall per refresh at 500 instances, under 2 % of a core at 10 s.
Prints numbers; asserts nothing. The machine's other load shows in the wall times.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx

ROOT = os.environ.get("LLMTOP_BENCH_ROOT") or os.path.dirname(
    os.path.dirname(os.path.abspath(__file__)))
"""The llmtop tree measured (``--compare`` runs another tree's code through this file)."""
sys.path.insert(0, ROOT)

MODELS = ("meta-llama/Llama-3.1-8B-Instruct", "Qwen/Qwen2.5-7B-Instruct",
          "mistralai/Mistral-7B-Instruct-v0.3", "meta-llama/Llama-3.1-70B-Instruct")
_SCALED = ("_total", "_bucket", "_sum", "_count")


def instance_name(i: int) -> str:
    return f"10.0.{i // 250}.{i % 250 + 1}:8000"


def kind_of(i: int) -> str:
    return "vllm" if i % 5 < 3 else "sglang"


# -- the synthetic exporter (child process) ------------------------------------------------

class _Template:
    """One engine's text, compiled: per model, the sample heads; values and which scale."""

    def __init__(self, text: str):
        self.comments: list[str] = []
        heads: list[str] = []
        self.values: list[float] = []
        self.scaled: list[bool] = []
        for line in text.splitlines():
            if not line.strip():
                continue
            if line.startswith("#"):
                self.comments.append(line)
                continue
            head, _, val = line.rpartition(" ")
            name = head.split("{", 1)[0]
            heads.append(head)
            self.values.append(float(val))
            self.scaled.append(name.endswith(_SCALED))
        self.heads = {m: [re.sub(r'model_name="[^"]*"', f'model_name="{m}"', h) for h in heads]
                      for m in MODELS}

    def render(self, model: str, factor: float) -> str:
        out = list(self.comments)
        for h, v, s in zip(self.heads[model], self.values, self.scaled, strict=True):
            out.append(f"{h} {v * factor!r}" if s else f"{h} {v!r}")
        return "\n".join(out) + "\n"


def serve_synthetic(n: int, sources: dict[str, str], down: set[int]) -> None:
    """Serve ``/m/<i>`` for i < n; print the port; refresh templates every 2 s."""
    from aiohttp import web

    templates: dict[str, _Template] = {}

    async def refresh() -> None:
        async with httpx.AsyncClient() as client:
            while True:
                for kind, url in sources.items():
                    try:
                        templates[kind] = _Template((await client.get(url, timeout=5)).text)
                    except httpx.HTTPError:
                        pass
                await asyncio.sleep(2.0)

    async def metrics(request: web.Request) -> web.Response:
        i = int(request.match_info["i"])
        t = templates.get(kind_of(i))
        if i >= n or i in down or t is None:
            return web.Response(status=503, text="unavailable\n")
        body = t.render(MODELS[i % len(MODELS)], 0.5 + (i % 97) / 97)
        return web.Response(text=body, content_type="text/plain")

    async def main() -> None:
        app = web.Application()
        app.router.add_get("/m/{i}", metrics)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        asyncio.get_running_loop().create_task(refresh())
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        print(port, flush=True)
        await asyncio.Event().wait()  # until terminated

    asyncio.run(main())


# -- the recording proxy -------------------------------------------------------------------

class RecordingProxy:
    """Loopback HTTP proxy in front of Prometheus that keeps every query it forwards."""

    def __init__(self, upstream: str):
        self.log: list[dict[str, str]] = []
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def _forward(self, body: bytes) -> None:
                url = upstream + self.path
                params = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(self.path).query))
                if body:
                    params.update(urllib.parse.parse_qsl(body.decode()))
                proxy.log.append({"path": urllib.parse.urlsplit(self.path).path, **params})
                hdrs = {k: v for k, v in self.headers.items()
                        if k.lower() in ("content-type", "accept")}
                r = httpx.request(self.command, url, content=body, headers=hdrs, timeout=60)
                self.send_response(r.status_code)
                self.send_header("Content-Type", r.headers.get("content-type", "text/plain"))
                self.send_header("Content-Length", str(len(r.content)))
                self.end_headers()
                try:
                    self.wfile.write(r.content)
                except OSError:  # llmtop gave up (its timeout) and hung up
                    pass

            def do_GET(self) -> None:
                self._forward(b"")

            def do_POST(self) -> None:
                self._forward(self.rfile.read(int(self.headers.get("Content-Length") or 0)))

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.server.shutdown()


# -- measuring -----------------------------------------------------------------------------

def scrape_config(n: int, port: int, interval_s: float) -> dict[str, Any]:
    jobs: dict[str, list[dict[str, Any]]] = {"vllm": [], "sglang": []}
    for i in range(n):
        jobs[kind_of(i)].append({"targets": [f"127.0.0.1:{port}"],
                                 "labels": {"instance": instance_name(i),
                                            "__metrics_path__": f"/m/{i}"}})
    s = f"{interval_s:g}s"
    return {"global": {"scrape_interval": s, "scrape_timeout": s},
            "scrape_configs": [{"job_name": j, "static_configs": sc} for j, sc in jobs.items()]}


def replay_stats(url: str, queries: list[dict[str, str]], *,
                 show: bool = False) -> tuple[int, float]:
    """Sum of ``totalQueryableSamples`` and of the server's ``evalTotalTime`` (s)."""
    samples, server_s = 0, 0.0
    for q in queries:
        if not q["path"].endswith(("/api/v1/query", "/api/v1/query_range")):
            continue
        params = {k: v for k, v in q.items() if k != "path"}
        params["stats"] = "all"
        body = httpx.post(url + q["path"], data=params, timeout=60).json()
        st = (body.get("data") or {}).get("stats") or {}
        n = int((st.get("samples") or {}).get("totalQueryableSamples") or 0)
        ev = float((st.get("timings") or {}).get("evalTotalTime") or 0.0)
        samples += n
        server_s += ev
        if show:
            expr = " ".join(params.get("query", "").split())
            print(f"    {n:>9,} samples {ev * 1000:>6.0f} ms  {expr[:150]}"
                  + (" ..." if len(expr) > 150 else ""))
    return samples, server_s


def once_runs(proxy: RecordingProxy, prom_url: str, runs: int, extra: list[str]) -> None:
    print("\n== llmtop --prometheus URL --once --json (subprocess, via a recording proxy)")
    env = dict(os.environ, PYTHONPATH=ROOT)
    for k in range(runs):
        proxy.log.clear()
        t0 = time.perf_counter()
        cp = subprocess.run([sys.executable, "-m", "llmtop", "--prometheus", proxy.url,
                             "--once", "--json", *extra], capture_output=True, text=True, env=env,
                            timeout=120, stdin=subprocess.DEVNULL)
        wall = time.perf_counter() - t0
        try:
            doc = json.loads(cp.stdout)
        except ValueError:
            print(f"  run {k + 1}: exit {cp.returncode}, no JSON: {cp.stderr.strip()[-300:]}")
            continue
        queries = [q for q in proxy.log if q["path"].endswith("/query")]
        samples, server_s = replay_stats(prom_url, proxy.log, show=k == runs - 1)
        err = (doc.get("error") or {}).get("message")
        print(f"  run {k + 1}: {wall:.2f} s wall (Python start-up included), exit "
              f"{cp.returncode}, {len(doc.get('engines') or [])} rows, "
              f"{len(doc.get('totals') or [])} model totals; {len(proxy.log)} HTTP requests "
              f"({len(queries)} instant queries; the refresh itself: "
              f"{doc.get('queries', '?')}); samples touched {samples:,}; server eval "
              f"{server_s * 1000:.0f} ms" + (f"; error: {err}" if err else ""))
    paths: dict[str, int] = {}
    for q in proxy.log:
        paths[q["path"]] = paths.get(q["path"], 0) + 1
    print(f"  last run's requests by endpoint: {paths}")


async def profile_tick(mon: Any) -> bool:
    """cProfile of one refresh (``--profile``): where llmtop's CPU goes (by own CPU time)."""
    import cProfile
    import pstats

    prof = cProfile.Profile(time.process_time)
    prof.enable()
    snap = await mon.tick()
    prof.disable()
    if not snap.engines:
        return False
    print(f"  profile of one refresh ({len(snap.engines)} rows; top 25 by cumulative CPU):")
    pstats.Stats(prof).sort_stats("cumulative").print_stats(25)
    return True


async def steady(prom_url: str, refresh_s: float, seconds: float, extra: list[str],
                 profile: bool = False) -> None:
    print(f"\n== FleetMonitor.tick() in-process every {refresh_s:g} s for {seconds:g} s")
    try:
        from llmtop.cli.main import build_parser
        from llmtop.fleet.monitor import FleetMonitor
        from llmtop.settings import build_config
    except ImportError as exc:
        print(f"  skipped: fleet mode not importable ({exc})")
        return
    config = build_config(build_parser().parse_args(["--prometheus", prom_url, *extra]))
    try:  # as the TUI runs it (detail-only histograms for the drilled-in row only)
        mon = FleetMonitor(config, lean=True)
    except TypeError:  # a --compare tree from before FleetMonitor(lean=)
        mon = FleetMonitor(config)
    rows: list[tuple[float, float, int, int, str]] = []
    skipped = 0
    try:
        last = (await mon.tick()).time  # connect: backend, scrape interval, names (not counted)
        if hasattr(mon, "warmed"):  # the baseline warm-up from history, once per start
            c_warm, w_warm = time.process_time(), time.monotonic()
            await mon.warmed()
            print(f"  baseline warm-up from history (once per start, not counted below): "
                  f"{time.process_time() - c_warm:.2f} s CPU, "
                  f"{time.monotonic() - w_warm:.2f} s wall")
        c0, w0 = time.process_time(), time.monotonic()
        while time.monotonic() - w0 < seconds:
            t_start = time.monotonic()
            c_start = time.process_time()
            snap = await mon.tick()
            if snap.time == last:  # same aligned evaluation time: nothing re-queried
                skipped += 1
            else:
                err = f"{mon.error.kind}: {mon.error.message}" if mon.error else ""
                rows.append((time.monotonic() - t_start, time.process_time() - c_start,
                             len(snap.engines), mon.queries_last, err))
            last = snap.time
            await asyncio.sleep(max(0.0, refresh_s - (time.monotonic() - t_start)))
        cpu, wall = time.process_time() - c0, time.monotonic() - w0
        for _ in range(3 if profile else 0):  # profile a refresh that got its answers
            await asyncio.sleep(max(0.0, refresh_s))
            if await profile_tick(mon):
                break
    finally:
        await mon.aclose()
    if skipped:
        print(f"  {skipped} tick(s) sent nothing (the monitor's refresh is not due yet, or the "
              "aligned evaluation time is unchanged)")
    for k, (w, c, n, q, err) in enumerate(rows):
        print(f"  refresh {k + 1}: {w * 1000:.0f} ms wall, {c * 1000:.0f} ms CPU, {n} rows, "
              f"{q} queries" + (f"; error {err}" if err else ""))
    if rows:
        ws = sorted(r[0] for r in rows)
        print(f"  wall per refresh: median {ws[len(ws) // 2] * 1000:.0f} ms, max "
              f"{ws[-1] * 1000:.0f} ms; CPU per refresh: mean "
              f"{sum(r[1] for r in rows) / len(rows) * 1000:.0f} ms")
        per = sum(r[1] for r in rows) / len(rows)
        print(f"  waiting on the server (wall - CPU per refresh): median "
              f"{sorted(r[0] - r[1] for r in rows)[len(rows) // 2] * 1000:.0f} ms")
        print(f"  llmtop CPU: {100 * per / refresh_s:.2f} % of one core if every "
              f"{refresh_s:g} s brings a refresh (CPU per refresh / {refresh_s:g} s); measured "
              f"over {wall:.0f} s: {cpu:.2f} s = {100 * cpu / wall:.2f} % ({len(rows)} refreshes, "
              f"{skipped} ticks without one)")


def compare(prom_url: str, args: argparse.Namespace) -> None:
    """``--compare DIR``: this tree's and DIR's steady refreshes, alternating, each in its own
    process (same Prometheus, same moment's load), ``--rounds`` times."""
    trees = {"this tree": ROOT, "compare": os.path.abspath(args.compare)}
    for k in range(args.rounds):
        for label, root in trees.items():
            env = dict(os.environ, LLMTOP_BENCH_ROOT=root, PYTHONPATH=root)
            cp = subprocess.run([sys.executable, os.path.abspath(__file__), "--steady-url",
                                 prom_url, "--seconds", f"{args.seconds:g}", "--refresh",
                                 f"{args.refresh:g}", "--timeout", f"{args.timeout:g}"],
                                capture_output=True, text=True, env=env, timeout=600,
                                stdin=subprocess.DEVNULL)
            summary = [ln for ln in cp.stdout.splitlines()
                       if "per refresh" in ln or "% of one core" in ln]
            print(f"\n-- round {k + 1}, {label} ({root}), load average "
                  f"{os.getloadavg()[0]:.1f}")
            print("\n".join(summary) or cp.stdout[-500:] + cp.stderr[-500:])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--instances", type=int, default=500)
    ap.add_argument("--scrape-interval", type=float, default=10.0)
    ap.add_argument("--refresh", type=float, default=10.0)
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--once-runs", type=int, default=3)
    ap.add_argument("--profile", action="store_true", help="cProfile one refresh at the end")
    ap.add_argument("--timeout", type=float, default=30.0,
                    help="llmtop's per-query timeout (its default is 10 s; a loaded 2-core box "
                    "can need more for 500 instances)")
    ap.add_argument("--compare", metavar="DIR", default=None,
                    help="another llmtop tree (e.g. a git worktree of the previous commit): "
                    "steady refreshes of both, interleaved, against the same Prometheus")
    ap.add_argument("--rounds", type=int, default=3, help="--compare: rounds of each tree")
    ap.add_argument("--hold", type=float, default=0.0, metavar="S",
                    help="keep the fleet up S seconds after the runs (its URL is printed), "
                    "for trying queries by hand")
    ap.add_argument("--steady-url", default=None, help=argparse.SUPPRESS)  # child mode
    ap.add_argument("--synthetic", default=None, help=argparse.SUPPRESS)  # child mode
    args = ap.parse_args()
    if args.steady_url:
        asyncio.run(steady(args.steady_url, args.refresh, args.seconds,
                           ["--timeout", f"{args.timeout:g}"]))
        return 0
    if args.synthetic:
        spec = json.loads(args.synthetic)
        serve_synthetic(spec["n"], spec["sources"], set(spec["down"]))
        return 0

    from llmtop.demo.fleet import INSTALL_HINT, find_binary, start_prometheus, wait_scraped
    from llmtop.demo.launcher import start_demo

    if not find_binary("prometheus"):
        print(f"benchmarks/fleet.py: no prometheus binary: {INSTALL_HINT}", file=sys.stderr)
        return 2
    n = args.instances
    demo = start_demo(engines=["vllm", "sglang"])
    sources = {e["engine"]: e["metrics_url"] for e in demo.info["engines"]}
    spec = {"n": n, "sources": sources, "down": [n // 3, 2 * n // 3]}
    child = subprocess.Popen([sys.executable, __file__, "--synthetic", json.dumps(spec)],
                             stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
    workdir = tempfile.mkdtemp(prefix="llmtop-bench-fleet-")
    prom = proxy = None
    try:
        port = int((child.stdout.readline() if child.stdout else "").strip())
        time.sleep(2.5)  # the first templates
        t0 = time.monotonic()
        prom = start_prometheus(scrape_config(n, port, args.scrape_interval), workdir)
        wanted = [instance_name(i) for i in range(n)]
        wait_scraped(prom.url, wanted, min_samples=3, timeout_s=20 * args.scrape_interval + 60)
        tsdb = httpx.get(prom.url + "/api/v1/status/tsdb", timeout=60).json()
        total = f'{tsdb["data"]["headStats"]["numSeries"]:,}'
        print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs (other work on "
              "the machine slows the server's answers, not llmtop's CPU)")
        print(f"Prometheus {prom.url}: {n} instances ({n - 2} up, 2 down), {total} series, "
              f"3 scrapes each after {time.monotonic() - t0:.0f} s; scrape every "
              f"{args.scrape_interval:g} s")
        proxy = RecordingProxy(prom.url)
        extra = ["--timeout", f"{args.timeout:g}"]
        once_runs(proxy, prom.url, args.once_runs, extra)
        if args.compare:
            compare(prom.url, args)
        else:
            asyncio.run(steady(prom.url, args.refresh, args.seconds, extra, args.profile))
        if args.hold > 0:
            print(f"\nholding {prom.url} for {args.hold:g} s", flush=True)
            time.sleep(args.hold)
    finally:
        if proxy:
            proxy.stop()
        if prom:
            prom.stop()
        child.terminate()
        child.wait(timeout=10)
        demo.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
