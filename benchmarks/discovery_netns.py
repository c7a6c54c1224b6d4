"""Discovery's cost with N engines in N network namespaces (root): docs/benchmarks.md.

    sudo .venv/bin/python benchmarks/discovery_netns.py [N=12] [RUNS=20]

Builds N namespaces with veth pairs, starts the demo engine on port 8000 in each, publishes
every third through docker-proxy (scripts/real_netns/setup.sh), times ``discover()`` (no
target: default ports and /proc) and its /proc part alone, prints the medians and maxima, and
deletes every namespace, veth and process it made, even on failure.
``LLMTOP_BENCH_NO_DIAG=1``: the /proc files only (as without root), not netlink sock_diag.
"""

from __future__ import annotations

import asyncio
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from llmtop.config import Config
from llmtop.discovery import sockets
from llmtop.discovery.search import discover, process_candidates

PROXY = Path.home() / ".cache/llmtop/docker-proxy/usr/sbin/docker-proxy"


def ip(*a: str) -> None:
    subprocess.run(["ip", *a], check=True, capture_output=True, timeout=30)


def main(n: int, runs: int) -> None:
    tag = os.getpid() % 100
    names = [f"lb{tag}n{i}" for i in range(n)]
    procs: list[subprocess.Popen[bytes]] = []
    tmp = Path(tempfile.mkdtemp())
    try:
        for i, ns in enumerate(names):
            host_end, ns_end, net = f"lb{tag}h{i}", f"lb{tag}c{i}", f"10.252.{tag}.{4 * i}"
            a = net.rsplit(".", 1)[0]
            ip("netns", "add", ns)
            ip("link", "add", host_end, "type", "veth", "peer", "name", ns_end)
            ip("link", "set", ns_end, "netns", ns)
            ip("addr", "add", f"{a}.{4 * i + 1}/30", "dev", host_end)
            ip("link", "set", host_end, "up")
            ip("netns", "exec", ns, "ip", "addr", "add", f"{a}.{4 * i + 2}/30", "dev", ns_end)
            ip("netns", "exec", ns, "ip", "link", "set", ns_end, "up")
            ip("netns", "exec", ns, "ip", "link", "set", "lo", "up")
            procs.append(subprocess.Popen(
                ["ip", "netns", "exec", ns, sys.executable, "-m", "llmtop", "demo", "serve",
                 "--engines", "vllm", "--ports", "8000", "--host", "0.0.0.0", "--quiet",
                 "--no-background", "--ready-file", str(tmp / ns)]))
            if i % 3 == 2 and PROXY.exists():
                procs.append(subprocess.Popen(
                    ["bash", "-c", 'exec "$@" 3>/dev/null', "docker-proxy", str(PROXY),
                     "-proto", "tcp", "-host-ip", "127.0.0.1", "-host-port", str(19000 + i),
                     "-container-ip", f"{a}.{4 * i + 2}", "-container-port", "8000"]))
        for ns in names:
            for _ in range(600):
                if (tmp / ns).exists():
                    break
                time.sleep(0.1)
        time.sleep(1.0)
        if os.environ.get("LLMTOP_BENCH_PROFILE"):
            import cProfile
            import pstats

            cProfile.runctx('process_candidates("/proc", "127.0.0.1")', globals(), locals(),
                            "/tmp/llmtop-bench.prof")
            pstats.Stats("/tmp/llmtop-bench.prof").sort_stats("tottime").print_stats(12)
        if os.environ.get("LLMTOP_BENCH_NO_DIAG"):  # as without root: /proc files only
            sockets.diag = lambda pid, root, errors=None: None
        total, proc_part, found = [], [], 0
        for _ in range(runs):
            t0 = time.perf_counter()
            got = asyncio.run(discover(Config(), timeout_s=5.0))
            total.append(time.perf_counter() - t0)
            found = sum(1 for t in got if t.container is not None)
            t0 = time.perf_counter()
            process_candidates("/proc", "127.0.0.1")
            proc_part.append(time.perf_counter() - t0)
        ms = lambda xs: f"median {1000 * statistics.median(xs):.0f} ms, max {1000 * max(xs):.0f} ms"  # noqa: E731
        print(f"{n} namespaces, {found} engines in them found; {runs} runs")
        print(f"discover() whole (ports + /proc): {ms(total)}")
        print(f"/proc part (process_candidates): {ms(proc_part)}")
        code = ("import asyncio, statistics, time\n"
                "from llmtop.config import Config\nfrom llmtop.discovery.search import discover\n"
                "xs, n = [], 0\n"
                f"for _ in range({runs}):\n"
                "    t0 = time.perf_counter()\n"
                "    got = asyncio.run(discover(Config(), timeout_s=5.0))\n"
                "    xs.append(time.perf_counter() - t0)\n"
                "    n = sum(1 for t in got if t.container is not None)\n"
                "print(f'without root (nobody): {n} found; discover() median "
                "{1000 * statistics.median(xs):.0f} ms, max {1000 * max(xs):.0f} ms')\n")
        home = Path(tempfile.mkdtemp())
        home.chmod(0o755)
        r = subprocess.run(["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups",
                            sys.executable, "-c", code], capture_output=True, text=True,
                           timeout=600, env={**os.environ, "HOME": str(home),
                                             "XDG_CONFIG_HOME": str(home)})
        print(r.stdout.strip() or r.stderr.strip()[-300:])
    finally:
        for p in procs:
            p.send_signal(signal.SIGTERM)
        for p in procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
        for i, ns in enumerate(names):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
            subprocess.run(["ip", "link", "del", f"lb{tag}h{i}"], capture_output=True)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 12, int(sys.argv[2]) if len(sys.argv) > 2
         else 20)
