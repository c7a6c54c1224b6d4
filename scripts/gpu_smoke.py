"""Smoke-check llmtop against a real NVIDIA GPU and write what it saw to a folder.

    python scripts/gpu_smoke.py OUTDIR [--port 8000] [--alloc-gib 2]

Needs NVML (the driver). With CUDA-enabled torch installed, it first starts a stand-in engine:
one process that allocates ``--alloc-gib`` on GPU 0 and serves the demo vLLM's /metrics on
``--port``, so attribution ("which engine owns which memory") is checked on real NVML
process data. Then it runs, and saves the output of:

- ``llmtop --once --json`` against that port, and with autodiscovery (no target);
- ``llmtop --once`` (the plain-text table);
- the TUI, headless, at 160x48 and 80x24 (overview) and the GPU detail screen, as SVGs.

It prints one line per check (``ok`` / ``FAIL``) and exits 1 when any check failed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

ENGINE = r"""
import sys, torch
gib = float(sys.argv[2])
x = torch.empty(int(gib * 1024**3), dtype=torch.uint8, device="cuda")
torch.cuda.synchronize()
from llmtop.cli.demo import main
sys.exit(main(["serve", "--engines", "vllm", "--ports", sys.argv[1], "--quiet"]))
"""

FAILED: list[str] = []


def check(name: str, ok: bool, detail: str = "") -> None:
    """Print one check's result and remember failures."""
    print(f"{'ok  ' if ok else 'FAIL'} {name}{': ' + detail if detail else ''}", flush=True)
    if not ok:
        FAILED.append(name)


def wait_port(port: int, timeout: float) -> bool:
    """True once something accepts on 127.0.0.1:port."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return True
        except OSError:
            time.sleep(0.2)
    return False


def llmtop(*args: str) -> subprocess.CompletedProcess[str]:
    """Run ``python -m llmtop ARGS`` and return the finished process."""
    return subprocess.run([sys.executable, "-m", "llmtop", *args], capture_output=True,
                          text=True, timeout=120, cwd=ROOT)


def check_once(out: Path, port: int, engine_pid: int | None) -> None:
    """The JSON and text --once outputs, with and without a named target."""
    for label, argv in (("target", [f"vllm@127.0.0.1:{port}"]), ("discover", [])):
        run = llmtop("--once", "--json", "--gpu-required", "--window", "1", *argv)
        (out / f"once-{label}.json").write_text(run.stdout + run.stderr)
        check(f"--once --json ({label}) exits 0", run.returncode == 0,
              f"rc={run.returncode} {run.stderr.strip()[:200]}")
        try:
            doc = json.loads(run.stdout)
        except ValueError:
            continue
        gpus = doc.get("gpus") or []
        check(f"--once ({label}) reads GPUs over NVML",
              bool(gpus) and all(g["source"] == "nvml" for g in gpus) and not doc["gpu_error"],
              f"{len(gpus)} GPU(s), gpu_error={doc['gpu_error']!r}")
        engines = doc.get("engines") or []
        check(f"--once ({label}) sees the engine", any(e.get("state") == "ok" for e in engines),
              ", ".join(f"{e.get('target')}={e.get('state')}" for e in engines))
        procs = [p for g in gpus for p in g.get("processes") or []]
        print("     processes:", json.dumps(procs))
        if engine_pid is not None:
            mine = [p for p in procs if p.get("pid") == engine_pid]
            if not mine:
                print(f"     (engine pid {engine_pid} not in NVML's process list: "
                      "another PID namespace?)")
            check(f"--once ({label}) attributes the engine's GPU memory",
                  any(p.get("engine_target") for p in procs),
                  json.dumps([(p.get("pid"), p.get("engine_target")) for p in procs]))
    run = llmtop("--once", "--window", "1", f"vllm@127.0.0.1:{port}")
    (out / "once.txt").write_text(run.stdout + run.stderr)
    check("--once text exits 0", run.returncode == 0, f"rc={run.returncode}")
    print(run.stdout)


async def shoot(out: Path, port: int) -> None:
    """Overview at two sizes and the GPU detail screen, polled on real NVML."""
    os.environ.setdefault("TEXTUAL_ANIMATIONS", "none")
    from llmtop.config import Config
    from llmtop.targets import parse_target
    from llmtop.ui.app import LlmtopApp
    from llmtop.ui.live import make_source
    from screenshots import shoot as shoot_svg

    config = Config(targets=(parse_target(f"vllm@127.0.0.1:{port}"),), discover=False)
    for name, size, keys in (("overview-160x48", (160, 48), ()),
                             ("overview-80x24", (80, 24), ()),
                             ("gpu-detail", (160, 48), ("g",))):
        source, _ = make_source(config)
        app = LlmtopApp(source, config, autopoll=False)
        await shoot_svg(name, app, keys, size, 3, out=out, between_s=0.5)
        snap = app.snapshot
        gpus = snap.gpus if snap is not None else []
        check(f"TUI {name}: NVML GPUs on screen", bool(gpus) and snap.gpu_error is None,
              ", ".join(f"{g.name} {g.mem_used_bytes}/{g.mem_total_bytes}" for g in gpus)
              or f"gpu_error={getattr(snap, 'gpu_error', None)!r}")
        await source.aclose()  # the Source protocol: scraper and NVML closed


def main() -> int:
    """Run the checks; exit 1 when one failed."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--port", type=int, default=8000)
    ap.add_argument("--alloc-gib", type=float, default=2.0)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)

    engine = None
    try:
        import torch

        have_cuda = torch.cuda.is_available()
    except ImportError:
        have_cuda = False
    cmd = ([sys.executable, "-c", ENGINE, str(args.port), str(args.alloc_gib)] if have_cuda
           else [sys.executable, "-m", "llmtop", "demo", "serve", "--engines", "vllm",
                 "--ports", str(args.port), "--quiet"])
    engine = subprocess.Popen(cmd, cwd=ROOT)
    try:
        check("stand-in engine listens", wait_port(args.port, 60),
              "torch holds GPU memory" if have_cuda else "no CUDA torch: no GPU memory held")
        time.sleep(1.0)
        check_once(args.out, args.port, engine.pid if have_cuda else None)
        asyncio.run(shoot(args.out, args.port))
    finally:
        engine.terminate()
        engine.wait(10)
    print("FAILED:", FAILED if FAILED else "none")
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
