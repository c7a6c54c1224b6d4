"""The search: which trial runs next, what the rules skip, parallel trials, the budget, the
state file and the final report (``run_tune``).

Adaptive (default): configurations equal but for the seat limit form a group; in each group
the middle of the untried seat limits runs first, so one measured limiter rules out a side
(``rules``), and a trial's boundary search starts where its measured neighbours predict
(``hint``). ``strategy = "grid"`` runs every configuration in order. The first trial runs
alone (it fixes the prompt calibration every later trial reuses); then up to ``parallel``
run side by side, each on its own ``gpu_sets`` entry and port. A trial that was client-bound
while others ran is run again alone.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import socket
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict
from typing import Any
from urllib.parse import urlsplit

from llmtop.loadgen.bakeoff import StopFlag, bakeoff_options, default_log_dir
from llmtop.loadgen.options import ProbeOptions
from llmtop.loadgen.plan import EngineSpec
from llmtop.tune.hint import start_hint
from llmtop.tune.limiter import load_text
from llmtop.tune.progress import TuneProgress
from llmtop.tune.rules import SEAT_PARAMS, skip_reason
from llmtop.tune.space import TunePlan, expand, gpus_of, render, trial_key, user_command
from llmtop.tune.state import StateFile, read_state
from llmtop.tune.summary import ranked, score, summarize
from llmtop.tune.trial import TrialRun, empty_trial

__all__ = ["next_batch", "plan_sha256", "run_tune"]

Say = Callable[[str], None]


def plan_sha256(plan: TunePlan) -> str:
    """What a resume must match: the traffic, the SLOs, the templates and the space."""
    keep = {k: v for k, v in asdict(plan).items()
            if k not in ("budget_s", "parallel", "gpu_sets", "strategy")}
    return hashlib.sha256(json.dumps(keep, sort_keys=True, default=str).encode()).hexdigest()


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _group(params: dict[str, Any]) -> str:
    return trial_key({k: v for k, v in params.items() if k not in SEAT_PARAMS})


def next_batch(pending: list[dict[str, Any]], k: int, strategy: str) -> list[dict[str, Any]]:
    """Up to ``k`` configurations to run next (``pending`` in grid order)."""
    if strategy == "grid":
        return pending[:k]
    groups: dict[str, list[dict[str, Any]]] = {}
    for p in pending:
        groups.setdefault(_group(p), []).append(p)
    out: list[dict[str, Any]] = []
    while len(out) < k and any(groups.values()):
        for g in groups.values():
            if g and len(out) < k:
                out.append(g.pop(len(g) // 2))
    return out


class _Search:
    def __init__(self, plan: TunePlan, options: ProbeOptions, *, log_dir: str, say: Say,
                 stop: StopFlag, new_monitor: Callable[[Any], Any] | None,
                 watch_interval_s: float, gpu_hour_price: float | None,
                 progress: TuneProgress | None = None) -> None:
        self.plan = plan
        self.say = say
        self.stop = stop
        self.t0 = time.monotonic()
        self.deadline = None if plan.budget_s is None else self.t0 + plan.budget_s
        self.run = TrialRun(bakeoff_options(dataclasses.replace(options, rate=None)),
                            rate=plan.rate, rate_start=options.rate, max_load=plan.max_load,
                            objective=plan.objective, deadline=self.deadline,
                            gpu_hour_price=gpu_hour_price, log_dir=log_dir, say=say,
                            drive=lambda *_a: None, stop=stop,
                            watch_interval_s=watch_interval_s, new_monitor=new_monitor)
        self.grid = expand(plan.space)
        self.progress = self.run.progress = progress or self.run.progress
        self.progress.total, self.progress.deadline = len(self.grid), self.deadline
        self.results: dict[str, dict[str, Any]] = {}
        self.alone: set[str] = set()
        self.warnings: list[str] = []
        self.count = 0

    def _spec(self, params: dict[str, Any], slot: int) -> tuple[EngineSpec, dict[str, Any]]:
        self.count += 1
        port = _free_port() if "{port}" in self.plan.start + self.plan.url else None
        cmd = render(self.plan.start, params, port)
        trial = empty_trial(params, user_command(self.plan.start, params), rate=self.plan.rate)
        gset = self.plan.gpu_sets[slot] if self.plan.gpu_sets else None
        name = f"trial{self.count:02d}-" + "-".join(f"{k}={v}" for k, v in params.items())
        left = None if self.deadline is None else max(1.0, self.deadline - time.monotonic())
        spec = EngineSpec(name=name, url=render(self.plan.url, params, port), start=cmd,
                          env=self.plan.env,
                          ready_timeout_s=min(self.plan.ready_timeout_s, left or 1e9),
                          gpus=gpus_of(self.plan.gpus, params), stop_timeout_s=
                          self.plan.stop_timeout_s, cuda_visible_devices=gset)
        trial.update(gpus=spec.gpus, url=spec.url, gpu_set=gset, trial_command=cmd,
                     port=port if port is not None else urlsplit(spec.url).port)
        if self.plan.strategy == "adaptive":
            hint = start_hint(params, self.results.values(), self.plan.max_load,
                              rate=self.plan.rate)
            if hint is not None:
                trial["start"] = {"load": hint[0], "predicted_from": hint[1]}
        return spec, trial

    def _skip_ruled_out(self) -> None:
        if self.plan.strategy != "adaptive":
            return
        done = list(self.results.values())
        for p in self.grid:
            key = trial_key(p)
            if key in self.results:
                continue
            why = skip_reason(p, done)
            if why:
                self.results[key] = empty_trial(p, user_command(self.plan.start, p),
                                                "skipped", why, rate=self.plan.rate)
                self.say(f"skip {_short(p)}: {why}")
                self._progress()

    def loop(self, state: StateFile) -> None:
        ran_here = False
        while not self.stop.requested:
            self._skip_ruled_out()
            pending = [p for p in self.grid if trial_key(p) not in self.results]
            if not pending:
                return
            if self.deadline is not None and time.monotonic() >= self.deadline:
                for p in pending:
                    self.results[trial_key(p)] = empty_trial(
                        p, user_command(self.plan.start, p), "skipped",
                        "not run: the budget (budget_s) was spent", rate=self.plan.rate)
                self.warnings.append(f"the budget of {self.plan.budget_s:g} s was spent; "
                                     f"{len(pending)} configuration(s) not run")
                return
            lone = [p for p in pending if trial_key(p) in self.alone]
            k = 1 if lone or not (ran_here or self.run.fixed) else self.plan.parallel
            batch = lone[:1] or next_batch(pending, k, self.plan.strategy)
            self._run_batch(batch, state)
            ran_here = True

    def _run_batch(self, batch: list[dict[str, Any]], state: StateFile) -> None:
        specs = [self._spec(p, i) for i, p in enumerate(batch)]
        n = len(self.grid)
        if len(specs) == 1:
            out = [self.run.run_trial(specs[0][0], specs[0][1], self.count - 1, n)]
        else:
            with ThreadPoolExecutor(max_workers=len(specs)) as ex:
                futs = [ex.submit(self.run.run_trial, s, t, self.count - len(specs) + i, n)
                        for i, (s, t) in enumerate(specs)]
                out = [f.result() for f in futs]
        for t in out:
            t["alone"] = len(out) == 1
            key = trial_key(t["params"])
            starved = len(out) > 1 and t["status"] == "measured" and any(
                lv.get("client_bound") for lv in t["levels"])
            if starved and key not in self.alone:
                self.alone.add(key)
                self.warnings.append(f"{_short(t['params'])}: the load generators of parallel "
                                     "trials starved each other (client-bound); run again alone")
                continue
            if t.get("incomplete"):  # the budget or Ctrl-C cut it: a resume runs it again
                if not self.stop.requested:
                    t = {**t, "status": "skipped", "reason": (
                        "not finished: the budget (budget_s) ran out during this trial "
                        f"after {sum(1 for lv in t['levels'] if lv['requests'])} level(s); "
                        "its server was stopped")}
                self.results[key] = t
                continue
            self.results[key] = t
            state.add(t)
            self.say(f"done {_short(t['params'])}: {t['status']}"
                     + (f" ({t['reason']})" if t["reason"] else "")
                     + f"; limiter {t['limiter']['kind']}; {self._progress()}")

    def _progress(self) -> str:
        """Trials done of all, the best so far and the time left in the budget."""
        done = [t for t in self.results.values() if t["status"] != "skipped"]
        top = ranked(list(self.results.values()), self.plan.objective)
        best = _short(top[0]["params"]) if top else "none yet"
        p = self.progress
        p.done, p.skipped = len(done), len(self.results) - len(done)
        if top:
            sc = score(top[0], self.plan.objective)
            p.best = (f"{best} (holds {load_text(top[0]['sla_load'], self.plan.rate)}; "
                      f"{self.plan.objective} per GPU {'–' if sc is None else f'{sc:.3g}'})")
        left = "" if self.deadline is None else \
            f"; {max(0.0, self.deadline - time.monotonic()):.0f} s left in the budget"
        return f"{len(done)} of {len(self.grid)} run, best so far: {best}{left}"


def _short(p: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in p.items())


def run_tune(plan: TunePlan, options: ProbeOptions, *, log_dir: str | None = None,
             state_path: str | None = None, resume_path: str | None = None,
             say: Say = lambda _s: None, stop: StopFlag | None = None,
             new_monitor: Callable[[Any], Any] | None = None, watch_interval_s: float = 1.0,
             progress: TuneProgress | None = None) -> dict[str, Any]:
    """Run the search; the tune report (partial after a stop). ``new_monitor`` as in
    ``run_bakeoff`` (None: no server-side numbers, so no limiters); ``progress`` is kept
    up to date for a live view."""
    stop = stop or StopFlag()
    log_dir = log_dir or default_log_dir("tune")
    os.makedirs(log_dir, exist_ok=True)
    started = time.time()
    h = plan_sha256(plan)
    s = _Search(plan, options, log_dir=log_dir, say=say, stop=stop, new_monitor=new_monitor,
                watch_interval_s=watch_interval_s,
                gpu_hour_price=plan.probe.get("gpu_hour_price"), progress=progress)
    resumed = 0
    if resume_path:
        old_hash, done = read_state(resume_path)
        if old_hash != h:
            s.warnings.append(f"{resume_path} was written for another plan; only the "
                              "configurations of this plan are reused")
        for key, t in done.items():
            if any(trial_key(p) == key for p in s.grid):
                t["resumed"] = True
                s.results[key] = t
                resumed += 1
        state_path = resume_path
    state_path = state_path or os.path.join(log_dir, "tune-state.jsonl")
    say(f"state file: {state_path}" + (f" ({resumed} trial(s) resumed)" if resume_path else ""))
    s.loop(StateFile(state_path, h))
    trials = [s.results.get(trial_key(p)) or empty_trial(
        p, user_command(plan.start, p), "skipped", "not run: the search was stopped (Ctrl-C)",
        rate=plan.rate)
        for p in s.grid]
    slo = s.run.slo
    summary = summarize(trials, plan.objective, slo)
    by_load: dict[str, set[str]] = {}
    for t in trials:
        for lv in t["levels"]:
            if lv.get("request_list_sha256") and not lv.get("partial"):
                by_load.setdefault(f"{lv['load']:g}", set()).add(lv["request_list_sha256"])
    lists = {k: sorted(v)[0] for k, v in sorted(by_load.items(), key=lambda kv: float(kv[0]))}
    o = s.run.o
    return {"kind": "tune", "objective": plan.objective, "strategy": plan.strategy,
            "load_unit": "req/s" if plan.rate else "concurrency",
            "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
            "duration_s": time.time() - started, "budget_s": plan.budget_s,
            "partial": stop.requested, "state_file": state_path, "log_dir": log_dir,
            "slo": slo, "options": o.to_json(),
            "traffic": {"seed": o.seed, "prompt_tokens": o.prompt_tokens,
                        "output_tokens": o.output_tokens,
                        "hash": hashlib.sha256(json.dumps(lists).encode()).hexdigest()
                        if lists else None, "request_list_sha256_by_load": lists,
                        "identical": all(len(v) == 1 for v in by_load.values())
                        if by_load else None,
                        "calibration": s.run.fixed.get("calibration")},
            "space": plan.space, "trials": trials, **summary,
            "trial_time_s": sum(t.get("duration_s") or 0.0 for t in trials
                                if not t.get("resumed")),
            "warnings": s.warnings + _warnings(trials)}


def _warnings(trials: list[dict[str, Any]]) -> list[str]:
    out = []
    for t in trials:
        bad = [w for lv in t["levels"] for w in lv.get("counts_warnings") or []]
        if t.get("counts_ok") is False and not t.get("resumed"):
            out.append(f"{_short(t['params'])}: counts do not add up: " + "; ".join(bad))
        a = t.get("applied") or {}
        for k, v in t["params"].items():
            if k in SEAT_PARAMS and a.get("max_running") and isinstance(v, (int, float)) \
                    and a["max_running"] < v:
                out.append(f"{_short(t['params'])}: asked {k}={v}, the engine reports a "
                           f"running limit of {a['max_running']:g}")
    return out
