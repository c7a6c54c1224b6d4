"""The search loop with its trials faked (``TrialRun.run_trial`` replaced): which command the
user is told to run, the thread pool of parallel trials, their ``gpu_sets`` slots, and the
re-run of a parallel trial whose load generator starved. No server, no clock: fast."""

from __future__ import annotations

import csv
import io
import json
import threading

import pytest

from llmtop.tune import search as search_mod
from llmtop.tune.search import run_tune
from llmtop.tune.space import parse_tune_plan
from llmtop.tune.trial import TrialRun

PLAN = """
[probe]
prompt_tokens = 64
output_tokens = 32
ttft_slo = 0.2
requests_per_step = 8
warmup = 0

[tune]
url = "http://127.0.0.1:{port}"
start = "llmtop demo serve --engines vllm --ports {port} --max-num-seqs {max_num_seqs}"
strategy = "grid"
max_load = 32
%s

[tune.space]
max_num_seqs = %s
"""


def _plan(seqs="[4, 8]", extra=""):
    return parse_tune_plan(PLAN % (extra, seqs))


def _options(plan):
    from llmtop.cli.tune import _options as opts

    return opts(plan, None)


def _level(load, met, client_bound=False):
    return {"load": load, "met": met, "requests": 8, "output_tok_s": 100.0 * load,
            "requests_per_s": 2.0 * load, "goodput_rps": 2.0 * load if met else 0.0,
            "ttft_p95_s": 0.1 if met else 0.5, "tpot_p95_s": 0.01, "itl_p95_s": 0.01,
            "errors": 0, "error_rate": 0.0, "duration_s": 4.0, "client_bound": client_bound,
            "client_bound_reasons": ["event-loop lag"] if client_bound else [],
            "running_peak": load, "waiting_peak": 0, "kv_peak": 0.2, "preemptions": 0,
            "preemptions_per_s": 0.0, "stopped_early": None, "partial": False,
            "request_list_sha256": f"h{load}"}


class Fake:
    """``run_trial`` stand-in: records each call and fills the trial as a measured one."""

    def __init__(self, *, meet: frozenset[int] = frozenset(),
                 starve: frozenset[int] = frozenset()) -> None:
        self.calls: list[dict] = []
        self.lock = threading.Lock()
        self.meet = set(meet)
        """Configurations (by seats) whose first runs must be inside ``run_trial`` at once."""
        self.barrier = threading.Barrier(len(meet)) if meet else None
        self.starve = set(starve)
        """Configurations whose first run is client-bound (the generators starved)."""
        self.starved_once: set[int] = set()

    def __call__(self, run: TrialRun, spec, trial, k, n):
        seqs = trial["params"]["max_num_seqs"]
        with self.lock:
            first = all(c["seqs"] != seqs for c in self.calls)
            self.calls.append({"seqs": seqs, "gpu_set": spec.cuda_visible_devices,
                               "start": spec.start, "url": spec.url,
                               "thread": threading.current_thread().name})
        if self.barrier is not None and first and seqs in self.meet:
            # run one after another, the first waits here alone and the barrier breaks
            self.barrier.wait(timeout=5)
        run.fixed = run.fixed or {"calibration": {"tokens_per_word": 1.0}}
        starved = seqs in self.starve and seqs not in self.starved_once
        if starved:
            self.starved_once.add(seqs)
        trial["levels"] = [_level(seqs, True, client_bound=starved),
                           _level(2 * seqs, False)]
        trial.update(sla_load=seqs, output_tok_s=100.0 * seqs, goodput_rps=2.0 * seqs,
                     ttft_p95_s=0.1, per_gpu={"goodput_rps": 2.0 * seqs,
                                              "output_tok_s": 100.0 * seqs},
                     limiter={"kind": "seats", "evidence": "running at the seat limit",
                              "level": 2 * seqs}, duration_s=1.0)
        return trial


def _run(tmp_path, monkeypatch, fake, plan=None, **kw):
    plan = plan or _plan()
    monkeypatch.setattr(TrialRun, "run_trial", lambda run, *a: fake(run, *a))
    return run_tune(plan, _options(plan), log_dir=str(tmp_path / "logs"), **kw)


# -- part 2: the start command the user can copy ---------------------------------------

def test_the_recommended_command_keeps_the_plans_port_placeholder_everywhere(
        tmp_path, monkeypatch):
    from llmtop.console.tune_view import print_tune
    from llmtop.report.tune import to_csv_text, tune_html

    fake = Fake()
    report = _run(tmp_path, monkeypatch, fake)
    ran = next(c for c in fake.calls if c["seqs"] == 8)
    trial_port = int(ran["url"].rsplit(":", 1)[1])
    want = "llmtop demo serve --engines vllm --ports {port} --max-num-seqs 8"
    # JSON: the command to run, and separately the trial's port and its own command
    doc = json.loads(json.dumps(report))
    assert doc["best"]["command"] == want
    assert doc["best"]["trial_port"] == trial_port
    assert doc["best"]["trial_command"] == ran["start"] == want.replace("{port}",
                                                                        str(trial_port))
    assert all(t["command"].count("{port}") == 1 for t in doc["trials"])
    # console
    out = io.StringIO()
    print_tune(report, file=out)
    text = out.getvalue()
    assert f"Start command: {want}\n" in text
    assert f"the trial ran it on port {trial_port}" in text
    assert f"--ports {trial_port}" not in text
    # CSV: a command column and the trial's port, per trial
    rows = list(csv.DictReader(io.StringIO(to_csv_text(report))))
    by = {r["params"]: r for r in rows}
    assert by["max_num_seqs=8"]["command"] == want
    assert by["max_num_seqs=8"]["trial_port"] == str(trial_port)
    # HTML
    page = tune_html(report)
    assert f"<pre class='cmd'>{want}</pre>" in page
    assert f"The trial ran it on port {trial_port}" in page
    assert f"--ports {trial_port}" not in page


def test_a_plan_that_fixes_its_port_recommends_that_port_and_no_extra_line(
        tmp_path, monkeypatch):
    from llmtop.console.tune_view import print_tune
    from llmtop.report.tune import to_csv_text

    text = PLAN.replace("{port}", "8011") % ("", "[4, 8]")
    plan = parse_tune_plan(text)
    report = _run(tmp_path, monkeypatch, Fake(), plan=plan)
    want = "llmtop demo serve --engines vllm --ports 8011 --max-num-seqs 8"
    assert report["best"]["command"] == report["best"]["trial_command"] == want
    assert report["best"]["trial_port"] == 8011
    out = io.StringIO()
    print_tune(report, file=out)
    assert f"Start command: {want}\n" in out.getvalue()
    assert "the trial ran it on port" not in out.getvalue()
    rows = list(csv.DictReader(io.StringIO(to_csv_text(report))))
    assert {r["trial_port"] for r in rows} == {"8011"}


def test_skipped_trials_show_the_command_to_run_not_port_zero(tmp_path, monkeypatch):
    plan = _plan("[4, 8, 16]", "budget_s = 0.001")
    report = _run(tmp_path, monkeypatch, Fake(), plan=plan)
    skipped = [t for t in report["trials"] if t["status"] == "skipped"]
    assert skipped, report["trials"]
    assert all("--ports {port}" in t["command"] for t in skipped)
    assert all(t["port"] is None for t in skipped)


@pytest.fixture(autouse=True)
def _fixed_ports(monkeypatch):
    # known trial ports (the search would bind for free ones)
    monkeypatch.setattr(search_mod, "_free_port", _ports())


def _ports():
    it = iter(range(47001, 48000))
    return lambda: next(it)


# -- part 5: parallel trials: the thread pool, the gpu_sets slots, the starved re-run ------

PARALLEL = 'parallel = 2\ngpu_sets = ["0", "1"]'


def test_parallel_trials_run_at_once_each_on_its_own_gpu_set_and_port(tmp_path, monkeypatch):
    fake = Fake(meet=frozenset({8, 16}))
    report = _run(tmp_path, monkeypatch, fake, plan=_plan("[4, 8, 16]", PARALLEL))
    first, *pair = fake.calls
    # the first runs alone (it fixes the prompt calibration), on slot 0
    assert (first["seqs"], first["gpu_set"]) == (4, "0")
    # then two at once (the barrier above held both), each on its own slot and port
    assert sorted(c["seqs"] for c in pair) == [8, 16]
    assert sorted(c["gpu_set"] for c in pair) == ["0", "1"]
    assert len({c["thread"] for c in pair}) == 2 and len({c["url"] for c in pair}) == 2
    by = {t["params"]["max_num_seqs"]: t for t in report["trials"]}
    assert {by[8]["gpu_set"], by[16]["gpu_set"]} == {"0", "1"}
    assert by[4]["alone"] is True and by[8]["alone"] is False and by[16]["alone"] is False
    assert not any("starved" in w for w in report["warnings"])


def test_a_starved_parallel_trial_runs_again_alone(tmp_path, monkeypatch):
    fake = Fake(meet=frozenset({8, 16}), starve=frozenset({16}))
    report = _run(tmp_path, monkeypatch, fake, plan=_plan("[4, 8, 16]", PARALLEL))
    runs16 = [c for c in fake.calls if c["seqs"] == 16]
    assert len(runs16) == 2 and len([c for c in fake.calls if c["seqs"] == 8]) == 1
    assert runs16[1]["gpu_set"] == "0" and fake.calls[-1]["seqs"] == 16  # alone, slot 0
    by = {t["params"]["max_num_seqs"]: t for t in report["trials"]}
    assert by[16]["alone"] is True and by[8]["alone"] is False
    assert not any(lv["client_bound"] for lv in by[16]["levels"])  # the re-run's numbers
    assert any("max_num_seqs=16" in w and "starved each other" in w
               for w in report["warnings"])
    # the state file holds each configuration once: the starved run was not kept
    state = (tmp_path / "logs" / "tune-state.jsonl").read_text().splitlines()
    assert sum('"kind": "trial"' in ln for ln in state) == 3
