"""A target's model key is stable from its first sample (llama.cpp behind an engine hint must
report rates).

Engines without a model label are named from their identity endpoints (llama.cpp ``/props``
and ``/v1/models``, TGI ``/info``, trtllm-serve ``/v1/models``). If the first sample counted
before identity was known it was keyed ``target|default`` and the second ``target|<name>``:
every window then held one point per key and every rate was null. Each engine is served
over loopback from its real fixture text, with and without an engine hint, and watched by
the real ``Monitor`` and ``Scraper`` for two ticks.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from llmtop.config import Config
from llmtop.monitor import Monitor
from llmtop.sources.scrape import Scraper
from llmtop.targets import parse_target
from tests.loopback import Route, serve

FIXTURES = Path(__file__).parent / "fixtures" / "metrics"


def _fixture(name: str) -> str:
    lines = (FIXTURES / name).read_text(encoding="utf-8").splitlines()
    return "\n".join(line for line in lines if not line.startswith("# source:")
                     and not line.startswith("# note:") and not line.startswith("#   ")) + "\n"


_SAMPLE = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)(\{[^}]*\})?\s+(\S+)(.*)$")


def advance(text: str, k: int) -> str:
    """The Prometheus ``text`` after ``k`` more requests: every counter and histogram
    series grows by ``10 * k`` (buckets alike, so histograms stay consistent)."""
    grows: set[str] = set()
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 4 and parts[:2] == ["#", "TYPE"] and parts[3] in ("counter",
                                                                            "histogram"):
            grows.add(parts[2])
    out = []
    for line in text.splitlines():
        m = _SAMPLE.match(line)
        if m and not line.startswith("#"):
            name = m.group(1)
            base = re.sub(r"(_bucket|_count|_sum|_total)$", "", name)
            if name in grows or base in grows or f"{base}_total" in grows:
                line = f"{name}{m.group(2) or ''} {float(m.group(3)) + 10 * k!r}{m.group(4)}"
        out.append(line)
    return "\n".join(out) + "\n"


def advance_trtllm_json(text: str, k: int) -> str:
    """trtllm-serve's JSON iteration stats after ``k`` more iterations."""
    stats = json.loads(text)
    for it in stats:
        it["iter"] = int(it.get("iter", 0)) + 10 * k
        it["numCompletedRequests"] = int(it.get("numCompletedRequests", 0)) + k
        kv = it.get("kvCacheStats")
        if isinstance(kv, dict):
            for key in ("reusedBlocks", "missedBlocks"):
                if key in kv:
                    kv[key] = int(kv[key]) + 10 * k
    return json.dumps(stats)


def _static(obj: object) -> Route:
    return lambda _k: (200, "application/json", json.dumps(obj))


def _metrics(name: str, grow: Callable[[str, int], str] = advance,
             ctype: str = "text/plain; version=0.0.4") -> Route:
    text = _fixture(name)
    return lambda k: (200, ctype, grow(text, k))


def _models(model: str, owned_by: str) -> Route:
    return _static({"object": "list", "data": [{"id": model, "object": "model",
                                                "owned_by": owned_by}]})


LLAMA_MODEL = "qwen2.5-0.5b-instruct-q4_k_m.gguf"
TGI_MODEL = "HuggingFaceTB/SmolLM2-135M-Instruct"
TRT_MODEL = "TinyLlama/TinyLlama-1.1B-Chat-v1.0"
LMD_MODEL = "internlm2_5-7b-chat"

ENGINES: dict[str, tuple[dict[str, Route], str | None]] = {
    "llamacpp": ({
        "/metrics": _metrics("llamacpp-SYNTHETIC-from-server-context-cpp.txt"),
        "/props": _static({"total_slots": 4, "build_info": "b6100-abc1234",
                           "model_path": f"/models/{LLAMA_MODEL}", "n_ctx": 4096}),
        "/v1/models": _models(LLAMA_MODEL, "llamacpp"),
    }, LLAMA_MODEL),
    "tgi": ({
        "/metrics": _metrics("tgi-SYNTHETIC-from-server-rs.txt"),
        "/info": _static({"model_id": TGI_MODEL, "router": "text-generation-router",
                          "version": "3.3.4", "max_concurrent_requests": 128}),
        "/v1/models": _models(TGI_MODEL, "text-generation-inference"),
    }, TGI_MODEL),
    "lmdeploy": ({
        "/metrics": _metrics("lmdeploy-SYNTHETIC-from-loggers-py.txt"),
        "/v1/models": _models(LMD_MODEL, "lmdeploy"),
    }, None),  # labelled: the model comes from the metrics themselves
    "trtllm": ({
        "/metrics": _metrics("trtllm-serve-SYNTHETIC-metrics-full.json", advance_trtllm_json,
                             "application/json"),
        "/prometheus/metrics": _metrics("trtllm-prometheus-SYNTHETIC-from-collector-py.txt"),
        "/v1/models": _models(TRT_MODEL, "tensorrt_llm"),
    }, TRT_MODEL),
    "ollama": ({
        "/api/ps": _static(json.loads(_fixture("ollama-docs-api-ps.txt"))),
        "/api/version": _static(json.loads(_fixture("ollama-docs-api-version.txt"))),
        "/api/tags": _static(json.loads(_fixture("ollama-docs-api-tags.txt"))),
    }, None),
}

RATES = ("prompt_tokens_per_s", "generation_tokens_per_s", "requests_per_s")


async def _two_ticks(spec: str) -> tuple[list, list]:
    # generous timeouts: this is about keys, not speed (a loaded 2-core CI box once timed
    # out the no-hint Ollama's identity probes at the default 2 s)
    target = parse_target(spec, timeout_s=10.0)
    config = Config(targets=(target,), interval_s=0.2)
    monitor = Monitor(config, scraper=Scraper(config, defer_identity=True))
    try:
        first = await monitor.tick(timeout_s=20)
        await asyncio.sleep(0.3)
        second = await monitor.tick(timeout_s=20)
        return [r.key for r in first.engines], list(second.engines)
    finally:
        await monitor.aclose()


@pytest.mark.parametrize("hint", [True, False], ids=["hint", "no-hint"])
@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_model_key_is_stable_from_the_first_sample(engine: str, hint: bool) -> None:
    routes, model = ENGINES[engine]
    with serve(routes) as (port, _hits):
        spec = f"{engine}@127.0.0.1:{port}" if hint else f"127.0.0.1:{port}"
        keys_first, rows = asyncio.run(_two_ticks(spec))
    assert rows, f"{engine}: no rows"
    assert all(r.engine == engine for r in rows), [(r.key, r.engine, r.state, r.error)
                                                   for r in rows]
    assert keys_first == [r.key for r in rows], "the model key changed between samples"
    if model is not None:
        assert [r.model for r in rows] == [model]
    if engine == "ollama":
        return  # /api/ps has no counters: no rates to derive
    for r in rows:
        got = {k: getattr(r, k) for k in RATES}
        assert any(v is not None and v > 0 for v in got.values()), (r.key, got)


@pytest.mark.parametrize("engine", ["llamacpp", "tgi", "trtllm"])
def test_once_json_with_a_hint_reports_rates(engine: str, capsys, monkeypatch, tmp_path) -> None:
    """The issue's command: ``llmtop --once --json llamacpp@127.0.0.1:PORT`` (real CLI)."""
    from llmtop.cli.main import main

    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    monkeypatch.delenv("LLMTOP_CONFIG", raising=False)
    routes, model = ENGINES[engine]
    with serve(routes) as (port, _hits):
        rc = main(["--once", "--json", "--window", "0.3", f"{engine}@127.0.0.1:{port}"])
    doc = json.loads(capsys.readouterr().out)
    assert rc == 0
    [row] = doc["engines"]
    assert row["model"] == model
    assert any(row[k] is not None and row[k] > 0 for k in RATES), {k: row[k] for k in RATES}


def test_identity_fields_reach_the_adapters() -> None:
    """What llama.cpp's ``/props`` and TGI's ``/info`` say reaches the adapters: llama.cpp's
    ``total_slots`` is the row's max running; TGI without ``/v1/models`` is named by
    ``/info``'s ``model_id``, not ``default``."""
    llama = dict(ENGINES["llamacpp"][0])
    tgi = {k: v for k, v in ENGINES["tgi"][0].items() if k != "/v1/models"}
    with serve(llama) as (lport, _lhits), serve(tgi) as (tport, _thits):
        _, lrows = asyncio.run(_two_ticks(f"llamacpp@127.0.0.1:{lport}"))
        _, trows = asyncio.run(_two_ticks(f"127.0.0.1:{tport}"))
    assert [(r.model, r.max_running) for r in lrows] == [(LLAMA_MODEL, 4.0)]
    assert [(r.engine, r.model) for r in trows] == [("tgi", TGI_MODEL)]
