"""A flood of request spans against llmtop's OTLP receiver: CPU and memory stay bounded.

Starts ``llmtop record FILE --otlp-listen 127.0.0.1:P --no-discover`` (the headless
recorder; ``--tui`` runs the TUI in a pseudo-terminal instead), then sends OTLP/HTTP
protobuf bodies of ``--batch`` (512, an exporter's batch) real vLLM ``llm_request`` spans
(tests/fixtures/spans, each with its own request id) at ``--rate`` spans/s (10,000) for
``--seconds`` (30) from a separate process, and prints llmtop's CPU (% of one core, over the
flood), its peak RSS, what the sender saw (accepted / refused) and, for the recorder, the
recording's size.

``--spanless MIB --senders N`` floods with bodies of MIB MiB that hold no spans instead, from
N senders at once: the receiver's byte bound (32 MiB queued) sheds them with 429 once it is
reached, so the peak RSS stays bounded however long the flood (the queue's bytes plus what
decoding and recording the bodies it took cost), where before every body was queued.

    .venv/bin/python benchmarks/otlp_flood.py [--rate 10000] [--seconds 30] [--tui]
    .venv/bin/python benchmarks/otlp_flood.py --spanless 8 --senders 12 --seconds 12
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import pty
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CLK = os.sysconf("SC_CLK_TCK")

SENDER = r"""
import json, sys, time, httpx
body = open(sys.argv[1], "rb").read()
rate, batch, seconds = map(float, sys.argv[2:5])
url, hdr = sys.argv[5], {"Content-Type": "application/x-protobuf"}
codes = {}
t0 = time.monotonic(); sent = 0
with httpx.Client(timeout=10) as c:
    while time.monotonic() - t0 < seconds:
        due = t0 + sent * batch / rate
        now = time.monotonic()
        if due > now:
            time.sleep(due - now)
        try:
            code = c.post(url, content=body, headers=hdr).status_code
        except httpx.HTTPError as exc:
            code = type(exc).__name__
        codes[str(code)] = codes.get(str(code), 0) + 1
        sent += 1
print(json.dumps({"bodies": sent, "spans": int(sent * batch), "codes": codes,
                  "seconds": round(time.monotonic() - t0, 1)}))
"""


def flood_body(batch: int) -> bytes:
    """``batch`` copies of the real vLLM llm_request span, each with its own request id."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    lines = (ROOT / "tests/fixtures/spans/vllm-real-cpu-v0.32.0-burst.b64").read_text()
    real = ExportTraceServiceRequest()
    real.ParseFromString(base64.b64decode(lines.splitlines()[-1]))
    rs = real.resource_spans[0]
    proto = rs.scope_spans[0].spans[0]
    out = ExportTraceServiceRequest()
    ors = out.resource_spans.add()
    ors.resource.CopyFrom(rs.resource)
    oss = ors.scope_spans.add()
    oss.scope.CopyFrom(rs.scope_spans[0].scope)
    for i in range(batch):
        s = oss.spans.add()
        s.CopyFrom(proto)
        s.span_id = i.to_bytes(8, "big")
        for kv in s.attributes:
            if kv.key == "gen_ai.request.id":
                kv.value.string_value = f"cmpl-flood{i:06d}-0"
    return out.SerializeToString()


def spanless_body(mib: float) -> bytes:
    """An OTLP export of ``mib`` MiB holding no spans (one padded resource attribute)."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    req = ExportTraceServiceRequest()
    kv = req.resource_spans.add().resource.attributes.add()
    kv.key = "pad"
    kv.value.string_value = "x" * int(mib * 2**20 - 64)
    return req.SerializeToString()


def cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rate", type=float, default=10_000)
    ap.add_argument("--seconds", type=float, default=30)
    ap.add_argument("--batch", type=int, default=512)
    ap.add_argument("--tui", action="store_true", help="the TUI (80x24 pty), not the recorder")
    ap.add_argument("--spanless", type=float, default=None, metavar="MIB",
                    help="send bodies of MIB MiB holding no spans, as fast as answered")
    ap.add_argument("--senders", type=int, default=1, help="sender processes at once")
    a = ap.parse_args()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    tmp = Path(tempfile.mkdtemp())
    body = tmp / "body.pb"
    body.write_bytes(spanless_body(a.spanless) if a.spanless else flood_body(a.batch))
    rate = 1e9 if a.spanless else a.rate / a.senders  # span-less: no pacing
    rec = tmp / "flood.llmtop"
    cmd = [sys.executable, "-m", "llmtop", "--no-discover", "--otlp-listen",
           f"127.0.0.1:{port}"] if a.tui else [
        sys.executable, "-m", "llmtop", "record", str(rec), "--no-discover",
        "--otlp-listen", f"127.0.0.1:{port}"]
    env = {**os.environ, "TEXTUAL_ANIMATIONS": "none", "COLUMNS": "80", "LINES": "24"}
    if a.tui:
        master, slave = pty.openpty()
        proc = subprocess.Popen(cmd, cwd=ROOT, stdin=slave, stdout=slave, stderr=slave,
                                env=env, start_new_session=True)
    else:
        master = None
        proc = subprocess.Popen(cmd, cwd=ROOT, stderr=subprocess.DEVNULL, env=env)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                    break
            except OSError:
                time.sleep(0.2)
        time.sleep(3)  # settle
        c0, t0, peak = cpu_s(proc.pid), time.monotonic(), 0.0
        senders = [subprocess.Popen(
            [sys.executable, "-c", SENDER, str(body), str(rate), str(a.batch),
             str(a.seconds), f"http://127.0.0.1:{port}/v1/traces"], stdout=subprocess.PIPE,
            text=True) for _ in range(a.senders)]
        while any(s.poll() is None for s in senders):
            if master is not None:
                try:
                    os.read(master, 65536)
                except OSError:
                    pass
            peak = max(peak, rss_mb(proc.pid))
            time.sleep(0.5)
        c1, t1 = cpu_s(proc.pid), time.monotonic()
        each = [json.loads(s.stdout.read()) for s in senders]
        codes: dict[str, int] = {}
        for e in each:
            for k, v in e["codes"].items():
                codes[k] = codes.get(k, 0) + v
        sent = {"bodies": sum(e["bodies"] for e in each), "codes": codes,
                "senders": a.senders, "spanless_mib": a.spanless}
        print(json.dumps({
            "what": "tui" if a.tui else "record", "rate_asked": a.rate, "batch": a.batch,
            "sender": sent, "cpu_pct_of_one_core": round(100 * (c1 - c0) / (t1 - t0), 1),
            "peak_rss_mb": round(peak, 1), "seconds": round(t1 - t0, 1)}))
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    if not a.tui:
        print(json.dumps({"recording_mb": round(rec.stat().st_size / 1e6, 2)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
