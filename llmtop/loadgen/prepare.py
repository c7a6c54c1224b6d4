"""Before the load: model, endpoint, ``ignore_eos`` support and prompt-length calibration.

Runs in the worker process. The model comes from ``/v1/models`` unless given; the endpoint
from the URL path or ``--endpoint``, else a one-token probe of ``/v1/completions`` (falling
back to ``/v1/chat/completions`` on 404/405/400). A 400/422 with ``ignore_eos`` set is retried
without it. Prompt length is calibrated with ``/tokenize`` where it answers, else from
``usage.prompt_tokens`` of two probe requests. These one-token requests are the run's
``preflight``: counted, and the server's counters are read before them (``reconcile``).
The JSON requests go through httpx, the
probe requests through the raw client (``rawhttp``): no aiohttp unless ``client=aiohttp``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import httpx

from llmtop.errors import LlmtopError
from llmtop.loadgen.client import ClientUnavailable, _loads, dumps, require_aiohttp
from llmtop.loadgen.options import ProbeOptions, split_url
from llmtop.loadgen.prompts import Calibration, sample_text
from llmtop.loadgen.rawhttp import RawStreamClient
from llmtop.loadgen.reconcile import Counters, Preflight, read_counters

__all__ = ["ENDPOINT_PATHS", "Prepared", "ProbeSetupError", "prepare"]

ENDPOINT_PATHS = {"completions": "/v1/completions", "chat": "/v1/chat/completions"}
_SMALL, _LARGE = 64, 320
_TRANSIENT = ("connect", "timeout", "truncated_stream", "malformed_event", "stream_error")


class ProbeSetupError(LlmtopError):
    """The server cannot be probed (unreachable, no model, no streaming endpoint)."""


@dataclass(frozen=True, slots=True)
class Prepared:
    """What the server supports, resolved once before the load."""

    base_url: str
    endpoint: str
    endpoint_url: str
    model: str
    ignore_eos: bool
    calibration: Calibration
    preflight: Preflight = field(default_factory=Preflight)
    """Requests sent while preparing (endpoint detection, calibration): in no step, but on
    the books (the server counted them)."""
    counters_before: Counters | None = None
    """The server's counters before the preflight (``reconcile.read_counters``)."""
    context: int | None = None
    """The model's context (``max_model_len`` of /v1/models) when the server says."""


def _headers(options: ProbeOptions) -> dict[str, str]:
    h = {"Content-Type": "application/json"}
    if options.api_key:
        h["Authorization"] = f"Bearer {options.api_key}"
    return h


_HTTPX_ERRORS = (httpx.HTTPError, httpx.InvalidURL)


def _why(exc: Exception) -> str:
    """``[Errno 111] Connection refused`` -> ``connection refused`` (a timeout: ``timed out``)."""
    if isinstance(exc, httpx.TimeoutException):
        return "timed out"
    text = str(exc).strip()
    if text.startswith("[Errno") and "]" in text:
        text = text.split("]", 1)[1].strip()
    return (text[:1].lower() + text[1:]) if text else type(exc).__name__


async def _get_model(session: httpx.AsyncClient, base: str,
                     options: ProbeOptions) -> tuple[str, int | None]:
    try:
        r = await session.get(base + "/v1/models", headers=_headers(options))
        if r.status_code != 200:
            raise ProbeSetupError(f"GET /v1/models answered HTTP {r.status_code}; pass --model")
        data = _loads(r.content)
    except _HTTPX_ERRORS as exc:
        raise ProbeSetupError(f"cannot reach {base}: {_why(exc)}") from None
    except ValueError:
        raise ProbeSetupError("GET /v1/models did not return JSON; pass --model") from None
    models = [m for m in data.get("data", []) if isinstance(m, dict) and m.get("id")]
    if not models:
        raise ProbeSetupError("the server lists no model; pass --model")
    pick = next((m for m in models if m["id"] == options.model), models[0])
    ctx = pick.get("max_model_len")
    return str(pick["id"]), (ctx if isinstance(ctx, int) and ctx > 1 else None)


def _probe_body(model: str, endpoint: str, text: str, ignore_eos: bool) -> bytes:
    body: dict[str, Any] = {"model": model, "max_tokens": 1, "stream": True,
                            "stream_options": {"include_usage": True}}
    if endpoint == "chat":
        body["messages"] = [{"role": "user", "content": text}]
    else:
        body["prompt"] = text
    if ignore_eos:
        body["ignore_eos"] = True
    return dumps(body)


async def _tokenize(session: httpx.AsyncClient, base: str, options: ProbeOptions,
                    model: str, endpoint: str, text: str) -> int | None:
    body: dict[str, Any] = {"model": model}
    if endpoint == "chat":
        body["messages"] = [{"role": "user", "content": text}]
    else:
        body["prompt"] = text
    try:
        r = await session.post(base + "/tokenize", content=dumps(body),
                               headers=_headers(options))
        if r.status_code != 200:
            return None
        data = _loads(r.content)
    except (*_HTTPX_ERRORS, ValueError):
        return None
    if isinstance(data, dict):
        if isinstance(data.get("count"), int):
            return data["count"]
        toks = data.get("tokens") or data.get("input_ids")
        if isinstance(toks, list):
            return len(toks)
    return None


def _fit(n1: int, n2: int) -> Calibration | None:
    ratio = (n2 - n1) / (_LARGE - _SMALL)
    if ratio <= 0:
        return None
    return Calibration(method="", ratio=ratio, overhead=max(0.0, n1 - ratio * _SMALL))


async def _calibrate(session: httpx.AsyncClient, base: str, options: ProbeOptions, model: str,
                     endpoint: str, texts: tuple[str, str],
                     usage_counts: list[int | None]) -> Calibration:
    """Tokens per word: ``/tokenize`` where it answers, else the probe requests' usage."""
    n1 = await _tokenize(session, base, options, model, endpoint, texts[0])
    n2 = await _tokenize(session, base, options, model, endpoint, texts[1]) if n1 else None
    if n1 and n2 and (c := _fit(n1, n2)):
        return Calibration("tokenize", c.ratio, c.overhead)
    if usage_counts[0] and usage_counts[1] and (c := _fit(usage_counts[0], usage_counts[1])):
        return Calibration("usage", c.ratio, c.overhead)
    return Calibration("assumed")


async def prepare(options: ProbeOptions) -> Prepared:
    """Resolve model, endpoint and calibration; raises ``ProbeSetupError``."""
    base, _host, ep_from_url = split_url(options.url)
    if options.client == "aiohttp":
        try:
            require_aiohttp()
        except ClientUnavailable as exc:
            raise ProbeSetupError(str(exc)) from None
    before = await read_counters(options.url, options.api_key, options.insecure)
    timeout = httpx.Timeout(min(30.0, options.request_timeout))
    async with httpx.AsyncClient(timeout=timeout, verify=not options.insecure,
                                 trust_env=False) as session:
        context = options.context
        if options.model and (options.traffic is None or context is not None):
            model = options.model
        else:
            try:
                model, served_ctx = await _get_model(session, base, options)
            except ProbeSetupError:
                if not options.model:
                    raise
                model, served_ctx = options.model, None
            context = context or served_ctx
        candidates = [options.endpoint or ep_from_url] if (options.endpoint or ep_from_url) \
            else ["completions", "chat"]
        if options.dataset and not (options.endpoint or ep_from_url):
            from llmtop.loadgen.dataset import load_dataset

            if any(r.messages for r in load_dataset(options.dataset)):
                candidates = ["chat"]  # messages are sent as written
        chosen = None
        ignore_eos = True
        last_err = None
        texts = (sample_text(_SMALL, options.seed, 1), sample_text(_LARGE, options.seed, 2))
        usage_counts: list[int | None] = []
        sent: list[Any] = []
        for ep in candidates:
            client = RawStreamClient(base + ENDPOINT_PATHS[ep], api_key=options.api_key,
                                  insecure=options.insecure,
                                  timeout_s=min(60.0, options.request_timeout))
            try:
                res = await client.request(_probe_body(model, ep, texts[0], True))
                sent.append(res)
                if res.error in ("http_400", "http_422"):
                    res2 = await client.request(_probe_body(model, ep, texts[0], False))
                    sent.append(res2)
                    if res2.ok:
                        res, ignore_eos = res2, False
                if res.ok:
                    chosen = ep
                    usage_counts.append(res.prompt_tokens)
                    res3 = await client.request(_probe_body(model, ep, texts[1], ignore_eos))
                    sent.append(res3)
                    usage_counts.append(res3.prompt_tokens if res3.ok else None)
                    break
                if res.error in ("http_429", "http_503") or (
                        len(candidates) == 1 and options.model and res.error in _TRANSIENT):
                    chosen = ep  # exists but busy (or down): the run counts the errors
                    usage_counts = [None, None]
                    break
                last_err = res.error
            finally:
                await client.aclose()
        if chosen is None:
            raise ProbeSetupError(f"no streaming endpoint answered ({last_err}); "
                                  "check the URL, --endpoint and --model")
        if options.calibration:  # fixed by the caller (a bake-off: identical prompts)
            c = options.calibration
            cal = Calibration(str(c.get("method", "given")), float(c["tokens_per_word"]),
                              float(c.get("overhead", 0.0)))
        else:
            cal = await _calibrate(session, base, options, model, chosen, texts, usage_counts)
    done = [r for r in sent if r.ok]
    pre = Preflight(len(sent), len(done), sum(r.tokens for r in done),
                    sum(r.prompt_tokens or 0 for r in done))
    return Prepared(base, chosen, base + ENDPOINT_PATHS[chosen], model, ignore_eos, cal,
                    preflight=pre, counters_before=before, context=context)
