"""The tuner's pure parts: the plan and its expansion, the level search, the limiter, the
pruning rules, the ranking and Pareto front, and the state file."""

from __future__ import annotations

import pytest

from llmtop.errors import ConfigError
from llmtop.tune.boundary import next_level, start_level
from llmtop.tune.limiter import limiter
from llmtop.tune.rules import skip_reason
from llmtop.tune.search import next_batch
from llmtop.tune.space import expand, gpus_of, parse_tune_plan, render
from llmtop.tune.state import StateFile, read_state
from llmtop.tune.summary import pareto, summarize
from llmtop.tune.trial import empty_trial

PLAN = """
[probe]
ttft_slo = 0.5
[tune]
url = "http://127.0.0.1:{port}"
start = "serve --port {port} --max-num-seqs {max_num_seqs} --tp {tp} --json '{\\"a\\": 1}'"
gpus = "{tp} * 2"
parallel = 2
gpu_sets = ["0", "1"]
[tune.space]
max_num_seqs = [64, 8, 32]
tp = [1, 2]
"""


def test_plan_expands_sorted_and_renders_port_and_params():
    plan = parse_tune_plan(PLAN)
    grid = expand(plan.space)
    assert [g["max_num_seqs"] for g in grid[:3]] == [8, 8, 32]
    assert len(grid) == 6
    cmd = render(plan.start, grid[1], port=9000)
    assert cmd == "serve --port 9000 --max-num-seqs 8 --tp 2 --json '{\"a\": 1}'"
    assert gpus_of(plan.gpus, grid[1]) == 4.0
    assert plan.probe == {"ttft_slo": 0.5}


@pytest.mark.parametrize("bad, words", [
    (PLAN.replace("{tp} --json", "{nope} --json"), "{nope}"),
    (PLAN.replace('gpus = "{tp} * 2"', 'gpus = "import os"'), "not a number"),
    (PLAN.replace("[tune.space]", "[tune.space]\nx = []"), "list of values"),
    (PLAN.replace('parallel = 2', 'parallel = 3'), "gpu_sets"),
    (PLAN + "\n[other]\n", "unknown table"),
], ids=["unknown-name", "gpus-not-arith", "empty-list", "parallel-gpu-sets", "table"])
def test_plan_errors_say_what(bad, words):
    with pytest.raises(ConfigError) as exc:
        parse_tune_plan(bad)
    assert words in str(exc.value)


def _walk(passes_up_to: float, start: float, max_load: float = 256) -> list[float]:
    met: dict[float, bool] = {}
    seq = []
    load = start
    while load is not None:
        seq.append(load)
        met[load] = load <= passes_up_to
        load = next_level(met, start, max_load)
    return seq


def test_boundary_doubles_then_bisects_in_a_handful():
    seq = _walk(12, start_level(8, 256))
    assert seq[:3] == [4, 8, 16]
    assert 12 in seq and len(seq) <= 6


def test_boundary_halves_when_the_start_fails_and_stops_at_nothing():
    assert _walk(2, 16)[:4] == [16, 8, 4, 2]
    assert _walk(0, 4) == [4, 2, 1]
    assert _walk(1000, 64, max_load=128) == [64, 128]


def _lv(load, met, **kw):
    base = {"load": load, "met": met, "requests": 10, "running_peak": 4, "waiting_peak": 0,
            "kv_peak": 0.3, "preemptions": 0, "error_rate": 0.0, "duration_s": 10.0,
            "client_bound": False, "ttft_p95_s": 0.1, "tpot_p95_s": 0.02}
    base.update(kw)
    return base


@pytest.mark.parametrize("levels, seats, kind", [
    ([_lv(4, True), _lv(8, False, kv_peak=0.97, preemptions=30, waiting_peak=3)], 16, "kv"),
    ([_lv(4, True), _lv(8, False, running_peak=4, waiting_peak=4)], 4, "seats"),
    ([_lv(4, True), _lv(8, False, running_peak=5, waiting_peak=3)], 16, "compute"),
    ([_lv(4, True), _lv(8, False, running_peak=5, waiting_peak=3, kv_peak=0.93)], 8, "kv"),
    ([_lv(4, True), _lv(8, False, running_peak=8)], 16, "compute"),
    ([_lv(4, True), _lv(8, False, error_rate=0.2)], 16, "errors"),
    ([_lv(4, True), _lv(8, False, client_bound=True, client_bound_reasons=["cpu"])], 16,
     "client"),
    ([_lv(4, True), _lv(8, True)], 16, "under_driven"),
    ([], 16, "none"),
])
def test_limiter_kinds(levels, seats, kind):
    lim = limiter(levels, seats)
    assert lim["kind"] == kind
    if levels:
        assert lim["level"] == 8 and "c=8" in lim["evidence"]


def test_limiter_queue_on_the_server_beats_client_bound():
    lv = _lv(8, False, running_peak=4, waiting_peak=4, client_bound=True)
    assert limiter([lv], 4)["kind"] == "seats"


def _trial(seqs, kv, kind, levels=None, status="measured", reason=None):
    t = empty_trial({"max_num_seqs": seqs, "kv_tokens": kv}, "x", status, reason)
    t["limiter"] = {"kind": kind, "evidence": f"{kind} evidence", "level": 8}
    t["levels"] = levels or [_lv(8, False)]
    return t


def test_rules_skip_with_reasons_and_only_same_other_params():
    kv = _trial(8, 480, "kv")
    assert "KV-bound" in skip_reason({"max_num_seqs": 16, "kv_tokens": 480}, [kv])
    assert skip_reason({"max_num_seqs": 4, "kv_tokens": 480}, [kv]) is None
    assert skip_reason({"max_num_seqs": 16, "kv_tokens": 2048}, [kv]) is None
    seats = _trial(8, 2048, "seats", [_lv(16, False, running_peak=8, waiting_peak=8,
                                          kv_peak=0.7)])
    assert "seat-bound" in skip_reason({"max_num_seqs": 4, "kv_tokens": 2048}, [seats])
    assert skip_reason({"max_num_seqs": 16, "kv_tokens": 2048}, [seats]) is None
    unused = _trial(16, 2048, "compute", [_lv(16, False, running_peak=6, waiting_peak=0)])
    assert "never reached" in skip_reason({"max_num_seqs": 32, "kv_tokens": 2048}, [unused])
    assert "never passed" in skip_reason({"max_num_seqs": 16, "kv_tokens": 4096}, [unused])
    oom = _trial(8, 2048, "none", status="failed", reason="CUDA out of memory")
    assert "out of memory" in skip_reason({"max_num_seqs": 8, "kv_tokens": 4096}, [oom])
    assert skip_reason({"max_num_seqs": 8, "kv_tokens": 1024}, [oom]) is None


def test_adaptive_batch_takes_the_middle_seat_limit_first():
    grid = expand({"max_num_seqs": [2, 4, 8, 16], "kv_tokens": [256, 1024]})
    assert next_batch(grid, 1, "adaptive") == [{"max_num_seqs": 8, "kv_tokens": 256}]
    two = next_batch(grid, 2, "adaptive")
    assert {t["kv_tokens"] for t in two} == {256, 1024}
    assert next_batch(grid, 1, "grid") == [grid[0]]


def test_summary_ranks_by_goodput_per_gpu_and_builds_the_front():
    a = _trial(4, 1, "seats")
    b = _trial(8, 1, "kv")
    a.update(goodput_rps=10.0, gpus=1.0, output_tok_s=100.0, ttft_p95_s=0.1,
             per_gpu={"output_tok_s": 100.0})
    b.update(goodput_rps=12.0, gpus=2.0, output_tok_s=240.0, ttft_p95_s=0.3,
             per_gpu={"output_tok_s": 120.0})
    skipped = empty_trial({"max_num_seqs": 16, "kv_tokens": 1}, "x", "skipped", "why")
    s = summarize([a, b, skipped], "goodput", {"ttft": 0.5})
    assert s["ranking"] == [0, 1] and s["best"]["params"]["max_num_seqs"] == 4
    # a's sla_load is unset: no load met the SLOs, said so with its limiter
    assert a["capacity"] == ("meets the SLOs at no load tried (TTFT p95 ≤ 500 ms); "
                             "limited by seats evidence")
    a["sla_load"] = 4
    assert summarize([a, b, skipped], "goodput", {"ttft": 0.5})["best"]["why"].endswith(
        "holds c=4 (10.00 req/s, 100 output tok/s) at TTFT p95 ≤ 500 ms; "
        "limited by seats evidence")
    assert pareto([a, b], "ttft_p95_s") == [0, 1]
    b["ttft_p95_s"] = 0.05
    assert pareto([a, b], "ttft_p95_s") == [1]


def test_state_file_round_trip_ignores_a_torn_line(tmp_path):
    path = str(tmp_path / "s.jsonl")
    st = StateFile(path, "abc")
    st.add(_trial(4, 1, "seats"))
    with open(path, "a", encoding="utf-8") as f:
        f.write('{"kind": "trial", "tri')
    h, done = read_state(path)
    assert h == "abc" and len(done) == 1
    (tmp_path / "x").write_text("{}\n")
    with pytest.raises(ConfigError):
        read_state(str(tmp_path / "x"))


# -- the capacity profile of a run (docs/capacity.md) -------------------------------------

def _tune_report(levels):
    trial = {"url": "http://127.0.0.1:8000", "params": {"max_num_seqs": 16},
             "applied": {"model": "tiny", "engine": "vllm"}, "levels": levels,
             "sla_boundary": {"load": 8, "requests_per_s": 4.5, "output_tokens_per_s": 900.0}}
    return {"best": {"trial": 0}, "trials": [trial], "slo": {"ttft": 0.5, "tpot": 0.05},
            "traffic": {"prompt_tokens": 512, "output_tokens": 256}}


def test_the_best_trials_boundary_is_saved_as_a_profile_when_a_higher_level_failed():
    from llmtop.tune.profile import best_profile

    p = best_profile(_tune_report([{"load": 8, "met": True}, {"load": 16, "met": False}]))
    assert p is not None and p.source == "tune" and p.requests_per_s == 4.5
    assert (p.netloc, p.model, p.engine) == ("127.0.0.1:8000", "tiny", "vllm")
    assert p.settings == {"max_num_seqs": 16} and p.slo["ttft"] == 0.5
    assert p.shape["prompt_mean"] == 512 and p.shape["output_mean"] == 256


def test_no_profile_when_every_level_met_the_slos_or_nothing_was_best():
    from llmtop.tune.profile import best_profile

    assert best_profile(_tune_report([{"load": 4, "met": True}, {"load": 8, "met": True}])) \
        is None  # only "at least this much"
    assert best_profile(_tune_report([{"load": 8, "met": True},
                                      {"load": 16, "met": False, "partial": True}])) is None
    assert best_profile({"best": None, "trials": []}) is None


def test_no_profile_when_the_only_failing_level_above_was_client_bound():
    from llmtop.tune.profile import best_profile

    starved = {"load": 16, "met": False, "client_bound": True}
    assert best_profile(_tune_report([{"load": 8, "met": True}, starved])) is None
    drove = {"load": 32, "met": False, "client_bound": False}
    p = best_profile(_tune_report([{"load": 8, "met": True}, starved, drove]))
    assert p is not None and p.requests_per_s == 4.5


def test_start_failures_skip_by_the_engines_own_words_in_both_directions():
    def failed(util, tail):
        t = empty_trial({"gpu_memory_utilization": util}, "x", "failed",
                        "the start command exited (status 1) before the engine was ready")
        t["log_tail"] = tail
        return t

    oom = failed(0.9, "INFO loading\nValueError: Free memory on device cuda:0 (69.65/79.65 "
                      "GiB) on startup is less than desired GPU memory utilization (0.9, "
                      "71.68 GiB). Decrease GPU memory utilization or reduce GPU memory "
                      "used by other processes.")
    why = skip_reason({"gpu_memory_utilization": 0.95}, [oom])
    assert "out of memory" in why and "Free memory on device" in why and "0.95" in why
    assert skip_reason({"gpu_memory_utilization": 0.8}, [oom]) is None
    small = failed(0.2, "ValueError: No available memory for the cache blocks. Try "
                        "increasing `gpu_memory_utilization` when initializing the engine.")
    why = skip_reason({"gpu_memory_utilization": 0.1}, [small])
    assert "too little memory for the KV cache" in why and "No available memory" in why
    assert skip_reason({"gpu_memory_utilization": 0.5}, [small]) is None
    # across two memory settings: skipped only when every one asks as much or more
    two = empty_trial({"gpu_memory_utilization": 0.9, "max_num_seqs": 8,
                       "num_gpu_blocks_override": 4096}, "x", "failed", "CUDA out of memory")
    why = skip_reason({"gpu_memory_utilization": 0.95, "max_num_seqs": 8,
                       "num_gpu_blocks_override": 8192}, [two])
    assert why and "gpu_memory_utilization=0.9, num_gpu_blocks_override=4096 failed to start " \
        "out of memory" in why and "gpu_memory_utilization=0.95, num_gpu_blocks_override=8192 " \
        "asks for more" in why
    assert skip_reason({"gpu_memory_utilization": 0.95, "max_num_seqs": 8,
                        "num_gpu_blocks_override": 2048}, [two]) is None  # less of one
    assert skip_reason({"gpu_memory_utilization": 0.95, "max_num_seqs": 16,
                        "num_gpu_blocks_override": 8192}, [two]) is None  # a seat differs
    few = empty_trial({"gpu_memory_utilization": 0.2, "num_gpu_blocks_override": 64}, "x",
                      "failed", "ValueError: No available memory for the cache blocks.")
    assert "leaves less" in skip_reason({"gpu_memory_utilization": 0.1,
                                         "num_gpu_blocks_override": 32}, [few])
    assert skip_reason({"gpu_memory_utilization": 0.1, "num_gpu_blocks_override": 128},
                       [few]) is None
    # a start that failed for another reason rules nothing out
    other = failed(0.9, "ModuleNotFoundError: No module named 'vllm'")
    assert skip_reason({"gpu_memory_utilization": 0.95}, [other]) is None
    assert skip_reason({"gpu_memory_utilization": 0.5}, [other]) is None


def test_rate_plans_measure_rates_and_a_late_generator_never_holds_a_rate():
    from llmtop.tune.boundary import level_met

    assert parse_tune_plan(PLAN.replace("parallel = 2", "rate = true\nparallel = 2")).rate
    assert parse_tune_plan(PLAN.replace("ttft_slo = 0.5", "ttft_slo = 0.5\nrate = 4")).rate
    assert not parse_tune_plan(PLAN).rate
    with pytest.raises(ConfigError, match="true or false"):
        parse_tune_plan(PLAN.replace("parallel = 2", "rate = 3\nparallel = 2"))
    slo = {"ttft": 0.5, "itl": None, "tpot": None}
    step = {"index": 0, "requests": 40, "errors_total": 0, "error_rate": 0.0,
            "requests_per_s": 8.0, "goodput_per_s": 8.0, "output_tokens_per_s": 200.0,
            "ttft_s": {"p95": 0.1}, "itl_request_s": {"p95": None}, "tpot_s": {"p95": None},
            "concurrency": None, "rate": 8.0}
    assert level_met(step, slo, 0.01, None, rate=True)
    late = {**step, "client_bound": True,
            "client_bound_reasons": ["requests sent late: p99 900 ms behind the schedule"]}
    assert not level_met(late, slo, 0.01, None, rate=True)
    # the rate walk: doubles from the first rate, bisects to within 20 %, fractional rates
    assert next_level({4.0: True, 8.0: False}, 4.0, 256, rate=True) == 6.0
    assert next_level({1.0: False}, 1.0, 256, rate=True) == 0.5


def test_a_rate_trial_says_its_unit_everywhere():
    import io

    from llmtop.console.tune_view import print_tune
    from llmtop.report.tune import to_csv_text, tune_html

    t = empty_trial({"max_num_seqs": 8}, "serve", rate=True)
    t.update(sla_load=12.0, goodput_rps=11.5, output_tok_s=300.0, ttft_p95_s=0.1, gpus=1.0,
             per_gpu={"goodput_rps": 11.5, "output_tok_s": 300.0}, max_output_tok_s=320.0,
             limiter={"kind": "seats", "evidence": "the seat limit at 14 req/s", "level": 14})
    slo = {"ttft": 0.5, "itl": None, "tpot": None}
    rep = {"trials": [t], "objective": "goodput", "strategy": "grid", **summarize([t], "goodput",
                                                                                  slo)}
    assert t["load_unit"] == "req/s" and t["capacity"].startswith("holds 12 req/s")
    assert "12 req/s" in to_csv_text(rep)
    t["levels"] = [_lv(14, False, running_peak=8, waiting_peak=3)]
    assert "<td>14 req/s</td>" in tune_html(rep) and "Started at" not in tune_html(rep)
    t["start"] = {"load": 12.0, "predicted_from": "max_num_seqs=4 was seat-bound and held "
                  "6 req/s; scaled to max_num_seqs=8: 12 req/s"}
    assert "Started at 12 req/s, predicted: max_num_seqs=4 was seat-bound" in tune_html(rep)
    out = io.StringIO()
    print_tune({**rep, "traffic": {}}, file=out)
    assert "12 req/s" in out.getvalue() and "c=12" not in out.getvalue()
    assert "c=12" in summarize([{**t, "load_unit": "concurrency"}], "goodput",
                               slo)["best"]["why"]


def test_cpu_pin_in_the_plan_reaches_the_probe_options():
    from llmtop.cli.bakeoff import apply_plan_options
    from llmtop.cli.probe import build_parser, options_from_args

    parser = build_parser()
    for value, want in ((1, (1,)), ([0, 1], (0, 1)), ("1", (1,))):
        ns = parser.parse_intermixed_args(["http://127.0.0.1:1"])
        apply_plan_options(ns, parser, {"cpu_pin": value}, set())
        assert options_from_args(ns, None).cpu_pin == want


def test_live_progress_says_trial_k_of_n_the_level_the_best_and_the_budget_left():
    from llmtop.console.tune_live import panel_text, progress_lines
    from llmtop.tune.progress import TuneProgress

    p = TuneProgress(total=6, deadline=1000.0, started=3, done=2, skipped=1,
                     running={"max_num_seqs=8, kv_tokens=2048": "c=16"},
                     best="max_num_seqs=16, kv_tokens=2048 (holds c=16; goodput per GPU 27.6)",
                     last="max_num_seqs=8: c=8 meets the SLOs")
    lines = progress_lines(p, now=1000.0 - 125)
    assert lines[0] == "trial 3 of 6 started; 2 finished, 1 skipped"
    assert "running max_num_seqs=8, kv_tokens=2048: measuring c=16" in lines
    assert "best so far: max_num_seqs=16, kv_tokens=2048 (holds c=16; goodput per GPU 27.6)" \
        in lines
    assert "time left in the budget: 2m05s" in lines
    assert progress_lines(p, now=2000.0)[3] == "time left in the budget: 0m00s"
    p.running, p.best, p.deadline = {"max_num_seqs=4": None}, None, None
    lines = progress_lines(p, now=0.0)
    assert "running max_num_seqs=4: starting" in lines and "best so far: none yet" in lines
    assert "budget: none" in lines
    text = panel_text(p, now=0.0)
    assert text.splitlines()[0].startswith("╭─ llmtop tune")
    assert "│ trial 3 of 6 started; 2 finished, 1 skipped" in text


def test_a_fixed_list_at_a_rate_is_one_level_never_a_ladder():
    from llmtop.loadgen.options import ProbeOptions
    from llmtop.loadgen.runner import ladder

    one = ProbeOptions(url="http://127.0.0.1:1", rate=4.0, requests_per_step=8).validate()
    assert ladder(one) == [(None, 4.0)]
    for bad in ({"sweep": True}, {"levels": (1, 2)}):
        with pytest.raises(ConfigError, match="one level each"):
            ProbeOptions(url="http://127.0.0.1:1", rate=4.0, requests_per_step=8,
                         **bad).validate()


def _walk_hinted(passes_up_to: float, hint: float, rate: bool = False) -> list[float]:
    met: dict[float, bool] = {}
    seq, load = [], hint
    while load is not None:
        seq.append(load)
        met[load] = load <= passes_up_to
        load = next_level(met, hint, 256, rate=rate, hinted=True)
    return seq


def test_a_good_prediction_pins_the_boundary_in_two_levels():
    assert _walk_hinted(21, 24) == [24, 20]  # missed, then met within the stop rule's 20 %
    assert _walk_hinted(12, 12) == [12, 14]  # met, then missed just above
    assert _walk_hinted(1.1, 1.0, rate=True) == [1.0, 1.2]
    assert _walk_hinted(2.3, 2.4, rate=True) == [2.4, 2.0]


def test_a_wrong_prediction_falls_back_to_the_usual_walk():
    seq = _walk_hinted(40, 12)  # far too low: 12, 14, then doubles from the higher met load
    assert seq[:4] == [12, 14, 28, 56]
    assert max(x for x in seq if x <= 40) >= 0.8 * 40 and len(seq) <= 8
    seq = _walk_hinted(3, 24)  # far too high: 24, 20, then halves
    assert seq[:4] == [24, 20, 10, 5] and 3 in seq
    assert _walk_hinted(0, 2) == [2, 1]  # nothing holds: stops at 1


def _measured(params, kind, sla, **kw):
    t = empty_trial(params, "serve")
    t.update(limiter={"kind": kind, "evidence": "…", "level": sla}, sla_load=sla, **kw)
    return t


def test_start_hint_scales_a_seat_bound_neighbour_and_says_from_what():
    from llmtop.tune.hint import start_hint

    seat8 = _measured({"max_num_seqs": 8, "kv_tokens": 2048}, "seats", 12.0)
    load, why = start_hint({"max_num_seqs": 16, "kv_tokens": 2048}, [seat8], 256)
    assert load == 24 and "max_num_seqs=8 was seat-bound and held c=12" in why
    # the same seats with other memory: the same load (memory did not limit it)
    load, why = start_hint({"max_num_seqs": 8, "kv_tokens": 4096}, [seat8], 256)
    assert load == 12 and "kv_tokens=2048" in why
    # the closest seat limit wins, in either order: 8 seats (2x away) held 12, predicting 6
    # for 4 seats; 1 seat (4x away) held 5, predicting 20
    seat1 = _measured({"max_num_seqs": 1, "kv_tokens": 2048}, "seats", 5.0)
    for done in ([seat8, seat1], [seat1, seat8]):
        load, why = start_hint({"max_num_seqs": 4, "kv_tokens": 2048}, done, 256)
        assert load == 6 and "max_num_seqs=8 was seat-bound and held c=12" in why
    # ... and a neighbour closer than the first one seen also wins over it
    seat2 = _measured({"max_num_seqs": 2, "kv_tokens": 2048}, "seats", 5.0)  # 2 seats held 5
    assert start_hint({"max_num_seqs": 3, "kv_tokens": 2048}, [seat8, seat2], 256)[0] == 8
    # max_load caps it
    assert start_hint({"max_num_seqs": 16, "kv_tokens": 2048}, [seat8], 20)[0] == 20


@pytest.mark.parametrize("kind", ["kv", "compute", "client", "under_driven", "none"])
def test_no_prediction_from_a_neighbour_not_seat_bound(kind):
    from llmtop.tune.hint import start_hint

    t = _measured({"max_num_seqs": 8, "kv_tokens": 480}, kind, 7.0)
    assert start_hint({"max_num_seqs": 16, "kv_tokens": 480}, [t], 256) is None
    other = _measured({"max_num_seqs": 8, "kv_tokens": 480, "tp": 2}, "seats", 7.0)
    assert start_hint({"max_num_seqs": 16, "kv_tokens": 480, "tp": 1}, [other], 256) is None
    failed = {**_measured({"max_num_seqs": 8, "kv_tokens": 480}, "seats", 7.0),
              "status": "failed"}
    assert start_hint({"max_num_seqs": 16, "kv_tokens": 480}, [failed], 256) is None
