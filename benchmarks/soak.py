"""A simulated day of a churning stack, fast-forwarded: is the monitor flat from hour to hour?

Runs ``Monitor`` ticks back to back on a simulated clock (``llmtop.clock`` patched in this
process only), with a scraper that answers from real captured engine output:

- 4 vLLM pods found by discovery (``Rediscovery`` with a scripted search): two of a
  StatefulSet (same pod name, a new address each time it is replaced) and two of a
  Deployment (a new pod name and address each time); each replaced every ``--pod-every``
  simulated seconds, staggered;
- a vLLM router whose worker list (4 backends) is re-listed as its backends are replaced every
  ``--backend-every`` s: the old addresses stop answering (connection refused);
- engines restart (counters back to zero) every ``--restart-every`` s, staggered;
- a llama-server with its ``/slots`` side poll every tick;
- request spans from each pod every tick, through a receiver stand-in (``drain``/``stats``).

Bodies: ``tests/fixtures/metrics/vllm-real-cpu-v0.32.0-under-load.txt`` (a real vLLM 0.32)
with its counters and histogram buckets growing with simulated time,
``tests/fixtures/routers/vllm-router-rr.txt`` (a real vllm-router 0.1.17) with its worker
URLs replaced, the real llama-server's metrics and ``/slots`` captures; spans are the demo
vLLM's ``llm_request`` bytes (``llmtop.demo.formats_spans``, the real vLLM's format).

Every simulated hour it prints: the monitor's targets, the snapshot's rows, RSS, the CPU of
one tick (mean over the hour, this thread), and the store's targets. Flat from the first hour
to the last is the goal; ``--hours 24 --interval 5`` is a day (17,280 ticks).

    .venv/bin/python benchmarks/soak.py [--hours 24] [--interval 5]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import re
import sys
import time
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from llmtop import clock  # noqa: E402
from llmtop.config import Config, Target  # noqa: E402
from llmtop.demo.formats_spans import encode_export, vllm_resource, vllm_span  # noqa: E402
from llmtop.model import Container, RawScrape, RawSpans  # noqa: E402

FIX = ROOT / "tests" / "fixtures"
EPOCH = 1_800_000_000.0


class SimClock:
    """The simulated time every llmtop module reads through ``llmtop.clock``."""

    def __init__(self) -> None:
        self.t = 0.0

    def install(self) -> None:
        clock.monotonic = lambda: 10_000.0 + self.t  # type: ignore[assignment]
        clock.time = lambda: EPOCH + self.t  # type: ignore[assignment]


def _fixture(path: Path) -> str:
    return "".join(ln for ln in path.read_text().splitlines(True) if not ln.startswith("# source")
                   and not ln.startswith("# note") and not ln.startswith("# workers"))


_GROWS = re.compile(r"^[^#\s{]+(_total|_count|_sum|_bucket)(\{[^}]*\})? ")


class GrowingBody:
    """A captured exposition text whose counters grow with simulated work (0 after a restart)."""

    def __init__(self, text: str) -> None:
        self.parts: list[tuple[str, float | None, str]] = []
        for line in text.splitlines():
            m = _GROWS.match(line)
            if m is None:
                self.parts.append((line, None, ""))
                continue
            head, _, value = line.rpartition(" ")
            self.parts.append((head + " ", float(value), ""))

    def render(self, work: float) -> str:
        out = []
        for head, value, _ in self.parts:
            out.append(head if value is None else f"{head}{value * work:.1f}")
        return "\n".join(out) + "\n"


class Pod:
    """One engine slot: its current address, pod name and restart time."""

    def __init__(self, slot: int, kind: str) -> None:
        self.slot, self.kind, self.gen = slot, kind, 0
        self.started = 0.0

    @property
    def ip(self) -> str:
        return f"127.{10 + self.slot}.{self.gen // 250}.{1 + self.gen % 250}"

    def target(self, port: int = 8000) -> Target:
        pod = (f"vllm-{self.slot}" if self.kind == "statefulset"
               else f"vllm-{self.gen:x}-{self.slot}")
        c = Container(runtime="containerd", id=f"{self.slot:02d}{self.gen:062x}", name="vllm",
                      pod=pod, namespace="serve")
        return Target(name=f"vllm@{self.ip}:{port}", base_url=f"http://{self.ip}:{port}",
                      engine="vllm", host=self.ip, port=port, container=c)


class Sim:
    """The churning stack: what answers where, moved on by ``advance``."""

    def __init__(self, args: argparse.Namespace, clk: SimClock) -> None:
        self.args, self.clk = args, clk
        self.pods = [Pod(i, "statefulset" if i < 2 else "deployment") for i in range(4)]
        self.backends = [Pod(4 + i, "backend") for i in range(4)]
        self.vllm = GrowingBody(_fixture(FIX / "metrics" / "vllm-real-cpu-v0.32.0-under-load.txt"))
        self.llama = GrowingBody(_fixture(
            FIX / "metrics" / "llamacpp-real-b0-sdist-11434.0.0-under-load.txt"))
        self.router_text = _fixture(FIX / "routers" / "vllm-router-rr.txt")
        self.slots = _fixture(FIX / "spans" / "llamacpp-real-11434.0.0-slots.txt").strip()
        self.rng = random.Random(7)
        self.replaced = 0

    def advance(self) -> None:
        t, a = self.clk.t, self.args
        for group, every in ((self.pods, a.pod_every), (self.backends, a.backend_every)):
            for i, p in enumerate(group):
                due = (t + i * every / len(group)) // every
                if due > p.gen:
                    p.gen, p.started = int(due), t
                    self.replaced += 1
        for i, p in enumerate([*self.pods, *self.backends]):
            if (t + i * 997) // a.restart_every > (t - a.interval + i * 997) // a.restart_every:
                p.started = t

    def live(self) -> dict[str, Pod]:
        return {f"http://{p.ip}:8000": p for p in [*self.pods, *self.backends]}

    def router_body(self) -> str:
        urls = [f"http://{p.ip}:8000" for p in self.backends]
        text = self.router_text
        captured = ("http://127.0.0.1:39201", "http://127.0.0.1:38637")
        for old, new in zip(captured, urls[:2], strict=True):
            text = text.replace(old, new)
        extra = "".join(
            f'vllm_router_worker_health{{worker="{u}"}} 1\n' for u in urls[2:])
        return text.replace("# TYPE vllm_router_cb_state gauge",
                            extra + "\n# TYPE vllm_router_cb_state gauge", 1)

    def spans(self) -> list[RawSpans]:
        groups = []
        now = EPOCH + self.clk.t
        for p in self.pods:
            spans = []
            for _ in range(3):
                r = SimpleNamespace(arrival=now - 2.0, admitted_t=now - 1.9,
                                    first_token_t=now - 1.7, finish_t=now - 0.1,
                                    last_token_t=now - 0.1, prompt_len=120, output=64,
                                    max_tokens=64)
                spans.append(vllm_span(r, self.rng))
            groups.append((vllm_resource(f"vllm@{p.ip}:8000", 100 + p.slot, p.ip), "vllm", spans))
        body = encode_export(groups)
        return [RawSpans(t_wall=now, t_mono=clock.monotonic(), body=body, peer="127.0.0.1")]


class Scraper:
    """The monitor's scraper, answering from ``Sim`` (no sockets)."""

    def __init__(self, sim: Sim) -> None:
        self.sim = sim

    def _raw(self, target: Target, url: str, body: str | None, **kw) -> RawScrape:
        ok = body is not None
        return RawScrape(target=target.name, url=url, t_wall=clock.time(), t_mono=clock.monotonic(),
                         status="ok" if ok else "down", http_status=200 if ok else None,
                         content_type="text/plain; version=0.0.4" if ok else None, body=body,
                         error=None if ok else "connection refused", elapsed_s=0.002, **kw)

    async def scrape(self, target: Target) -> RawScrape:
        url = target.base_url.rstrip("/") + "/metrics"
        base = target.base_url.rstrip("/")
        if target.engine == "vllm-router":
            return self._raw(target, url, self.sim.router_body(), engine_hint="vllm-router")
        if target.engine == "llamacpp":
            return self._raw(target, url, self.sim.llama.render(1 + self.sim.clk.t / 60),
                             engine_hint="llamacpp")
        pod = self.sim.live().get(base)
        work = None if pod is None else 1 + (self.sim.clk.t - pod.started) / 60
        body = None if work is None else self.sim.vllm.render(work)
        return self._raw(target, url, body, engine_hint="vllm" if pod else None)

    async def slots(self, target: Target) -> RawScrape:
        return self._raw(target, target.base_url.rstrip("/") + "/slots", self.sim.slots)

    async def workers(self, target: Target) -> RawScrape:
        return self._raw(target, target.base_url.rstrip("/") + "/workers", None)

    def health_url(self, target: Target, engine: str | None) -> str | None:
        return target.base_url.rstrip("/") + "/health"

    async def health(self, target: Target, url: str) -> RawScrape:
        up = target.base_url.rstrip("/") in self.sim.live()
        return self._raw(target, url, "" if up else None)

    async def identify(self, target: Target) -> dict:
        return {"host": target.host}

    def identity_pending(self, target_name: str) -> bool:
        return False

    def reidentify(self, target_name: str) -> None:
        return None

    async def aclose(self) -> None:
        return None


class Receiver:
    """The span receiver's face the monitor uses, fed by ``Sim`` every tick."""

    def __init__(self, sim: Sim) -> None:
        self.sim, self.bodies = sim, 0

    def drain(self) -> list[RawSpans]:
        self.bodies += 1
        return self.sim.spans()

    def stats(self) -> dict:
        return {"received": self.bodies, "pending_spans": 0, "last_error": None, "url": None}

    def close(self) -> None:
        return None


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096 / 1e6


async def run(args: argparse.Namespace) -> None:
    from llmtop.discovery import Rediscovery
    from llmtop.monitor import Monitor

    clk = SimClock()
    clk.install()
    sim = Sim(args, clk)
    fixed = [Target(name="router", base_url="http://127.0.0.2:9000", engine="vllm-router",
                    host="127.0.0.2", port=9000),
             Target(name="llama", base_url="http://127.0.0.3:8080", engine="llamacpp",
                    host="127.0.0.3", port=8080)]
    config = Config(targets=tuple(fixed), interval_s=args.interval, discover=False)

    async def find(_config: Config) -> list[Target]:
        return [p.target() for p in sim.pods]

    rediscovery = Rediscovery(config, find=find, clock=clock.monotonic)
    scraper, receiver = Scraper(sim), Receiver(sim)
    try:
        mon = Monitor(config, scraper=scraper, gpu_sampler=None, rediscover=rediscovery,
                      receiver=receiver)
    except TypeError:  # a tree where the receiver is attached after the monitor is built
        mon = Monitor(config, scraper=scraper, gpu_sampler=None, rediscover=rediscovery)
        mon.spans = receiver
    per_hour = int(3600 / args.interval)
    print(f"{args.hours} simulated hours, a tick every {args.interval:g} s "
          f"({per_hour} ticks an hour); pods replaced every {args.pod_every:g} s, router "
          f"backends every {args.backend_every:g} s, engines restart every "
          f"{args.restart_every:g} s")
    print(f"{'hour':>4} {'targets':>7} {'store':>5} {'rows':>4} {'RSS MB':>7} "
          f"{'ms CPU/tick':>11} {'replaced':>8} {'wall s':>6}")
    wall0 = time.monotonic()
    for hour in range(1, args.hours + 1):
        cpu = 0.0
        for _ in range(per_hour):
            clk.t += args.interval
            sim.advance()
            t0 = time.thread_time()
            snap = await mon.tick()
            cpu += time.thread_time() - t0
        store_n = len(getattr(mon.store, "_targets", {}))
        print(f"{hour:>4} {len(mon.targets):>7} {store_n:>5} {len(snap.engines):>4} "
              f"{_rss_mb():>7.1f} {cpu / per_hour * 1e3:>11.2f} {sim.replaced:>8} "
              f"{time.monotonic() - wall0:>6.0f}", flush=True)
    await mon.aclose()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hours", type=int, default=24)
    ap.add_argument("--interval", type=float, default=5.0, help="simulated s between ticks")
    ap.add_argument("--pod-every", type=float, default=300.0, metavar="S")
    ap.add_argument("--backend-every", type=float, default=420.0, metavar="S")
    ap.add_argument("--restart-every", type=float, default=5400.0, metavar="S")
    asyncio.run(run(ap.parse_args()))


if __name__ == "__main__":
    main()
