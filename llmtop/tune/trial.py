"""One trial: one configuration on one warm server (the bake-off's ``EngineRun``: started in
its own process group with a log, cold start timed, stopped, GPU memory released), its SLA
boundary found level by level (``boundary``), each level watched from the server's side, and
its limiter named (``limiter``).

A level is stopped early when it is lost beyond doubt (preemptions climb tick after tick);
the trial ends when the engine dies or hangs (its process exits, its metrics stop answering
or its token counter freezes under load), with its log tail kept.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import Any

from llmtop.loadgen.bakeoff import EngineRun, StopFlag
from llmtop.loadgen.cost import usd_per_mtok
from llmtop.loadgen.engines import EngineProcess
from llmtop.loadgen.fairness import engine_info
from llmtop.loadgen.options import ProbeOptions
from llmtop.loadgen.plan import EngineSpec
from llmtop.loadgen.reconcile import Preflight
from llmtop.loadgen.server_side import ServerWatch
from llmtop.loadgen.stats import p95_lost
from llmtop.tune.boundary import level_met, next_level, start_level
from llmtop.tune.limiter import limiter, load_text
from llmtop.tune.progress import TuneProgress
from llmtop.tune.rules import SEAT_PARAMS
from llmtop.units import fixed
from llmtop.units import ms_words as _ms
from llmtop.units import pct_words as _pct

__all__ = ["HUNG_S", "RATE_LEVEL_S", "TrialRun", "empty_trial"]

HUNG_S = 10.0
"""Metrics unanswered, or no token generated while requests run, this long: hung."""
RATE_LEVEL_S = 600.0
"""The time bound of one rate level (its list ends it long before, unless the engine hangs)."""
CLIMB_TICKS = 3
"""Preemptions rising on this many ticks in a row, with a queue: the level is lost."""

Say = Callable[[str], None]


def empty_trial(params: dict[str, Any], command: str, status: str = "measured",
                reason: str | None = None, *, rate: bool = False) -> dict[str, Any]:
    """A trial record with nothing measured; its loads are rates (req/s) with ``rate``."""
    return {"params": params, "command": command, "status": status, "reason": reason,
            "load_unit": "req/s" if rate else "concurrency",
            "cold_start_s": None, "applied": {}, "sla_load": None, "output_tok_s": None,
            "goodput_rps": None, "ttft_p95_s": None, "sla_boundary": None,
            "limiter": {"kind": "none", "evidence": "not measured", "level": None},
            "cost_per_mtok_usd": None, "levels": [], "start": None, "gpus": None,
            "log": None,
            "log_tail": None, "url": None, "gpu_set": None, "duration_s": None,
            "trial_command": None, "port": None, "preflight": None, "counts_ok": None,
            "alone": True}


class _Watchdog:
    """The drive of one level: passes Ctrl-C and the budget on, stops a lost level and
    notices a dead or hung engine."""

    def __init__(self, proc: EngineProcess | None, deadline: float | None,
                 ttft_slo: float | None = None) -> None:
        self.proc = proc
        self.deadline = deadline
        self.ttft_slo = ttft_slo
        self.watch: ServerWatch | None = None
        self.early: str | None = None
        self.dead: str | None = None
        self.budget = False

    def drive(self, _spec: Any, _opts: Any, handle: Any, stop: StopFlag) -> None:
        t_stop = None
        climb, last_pre, last_tok, t_tok = 0, None, None, time.monotonic()
        t0 = time.monotonic()
        while not handle.finished:
            lost = self._lost([ev for ev in handle.wait(0.2) if ev.get("type") == "progress"])
            now = time.monotonic()
            why = None
            if stop.requested:
                why = "ctrl-c"
            elif self.deadline is not None and now > self.deadline:
                self.budget, why = True, "budget"
            elif self.proc is not None and not self.proc.child.alive():
                code = self.proc.child.proc.returncode
                self.dead = why = f"the engine exited (status {code}) during the trial"
            elif self.watch is not None:
                lat = self.watch.latest
                seen = lat.get("t", t0)
                if now - seen > HUNG_S:
                    self.dead = why = (f"the engine's metrics did not answer for {HUNG_S:g} s "
                                       "(hung)")
                tok = lat.get("generation_tokens")
                if tok is not None and tok != last_tok:
                    last_tok, t_tok = tok, now
                elif self.dead is None and tok is not None and now - t_tok > HUNG_S and (
                        (lat.get("running") or 0) + (lat.get("waiting") or 0)) > 0:
                    self.dead = why = (
                        f"the engine generated no token for {HUNG_S:g} s with "
                        f"{lat.get('running') or 0:.0f} running and {lat.get('waiting') or 0:.0f} "
                        "waiting (hung)")
                pre = lat.get("preemptions")
                if pre is not None and last_pre is not None and seen > t0:
                    climb = climb + 1 if pre > last_pre and (lat.get("waiting") or 0) >= 1 \
                        else 0
                    if climb >= CLIMB_TICKS and self.early is None:
                        self.early = why = (f"stopped early: preemptions climbed on "
                                            f"{climb} ticks in a row with a queue")
                last_pre = pre
            if why is None and lost and self.early is None:
                self.early = why = lost
            if why and t_stop is None:
                t_stop = now
                handle.stop()
            if (t_stop is not None and (now - t_stop > 10 or stop.count >= 2)) or self.dead:
                handle.kill()
                break

    def _lost(self, progress: list[dict[str, Any]]) -> str | None:
        """Why the level is lost beyond doubt from the generator's side: enough of its list
        already past the TTFT SLO that its p95 cannot meet it (this also caps a rate level
        far past the engine's capacity, whose requests would pile up until its list ends)."""
        if self.ttft_slo is None or not progress:
            return None
        last = progress[-1]
        missed, planned = last.get("ttft_slo_missed"), last.get("requests_planned")
        if not p95_lost(missed, planned):
            return None
        return (f"stopped early: {missed} of its {planned} requests already past the TTFT "
                f"SLO ({1000 * self.ttft_slo:.0f} ms), so its p95 cannot meet it")


class TrialRun(EngineRun):
    """The bake-off's engine run, measuring a trial's SLA boundary instead of a ladder."""

    def __init__(self, options: ProbeOptions, *, rate: bool, max_load: float, objective: str,
                 deadline: float | None, rate_start: float | None = None, **kw: Any) -> None:
        super().__init__(options, **kw)
        self.rate = rate
        self.rate_start = rate_start
        """The first rate level (``[probe] rate``); None: 1 req/s."""
        self.max_load = max_load
        self.objective = objective
        self.deadline = deadline
        self.slo = {"ttft": options.ttft_slo, "itl": options.itl_slo, "tpot": options.tpot_slo}
        self.trials: dict[str, dict[str, Any]] = {}
        """Trial record by engine name, filled while it runs."""
        self.progress = TuneProgress()
        """Where the search stands (the search sets it; the live view reads it)."""

    def run_trial(self, spec: EngineSpec, trial: dict[str, Any], k: int, n: int
                  ) -> dict[str, Any]:
        """Start, measure and stop one configuration; fills and returns ``trial``."""
        t0 = time.monotonic()
        self.trials[spec.name] = trial
        words = _words(trial["params"])
        self.progress.started += 1
        self.progress.running[words] = None
        try:
            e = self.engine(k, n, spec)
        finally:
            self.progress.running.pop(words, None)
        trial["duration_s"] = time.monotonic() - t0
        trial["cold_start_s"] = e.get("cold_start_s")
        trial["cold_start_stages"] = e.get("cold_start_stages")  # vLLM's start-up spans
        trial["log"] = e.get("log")
        trial["exit_status"] = e.get("exit_status")
        trial["pid"] = e.get("pid")
        trial["gpu_release"] = e.get("gpu_release")
        books = Preflight.from_json(e.get("cold_start_requests"))
        for lv in trial["levels"]:
            books = books.add(Preflight.from_json(lv.get("preflight")))
        trial["preflight"] = books.to_json()
        trial["counts_ok"] = all(lv.get("counts_ok") is not False for lv in trial["levels"])
        if e.get("error") and trial["status"] == "measured" and not any(
                lv["requests"] for lv in trial["levels"]):
            trial["status"] = "failed"
            trial["log_tail"] = e.get("log_tail")
            last = next((ln.strip() for ln in (e.get("log_tail") or "").splitlines()[::-1]
                         if ln.strip()), None)
            trial["reason"] = e["error"] + ("" if last is None else f"; its log ends: {last}")
        elif e.get("error") and trial["reason"] is None:
            trial["reason"] = e["error"]
        return trial

    def _measure(self, spec: EngineSpec, e: dict[str, Any], proc: EngineProcess | None
                 ) -> None:
        trial = self.trials[spec.name]
        info = engine_info(spec.url, api_key=self.o.api_key, insecure=self.o.insecure)
        trial["applied"] = {"max_model_len": info.get("max_model_len"),
                            "model": info.get("model"),
                            "engine_version": info.get("version"),
                            "kv_capacity_tokens": None, "max_running": None}
        seats_param = next((float(v) for k, v in trial["params"].items()
                            if k in SEAT_PARAMS and isinstance(v, (int, float))), None)
        met: dict[float, bool] = {}
        hint = trial.get("start")
        load: float | None = (hint["load"] if hint else
                              min(self.max_load, self.rate_start or 1.0) if self.rate else
                              start_level(seats_param, self.max_load))
        if hint:
            self.say(f"  {spec.name}: starts at {load_text(hint['load'], self.rate)}, "
                     f"predicted: {hint['predicted_from']}")
        first = load
        dog = _Watchdog(proc, self.deadline, self.slo.get("ttft"))
        try:
            while load is not None and not (self.stop.requested or dog.budget or dog.dead):
                self.say(f"  {spec.name}: measuring {load_text(load, self.rate)}")
                self.progress.running[_words(trial["params"])] = load_text(load, self.rate)
                lv = self._level(spec, trial, load, dog)
                met[load] = lv["met"]
                trial["levels"].append(lv)
                self.say(f"  {spec.name}: {_level_line(lv, self.rate)}")
                self.progress.last = f"{_words(trial['params'])}: {_level_line(lv, self.rate)}"
                load = next_level(met, first, self.max_load, rate=self.rate,
                                  hinted=bool(hint))
        finally:  # also when a level gave no report: what was measured still counts
            if dog.dead:
                trial["status"], trial["reason"] = "failed", dog.dead
                trial["log_tail"] = proc.child.tail() if proc is not None else None
            elif self.stop.requested or dog.budget:
                trial["status"] = "failed"
                trial["reason"] = ("stopped (Ctrl-C) during the trial" if self.stop.requested
                                   else "the budget ran out during the trial")
                trial["incomplete"] = True
            self._conclude(trial, seats_param)

    def _level(self, spec: EngineSpec, trial: dict[str, Any], load: float,
               dog: _Watchdog) -> dict[str, Any]:
        o = self.o
        if self.rate:  # one open-loop fixed list at this rate (fixed_steps)
            opts = dataclasses.replace(o, url=spec.url, sweep=False, levels=None, rate=load,
                                       concurrency=None, duration=o.duration or RATE_LEVEL_S,
                                       **self.fixed).validate()
        else:
            opts = dataclasses.replace(o, url=spec.url, levels=(int(load),), **self.fixed
                                       ).validate()
        dog.early = None

        def on_watch(w: ServerWatch | None) -> None:
            dog.watch = w

        report, server = self.probe(spec, opts, drive=dog.drive, on_watch=on_watch)
        self.fix_calibration(spec, report)
        applied = trial["applied"]
        applied["kv_capacity_tokens"] = server.get("kv_capacity_tokens") or \
            applied["kv_capacity_tokens"]
        applied["max_running"] = server.get("max_running") or applied["max_running"]
        applied["engine"] = server.get("engine") or applied.get("engine")
        steps = report.get("steps") or []
        step = steps[-1] if steps else {}
        below = [lv["output_tok_s"] for lv in trial["levels"]
                 if lv["load"] < load and lv.get("output_tok_s") is not None]
        met = bool(step.get("requests")) and dog.early is None and level_met(
            step, self.slo, min(o.max_error_rate, 0.01), max(below) if below else None,
            rate=self.rate)
        lv = _level_record(load, step, server, met, dog.early)
        lv["request_list_sha256"] = report.get("request_list_sha256")
        rec = report.get("reconciliation") or {}
        lv["preflight"] = report.get("preflight")
        lv["requests_sent"] = report.get("requests_sent")
        lv["counts_ok"] = rec.get("ok")
        lv["counts_warnings"] = rec.get("warnings") or []
        return lv

    def _conclude(self, trial: dict[str, Any], seats_param: float | None) -> None:
        levels = trial["levels"]
        seats = trial["applied"].get("max_running") or seats_param
        trial["limiter"] = limiter(levels, seats, rate=self.rate)
        ok = [lv for lv in levels if lv["met"]]
        best = max(ok, key=lambda lv: lv["load"]) if ok else None
        gpus = trial["gpus"] or 1.0
        if best is not None:
            trial["sla_load"] = best["load"]
            trial["output_tok_s"] = best["output_tok_s"]
            trial["goodput_rps"] = best["goodput_rps"]
            trial["ttft_p95_s"] = best["ttft_p95_s"]
            trial["sla_boundary"] = {"load": best["load"], "rate": self.rate,
                                     "requests_per_s": best["requests_per_s"],
                                     "output_tokens_per_s": best["output_tok_s"],
                                     "ttft_p95_s": best["ttft_p95_s"],
                                     "tpot_p95_s": best["tpot_p95_s"], "slo": self.slo}
        tops = [lv["output_tok_s"] for lv in levels if lv.get("output_tok_s")]
        trial["max_output_tok_s"] = max(tops) if tops else None
        price = self.price
        trial["cost_per_mtok_usd"] = None if price is None else usd_per_mtok(
            price, gpus, trial["output_tok_s"])
        trial["per_gpu"] = {
            "goodput_rps": None if trial["goodput_rps"] is None else trial["goodput_rps"] / gpus,
            "output_tok_s": None if trial["output_tok_s"] is None
            else trial["output_tok_s"] / gpus}


def _words(params: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in params.items())


def _level_record(load: float, step: dict[str, Any], server: dict[str, Any], met: bool,
                  early: str | None) -> dict[str, Any]:
    def p95(key: str) -> float | None:
        return (step.get(key) or {}).get("p95")

    dur = step.get("duration_s")
    pre = server.get("preemptions")
    return {"load": load, "met": met, "requests": step.get("requests", 0),
            "output_tok_s": step.get("output_tokens_per_s"),
            "requests_per_s": step.get("requests_per_s"),
            "goodput_rps": step.get("goodput_per_s"),
            "ttft_p95_s": p95("ttft_s"), "tpot_p95_s": p95("tpot_s"),
            "itl_p95_s": p95("itl_request_s"), "errors": step.get("errors_total", 0),
            "error_rate": step.get("error_rate", 0.0), "duration_s": dur,
            "client_bound": bool(step.get("client_bound")),
            "client_bound_reasons": step.get("client_bound_reasons") or [],
            "running_peak": server.get("running_peak"), "waiting_peak": server.get("waiting_peak"),
            "kv_peak": server.get("kv_peak"), "preemptions": pre,
            "preemptions_per_s": pre / dur if pre is not None and dur else None,
            "stopped_early": early, "partial": bool(step.get("partial"))}


def _level_line(lv: dict[str, Any], rate: bool) -> str:
    """One progress line per measured level."""
    return (f"{load_text(lv['load'], rate)} {'meets' if lv['met'] else 'misses'} the SLOs: "
            f"{fixed(lv['output_tok_s'])} tok/s, TTFT p95 {_ms(lv['ttft_p95_s'])}, running "
            f"{fixed(lv['running_peak'])}, waiting {fixed(lv['waiting_peak'])}, "
            f"KV {_pct(lv['kv_peak'])}"
            + (f" ({lv['stopped_early']})" if lv.get("stopped_early") else ""))


