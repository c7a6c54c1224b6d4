"""End to end: ``python -m llmtop --once`` against a healthy vLLM and one misbehaving server
per failure case, all in the same run, on 127.0.0.1.

The product standard proven here: bad input gets a clear state, never a crash; the healthy
target keeps real numbers in the same run; missing is null, never 0; NaN never appears; no
rate is negative; a restart gives no negative rate or spike; the exit code is non-zero only
when no target could be read, with one clear line and no traceback.
"""

from __future__ import annotations

import math
import re

import pytest

from tests.e2e.conftest import Run, needs_parsers, nvml_works, run_llmtop
from tests.e2e.servers import closed_port
from tests.test_once import Q_KEYS, ROW_KEYS, TOP_KEYS  # documented keys, documented order

pytestmark = pytest.mark.xdist_group("tests/e2e/test_once_e2e.py")
"""One worker runs this module: its two 15-target runs (``multi``, ``multi2``) are reached
through ``request.getfixturevalue``, out of the tests' closure, so conftest cannot group them
and every worker would start their servers and runs again (six times the CPU)."""

LIFETIME_KEYS = {
    "ttft_s", "itl_s", "tpot_s", "e2e_s", "queue_s", "prompt_len", "gen_len",
    "prefix_hit_rate", "requests", "prompt_tokens", "generation_tokens", "preemptions",
    "errors", "aborted", "rejected", "finished", "start_time", "uptime_s",
    "prefill_s", "decode_s", "inference_s", "iteration_tokens", "spec_accept_rate",
    "spec_drafts", "spec_draft_tokens", "spec_accepted_tokens",
}
Q_FIELDS = ("ttft_s", "itl_s", "tpot_s", "e2e_s", "queue_s", "prefill_s", "decode_s",
            "inference_s", "prompt_len", "gen_len", "iteration_tokens")
GPU_KEYS = ["host", "index", "uuid", "name", "util", "mem_util", "mem_used_bytes",
            "mem_total_bytes", "power_w", "power_limit_w", "temp_c", "sm_clock_mhz",
            "sm_clock_max_mhz", "throttle", "processes", "source", "error"]
RATE_KEYS = [k for k in ROW_KEYS if k.endswith("_per_s")]
STATES = {"ok", "down", "http_error", "unauthorized", "bad_payload", "stale", "restarted"}

WINDOW = "0.4"
TIMEOUT = "2"
"""Per-target timeout: tight, yet first contact with 15 targets at once (7 identity probes
each) must fit on a loaded 2-core machine."""

GOOD = ("healthy", "partial", "nan", "restart", "counter_reset", "ok_then_500",
        "ok_then_drop")
BAD = ("slow", "http_500", "http_401", "html", "html_as_text", "garbage", "truncated",
       "huge_declared", "empty")

# case -> (state, regex the error must match)
EXPECT: dict[str, tuple[str, str]] = {
    "refused": ("down", r"connection refused"),
    "slow": ("down", r"timeout"),
    "http_500": ("http_error", r"^HTTP 500\b.*engine core died"),
    "http_401": ("unauthorized", r"401"),
    "html": ("bad_payload", r"HTML"),
    "html_as_text": ("bad_payload", r"HTML"),
    "garbage": ("bad_payload", r"."),
    "truncated": ("bad_payload", r"truncated"),
    "huge_declared": ("bad_payload", r"32 MiB"),
    "empty": ("bad_payload", r"."),
}
# the second run: more bad answers beside another healthy vLLM
EXPECT2: dict[str, tuple[str, str]] = {
    "http_403": ("unauthorized", r"403"),
    "http_404": ("http_error", r"^HTTP 404"),
    "redirect_loop": ("http_error", r"redirect"),
    "bad_gzip": ("bad_payload", r"undecodable|encoding"),
    "json_200": ("bad_payload", r"."),
    "node_exporter": ("bad_payload", r"."),
    "trickle": ("down", r"timeout"),
    "one_long_line": ("bad_payload", r"."),
    "deep_json_500": ("http_error", r"^HTTP 500"),
    "hang_up": ("down", r"closed before a response"),
    "not_http": ("down", r"."),
    "bad_status_line": ("down", r"invalid HTTP response"),
    "deep_json_200": ("bad_payload", r"."),
}
XFAIL_CASES: dict[str, str] = {}
PARSE_CASES = {"garbage", "empty", "json_200", "node_exporter", "one_long_line",
               "deep_json_200"}
"""Cases whose state is decided after parsing (detect/registry must be there)."""

# the healthy server multiplies every vLLM counter by 1 + 0.1 n at its n-th scrape, so one
# window holds a tenth of each capture value: these are the exact deltas
GEN_TOKENS = 3641.0
PROMPT_TOKENS = 14482.0
PREFIX_HITS, PREFIX_QUERIES = 9984.0, 14482.0
FINISHED_LENGTH = 33.0
TTFT_COUNT = 41.0


def walk(v, path="$"):
    """Every (path, number) pair in a JSON document."""
    if isinstance(v, dict):
        for k, x in v.items():
            yield from walk(x, f"{path}.{k}")
    elif isinstance(v, list):
        for i, x in enumerate(v):
            yield from walk(x, f"{path}[{i}]")
    elif isinstance(v, (int, float)) and not isinstance(v, bool):
        yield path, v


def assert_no_traceback(run: Run) -> None:
    assert "Traceback" not in run.stderr, run.stderr
    assert "Traceback" not in run.stdout


def assert_schema(doc: dict) -> None:
    assert list(doc) == TOP_KEYS
    assert isinstance(doc["window_s"], (int, float)) and doc["window_s"] > 0
    for row in doc["engines"]:
        assert list(row)[: len(ROW_KEYS)] == ROW_KEYS, row["target"]
        assert row["state"] in STATES
        for k in Q_FIELDS:
            if row[k] is not None:
                assert list(row[k]) == Q_KEYS
        assert isinstance(row["ranks"], list)
        assert isinstance(row["lifetime"], dict)
        assert set(row["lifetime"]) <= LIFETIME_KEYS, set(row["lifetime"]) - LIFETIME_KEYS
        for k in Q_FIELDS:
            if k in row["lifetime"]:
                assert list(row["lifetime"][k]) == Q_KEYS
    assert isinstance(doc["gpus"], list)
    for g in doc["gpus"]:
        assert list(g) == GPU_KEYS
    assert doc["gpu_error"] is None or isinstance(doc["gpu_error"], str)


def assert_sane_numbers(doc: dict) -> None:
    for path, v in walk(doc):
        assert math.isfinite(v), path
    for row in doc["engines"]:
        for r in (row, *row["ranks"]):
            for k in RATE_KEYS:
                assert r[k] is None or r[k] >= 0, (r["target"], k, r[k])
            for reason, n in (r["finished"] or {}).items():
                assert n >= 0, (r["target"], reason, n)
            if r["prefix_hit_rate"] is not None:
                assert 0 <= r["prefix_hit_rate"] <= 1


# ------------------------------------------------------------------ the multi-target run

@pytest.fixture(scope="module")
def multi(servers):
    """One ``--once --json`` run: the good servers, every bad one and a closed port."""
    ports = servers.start([*GOOD, *BAD])
    names = {c: f"127.0.0.1:{p}" for c, p in ports.items()}
    names["refused"] = f"127.0.0.1:{closed_port()}"
    order = [*GOOD, "refused", *BAD]
    run = run_llmtop("--once", "--json", "--window", WINDOW, "--timeout", TIMEOUT,
                     *[names[c] for c in order])
    return run, names


@pytest.fixture(scope="module")
def multi2(servers):
    """A second ``--once --json`` run: a healthy vLLM, a restart with higher counters and
    the rest of the bad answers."""
    order = ["healthy", "restart_higher", "restart_created", "crlf", "bom", "gzipped",
             "bad_identity", "dp2", "future_start", *EXPECT2]
    ports = servers.start(order)
    names = {c: f"127.0.0.1:{p}" for c, p in ports.items()}
    run = run_llmtop("--once", "--json", "--window", WINDOW, "--timeout", TIMEOUT,
                     *[names[c] for c in order])
    return run, names


@pytest.mark.parametrize("which", ["multi", "multi2"])
def test_multi_run_is_one_valid_document(request, which):
    run, names = request.getfixturevalue(which)
    assert_no_traceback(run)
    assert not re.search(r"\bNaN\b|Infinity", run.stdout)
    doc = run.json()
    assert_schema(doc)
    assert_sane_numbers(doc)
    # every target has its row, in the order given
    targets = list(dict.fromkeys(r["target"] for r in doc["engines"]))
    assert targets == list(names.values()) or sorted(targets) == sorted(names.values())


def _case_params():
    out = []
    for which, cases in (("multi", EXPECT), ("multi2", EXPECT2)):
        for c in sorted(cases):
            marks = ([pytest.mark.xfail(strict=True, reason=XFAIL_CASES[c])]
                     if c in XFAIL_CASES else [])
            out.append(pytest.param(which, c, marks=marks, id=f"{which}-{c}"))
    return out


@pytest.mark.parametrize(("which", "case"), _case_params())
def test_bad_target_gets_a_clear_state(request, which, case):
    if case in PARSE_CASES and needs_parsers.args[0]:
        pytest.skip(needs_parsers.kwargs["reason"])
    run, names = request.getfixturevalue(which)
    row = run.rows()[names[case]]
    state, pattern = {**EXPECT, **EXPECT2}[case]
    assert row["state"] == state, row["error"]
    assert row["error"] and re.search(pattern, row["error"]), row["error"]
    # the reason is for people: no exception class names leaking from a parser
    assert "adapter failed" not in row["error"]
    assert "detection failed" not in row["error"]
    assert "Traceback" not in row["error"]
    # a target that never answered with metrics shows nothing, and nothing is 0
    assert row["model"] is None
    for k in ("running", "waiting", "kv_cache_usage", *RATE_KEYS):
        assert row[k] is None, k
    assert row["ttft_s"] is None
    assert row["lifetime"] == {}


@needs_parsers
@pytest.mark.parametrize("which", ["multi", "multi2"])
def test_exit_zero_when_one_target_was_read(request, which):
    run, _ = request.getfixturevalue(which)
    assert run.rc == 0, run.stderr
    assert_no_traceback(run)


@needs_parsers
@pytest.mark.parametrize("which", ["multi", "multi2"])
def test_healthy_target_keeps_real_numbers_beside_the_bad_ones(request, which):
    run, names = request.getfixturevalue(which)
    doc = run.json()
    row = run.rows()[names["healthy"]]
    assert row["state"] == "ok" and row["error"] is None
    assert row["engine"] == "vllm"
    assert row["engine_version"] == "0.32.0"
    assert row["model"] == "tiny-llama"
    assert row["running"] == 8.0 and row["waiting"] == 22.0
    assert row["kv_cache_usage"] == pytest.approx(0.006349206349206327)
    assert row["kv_capacity_tokens"] == 4096 * 128  # cache_config_info blocks x block size
    assert row["ranks"] == []  # one engine rank
    # vLLM 0.32 reports every one (no spec-decode counters without a draft model)
    assert set(row["lifetime"]) == LIFETIME_KEYS - {"spec_drafts", "spec_draft_tokens",
                                                    "spec_accepted_tokens"}
    assert row["lifetime"]["finished"]["length"] == pytest.approx(FINISHED_LENGTH * 1.2)
    assert row["lifetime"]["uptime_s"] is None or row["lifetime"]["uptime_s"] > 0
    assert doc["window_s"] > float(WINDOW)
    assert row["generation_tokens_per_s"] > 0 and row["prompt_tokens_per_s"] > 0
    assert row["requests_per_s"] > 0
    # counters advanced by exactly a tenth of the capture between the two scrapes
    assert row["prefix_hit_rate"] == pytest.approx(PREFIX_HITS / PREFIX_QUERIES, rel=1e-6)
    assert row["finished"]["length"] == pytest.approx(FINISHED_LENGTH / 10)
    assert row["preemptions_per_s"] == 0.0  # reported and zero: 0, not null
    ttft = row["ttft_s"]
    assert ttft is not None and ttft["count"] == pytest.approx(TTFT_COUNT / 10)
    assert ttft["p50"] is not None and ttft["p50"] > 0
    assert row["lifetime"]["start_time"] == pytest.approx(1.79535416043e09)


@needs_parsers
def test_missing_families_are_null_not_zero(multi):
    run, names = multi
    row = run.rows()[names["partial"]]
    assert row["state"] == "ok"
    assert row["running"] == 8.0
    assert row["waiting"] is None  # vllm:num_requests_waiting removed
    assert row["ttft_s"] is None  # vllm:time_to_first_token_seconds removed
    assert row["prefix_hit_rate"] is None  # vllm:prefix_cache_* removed
    assert "ttft_s" not in row["lifetime"]
    assert row["lifetime"].get("prefix_hit_rate") is None
    assert row["generation_tokens_per_s"] > 0  # the rest still works


@needs_parsers
def test_nan_and_inf_values_become_null(multi):
    run, names = multi
    row = run.rows()[names["nan"]]
    assert row["state"] == "ok", row["error"]
    assert row["kv_cache_usage"] is None  # NaN
    assert row["running"] is None  # +Inf
    assert row["waiting"] is None  # -Inf
    if row["e2e_s"] is not None:  # sum +Inf
        assert row["e2e_s"]["mean"] is None
    assert row["prompt_tokens_per_s"] is None  # NaN, then +Inf: no rate, never a spike
    if row["itl_s"] is not None:  # every bucket NaN: no quantile can be made up
        assert (row["itl_s"]["p50"], row["itl_s"]["p99"]) == (None, None)
    assert row["generation_tokens_per_s"] > 0  # the finite counters still give rates
    assert row["finished"]["length"] == pytest.approx(FINISHED_LENGTH / 10)


@needs_parsers
def test_nan_histogram_sum_gives_a_null_mean_not_zero(multi):
    run, names = multi
    ttft = run.rows()[names["nan"]]["ttft_s"]
    assert ttft is not None  # the buckets are finite: quantiles are still known
    assert ttft["p50"] is not None
    assert ttft["mean"] is None  # Δsum is unknown


@needs_parsers
def test_restart_is_shown_and_gives_no_negative_rate_or_spike(multi):
    run, names = multi
    row = run.rows()[names["restart"]]
    assert row["state"] == "restarted", row["error"]
    assert row["error"] is None
    # one sample of the new process: rates cannot be computed yet (null), never < 0
    for k in RATE_KEYS:
        assert row[k] is None or 0 <= row[k] < 1000, (k, row[k])
    assert row["finished"] is None or all(v >= 0 for v in row["finished"].values())
    # the row shows the new process
    assert row["lifetime"]["start_time"] == pytest.approx(1.79535416043e09 + 3600.0)
    assert row["lifetime"]["generation_tokens"] == pytest.approx(GEN_TOKENS * 0.1)


@needs_parsers
def test_restart_with_higher_counters_gives_no_spike(multi2):
    """New start time, counters above the old ones: the delta spans two processes and must
    not become a rate."""
    run, names = multi2
    row = run.rows()[names["restart_higher"]]
    assert row["state"] == "restarted", row["error"]
    for k in RATE_KEYS:
        assert row[k] is None, (k, row[k])
    assert row["finished"] is None or all(v == 0 for v in row["finished"].values())
    assert row["lifetime"]["start_time"] == pytest.approx(1.79535416043e09 + 3600.0)


@needs_parsers
def test_data_parallel_ranks_aggregate_and_keep_their_rows(multi2):
    """Two engine ranks (rank 1 carries twice rank 0's values): the model row sums the
    queues and rates, KV usage is the busiest rank's, and each rank has its own row."""
    run, names = multi2
    doc = run.json()
    row = run.rows()[names["dp2"]]
    assert row["state"] == "ok"
    assert (row["running"], row["waiting"]) == (24.0, 66.0)
    assert row["kv_cache_usage"] == pytest.approx(2 * 0.006349206349206327)
    assert row["finished"]["length"] == pytest.approx(3 * FINISHED_LENGTH / 10)
    assert [r["rank"] for r in row["ranks"]] == ["0", "1"]
    r0, r1 = row["ranks"]
    assert list(r0)[: len(ROW_KEYS)] == ROW_KEYS
    assert (r0["running"], r1["running"]) == (8.0, 16.0)
    assert r1["generation_tokens_per_s"] == pytest.approx(2 * r0["generation_tokens_per_s"])
    assert row["generation_tokens_per_s"] == pytest.approx(
        r0["generation_tokens_per_s"] + r1["generation_tokens_per_s"])
    assert r0["ranks"] == [] and doc["window_s"] > 0


@needs_parsers
def test_start_time_in_the_future_gives_unknown_uptime_not_zero(multi2):
    run, names = multi2
    row = run.rows()[names["future_start"]]
    assert row["state"] == "ok"
    assert row["lifetime"]["start_time"] > run.json()["time"]
    assert row["lifetime"]["uptime_s"] is None


@needs_parsers
def test_odd_identity_endpoints_do_not_hurt_the_metrics(multi2):
    """Wrong JSON shapes, HTML, 500, a hang and a 1 MiB body on the identity endpoints."""
    run, names = multi2
    row = run.rows()[names["bad_identity"]]
    assert row["state"] == "ok", row["error"]
    assert row["engine"] == "vllm" and row["model"] == "tiny-llama"
    assert row["engine_version"] is None or isinstance(row["engine_version"], str)
    assert (row["running"], row["waiting"]) == (8.0, 22.0)
    assert row["generation_tokens_per_s"] > 0


@needs_parsers
@pytest.mark.parametrize("case", ["crlf", "bom", "gzipped"])
def test_same_metrics_in_another_encoding_read_the_same(multi2, case):
    """CRLF line ends, a UTF-8 BOM, gzip: the same numbers as the plain capture."""
    run, names = multi2
    row = run.rows()[names[case]]
    assert row["state"] == "ok", row["error"]
    assert row["model"] == "tiny-llama"
    assert (row["running"], row["waiting"]) == (8.0, 22.0)
    assert row["finished"]["length"] == pytest.approx(FINISHED_LENGTH / 10)
    assert row["prefix_hit_rate"] == pytest.approx(PREFIX_HITS / PREFIX_QUERIES, rel=1e-6)


@needs_parsers
def test_restart_seen_from_created_timestamps_alone(multi2):
    """No process_start_time_seconds; counters went up; only ``_created`` moved."""
    run, names = multi2
    row = run.rows()[names["restart_created"]]
    assert row["state"] == "restarted", row["error"]
    for k in RATE_KEYS:
        assert row[k] is None, (k, row[k])


@needs_parsers
def test_counter_reset_alone_is_a_restart(multi):
    run, names = multi
    row = run.rows()[names["counter_reset"]]
    assert row["state"] == "restarted", row["error"]
    for k in RATE_KEYS:
        assert row[k] is None or 0 <= row[k] < 1000, (k, row[k])
    assert row["finished"] is None or all(v >= 0 for v in row["finished"].values())


@needs_parsers
@pytest.mark.parametrize(("case", "state", "pattern"), [
    ("ok_then_500", "http_error", r"^HTTP 500"),
    ("ok_then_drop", "down", r"clos|reset"),
])
def test_failure_after_a_good_scrape_keeps_the_last_good_values(multi, case, state, pattern):
    run, names = multi
    row = run.rows()[names[case]]
    assert row["state"] == state, row["error"]
    assert re.search(pattern, row["error"]), row["error"]
    # docs/json-schema.md: in every state other than ok the values are the last good ones
    assert row["engine"] == "vllm" and row["model"] == "tiny-llama"
    assert row["running"] == 8.0 and row["waiting"] == 22.0
    for k in RATE_KEYS:  # one good sample: no rate yet, and never 0 made up
        assert row[k] is None, k


@needs_parsers
def test_rate_times_window_is_the_counter_delta(servers):
    """``generation_tokens_per_s × window_s`` = Δ``vllm:generation_tokens_total`` (the
    real-engine check of issue 2), here with fast targets only."""
    ports = servers.start(["healthy", "http_500"])
    run = run_llmtop("--once", "--json", "--window", WINDOW, "--timeout", TIMEOUT,
                     *[f"127.0.0.1:{p}" for p in ports.values()])
    doc = run.json()
    row = run.rows()[f"127.0.0.1:{ports['healthy']}"]
    w = doc["window_s"]
    assert row["generation_tokens_per_s"] * w == pytest.approx(GEN_TOKENS / 10, rel=0.03)
    assert row["prompt_tokens_per_s"] * w == pytest.approx(PROMPT_TOKENS / 10, rel=0.03)


@needs_parsers
def test_rate_times_window_with_a_slow_target_beside(servers):
    """Same check when a timed-out target and a slower first contact share the run (before
    5477814 window_s was the span between the timed-out target's stamps: 13-100 % off)."""
    ports = servers.start(["slow_identity", "slow"])
    run = run_llmtop("--once", "--json", "--window", WINDOW, "--timeout", TIMEOUT,
                     *[f"127.0.0.1:{p}" for p in ports.values()])
    doc = run.json()
    row = run.rows()[f"127.0.0.1:{ports['slow_identity']}"]
    assert row["state"] == "ok"
    w = doc["window_s"]
    assert row["generation_tokens_per_s"] * w == pytest.approx(GEN_TOKENS / 10, rel=0.03)


# engine hint -> a vLLM payload is not that engine's: BAD PAYLOAD with the reason
WRONG_HINTS = ["sglang", "lmdeploy", "tgi", "llamacpp", "trtllm", "dcgm"]


@pytest.fixture(scope="module")
def hinted(servers):
    """One run: each engine hint on its own healthy vLLM server (a wrong hint)."""
    engines = ["sglang", "lmdeploy", "tgi", "llamacpp", "trtllm", "dcgm"]
    names = {e: f"{e}@127.0.0.1:{servers.start(['healthy'])['healthy']}" for e in engines}
    run = run_llmtop("--once", "--json", "--window", "0.1", "--timeout", TIMEOUT,
                     *names.values())
    return run, names


@needs_parsers
@pytest.mark.parametrize("engine", WRONG_HINTS)
def test_wrong_engine_hint_is_a_bad_payload(hinted, engine):
    run, names = hinted
    assert_no_traceback(run)
    row = run.rows()[names[engine]]
    assert row["state"] == "bad_payload", (row["state"], row["model"])
    assert row["error"] and "adapter failed" not in row["error"]
    assert row["engine"] == engine


@needs_parsers
@pytest.mark.parametrize("engine", [
    "ollama", "trtllm",
])
def test_deeply_nested_json_is_a_plain_bad_payload(servers, engine):
    port = servers.start(["deep_json_200"])["deep_json_200"]
    target = f"{engine}@127.0.0.1:{port}"
    run = run_llmtop("--once", "--json", "--window", "0", "--timeout", TIMEOUT, target)
    assert_no_traceback(run)
    row = run.rows()[target]
    assert row["state"] == "bad_payload"
    assert "adapter failed" not in row["error"] and "Error" not in row["error"], row["error"]


@pytest.fixture(scope="module")
def not_vllm(servers):
    """vLLM replaced by SGLang on the same port; a vllm hint on a node_exporter."""
    swap = servers.start(["engine_swap"])["engine_swap"]
    node = servers.start(["node_exporter"])["node_exporter"]
    names = {"swap": f"127.0.0.1:{swap}", "node": f"vllm@127.0.0.1:{node}"}
    run = run_llmtop("--once", "--json", "--window", "0.2", "--timeout", TIMEOUT,
                     *names.values())
    return run, names


@needs_parsers
def test_another_engine_on_the_same_port_is_detected(not_vllm):
    run, names = not_vllm
    assert_no_traceback(run)
    row = run.rows()[names["swap"]]
    assert row["state"] in ("ok", "restarted")
    assert row["engine"] == "sglang", (row["engine"], row["model"])
    assert row["model"] is not None


@needs_parsers
def test_vllm_hint_on_something_else_is_a_bad_payload(not_vllm):
    run, names = not_vllm
    row = run.rows()[names["node"]]
    assert row["state"] == "bad_payload", (row["state"], row["model"])


def test_all_targets_bad_exit_one_with_one_clear_line(servers):
    ports = servers.start(["http_500", "html", "truncated"])
    targets = [f"127.0.0.1:{p}" for p in ports.values()] + [f"127.0.0.1:{closed_port()}"]
    run = run_llmtop("--once", "--json", "--window", "0.1", "--timeout", TIMEOUT, *targets)
    assert run.rc == 1
    assert_no_traceback(run)
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1, run.stderr
    assert lines[0].startswith("llmtop: no target could be read")
    assert "connection refused" in lines[0] and "HTTP 500" in lines[0]
    doc = run.json()  # the document is still printed, with the states
    assert_schema(doc)
    assert {r["state"] for r in doc["engines"]} == {"http_error", "bad_payload", "down"}


def test_table_mode_all_bad_exit_one_with_every_reason(servers):
    cases = ["http_500", "html", "truncated"]
    ports = servers.start(cases)
    refused = f"127.0.0.1:{closed_port()}"
    run = run_llmtop("--once", "--window", "0", "--timeout", TIMEOUT,
                     *[f"127.0.0.1:{ports[c]}" for c in cases], refused,
                     env={"COLUMNS": "200"})
    assert run.rc == 1
    assert_no_traceback(run)
    for reason in ("engine core died", "HTML page", "truncated body", "connection refused"):
        assert reason in run.stdout + run.stderr, reason


def test_table_mode_shows_the_state_words(servers):
    cases = ["healthy", "restart", "http_500", "http_401", "html", "truncated"]
    ports = servers.start(cases)
    targets = [f"127.0.0.1:{ports[c]}" for c in cases] + [f"127.0.0.1:{closed_port()}"]
    run = run_llmtop("--once", "--window", WINDOW, "--timeout", TIMEOUT, *targets,
                     env={"COLUMNS": "200"})
    assert_no_traceback(run)
    out = run.stdout
    for word in ("DOWN", "HTTP 500", "UNAUTHORIZED", "BAD PAYLOAD"):
        assert word in out, word
    if needs_parsers.args[0]:
        return
    assert run.rc == 0, run.stderr
    assert "RESTARTED" in out
    assert "tiny-llama" in out


# ------------------------------------------------------------------ usage errors

@pytest.mark.parametrize("argv", [
    ["--once", "--json", "--no-such-flag", "127.0.0.1:1"],
    ["--once", "--json", "--window", "soon", "127.0.0.1:1"],
])
def test_bad_flag_is_one_error_line_exit_two(argv):
    run = run_llmtop(*argv)
    assert run.rc == 2
    assert_no_traceback(run)
    assert run.stdout == ""
    errors = [ln for ln in run.stderr.splitlines() if ln.startswith("llmtop: error:")]
    assert len(errors) == 1, run.stderr


@pytest.mark.parametrize("spec", [
    "127.0.0.1:notaport",
    "127.0.0.1:99999",
    "nosuchengine@127.0.0.1:8000",
    "http://user:secret@127.0.0.1:8000/metrics",
    "ftp://127.0.0.1:8000",
    "",
])
def test_bad_target_string_is_one_line_exit_two(spec):
    run = run_llmtop("--once", "--json", "--window", "0", spec)
    assert run.rc == 2, (run.rc, run.stderr)
    assert_no_traceback(run)
    assert run.stdout == ""
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("llmtop: "), run.stderr
    assert "secret" not in run.stderr


# ------------------------------------------------------------------ GPUs absent

gpu_absent = pytest.mark.skipif(nvml_works(), reason="NVML works here: GPUs are readable")


@gpu_absent
def test_gpu_error_is_a_reason_in_json_and_the_rest_works(servers):
    ports = servers.start(["http_500"])
    run = run_llmtop("--once", "--json", "--window", "0", "--timeout", TIMEOUT,
                     f"127.0.0.1:{ports['http_500']}")
    assert_no_traceback(run)
    doc = run.json()
    assert isinstance(doc["gpu_error"], str) and len(doc["gpu_error"]) > 10
    assert "\n" not in doc["gpu_error"]
    assert "NVML" in doc["gpu_error"] or "GPU" in doc["gpu_error"]
    assert doc["gpus"] == []
    assert doc["engines"][0]["state"] == "http_error"


@gpu_absent
def test_gpu_required_without_gpu_exits_non_zero_with_the_reason(servers):
    ports = servers.start(["healthy"])
    run = run_llmtop("--once", "--gpu-required", "--window", "0", "--timeout", TIMEOUT,
                     f"127.0.0.1:{ports['healthy']}")
    assert run.rc == 2  # docs/json-schema.md: --gpu-required with unreadable GPUs
    assert_no_traceback(run)
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1, run.stderr
    assert lines[0].startswith("llmtop: ") and "GPU" in lines[0]
    assert "NVML" in lines[0] or "driver" in lines[0]


# ------------------------------------------------------------------ GPUs present (real NVML)

gpu_present = pytest.mark.skipif(not nvml_works(), reason="NVML cannot initialize here")


@pytest.mark.gpu
@gpu_present
def test_gpus_listed_and_gpu_required_passes_on_a_gpu_machine(servers):
    ports = servers.start(["http_500"])
    run = run_llmtop("--once", "--json", "--gpu-required", "--window", "0", "--timeout",
                     TIMEOUT, f"127.0.0.1:{ports['http_500']}")
    assert_no_traceback(run)
    doc = run.json()
    assert doc["gpu_error"] is None
    assert doc["gpus"] and all(g["source"] == "nvml" for g in doc["gpus"])
    for g in doc["gpus"]:
        assert g["mem_total_bytes"] and g["mem_total_bytes"] > 0
        assert g["util"] is None or 0 <= g["util"] <= 1
    assert run.rc == 1  # the GPUs were read, but no target could be
