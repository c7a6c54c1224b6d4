"""Real routers (``vllm-router``, ``sglang-router`` from PyPI, ``scripts/real_routers``) in
front of real vLLM CPU engines (``scripts/real_vllm``), seen through ``llmtop --once --json``
and ``llmtop record`` as ``/work/CONTRACT_42.md`` (issue 42) describes.

Each test first checks the router's and the engines' own ``/metrics`` (the facts llmtop must
agree with), then what llmtop says. The engines run wholly on core 0 (as ``.ci/run`` pins
vLLM; each loads on any core first), at most two at a time, kept between tests: ``a1``
(``--max-num-seqs 1``) and ``b8`` start side by side for the round-robin tests, then ``a1``
stops and ``c8`` starts for the calm stack, P/D and the killed backend (three start-ups).

Opt-in: ``LLMTOP_REAL_ROUTERS=1`` after ``scripts/real_vllm/setup.sh`` and
``scripts/real_routers/setup.sh`` (``.ci/run`` sets it). About 5 minutes in all.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from llmtop.model import RawScrape
from llmtop.monitor.targetset import BACKOFF_CAP_S
from llmtop.record.reader import Recording, Tick
from tests.real_engine.incidents import ROOT, served, vllm_ready
from tests.real_engine.servers import llmtop

ENABLED = os.environ.get("LLMTOP_REAL_ROUTERS") == "1"
pytestmark = [
    pytest.mark.real_engine,
    pytest.mark.slow,
    pytest.mark.skipif(not ENABLED, reason=(
        "set LLMTOP_REAL_ROUTERS=1 after scripts/real_vllm/setup.sh and "
        "scripts/real_routers/setup.sh: starts two real vLLM engines and the routers (~5 min)")),
]

MODEL = "tiny-llama"
LOUD = ("warn", "critical")


def _load_module():
    path = ROOT / "scripts/real_routers/load.py"
    spec = importlib.util.spec_from_file_location("router_load", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


START_S = 600
"""Bounded wait for one vLLM start (a box loaded by other jobs took over 3 minutes)."""
VLLM_ENV = {"VLLM_CPU_OMP_THREADS_BIND": "0", "LLMTOP_VLLM_START_S": str(START_S)}


def pin_tree(pid: int, cpus: str) -> None:
    """Every thread of ``pid`` and its descendants onto ``cpus`` (``taskset``, if any)."""
    if not shutil.which("taskset"):
        return
    todo = [pid]
    while todo:
        p = todo.pop()
        subprocess.run(["taskset", "-a", "-p", "-c", cpus, str(p)], capture_output=True)
        for kids in Path(f"/proc/{p}/task").glob("*/children"):
            with contextlib.suppress(OSError):
                todo += [int(k) for k in kids.read_text().split()]


class Engines:
    """Real vLLM engines by name, started on demand (the missing ones at once, on any core
    while they load, then wholly on core 0 as ``.ci/run`` pins vLLM), stopped by
    ``stop``/``close``."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.urls: dict[str, str] = {}
        self._stacks: dict[str, contextlib.ExitStack] = {}

    def _start(self, name: str, flags: tuple[str, ...], errors: list[BaseException]) -> None:
        stack = contextlib.ExitStack()
        try:
            st = stack.enter_context(served("scripts/real_vllm/serve.sh", self.base / name,
                                            *flags, env=VLLM_ENV, timeout_s=START_S + 30))
            self._stacks[name] = stack
            pin_tree(int((st / "pid").read_text()), "0")
            self.urls[name] = (st / "url").read_text().strip()
        except BaseException as e:  # re-raised by get()
            stack.close()
            errors.append(e)

    def get(self, *specs: tuple[str, tuple[str, ...]]) -> list[str]:
        """The URLs of engines ``(name, flags)``, starting the missing ones side by side."""
        errors: list[BaseException] = []
        threads = [threading.Thread(target=self._start, args=(n, f, errors))
                   for n, f in specs if n not in self.urls]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            raise errors[0]
        return [self.urls[n] for n, _ in specs]

    def stop(self, name: str) -> None:
        self.urls.pop(name, None)
        stack = self._stacks.pop(name, None)
        if stack:
            stack.close()

    def close(self) -> None:
        for name in list(self._stacks):
            self.stop(name)


A1 = ("a1", ("--max-num-seqs", "1"))
B8 = ("b8", ("--max-num-seqs", "8"))
C8 = ("c8", ("--max-num-seqs", "8"))


@pytest.fixture(scope="module")
def engines(tmp_path_factory) -> Iterator[Engines]:
    if not vllm_ready():
        pytest.fail("LLMTOP_REAL_ROUTERS=1 but no cached vLLM: run scripts/real_vllm/setup.sh")
    out = subprocess.run(["bash", str(ROOT / "scripts/real_routers/setup.sh")],
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    e = Engines(tmp_path_factory.mktemp("engines"))
    try:
        yield e
    finally:
        e.close()


@contextlib.contextmanager
def router(state: Path, kind: str, mode: str, *urls: str) -> Iterator[tuple[str, str]]:
    """``scripts/real_routers/serve.sh``: yields (serving URL, metrics URL)."""
    with served("scripts/real_routers/serve.sh", state, kind, mode, *urls) as st:
        yield (st / "url").read_text().strip(), (st / "metrics_url").read_text().strip()


class Load(threading.Thread):
    """Closed-loop clients through the router (``scripts/real_routers/load.py``)."""

    def __init__(self, url: str, clients: int, seconds: float, max_tokens: int) -> None:
        super().__init__(daemon=True)
        self.args = (url, clients, seconds, max_tokens, MODEL)
        self.result: dict = {}

    def run(self) -> None:
        self.result = _load_module().run_load(*self.args)


def series(url: str) -> dict[tuple[str, str], float]:
    """``{(sample name, worker label or ""): value}`` of a ``/metrics`` page (summed)."""
    out: dict[tuple[str, str], float] = {}
    for fam in text_string_to_metric_families(httpx.get(url, timeout=10).text):
        for s in fam.samples:
            if "quantile" in s.labels or "le" in s.labels:
                continue
            if s.labels.get("outcome", "success") != "success":
                continue
            key = (s.name, s.labels.get("worker", ""))
            out[key] = out.get(key, 0.0) + s.value
    return out


def routed(before: dict, after: dict, kind: str, urls: tuple[str, ...]) -> dict[str, float]:
    """Requests each worker got between two router scrapes, from the router's own counters
    (the sglang router has no per-worker request counter: its breaker's success outcomes)."""
    name = ("vllm_router_processed_requests_total" if kind == "vllm"
            else "smg_worker_cb_outcomes_total")
    return {u: after.get((name, u), 0.0) - before.get((name, u), 0.0) for u in urls}


def waiting(url: str) -> float:
    return series(f"{url}/metrics").get(("vllm:num_requests_waiting", ""), 0.0)


def once(target: str, window: float) -> dict:
    out = llmtop("--once", "--json", "--window", str(window), target, timeout=120)
    assert out.stdout.strip(), out.stderr
    return json.loads(out.stdout)


def the_router(snap: dict, kind: str) -> dict:
    routers = snap.get("routers")
    assert routers is not None, "llmtop --once --json has no 'routers' key (issue 42)"
    assert [r["engine"] for r in routers] == [f"{kind}-router"], routers
    return routers[0]


def backend(r: dict, url: str) -> dict:
    port = urlsplit(url).port
    found = [b for b in r["backends"] if urlsplit(b["url"]).port == port]
    assert len(found) == 1, (url, r["backends"])
    return found[0]


def row(snap: dict, url: str) -> dict:
    port = urlsplit(url).port
    found = [e for e in snap["engines"] if e["target"].endswith(f":{port}")]
    assert len(found) == 1, (url, [e["target"] for e in snap["engines"]])
    return found[0]


def loud(snap: dict) -> list[dict]:
    return [f for f in snap["diagnosis"] if f["severity"] in LOUD]


def names(finding: dict, url: str, snap: dict) -> bool:
    """The finding is about the engine at ``url`` (its row's target, or the URL in the text)."""
    target = row(snap, url)["target"]
    port = f":{urlsplit(url).port}"
    return finding.get("target") == target or port in finding.get("summary", "")


@pytest.mark.parametrize("kind", ["vllm", "sglang"])
def test_round_robin_over_1_and_8_seats_is_named_routing(engines, tmp_path, kind):
    a, b = engines.get(A1, B8)
    with router(tmp_path / "router", kind, "rr", a, b) as (url, murl):
        load = Load(url, clients=10, seconds=22, max_tokens=48)
        load.start()
        time.sleep(6)
        before = series(murl)
        waits = {a: [], b: []}
        snap: dict = {}

        def watch() -> None:
            for _ in range(8):
                for u in (a, b):
                    waits[u].append(waiting(u))
                time.sleep(1)

        w = threading.Thread(target=watch)
        w.start()
        snap = once(murl, 10)
        w.join()
        after = series(murl)
        load.join()
    # the router's own view: round robin gives each half, while the 1-seat engine queues
    got = routed(before, after, kind, (a, b))
    total = sum(got.values())
    assert total >= 6, (got, load.result)
    assert got[a] / total == pytest.approx(0.5, abs=0.12), got
    assert max(waits[a]) >= 2 and max(waits[b]) == 0, waits
    assert load.result["failed"] == 0, load.result
    # llmtop's
    r = the_router(snap, kind)
    assert r["policy"] == "round_robin"
    assert r["healthy_backends"] == 2 and r["total_backends"] == 2
    ba, bb = backend(r, a), backend(r, b)
    # both routers say per worker whether its breaker is open (cb_state) and what it was
    # sent (vllm-router: processed_requests_total; sglang-router: cb_outcomes_total), as the
    # real captures in tests/fixtures/routers/real/*-rr.txt show: None here is a lost value
    assert r["open_breakers"] == 0, r
    for be in (ba, bb):
        assert be["healthy"] is True and be["breaker_open"] is False, r["backends"]
        assert be["routed_share"] == pytest.approx(0.5, abs=0.15), r["backends"]
    assert row(snap, a)["router"] == r["target"] and row(snap, b)["router"] == r["target"]
    routing = [f for f in snap["diagnosis"] if f["rule"] == "routing"]
    assert routing and any(names(f, a, snap) for f in routing), snap["diagnosis"]
    assert not any(names(f, b, snap) for f in loud(snap) if f["rule"] != "routing"), loud(snap)


def test_calm_stack_gets_no_warning(engines, tmp_path):
    engines.stop("a1")  # at most two real engines at a time on this box
    b, c = engines.get(B8, C8)
    with router(tmp_path / "router", "vllm", "rr", b, c) as (url, murl):
        load = Load(url, clients=2, seconds=20, max_tokens=16)
        load.start()
        time.sleep(4)
        before = series(murl)
        snap = once(murl, 10)
        after = series(murl)
        w = (waiting(b), waiting(c))
        load.join()
    got = routed(before, after, "vllm", (b, c))
    assert sum(got.values()) >= 4 and w == (0.0, 0.0), (got, w)
    assert after[("vllm_router_worker_health", b)] == after[("vllm_router_worker_health", c)] == 1
    r = the_router(snap, "vllm")
    assert r["healthy_backends"] == 2 and r["open_breakers"] == 0  # cb_state per worker
    assert all(be["healthy"] is True for be in r["backends"])
    assert loud(snap) == [], snap["diagnosis"]


def test_pd_disaggregation_shows_roles_and_pools(engines, tmp_path):
    b, c = engines.get(B8, C8)
    with router(tmp_path / "router", "vllm", "pd", b, c) as (url, murl):
        load = Load(url, clients=2, seconds=20, max_tokens=16)
        load.start()
        time.sleep(4)
        snap = once(murl, 10)
        text = llmtop("--once", "--window", "2", murl, timeout=120).stdout
        load.join()
        after = series(murl)
    # the router's own P/D counters: every request went to the prefill worker, then the decode one
    pre = after.get(("vllm_router_pd_prefill_requests_total", b), 0.0)
    dec = after.get(("vllm_router_pd_decode_requests_total", c), 0.0)
    assert pre > 0 and pre == dec >= load.result["ok"] > 0, (pre, dec, load.result)
    assert ("vllm_router_pd_prefill_requests_total", c) not in after
    r = the_router(snap, "vllm")
    assert backend(r, b)["role"] == "prefill" and backend(r, c)["role"] == "decode"
    assert row(snap, b)["role"] == "prefill" and row(snap, c)["role"] == "decode"
    assert row(snap, b)["router"] == row(snap, c)["router"] == r["target"]
    assert "prefill" in text.lower() and "decode" in text.lower(), text  # the pools' rows


def test_sglang_pd_roles_from_its_worker_list(engines, tmp_path):
    """sglang-router names roles per URL only in ``GET /workers`` on its serving port; llmtop
    finds that port by discovery (the router renames its process, so its two ports are the
    pair) and polls it beside the scrape. No target given: autodiscovery, as a user would."""
    b, c = engines.get(B8, C8)
    with router(tmp_path / "router", "sglang", "pd", b, c) as (url, murl):
        load = Load(url, clients=2, seconds=12, max_tokens=16)
        load.start()
        time.sleep(3)
        out = llmtop("--once", "--json", "--window", "5", timeout=120)
        load.join()
        listed = httpx.get(f"{url}/workers", timeout=10).json()["workers"]
    assert out.stdout.strip(), out.stderr
    snap = json.loads(out.stdout)
    # the router's own answer: A prefill, B decode
    assert {w["url"]: w["worker_type"] for w in listed} == {b: "prefill", c: "decode"}
    [r] = [r for r in snap["routers"] if r["target"].endswith(f":{urlsplit(murl).port}")]
    assert backend(r, b)["role"] == "prefill" and backend(r, c)["role"] == "decode"
    assert row(snap, b)["role"] == "prefill" and row(snap, c)["role"] == "decode"


def test_backend_killed_router_and_llmtop_agree(engines, tmp_path):
    b, c = engines.get(B8, C8)
    rec = tmp_path / "stack.llmtop"
    with router(tmp_path / "router", "vllm", "rr", b, c) as (url, murl):
        recorder = subprocess.Popen(
            [sys.executable, "-m", "llmtop", "record", str(rec), "--interval", "1",
             "--duration", "32", murl], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            text=True)
        try:
            load = Load(url, clients=2, seconds=24, max_tokens=16)
            load.start()
            time.sleep(10)
            engines.stop("c8")
            killed_at = time.monotonic()
            health = 1.0
            while time.monotonic() - killed_at < 30:
                health = series(murl).get(("vllm_router_worker_health", c), 1.0)
                if health == 0:
                    break
                time.sleep(0.5)
            assert health == 0, "the router never marked the killed backend unhealthy"
            snap = once(murl, 5)
            load.join()
            _, err = recorder.communicate(timeout=60)
            assert recorder.returncode == 0, err
        finally:
            if recorder.poll() is None:
                recorder.kill()
    assert load.result["ok"] > 0
    # llmtop agrees with the router: c unhealthy and its row down, b healthy and not flagged
    r = the_router(snap, "vllm")
    assert backend(r, c)["healthy"] is False and backend(r, b)["healthy"] is True
    assert r["healthy_backends"] == 1 and r["total_backends"] == 2
    assert row(snap, c)["state"] == "down" and row(snap, b)["state"] == "ok"
    routing = [f for f in snap["diagnosis"] if f["rule"] == "routing"]
    assert routing and all(names(f, c, snap) for f in routing), snap["diagnosis"]
    assert not any(names(f, b, snap) for f in loud(snap)), loud(snap)
    # the recording holds the same story: both healthy before the kill, c down at the end
    early = json.loads(llmtop("replay", str(rec), "--at", "6", "--once", "--json").stdout)
    late = json.loads(llmtop("replay", str(rec), "--at", "end", "--once", "--json").stdout)
    re_, rl = the_router(early, "vllm"), the_router(late, "vllm")
    assert backend(re_, c)["healthy"] is True and backend(re_, b)["healthy"] is True
    assert backend(rl, c)["healthy"] is False and backend(rl, b)["healthy"] is True
    assert row(early, c)["state"] == "ok" and row(late, c)["state"] == "down"
    # nothing lost: the file is whole; from the first tick that scraped the router and both
    # backends on, every tick holds the router and b, and c every tick while it answers; once
    # killed c is asked less and less often (the target set's back-off), each answer failing,
    # never dropped (the router still names it)
    recording = Recording.open(rec)
    assert recording.problem is None, recording.problem
    ticks: list[dict[int, str]] = []
    current: dict[int, str] = {}
    for item in recording.items():
        if isinstance(item, RawScrape):
            current[urlsplit(item.url).port] = item.status
        elif isinstance(item, Tick):
            ticks.append(current)
            current = {}
    cp = urlsplit(c).port
    always = {urlsplit(u).port for u in (murl, b)}
    first = next(i for i, t in enumerate(ticks) if always | {cp} <= set(t))
    assert all(always <= set(t) for t in ticks[first:]), ticks
    assert ticks[first][cp] == "ok", ticks
    down_at = next(i for i in range(first, len(ticks)) if ticks[i].get(cp, "ok") != "ok")
    assert all(cp in t for t in ticks[first:down_at]), ticks
    asked = [i for i in range(down_at, len(ticks)) if cp in ticks[i]]
    assert len(asked) >= 3 and all(ticks[i][cp] != "ok" for i in asked), ticks
    gaps = [j - i for i, j in zip(asked, [*asked[1:], len(ticks) - 1], strict=True)]
    assert max(gaps) <= BACKOFF_CAP_S + 2, ticks
