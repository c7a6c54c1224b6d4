"""A demo fleet: demo engines scraped by a real Prometheus (or VictoriaMetrics) on loopback.

``start_fleet(n)`` starts N simulated engines in three ``llmtop demo serve`` processes (see
:mod:`llmtop.demo.launcher`): model A (vLLM and SGLang), model B (vLLM and SGLang) and one
vLLM of model A in trouble (the ``kv-pressure`` scenario: KV near full, preemptions, a
queue). The demo engines all serve the same model name, so model B's name is set by the
scrape config (``metric_relabel_configs`` on ``model_name``), as a relabel in a real fleet
would. ``down=K`` adds K targets on ports where nothing listens (``up == 0``); ``stale``,
``restarting`` and ``dcgm`` add a stuck exporter, a restarting engine and DCGM exporters
(:mod:`llmtop.demo.fleet_exporters`).

``start_prometheus`` / ``start_victoria`` run the real binaries (Debian's ``prometheus`` and
``victoria-metrics`` packages; ``scripts/fleet_servers.sh`` unpacks them into
``.cache/fleet-bin/``) on 127.0.0.1 with a temporary data folder; ``wait_scraped`` returns once
every target has a few ``up`` samples; ``start_demo_fleet`` does all of it for ``llmtop demo
fleet``. Also used by ``tests/fleet`` and ``benchmarks/fleet.py``. No textual, no rich.
Every server and demo process is started with :func:`llmtop.children.spawn` and every folder
made with :func:`llmtop.children.temp_dir`: all of them end when llmtop ends, SIGKILL included.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx

from llmtop import children
from llmtop.demo import fleet_bins
from llmtop.demo.fleet_exporters import TextTarget, dcgm_text, frozen_text
from llmtop.demo.launcher import DemoHandle, start_demo
from llmtop.demo.profiles import DEFAULT_PROFILE
from llmtop.errors import LlmtopError

__all__ = ["BIN_ENV", "INSTALL_HINT", "MODEL_A", "MODEL_B", "DemoFleet", "FleetEngine",
           "RunningFleet", "ServerProcess", "TextTarget", "dcgm_text", "find_binary", "free_port",
           "frozen_text", "plan", "query", "start_demo_fleet", "start_fleet", "start_prometheus",
           "start_victoria", "wait_scraped"]

MODEL_A = DEFAULT_PROFILE.model
MODEL_B = "Qwen/Qwen2.5-7B-Instruct"
TROUBLE_SCENARIO = "kv-pressure"
BIN_ENV = {"prometheus": "LLMTOP_PROMETHEUS_BIN", "victoria-metrics": "LLMTOP_VICTORIA_BIN",
           "promtool": "LLMTOP_PROMTOOL_BIN"}
INSTALL_HINT = ("run `llmtop demo fleet --yes` to fetch Debian's prometheus and "
                "victoria-metrics packages into ~/.cache/llmtop/fleet-bin (no root, no "
                "services), or install them (`apt-get install prometheus victoria-metrics`, "
                "`brew install prometheus victoriametrics`), or point LLMTOP_PROMETHEUS_BIN / "
                "LLMTOP_VICTORIA_BIN at the binaries")
_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def find_binary(name: str) -> str | None:
    """Path of ``prometheus`` | ``promtool`` | ``victoria-metrics``, or None when absent.

    Looks at the env var (``LLMTOP_PROMETHEUS_BIN``...), ``$LLMTOP_FLEET_BIN_DIR``, llmtop's
    cache (``~/.cache/llmtop/fleet-bin``, where ``llmtop demo fleet --yes`` fetches them), the
    checkout's ``.cache/fleet-bin/``, then ``PATH`` and ``/usr/bin``.
    """
    env = os.environ.get(BIN_ENV.get(name, ""), "")
    dirs = [os.environ.get("LLMTOP_FLEET_BIN_DIR", ""), fleet_bins.cache_dir(),
            os.path.join(_ROOT, ".cache", "fleet-bin"),
            os.path.join(os.getcwd(), ".cache", "fleet-bin")]
    for cand in [env, *(os.path.join(d, name) for d in dirs if d)]:
        if cand and os.path.isfile(cand) and os.access(cand, os.X_OK):
            return cand
    return shutil.which(name) or shutil.which(name, path="/usr/bin:/usr/sbin")


def free_port() -> int:
    """A loopback port nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass(frozen=True)
class FleetEngine:
    """One scrape target of the fleet, with the labels Prometheus will give it."""

    engine: str
    """``vllm`` | ``sglang``."""
    instance: str
    """``127.0.0.1:PORT``: the ``instance`` label."""
    model: str
    """The ``model_name`` label after relabelling."""
    job: str
    trouble: bool = False
    down: bool = False
    scenario: str | None = None


@dataclass(frozen=True)
class _Group:
    engines: tuple[str, ...]
    model: str
    scenario: str | None
    seed: int
    extra: tuple[str, ...] = ()


def plan(n: int) -> list[_Group]:
    """The demo processes for an N-engine fleet: model A, model B, one engine in trouble."""
    if n < 1:
        raise ValueError("a fleet needs at least one engine")
    kinds = ("vllm", "sglang")
    if n == 1:
        return [_Group(("vllm",), MODEL_A, None, 0)]
    rest = n - 1
    n_a = (rest + 1) // 2
    groups = [_Group(tuple(kinds[i % 2] for i in range(n_a)), MODEL_A, None, 0)]
    if rest - n_a:
        groups.append(_Group(tuple(kinds[i % 2] for i in range(rest - n_a)), MODEL_B, None, 1))
    groups.append(_Group(("vllm",), MODEL_A, TROUBLE_SCENARIO, 2))
    return groups


@dataclass
class DemoFleet:
    """Running demo processes and the targets a Prometheus should scrape."""

    handles: list[DemoHandle]
    engines: list[FleetEngine]
    gpu_urls: list[str] = field(default_factory=list)
    text_targets: list[TextTarget] = field(default_factory=list)

    @property
    def instances(self) -> list[str]:
        return [e.instance for e in self.engines]

    def scrape_config(self, interval_s: float = 1.0) -> dict[str, Any]:
        """A Prometheus scrape config (JSON is YAML) with one job per engine kind."""
        ms = max(1, int(interval_s * 1000))
        timeout = min(ms, max(500, ms - 100))
        jobs: dict[str, list[FleetEngine]] = {}
        for e in self.engines:
            jobs.setdefault(e.job, []).append(e)
        scrape = []
        for job, members in jobs.items():
            cfg: dict[str, Any] = {"job_name": job, "honor_timestamps": True,
                                   "static_configs": [{"targets": [m.instance for m in members]}]}
            renamed = [m.instance for m in members if m.model != MODEL_A and not m.down]
            if renamed:
                alts = "|".join(i.replace(".", "\\.") for i in renamed)
                cfg["metric_relabel_configs"] = [{
                    "source_labels": ["instance", "model_name"], "separator": ";",
                    "regex": f"({alts});.+", "target_label": "model_name",
                    "replacement": MODEL_B}]
            scrape.append(cfg)
        return {"global": {"scrape_interval": f"{ms}ms", "scrape_timeout": f"{timeout}ms",
                           "evaluation_interval": f"{ms}ms"},
                "scrape_configs": scrape}

    def stop(self) -> None:
        for t in self.text_targets:
            t.stop()
        for h in self.handles:
            h.stop()


def start_fleet(n: int = 8, *, down: int = 0, restarting: bool = False,
                restart_after_s: float = 10.0, restart_every_s: float = 30.0,
                stale: bool = False, stale_age_s: float = 60.0, dcgm: bool = False) -> DemoFleet:
    """Start an N-engine demo fleet; stop it with ``.stop()``.

    ``down``: dead targets added (nothing listens). ``stale``: one target (job ``vllm``)
    that answers with a frozen copy of the first engine's metrics, every sample stamped
    ``stale_age_s`` ago (up is 1, the data is old). ``dcgm``: one DCGM-exporter target per
    demo process (job ``dcgm``, ``Hostname`` ``demo-node-K``), made from its simulated GPUs.
    ``restarting``: one extra vLLM engine of model B that restarts (counters reset, a new
    ``process_start_time_seconds``) after ``restart_after_s``, then every ``restart_every_s``.
    """
    handles: list[DemoHandle] = []
    engines: list[FleetEngine] = []
    groups = plan(n)
    if restarting:
        groups.append(_Group(("vllm",), MODEL_B, "restart", 3,
                             ("--fault-after", str(restart_after_s),
                              "--fault-every", str(restart_every_s))))
    try:
        for g in groups:
            h = start_demo(scenario=g.scenario, engines=list(g.engines),
                           extra_args=["--seed", str(g.seed), *g.extra])
            handles.append(h)
            for e in h.info["engines"]:
                engines.append(FleetEngine(e["engine"], f"127.0.0.1:{e['port']}", g.model,
                                           e["engine"], trouble=g.scenario == TROUBLE_SCENARIO,
                                           scenario=g.scenario))
    except BaseException:
        for h in handles:
            h.stop()
        raise
    fleet = DemoFleet(handles, engines, [h.gpu_url for h in handles])
    for _ in range(down):
        engines.append(FleetEngine("vllm", f"127.0.0.1:{free_port()}", MODEL_A, "vllm",
                                   down=True))
    try:
        if stale:
            frozen = httpx.get(handles[0].targets[0].base_url + "/metrics", timeout=5).text
            t = TextTarget(lambda: frozen_text(frozen, stale_age_s))
            fleet.text_targets.append(t)
            engines.append(FleetEngine("vllm", t.instance, MODEL_A, "vllm", scenario="stale"))
        if dcgm:
            for k, url in enumerate(fleet.gpu_urls):
                t = TextTarget(_dcgm_render(url, f"demo-node-{k}"))
                fleet.text_targets.append(t)
                engines.append(FleetEngine("dcgm", t.instance, "", "dcgm", scenario="dcgm"))
    except BaseException:
        fleet.stop()
        raise
    return fleet


def _dcgm_render(gpu_url: str, hostname: str) -> Callable[[], str]:
    def render() -> str:
        return dcgm_text(httpx.get(gpu_url, timeout=2).json()["gpus"], hostname)
    return render


class ServerProcess:
    """A Prometheus or VictoriaMetrics child process on 127.0.0.1."""

    def __init__(self, kind: str, child: children.Child, url: str, workdir: str,
                 log_path: str):
        self.kind = kind
        self.child = child
        self.proc = child.proc
        self.url = url
        self.workdir = workdir
        self.log_path = log_path

    def alive(self) -> bool:
        return self.child.alive()

    def log_tail(self, lines: int = 5) -> str:
        return " | ".join(self.child.tail(lines).splitlines())

    def stop(self) -> None:
        """Terminate the server (idempotent)."""
        self.child.stop(timeout_s=10.0)


def _launch(kind: str, argv: list[str], url: str, health: str, workdir: str,
            timeout_s: float) -> ServerProcess:
    log_path = os.path.join(workdir, f"{kind}.log")
    srv = ServerProcess(kind, children.spawn(argv, cwd=workdir, log_path=log_path), url,
                        workdir, log_path)
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            if not srv.alive():
                raise LlmtopError(f"{kind} exited at start: {srv.log_tail()}")
            try:
                if httpx.get(url + health, timeout=1.0).status_code == 200:
                    return srv
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise LlmtopError(f"{kind} did not answer within {timeout_s:.0f} s: "
                                  f"{srv.log_tail()}")
            time.sleep(0.1)
    except BaseException:
        srv.stop()
        raise


def _config_file(config: dict[str, Any] | str, workdir: str, name: str) -> str:
    if isinstance(config, str) and os.path.isfile(config):
        return config
    path = os.path.join(workdir, name)
    with open(path, "w", encoding="utf-8") as f:
        f.write(config if isinstance(config, str) else json.dumps(config, indent=1))
    return path


def start_prometheus(config: dict[str, Any] | str, workdir: str, *, binary: str | None = None,
                     port: int = 0, data_dir: str | None = None,
                     extra_args: Sequence[str] = (), timeout_s: float = 30.0) -> ServerProcess:
    """Run Prometheus on 127.0.0.1 (``config``: a dict, YAML text or a file path)."""
    binary = binary or find_binary("prometheus")
    if not binary:
        raise LlmtopError("no prometheus binary: " + INSTALL_HINT)
    os.makedirs(workdir, exist_ok=True)
    cfg = _config_file(config, workdir, "prometheus.yml")
    data = data_dir or os.path.join(workdir, "prometheus-data")
    for attempt in range(3):
        p = port or free_port()
        argv = [binary, f"--config.file={cfg}", f"--storage.tsdb.path={data}",
                f"--web.listen-address=127.0.0.1:{p}", "--log.level=warn", *extra_args]
        try:
            return _launch("prometheus", argv, f"http://127.0.0.1:{p}", "/-/ready", workdir,
                           timeout_s)
        except LlmtopError:
            if port or attempt == 2:
                raise
    raise AssertionError("unreachable")


def start_victoria(config: dict[str, Any] | str, workdir: str, *, binary: str | None = None,
                   port: int = 0, latency_offset: str = "1s", extra_args: Sequence[str] = (),
                   timeout_s: float = 30.0) -> ServerProcess:
    """Run single-node VictoriaMetrics on 127.0.0.1, scraping with ``config``.

    ``latency_offset``: VictoriaMetrics hides samples newer than this (default there: 30 s).
    """
    binary = binary or find_binary("victoria-metrics")
    if not binary:
        raise LlmtopError("no victoria-metrics binary: " + INSTALL_HINT)
    os.makedirs(workdir, exist_ok=True)
    cfg = _config_file(config, workdir, "promscrape.yml")
    data = os.path.join(workdir, "victoria-data")
    for attempt in range(3):
        p = port or free_port()
        argv = [binary, f"-httpListenAddr=127.0.0.1:{p}", f"-storageDataPath={data}",
                f"-promscrape.config={cfg}", "-promscrape.config.strictParse=false",
                f"-search.latencyOffset={latency_offset}", "-loggerLevel=ERROR", *extra_args]
        try:
            return _launch("victoria-metrics", argv, f"http://127.0.0.1:{p}", "/health",
                           workdir, timeout_s)
        except LlmtopError:
            if port or attempt == 2:
                raise
    raise AssertionError("unreachable")


def query(url: str, expr: str, at: float | None = None, *, timeout: float = 10.0,
          **params: str) -> dict[str, Any]:
    """The JSON envelope of an instant query ``expr`` at ``at`` (unix s; None = server now)."""
    q: dict[str, str] = {"query": expr, **params}
    if at is not None:
        q["time"] = f"{at:.3f}"
    r = httpx.post(url.rstrip("/") + "/api/v1/query", data=q, timeout=timeout)
    try:
        body: dict[str, Any] = r.json()
    except ValueError as exc:
        raise LlmtopError(f"{url}: HTTP {r.status_code}, not JSON: {r.text[:200]!r}") from exc
    if body.get("status") != "success":
        raise LlmtopError(f"{url}: {body.get('errorType')}: {body.get('error')} ({expr})")
    return body


def wait_scraped(url: str, instances: Sequence[str], *, min_samples: int = 3,
                 timeout_s: float = 60.0) -> dict[str, float]:
    """Wait until each instance has ``min_samples`` ``up`` samples; return its latest ``up``."""
    want = set(instances)
    deadline = time.monotonic() + timeout_s
    seen: dict[str, float] = {}
    while True:
        try:
            counts = query(url, "count_over_time(up[1m])")["data"]["result"]
            ups = query(url, "up")["data"]["result"]
            ok = {s["metric"].get("instance") for s in counts
                  if float(s["value"][1]) >= min_samples}
            seen = {s["metric"].get("instance", ""): float(s["value"][1]) for s in ups}
            if want <= ok and want <= set(seen):
                return {i: seen[i] for i in want}
        except (httpx.HTTPError, LlmtopError):
            pass
        if time.monotonic() > deadline:
            missing = sorted(want - set(seen))
            raise LlmtopError(f"{url}: targets not scraped within {timeout_s:.0f} s "
                              f"(no 'up' yet for {missing or 'none'}; need {min_samples} "
                              "samples each)")
        time.sleep(0.25)


@dataclass
class RunningFleet:
    """A demo fleet and the real server scraping it (``llmtop demo fleet``)."""

    fleet: DemoFleet
    server: ServerProcess
    workdir: str

    @property
    def url(self) -> str:
        return self.server.url

    def stop(self) -> None:
        self.server.stop()
        self.fleet.stop()
        children.remove_temp_dir(self.workdir)


def start_demo_fleet(n: int = 8, *, backend: str = "prometheus", scrape_interval_s: float = 2.0,
                     down: int = 1, port: int = 0, min_samples: int = 3) -> RunningFleet:
    """N demo engines + DCGM targets + a dead one, scraped by a real server on 127.0.0.1.

    Raises :class:`LlmtopError` (with :data:`INSTALL_HINT`) when the binary is missing.
    """
    name = "prometheus" if backend == "prometheus" else "victoria-metrics"
    binary = find_binary(name)
    if not binary:
        raise LlmtopError(f"no {name} binary found: {INSTALL_HINT}")
    fl = start_fleet(n, down=down, dcgm=True)
    workdir = children.temp_dir(prefix="llmtop-demo-fleet-")
    try:
        cfg = fl.scrape_config(scrape_interval_s)
        if name == "prometheus":
            srv = start_prometheus(cfg, workdir, binary=binary, port=port)
        else:
            srv = start_victoria(cfg, workdir, binary=binary, port=port)
        try:
            wait_scraped(srv.url, fl.instances, min_samples=min_samples,
                         timeout_s=max(30.0, 6 * min_samples * scrape_interval_s))
        except BaseException:
            srv.stop()
            raise
    except BaseException:
        fl.stop()
        children.remove_temp_dir(workdir)
        raise
    return RunningFleet(fl, srv, workdir)
