"""Router adapters on fixtures cut from each project's source (tests/fixtures/routers)."""

from __future__ import annotations

import pytest

from llmtop.parse import detect, registry
from llmtop.parse.exposition import ParseError
from tests.conftest import fixture_text


def sample(name):
    body = fixture_text(f"routers/{name}")
    engine = detect.detect_engine(body)
    return engine, registry.normalize(engine, body).extra["router"]


def test_vllm_router_backends_policy_health():
    engine, rs = sample("vllm-router-SYNTHETIC-metrics-rs.txt")
    assert engine == "vllm-router"
    assert rs.policy == "round_robin"
    assert rs.counters == {"requests": 120.0, "retries": 2.0}
    assert set(rs.backends) == {"http://127.0.0.1:8001", "http://127.0.0.1:8002"}
    b = rs.backends["http://127.0.0.1:8002"]
    assert b.counters == {"routed": 60.0, "failures": 2.0}
    assert b.gauges["healthy"] == 1.0 and b.gauges["breaker"] == 0.0
    assert b.role is None  # plain mode: no P/D series, nothing says
    assert rs.hists["request"].count == 120


def test_vllm_router_pd_roles_and_requests_counted_once():
    _, rs = sample("vllm-router-pd-SYNTHETIC-metrics-rs.txt")
    roles = {u: b.role for u, b in rs.backends.items()}
    assert roles == {"http://127.0.0.1:8101": "prefill", "http://127.0.0.1:8102": "decode",
                     "http://127.0.0.1:8103": "decode"}
    assert rs.counters["requests"] == 40.0  # pd_requests_total, not prefill + decode
    assert rs.backends["http://127.0.0.1:8103"].gauges == {"healthy": 0.0, "breaker": 1.0}


def test_smg_router():
    engine, rs = sample("smg-SYNTHETIC-metrics-rs.txt")
    assert engine == "sglang-router"
    assert rs.policy == "cache_aware"
    assert rs.counters == {"requests": 100.0, "retries": 3.0}
    assert rs.backends["http://127.0.0.6:8000"].counters == {"routed": 30.0, "failures": 3.0}
    assert rs.backends["http://127.0.0.6:8000"].gauges["breaker"] == 2.0
    assert set(rs.hists) == {"request", "ttft"}


def test_old_sgl_router_names_read_like_the_vllm_fork():
    body = fixture_text("routers/vllm-router-SYNTHETIC-metrics-rs.txt").replace(
        "vllm_router_", "sgl_router_")
    assert detect.detect_engine(body) == "sglang-router"
    rs = registry.normalize("sglang-router", body).extra["router"]
    assert rs.policy == "round_robin" and len(rs.backends) == 2


@pytest.mark.parametrize("engine", ["vllm-router", "sglang-router"])
@pytest.mark.parametrize("body", ["", "<html>nope</html>", "garbage {{{",
                                  "vllm:num_requests_running 1\n"])
def test_bad_payloads_are_parse_errors(engine, body):
    with pytest.raises(ParseError):
        registry.normalize(engine, body)


def test_nan_backend_values_are_not_reported():
    body = ('vllm_router_worker_health{worker="http://a:1"} NaN\n'
            'vllm_router_processed_requests_total{worker="http://a:1"} +Inf\n'
            'vllm_router_worker_health{worker="http://b:1"} 1\n')
    rs = registry.normalize("vllm-router", body).extra["router"]
    assert "http://a:1" not in rs.backends
    assert rs.backends["http://b:1"].gauges == {"healthy": 1.0}


def test_engines_are_not_routers():
    assert detect.router_from_body(fixture_text("vllm-docs-usage-metrics.txt")) is None
    assert detect.detect_engine(fixture_text("vllm-docs-usage-metrics.txt")) == "vllm"


def test_gie_epp_from_its_testdata():
    engine, rs = sample("gie-epp-testdata.txt")
    assert engine == "gie-epp" and rs.policy is None
    assert rs.counters == {"requests": 4.0}  # inference_model_request_total (older name)
    assert rs.backends["pod1-rank-0"].gauges == {"pending": 100.0}
    assert rs.gauges["ready_backends"] == 2.0
    assert rs.hists["request"].count == 1 and rs.hists["request"].sum == pytest.approx(0.06)


def test_llm_d_epp_endpoints():
    engine, rs = sample("llm-d-epp-test-SYNTHETIC.txt")
    assert engine == "llm-d-epp"
    assert set(rs.backends) == {"pod1-rank-0", "127.0.0.7:8000"}


def test_dynamo_frontend_workers_and_roles():
    engine, rs = sample("dynamo-frontend-SYNTHETIC.txt")
    assert engine == "dynamo"
    assert rs.backends["123"].role == "decode" and rs.backends["456"].role == "prefill"
    assert rs.backends["456"].gauges["pending"] == 5.0
    assert rs.counters["requests"] == 1523.0 and rs.hists["ttft"].count == 1523


def test_production_stack_router_is_never_an_engine():
    body = fixture_text("routers/production-stack-SYNTHETIC.txt")
    assert detect.detect_engine(body) == "production-stack"  # not "vllm": its vllm:* are
    rs = registry.normalize("production-stack", body).extra["router"]  # the router's view
    assert rs.gauges["qps"] == 8.0
    assert rs.backends["http://127.0.0.5:8000"].gauges["pending"] == 3.0
    assert registry.normalize("production-stack", body).models == []


def test_litellm_deployments():
    engine, rs = sample("litellm-SYNTHETIC.txt")
    assert engine == "litellm"
    down = rs.backends["http://127.0.0.6:8000/v1"]
    assert down.gauges == {"healthy": 0.0, "breaker": 1.0}  # complete outage
    assert down.counters == {"routed": 100.0, "failures": 40.0}
    assert rs.counters == {"requests": 400.0}


@pytest.mark.parametrize("engine", ["gie-epp", "llm-d-epp", "dynamo", "production-stack",
                                    "litellm"])
def test_other_families_refuse_other_payloads(engine):
    for body in ("", "<html></html>", "vllm_router_requests_total 1\n"):
        with pytest.raises(ParseError):
            registry.normalize(engine, body)
