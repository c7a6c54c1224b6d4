"""Router adapters on fixtures cut from each project's source (tests/fixtures/routers)."""

from __future__ import annotations

import pytest

from llmtop.model.stack import RouterSample
from llmtop.parse import detect, registry
from llmtop.parse.exposition import ParseError
from llmtop.parse.router_common import put_backend
from tests.conftest import fixture_text


def sample(name):
    body = fixture_text(f"routers/{name}")
    engine = detect.detect_engine(body)
    return engine, registry.normalize(engine, body).extra["router"]


def test_vllm_router_backends_policy_health():
    engine, rs = sample("vllm-router-SYNTHETIC-metrics-rs.txt")
    assert engine == "vllm-router"
    assert rs.policy == "round_robin"
    assert rs.reported() == {"requests": 120.0, "retries": 2.0, "active_workers": 2.0}
    assert set(rs.backends) == {"http://127.0.0.1:8001", "http://127.0.0.1:8002"}
    b = rs.backends["http://127.0.0.1:8002"]
    assert b.reported() == {"healthy": 1.0, "breaker": 0.0, "active": 9.0, "load": 9.0,
                            "routed": 60.0, "failures": 2.0}
    assert b.role is None  # plain mode: no P/D series, nothing says
    assert rs.request is not None and rs.request.count == 120
    assert rs.ttft is None and rs.decode_pending is None


def test_vllm_router_pd_roles_and_requests_counted_once():
    _, rs = sample("vllm-router-pd-SYNTHETIC-metrics-rs.txt")
    roles = {u: b.role for u, b in rs.backends.items()}
    assert roles == {"http://127.0.0.1:8101": "prefill", "http://127.0.0.1:8102": "decode",
                     "http://127.0.0.1:8103": "decode"}
    assert rs.requests == 40.0  # pd_requests_total, not prefill + decode
    assert rs.backends["http://127.0.0.1:8103"].reported() == {
        "healthy": 0.0, "breaker": 1.0, "routed": 20.0, "decode_routed": 20.0}


def test_smg_router():
    engine, rs = sample("smg-SYNTHETIC-metrics-rs.txt")
    assert engine == "sglang-router"
    assert rs.policy == "cache_aware"
    assert (rs.requests, rs.retries, rs.errors) == (100.0, 3.0, None)
    b = rs.backends["http://127.0.0.6:8000"]
    assert (b.routed, b.failures, b.prefill_routed, b.decode_routed) == (30.0, 3.0, None, None)
    assert b.breaker == 2.0
    assert rs.request is not None and rs.ttft is not None and rs.decode_pending is None


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
    assert rs.backends["http://b:1"].reported() == {"healthy": 1.0}


def test_engines_are_not_routers():
    assert detect.router_from_body(fixture_text("vllm-docs-usage-metrics.txt")) is None
    assert detect.detect_engine(fixture_text("vllm-docs-usage-metrics.txt")) == "vllm"


def test_gie_epp_from_its_testdata():
    engine, rs = sample("gie-epp-testdata.txt")
    assert engine == "gie-epp" and rs.policy is None
    assert (rs.requests, rs.errors) == (4.0, None)  # inference_model_request_total (older)
    assert rs.backends["pod1-rank-0"].reported() == {"pending": 100.0}
    assert rs.ready_backends == 2.0
    assert rs.request is not None
    assert rs.request.count == 1 and rs.request.sum == pytest.approx(0.06)


def test_llm_d_epp_endpoints():
    engine, rs = sample("llm-d-epp-test-SYNTHETIC.txt")
    assert engine == "llm-d-epp"
    assert set(rs.backends) == {"pod1-rank-0", "127.0.0.7:8000"}


def test_dynamo_frontend_workers_and_roles():
    engine, rs = sample("dynamo-frontend-SYNTHETIC.txt")
    assert engine == "dynamo"
    assert rs.backends["123"].role == "decode" and rs.backends["456"].role == "prefill"
    assert rs.backends["456"].pending == 5.0
    assert rs.requests == 1523.0 and rs.ttft is not None and rs.ttft.count == 1523


def test_production_stack_router_is_never_an_engine():
    body = fixture_text("routers/production-stack-SYNTHETIC.txt")
    assert detect.detect_engine(body) == "production-stack"  # not "vllm": its vllm:* are
    rs = registry.normalize("production-stack", body).extra["router"]  # the router's view
    assert rs.qps == 8.0
    assert rs.backends["http://127.0.0.5:8000"].pending == 3.0
    assert registry.normalize("production-stack", body).models == []


def test_litellm_deployments():
    engine, rs = sample("litellm-SYNTHETIC.txt")
    assert engine == "litellm"
    down = rs.backends["http://127.0.0.6:8000/v1"]
    assert down.reported() == {"healthy": 0.0, "breaker": 1.0,  # complete outage
                               "routed": 100.0, "failures": 40.0}
    assert (rs.requests, rs.retries, rs.errors) == (400.0, None, None)


@pytest.mark.parametrize("engine", ["gie-epp", "llm-d-epp", "dynamo", "production-stack",
                                    "litellm"])
def test_other_families_refuse_other_payloads(engine):
    for body in ("", "<html></html>", "vllm_router_requests_total 1\n"):
        with pytest.raises(ParseError):
            registry.normalize(engine, body)


def test_a_backend_value_has_a_declared_name():
    """Router adapters set ``BackendSample`` fields; a name that is no field (a typo, a
    value nobody declared) fails at once instead of landing in a dict no one reads."""
    rs = RouterSample()
    put_backend(rs, " http://a:1 ", healthy=1.0, routed=5.0, role="decode")
    assert rs.backends["http://a:1"].reported() == {"healthy": 1.0, "routed": 5.0}
    with pytest.raises(AttributeError):
        put_backend(rs, "http://a:1", helthy=0.0)
