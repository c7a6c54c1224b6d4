"""One table of metric-name prefixes: discovery's sniff and parsing's detection agree on it."""

from __future__ import annotations

import pytest

from llmtop.discovery.probe import sniff_engine
from llmtop.families import PREFIXES, family_of, prefixes_of
from llmtop.parse.detect import detect_engine, router_from_body


@pytest.mark.parametrize(("prefix", "family", "kind"), PREFIXES)
def test_each_prefix_is_sniffed_and_detected_the_same(prefix, family, kind):
    body = f"# HELP {prefix}x a series\n# TYPE {prefix}x gauge\n{prefix}x 1\n"
    assert sniff_engine(body) == family
    assert detect_engine(body) == family
    assert (router_from_body(body) == family) is (kind == "router")


@pytest.mark.parametrize(("name", "family"), [
    ("llm_d_epp_pool_ready_pods", "llm-d-epp"),
    ("inference_pool_ready_pods", "gie-epp"),
    ("inference_objective_request_total", "gie-epp"),
    ("dynamo_frontend_requests_total", "dynamo"),
    ("litellm_requests_metric_total", "litellm"),
])
def test_discovery_knows_the_routers_parsing_knows(name, family):
    assert sniff_engine(f'python_gc_objects 1\n{name}{{a="b"}} 3\n') == family


def test_routers_come_before_the_engine_names_they_re_export():
    body = 'vllm:num_requests_running{server="a"} 1\nvllm:current_qps 2\n'
    assert family_of(body) == "production-stack" == sniff_engine(body) == detect_engine(body)
    assert prefixes_of("triton") == ("nv_inference_", "nv_gpu_", "nv_trt_llm_", "nv_llm_")
