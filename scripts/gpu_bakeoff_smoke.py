"""Smoke-check the bake-off's GPU side on a real NVIDIA GPU and write what it saw to a folder.

    python scripts/gpu_bakeoff_smoke.py OUTDIR [--alloc-gib 4 8]

Needs NVML and CUDA-enabled torch. Writes a plan of stand-in engines: each is one process that
allocates its ``--alloc-gib`` on GPU 0 with torch and serves the demo vLLM on a loopback port.
Runs ``llmtop probe --plan`` over them (llmtop starts, measures and stops each in turn), then
checks, from the report and from NVML itself:

- each engine's server-side GPU memory peak covers what it allocated;
- after each stop the report says the memory was released, and NVML's used memory is back
  near where it started;
- no stand-in process is left.

Prints one line per check (``ok`` / ``FAIL``) and exits 1 when any check failed.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

ENGINE = r"""
import sys, torch
x = torch.empty(int(float(sys.argv[2]) * 1024**3), dtype=torch.uint8, device="cuda")
torch.cuda.synchronize()
from llmtop.cli.demo import main
sys.exit(main(["serve", "--engines", "vllm", "--ports", sys.argv[1], "--quiet",
               "--no-background"]))
"""

FAILED: list[str] = []


def check(name: str, ok: bool, detail: str = "") -> None:
    """Print one check's result and remember failures."""
    print(f"{'ok  ' if ok else 'FAIL'} {name}{': ' + detail if detail else ''}", flush=True)
    if not ok:
        FAILED.append(name)


def free_port() -> int:
    """A free loopback port."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def used_mib() -> float:
    """GPU 0's used memory (MiB) from NVML."""
    import pynvml

    pynvml.nvmlInit()
    try:
        return pynvml.nvmlDeviceGetMemoryInfo(pynvml.nvmlDeviceGetHandleByIndex(0)).used / 2**20
    finally:
        pynvml.nvmlShutdown()


def main() -> int:
    """Write the plan, run the bake-off, check the report."""
    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=Path)
    ap.add_argument("--alloc-gib", type=float, nargs="+", default=[4.0, 8.0])
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    engine_py = args.out / "engine.py"
    engine_py.write_text(ENGINE)
    lines = ["[probe]", "levels = [1, 4]", "requests_per_step = 16", "prompt_tokens = 64",
             "output_tokens = 32", "gpu_hour_price = 3.0", ""]
    for gib in args.alloc_gib:
        port = free_port()
        lines += ["[[engine]]", f'name = "stand-in-{gib:g}GiB"', f'url = "http://127.0.0.1:{port}"',
                  f'start = "{sys.executable} {engine_py} {port} {gib}"',
                  "ready_timeout_s = 120", "gpus = 1", ""]
    plan = args.out / "plan.toml"
    plan.write_text("\n".join(lines))
    before = used_mib()
    env = {**os.environ, "PYTHONPATH": f"{ROOT}:{os.environ.get('PYTHONPATH', '')}"}
    run = subprocess.run([sys.executable, "-m", "llmtop", "probe", "--plan", str(plan), "--yes",
                          "--json", str(args.out / "bakeoff.json"), "--html",
                          str(args.out / "bakeoff.html")],
                         capture_output=True, text=True, timeout=420, cwd=ROOT, env=env)
    (args.out / "stdout.txt").write_text(run.stdout)
    (args.out / "stderr.txt").write_text(run.stderr)
    print(run.stdout[-4000:])
    check("bake-off exits 0", run.returncode == 0, f"rc={run.returncode} {run.stderr[-300:]}")
    after = used_mib()
    check("NVML used memory back to where it started", after <= before + 256,
          f"before {before:.0f} MiB, after {after:.0f} MiB")
    try:
        report = json.loads((args.out / "bakeoff.json").read_text())
    except (OSError, ValueError) as e:
        check("report written", False, str(e))
        return 1
    for e, gib in zip(report["endpoints"], args.alloc_gib, strict=False):
        server = e.get("server") or {}
        peak = server.get("gpu_memory_peak_bytes")
        check(f"{e['name']}: no error", e.get("error") is None, str(e.get("error")))
        check(f"{e['name']}: GPU memory peak covers the allocation",
              peak is not None and peak >= gib * 2**30,
              f"peak {peak} bytes, allocated {gib:g} GiB; util peak {server.get('gpu_util_peak')}")
        check(f"{e['name']}: memory released after stop",
              "released" in str(e.get("gpu_release")) and "not" not in str(e.get("gpu_release")),
              str(e.get("gpu_release")))
        check(f"{e['name']}: cold start timed", e.get("cold_start_s") is not None,
              f"{e.get('cold_start_s')} s")
    left = subprocess.run(["pgrep", "-f", str(engine_py)], capture_output=True, text=True)
    check("no stand-in engine left", not left.stdout.strip(), left.stdout.strip())
    print("FAILED:", FAILED) if FAILED else print("all checks passed")
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
