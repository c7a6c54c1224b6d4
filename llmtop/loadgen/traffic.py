"""Traffic shaped like production: what the engine itself saw, read before the load.

``read_signals(spec)`` scrapes a target once through llmtop's own scrape and parse path
(``sources.scrape.Scraper``, ``parse.registry.normalize``) and keeps what the probe needs:
the prompt- and output-length histograms (``ModelSample.hists`` keys ``prompt_len`` and
``gen_len``: vLLM ``vllm:request_prompt_tokens`` / ``vllm:request_generation_tokens``,
SGLang ``sglang:prompt_tokens_histogram`` / ``sglang:generation_tokens_histogram``) and the
prefix-cache counters. ``recording_signals(path, window_s)`` reads the same from an llmtop
recording (its last ``window_s`` seconds). ``build_traffic(first, second, ...)`` turns one
or two readings into the JSON the probe carries (``ProbeOptions.traffic``), saying which
window it describes. Runs in the CLI process, never in the load's hot path.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Any

from llmtop.errors import LlmtopError
from llmtop.loadgen.shape import LengthDist, ShapeError, window_dist
from llmtop.model import EngineSample, Hist

__all__ = ["Signals", "TrafficError", "build_traffic", "dists", "lifetime_reason", "read_signals",
           "recording_signals"]

NO_LENGTHS_HINT = ("use --dataset FILE (your own prompts), or --prompt-tokens/--output-tokens "
                   "with --length-dist")


class TrafficError(LlmtopError):
    """The engine's traffic cannot be read (unreachable, no length histograms, no hits)."""


@dataclass(slots=True)
class Signals:
    """One reading of one engine: the histograms and counters the probe copies."""

    source: str
    engine: str | None
    t_wall: float
    start_time: float | None = None
    hists: dict[str, Hist] = field(default_factory=dict)
    counters: dict[str, float] = field(default_factory=dict)
    gauges: dict[str, float] = field(default_factory=dict)


def _from_sample(source: str, engine: str | None, t_wall: float,
                 sample: EngineSample) -> Signals:
    sig = Signals(source, engine, t_wall, sample.start_time)
    if sample.models:  # the busiest model (most prompts seen) speaks for the engine
        m = max(sample.models, key=lambda m: h.count
                if (h := m.hists.get("prompt_len")) is not None else -1.0)
        sig.hists, sig.counters, sig.gauges = dict(m.hists), dict(m.counters), dict(m.gauges)
    return sig


async def read_signals(spec: str, *, api_key: str | None = None,
                       insecure: bool = False) -> Signals:
    """Scrape ``spec`` (a target string: ``host:port``, ``vllm@host:port``, a URL) once."""
    from llmtop.config import Config
    from llmtop.parse.detect import detect_engine
    from llmtop.parse.exposition_types import ParseError
    from llmtop.parse.registry import normalize
    from llmtop.sources.scrape import Scraper
    from llmtop.targets import parse_target

    if "://" in spec and "@" not in spec.split("://", 1)[0]:  # the probe's own URL form:
        from llmtop.loadgen.options import split_url  # .../v1[/completions] -> the server

        spec = split_url(spec)[0]
    target = parse_target(spec, timeout_s=10.0, verify_tls=not insecure)
    scraper = Scraper(Config(targets=(target,), timeout_s=10.0, api_key=api_key,
                             verify_tls=not insecure, discover=False))
    try:
        raw = await scraper.scrape(target)
    finally:
        await scraper.aclose()
    if raw.status != "ok" or raw.body is None:
        raise TrafficError(f"cannot read metrics from {target.name}: "
                           f"{raw.error or raw.status}")
    engine = target.engine or raw.engine_hint or detect_engine(
        raw.body, raw.content_type, raw.identity)
    if engine is None:
        raise TrafficError(f"{target.name}: not a known engine's metrics")
    try:
        sample = normalize(engine, raw.body, headers=raw.headers, identity=raw.identity)
    except ParseError as exc:
        raise TrafficError(f"{target.name}: cannot parse its metrics: {exc}") from None
    return _from_sample(target.name, engine, raw.t_wall, sample)


def recording_signals(path: str, window_s: float) -> tuple[Signals, Signals | None]:
    """The first and last reading of the last ``window_s`` seconds of a recording (the
    first target whose scrapes carry a prompt-length histogram)."""
    from llmtop.model import RawScrape
    from llmtop.parse.detect import detect_engine
    from llmtop.parse.exposition_types import ParseError
    from llmtop.parse.registry import normalize
    from llmtop.record.reader import Recording

    rec = Recording.open(path)
    if rec.end is None:
        raise TrafficError(f"{path}: the recording holds no data")
    start = rec.index_at(rec.end - window_s) if window_s > 0 else 0
    by_target: dict[str, list[Signals]] = {}
    for item in rec.items(start):
        if not isinstance(item, RawScrape) or item.status != "ok" or item.body is None:
            continue
        engine = item.engine_hint or detect_engine(item.body, item.content_type, item.identity)
        if engine is None:
            continue
        try:
            sample = normalize(engine, item.body, headers=item.headers, identity=item.identity)
        except ParseError:
            continue
        sig = _from_sample(f"{item.target} in {os.path.basename(path)}", engine, item.t_wall,
                           sample)
        if "prompt_len" in sig.hists or "prefix_queries" in sig.counters:
            by_target.setdefault(item.target, []).append(sig)
    if not by_target:
        raise TrafficError(f"{path}: no target in the recording reports length histograms; "
                           + NO_LENGTHS_HINT)
    sigs = next(iter(by_target.values()))
    return sigs[0], (sigs[-1] if len(sigs) > 1 else None)


def _hit_rate(first: Signals, second: Signals | None) -> float | None:
    last = second or first
    q, h = last.counters.get("prefix_queries"), last.counters.get("prefix_hits")
    if q is not None and h is not None:
        if second is not None:
            q0, h0 = first.counters.get("prefix_queries"), first.counters.get("prefix_hits")
            if q0 is not None and h0 is not None and q - q0 > 0 and h >= h0:
                return min(1.0, (h - h0) / (q - q0))
        if q > 0:
            return min(1.0, h / q)
    return last.gauges.get("prefix_hit_rate_gauge")


def _age(s: float) -> str:
    return f"{s / 60:.0f} min" if s >= 120 else f"{s:.0f} s"


def build_traffic(first: Signals, second: Signals | None, *, lengths: bool, prefix: bool,
                  window_s: float, why_lifetime: str | None = None) -> dict[str, Any]:
    """``ProbeOptions.traffic``: the length histograms and/or prefix hit rate to match, and
    ``window`` saying which span they describe. Raises ``TrafficError``."""
    out: dict[str, Any] = {"source": first.source, "engine": first.engine}
    span = (second.t_wall - first.t_wall) if second is not None else None
    window = (f"last {_age(span)} (two scrapes)" if span is not None
              else f"lifetime ({why_lifetime or 'one scrape'})")
    if lengths:
        news, olds = {}, {}
        for key, name in (("prompt_len", "prompt"), ("gen_len", "output")):
            new = (second or first).hists.get(key)
            if new is None:
                raise TrafficError(
                    f"{first.source} ({first.engine}) reports no {name}-length histogram "
                    f"(vllm:request_prompt_tokens / vllm:request_generation_tokens, "
                    f"sglang:prompt_tokens_histogram); {NO_LENGTHS_HINT}")
            news[name] = new
            olds[name] = first.hists.get(key) if second is not None else None
        got = {}
        try:  # the window for both lengths, or the lifetime for both (never a mix)
            for name in news:
                got[name], reset = window_dist(news[name], olds[name])
                if reset:
                    raise ShapeError("the engine restarted during the window")
        except ShapeError as exc:
            if second is None:
                raise TrafficError(f"{first.source}: {exc}; {NO_LENGTHS_HINT}") from None
            window = f"lifetime ({exc} of the last {_age(span or 0)})"
            try:
                got = {name: window_dist(news[name])[0] for name in news}
            except ShapeError as exc2:
                raise TrafficError(f"{first.source}: {exc2}; {NO_LENGTHS_HINT}") from None
        out["prompt"] = got["prompt"].describe()
        out["output"] = got["output"].describe()
    if prefix:
        rate = _hit_rate(first, second)
        if rate is None:
            raise TrafficError(f"{first.source} ({first.engine}) reports no prefix-cache "
                               "hit counters; use --shared-prefix N:P instead")
        out["prefix_hit_rate"] = rate
    out["window"] = window
    out["window_s"] = span
    out["read_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime((second or first).t_wall))
    return out


def lifetime_reason(first: Signals, window_s: float) -> str | None:
    """Why a window cannot be waited for (the engine is younger than it), else None."""
    if window_s <= 0:
        return "--lengths-window 0"
    if first.start_time is not None and first.t_wall - first.start_time < window_s:
        return f"engine up {_age(first.t_wall - first.start_time)} < {_age(window_s)} window"
    return None


def dists(traffic: dict[str, Any]) -> tuple[LengthDist | None, LengthDist | None]:
    """The prompt and output ``LengthDist`` of a ``traffic`` dict (None where absent)."""
    p, o = traffic.get("prompt"), traffic.get("output")
    return (LengthDist.from_json(p) if p else None, LengthDist.from_json(o) if o else None)

