"""Fakes for store/monitor/once tests: a JSON "engine" and RawScrape builders.

The fake engine body is JSON::

    {"engine": "vllm", "start": 100.0, "version": "0.33.0",
     "models": {"m": {"gauges": {...}, "counters": {...},
                      "hists": {"ttft": [[bounds...], [cumulative...], sum, count]}}}}

``"inf"`` in bounds means +Inf. Anything that is not JSON raises ``ParseError``.
"""

from __future__ import annotations

import json
import math

from llmtop.model import EngineSample, GpuRecord, GpuSample, Hist, ModelSample, RawScrape
from llmtop.parse.exposition import ParseError

__all__ = ["body", "fake_detect", "fake_normalize", "gpu_sample", "raw"]


def fake_normalize(engine, text, *, headers=None, identity=None):
    try:
        d = json.loads(text)
    except ValueError as exc:
        raise ParseError(f"not JSON: {exc}") from exc
    models = []
    for name, m in d.get("models", {}).items():
        hists = {
            k: Hist(tuple(math.inf if b == "inf" else float(b) for b in h[0]),
                    tuple(float(c) for c in h[1]), float(h[2]), float(h[3]))
            for k, h in m.get("hists", {}).items()
        }
        models.append(ModelSample(name, gauges={k: float(v) for k, v in m.get("gauges",
                                                                               {}).items()},
                                  counters={k: float(v) for k, v in m.get("counters",
                                                                           {}).items()},
                                  hists=hists))
    gpus = [GpuRecord(host=(identity or {}).get("host", ""), index=i, source="dcgm", util=u)
            for i, u in enumerate(d.get("gpus", []))]
    return EngineSample(engine=d.get("engine", engine), version=d.get("version"),
                        start_time=d.get("start"), models=models, gpus=gpus)


def fake_detect(text, content_type=None, identity=None):
    return "vllm" if text.lstrip().startswith("{") else None


def body(*, start=100.0, model="m", gauges=None, counters=None, hists=None, version=None,
         extra_models=None, **kw):
    models = {model: {"gauges": gauges or {}, "counters": counters or {}, "hists": hists or {}}}
    models.update(extra_models or {})
    d = {"engine": "vllm", "start": start, "models": models, **kw}
    if version:
        d["version"] = version
    return json.dumps(d)


def raw(target, t, text=None, *, status="ok", error=None, http_status=None, identity=None,
        engine_hint=None, wall0=1_700_000_000.0):
    return RawScrape(
        target=target, url=f"http://127.0.0.1:1/{target}", t_wall=wall0 + t, t_mono=t,
        status=status, http_status=http_status if http_status is not None else (
            200 if status == "ok" else None),
        body=text if status == "ok" else None, error=error, identity=identity,
        engine_hint=engine_hint,
    )


def gpu_sample(t, *, error=None, utils=(0.5,), wall0=1_700_000_000.0):
    gpus = [] if error else [GpuRecord(host="local", index=i, source="nvml", util=u,
                                       temp_c=50.0) for i, u in enumerate(utils)]
    return GpuSample(t_wall=wall0 + t, t_mono=t, gpus=gpus, error=error)
