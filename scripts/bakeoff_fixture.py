"""Make ``tests/fixtures/bakeoff/from-two-probes.json``: a bake-off report built from reality.

    .venv/bin/python scripts/bakeoff_fixture.py [--out FILE] [--engines vllm,triton]

Starts the demo engines (``llmtop demo serve --no-background``, loopback only), runs one real
``llmtop probe URL --sweep --max-concurrency 8 --step-duration 3 --json X`` per engine, one
after the other (the SLA boundary for ``--ttft-slo`` is found afterwards by
``knee.sla_boundary``), while it samples each engine's own ``/metrics`` (4 Hz, parsed by
``llmtop.parse``) for the server peaks, then wraps the probe JSONs into the bake-off contract
(issue 23): ``kind``, ``endpoints`` (each probe report plus name, url, engine, version, error,
cold_start_s, server, cost_per_mtok_usd, short_outputs), ``traffic`` and ``warnings``.

Made by hand here, not by the bake-off command itself (another branch builds that): the cost
uses ``--gpu-hour-price`` x 1 GPU, the GPU peaks are null (no NVML on the demo), cold start is
null (llmtop did not start the engines). The demo engines' process is stopped on every exit.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import httpx

from llmtop.loadgen import knee
from llmtop.loadgen.report import capacity
from llmtop.parse.registry import normalize

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "fixtures" / "bakeoff" / "from-two-probes.json"


def start_demo(engines: str) -> tuple[subprocess.Popen[str], dict[str, str]]:
    """``llmtop demo serve``; returns the process and {engine: base URL}."""
    proc = subprocess.Popen([sys.executable, "-m", "llmtop", "demo", "serve", "--engines",
                             engines, "--no-background"], stdout=subprocess.PIPE, text=True,
                            cwd=ROOT)
    urls: dict[str, str] = {}
    assert proc.stdout is not None
    for _ in range(20):  # the banner: a line per engine, then "Ctrl-C to stop."
        line = proc.stdout.readline()
        if not line or line.startswith("Ctrl-C"):
            break
        parts = line.split()
        if "@" in parts[0] and "OpenAI" in parts:
            urls[parts[0].split("@")[0]] = parts[parts.index("OpenAI") + 1].removesuffix("/v1")
    return proc, urls


class Sampler(threading.Thread):
    """Polls an engine's /metrics: peaks of running, waiting, KV use; preemptions delta."""

    def __init__(self, engine: str, base: str) -> None:
        super().__init__(daemon=True)
        self.engine, self.base = engine, base
        self.stop_ev = threading.Event()
        self.peaks: dict[str, float] = {}
        self.preempt: list[float] = []
        self.kv_capacity: float | None = None

    def run(self) -> None:
        with httpx.Client(timeout=2.0) as c:
            while not self.stop_ev.is_set():
                try:
                    body = c.get(f"{self.base}/metrics").text
                    m = normalize(self.engine, body).models[0]
                except Exception:  # a missed scrape only lowers the sample count
                    self.stop_ev.wait(0.25)
                    continue
                for key in ("running", "waiting", "kv_usage"):
                    if (v := m.gauges.get(key)) is not None:
                        self.peaks[key] = max(self.peaks.get(key, v), v)
                self.kv_capacity = m.gauges.get("kv_capacity_tokens", self.kv_capacity)
                if (p := m.counters.get("preemptions")) is not None:
                    self.preempt.append(p)
                self.stop_ev.wait(0.25)

    def server(self) -> dict[str, Any]:
        return {"running_peak": self.peaks.get("running"),
                "waiting_peak": self.peaks.get("waiting"),
                "kv_peak": self.peaks.get("kv_usage"),
                "preemptions": (self.preempt[-1] - self.preempt[0]) if self.preempt else None,
                "kv_capacity_tokens": self.kv_capacity,
                "gpu_mem_peak_bytes": None, "gpu_util_peak": None}


def probe(base: str, out: Path, slo: float) -> dict[str, Any]:
    subprocess.run([sys.executable, "-m", "llmtop", "probe", base, "--sweep",
                    "--max-concurrency", "8", "--step-duration", "3", "--json", str(out)],
                   check=True, cwd=ROOT, timeout=300, stdout=subprocess.DEVNULL)
    rep = json.loads(out.read_text())
    # A single probe stops its sweep at the SLO; a bake-off runs every level. So the sweep
    # runs without one and the boundary is found afterwards by the probe's own functions.
    slos = {"ttft": slo, "itl": None, "tpot": None}
    rep["options"]["ttft_slo"] = slo
    rep["sla_boundary"] = knee.sla_boundary(rep["steps"], slos,
                                            rep["options"]["max_error_rate"])
    rep["capacity"] = capacity(rep)
    return rep


def cost(step: dict[str, Any] | None, price: float) -> float | None:
    tps = (step or {}).get("output_tokens_per_s")
    return price / (tps * 3600) * 1e6 if tps else None


def wrap(name: str, engine: str, base: str, rep: dict[str, Any], server: dict[str, Any],
         price: float, version: str | None) -> dict[str, Any]:
    sla = rep.get("sla_boundary") or {}
    short = None
    ln = (rep.get("lengths") or {})
    asked, got = (ln.get("asked") or {}).get("output"), (ln.get("actual") or {}).get("output")
    if asked and got and asked.get("mean") is not None and got.get("mean") is not None:
        # no request generates more than it asked for, so equal means: none ended early;
        # otherwise the share is not known from quantiles alone (left None)
        short = 0.0 if got["mean"] >= asked["mean"] else None
    steps = {s["index"]: s for s in rep["steps"]}
    return {**rep, "name": name, "url": base, "engine": engine, "engine_version": version,
            "error": None, "cold_start_s": None, "server": server,
            "cost_per_mtok_usd": {
                "sla": cost(steps.get(sla.get("step")), price) if sla.get("met") else None,
                "max": cost(rep.get("max_throughput"), price)},
            "short_outputs": short, "comparable": True,
            "settings": {"gpus": 1, "gpu_hour_price": price}}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(OUT))
    ap.add_argument("--engines", default="vllm,triton")
    ap.add_argument("--ttft-slo", type=float, default=0.05)
    ap.add_argument("--gpu-hour-price", type=float, default=2.5)
    a = ap.parse_args()
    tmp = Path(a.out).with_suffix(".parts")
    tmp.mkdir(parents=True, exist_ok=True)
    proc, urls = start_demo(a.engines)
    endpoints = []
    try:
        for engine in a.engines.split(","):
            base = urls[engine]
            version = httpx.get(f"{base}/version", timeout=2).json().get("version") \
                if engine == "vllm" else None
            sampler = Sampler(engine, base)
            sampler.start()
            rep = probe(base, tmp / f"{engine}.json", a.ttft_slo)
            sampler.stop_ev.set()
            sampler.join(5)
            endpoints.append(wrap(f"demo-{engine}", engine, base, rep, sampler.server(),
                                  a.gpu_hour_price, version))
            print(f"{engine}: {len(rep['steps'])} steps", file=sys.stderr)
    finally:
        proc.terminate()
        proc.wait(10)
    tr = endpoints[0].get("traffic") or {}
    same = {json.dumps(e.get("traffic"), sort_keys=True) for e in endpoints}
    report = {
        "kind": "bakeoff",
        "made_by": "scripts/bakeoff_fixture.py: two real llmtop probe runs against demo "
                   f"engines ({a.engines}), wrapped into the issue-23 contract",
        "endpoints": endpoints,
        "traffic": {"kind": tr.get("kind"), "seed": tr.get("seed"),
                    "requests_per_step": None,
                    "hash": hashlib.sha256(same.pop().encode()).hexdigest()[:16]
                    if len(same) == 1 else None},
        "warnings": [],
    }
    Path(a.out).write_text(json.dumps(report, indent=2) + "\n")
    for f in tmp.iterdir():
        f.unlink()
    tmp.rmdir()
    print(f"wrote {a.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
