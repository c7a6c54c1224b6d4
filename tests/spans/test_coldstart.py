"""loadgen/coldstart.py: a bake-off's vLLM starts with tracing on; its start-up spans read."""

from __future__ import annotations

import httpx
import pytest

from llmtop.errors import ConfigError
from llmtop.loadgen.coldstart import describe, stages, traced
from llmtop.loadgen.plan import EngineSpec, parse_plan
from tests.spans.spanfix import bodies


def test_a_vllm_command_gets_tracing_and_its_start_is_read():
    spec = EngineSpec(name="v", url="http://127.0.0.1:8000",
                      start="vllm serve m --port 8000", env={"A": "1"})
    cmd, env, rx = traced(spec)
    try:
        assert cmd == f"vllm serve m --port 8000 --otlp-traces-endpoint {rx.url}"
        assert rx.url.startswith("http://127.0.0.1:") and rx.url.endswith("/v1/traces")
        assert env == {"A": "1", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf",
                       "OTEL_BSP_SCHEDULE_DELAY": "1000"}
        assert stages(rx, wait_s=0.0) is None  # nothing sent yet
        with httpx.Client(timeout=5) as c:
            for b in bodies("startup"):  # what the real vLLM sent at start-up
                c.post(rx.url, content=b, headers={"Content-Type": "application/x-protobuf"})
        st = stages(rx, wait_s=2.0)
        assert st["weights"] == pytest.approx(0.028105) and st["total"] > st["kv_cache"] > 4
        line = describe(st)
        assert line.startswith("weights 0.0 s, KV cache 4.5 s, model init 0.0 s")
        assert "loading in all 117.1 s" in line
    finally:
        rx.close()


@pytest.mark.parametrize("start", [
    "python -m sglang.launch_server --port 30000",  # not vLLM
    "python -m llmtop demo serve --engines vllm --ports 8000",  # the demo's, not vLLM
    "vllm serve m --otlp-traces-endpoint http://collector:4318/v1/traces",  # traces already
    None,  # not started by llmtop
])
def test_other_commands_are_left_as_written(start):
    spec = EngineSpec(name="x", url="http://127.0.0.1:1", start=start)
    assert traced(spec) == (start, {}, None)


@pytest.mark.parametrize("start", [
    "/opt/venv/bin/vllm serve m", "python3 -m vllm.entrypoints.openai.api_server --model m"])
def test_what_runs_vllm(start):
    cmd, _env, rx = traced(EngineSpec(name="x", url="http://127.0.0.1:1", start=start))
    rx.close()
    assert cmd.startswith(start + " --otlp-traces-endpoint http://127.0.0.1:")


def test_a_script_that_starts_vllm_is_traced_where_the_plan_says_so():
    start = "taskset -c 0 bash /x/scripts/real_vllm/serve_fg.sh 8000 --max-num-seqs 2"
    assert traced(EngineSpec(name="x", url="http://127.0.0.1:1", start=start)) == \
        (start, {}, None)  # a script is not known to run vLLM
    plan = parse_plan(f'[[engine]]\nurl = "http://127.0.0.1:8000"\nstart = "{start}"\n'
                      'traces = true\n')
    cmd, _env, rx = traced(plan.engines[0])
    rx.close()
    assert cmd.startswith(start + " --otlp-traces-endpoint http://127.0.0.1:")


def test_the_plan_can_turn_it_off():
    plan = parse_plan('[[engine]]\nurl = "http://127.0.0.1:8000"\nstart = "vllm serve m"\n'
                      'traces = false\n')
    assert plan.engines[0].traces is False
    assert traced(plan.engines[0])[2] is None
    with pytest.raises(ConfigError, match="traces must be true or false"):
        parse_plan('[[engine]]\nurl = "http://127.0.0.1:8000"\ntraces = "yes"\n')
    assert describe(None).startswith("no start-up spans")
