"""OpenAI-compatible completions and chat completions over a simulated engine.

Shapes follow vLLM's OpenAI server: compact JSON; streaming as SSE ``data: {...}\\n\\n``
events, one per token, the chat stream starting with a role-only chunk, the last token's
chunk carrying ``finish_reason``, then (with ``stream_options.include_usage``) a usage chunk
with ``choices: []``, then ``data: [DONE]``. Tokens are whitespace-separated words, so
``usage``, ``/tokenize`` and a client's ``text.split()`` agree. Token timing comes from the
engine's step loop. ``max_tokens`` is exact with ``ignore_eos``; without it a request may
stop earlier with ``finish_reason: "stop"``. An engine that refuses a request (Triton queue
full) answers 503 with ``Retry-After``; a request the engine fails (``errors`` scenario)
answers 500, or, streaming, ends with an ``{"error": {...}}`` event before ``[DONE]``.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from typing import Any

from llmtop.demo.formats_spans import parse_traceparent
from llmtop.demo.httpd import Request, Response, StreamResponse, json_response, text_response
from llmtop.demo.scenarios import VOCAB
from llmtop.demo.sim import Engine, Rejected

__all__ = ["chat_completions", "completions", "error_response", "prompt_words", "token_text"]

_V = len(VOCAB)
_ENGINE_ERROR = "The engine failed while processing the request (demo scenario 'errors')."


def token_text(rid: int, i: int) -> str:
    """Text of output token ``i`` of request ``rid`` (one word with a leading space)."""
    return " " + VOCAB[(rid * 31 + i * 7) % _V]


def error_response(status: int, message: str, typ: str = "BadRequestError",
                   headers: dict[str, str] | None = None) -> Response:
    """An error body in vLLM's shape."""
    body = {"object": "error", "message": message, "type": typ, "param": None, "code": status}
    return json_response(body, status=status, headers=headers, dumps=_dumps)


def _dumps(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"))


def prompt_words(body: dict[str, Any], chat: bool) -> list[str] | None:
    """The prompt's tokens (words); None when the body has no usable prompt."""
    if chat:
        msgs = body.get("messages")
        if not isinstance(msgs, list) or not msgs:
            return None
        words: list[str] = []
        for m in msgs:
            content = m.get("content") if isinstance(m, dict) else None
            if isinstance(content, list):  # content parts
                content = " ".join(p.get("text", "") for p in content if isinstance(p, dict))
            if isinstance(content, str):
                words.extend(content.split())
        return words
    prompt = body.get("prompt")
    if isinstance(prompt, list) and prompt:
        if all(isinstance(x, int) for x in prompt):
            return [f"t{x}" for x in prompt]
        prompt = prompt[0]
        if isinstance(prompt, list):
            return [f"t{x}" for x in prompt]
    if isinstance(prompt, str):
        return prompt.split()
    return None


def _parse(request: Request, engine: Engine, chat: bool
           ) -> tuple[dict[str, Any], list[str], int] | Response:
    try:
        body = request.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        return error_response(400, "Invalid JSON body")
    if not isinstance(body, dict):
        return error_response(400, "Request body must be a JSON object")
    model = body.get("model")
    if model not in (None, "", engine.model):
        return error_response(404, f"The model `{model}` does not exist.", "NotFoundError")
    words = prompt_words(body, chat)
    if words is None:
        return error_response(400, "Either 'prompt' or 'messages' must be given" if not chat
                              else "'messages' must be a non-empty list")
    limit = engine.settings.max_model_len
    mt = body.get("max_tokens", body.get("max_completion_tokens"))
    if mt is None:
        mt = (limit - len(words)) if chat else 16
    if not isinstance(mt, int) or isinstance(mt, bool) or mt < 1:
        return error_response(400, "max_tokens must be at least 1, got " + repr(mt))
    if len(words) + mt > limit:
        return error_response(
            400, f"This model's maximum context length is {limit} tokens. However, you "
            f"requested {len(words) + mt} tokens ({len(words)} in the messages, {mt} in the "
            "completion). Please reduce the length of the messages or completion.")
    return body, words, mt


async def _run(request: Request, engine: Engine, chat: bool) -> Response | StreamResponse:
    parsed = _parse(request, engine, chat)
    if isinstance(parsed, Response):
        return parsed
    body, words, max_tokens = parsed
    stream = bool(body.get("stream"))
    opts = body.get("stream_options")
    include_usage = bool(isinstance(opts, dict) and opts.get("include_usage"))
    try:
        r = engine.submit(words, max_tokens, stream=stream, ignore_eos=bool(body.get("ignore_eos")))
    except Rejected:
        return error_response(503, "Server is at capacity, retry later.", "ServiceUnavailable",
                              headers={"Retry-After": "1"})
    rid = f"{'chatcmpl' if chat else 'cmpl'}-{uuid.uuid4().hex}"
    r.req_id = rid  # its span (demo/formats_spans.py) says it, and the caller's trace id
    r.trace = parse_traceparent(request.headers.get("traceparent"))
    created = int(time.time())
    model = engine.model
    if not stream:
        try:
            while not r.done:
                await r.wait()
        except asyncio.CancelledError:
            engine.abort(r)
            raise
        if r.failed:
            return text_response(500, "engine restarted")
        if r.finish_reason == "error":
            return error_response(500, _ENGINE_ERROR, "InternalServerError")
        text = "".join(token_text(r.rid, i) for i in range(r.output))
        usage = {"prompt_tokens": r.prompt_len, "total_tokens": r.prompt_len + r.output,
                 "completion_tokens": r.output, "prompt_tokens_details": None}
        if chat:
            choice: dict[str, Any] = {
                "index": 0,
                "message": {"role": "assistant", "content": text, "refusal": None,
                            "annotations": None, "audio": None, "function_call": None,
                            "tool_calls": [], "reasoning_content": None},
                "logprobs": None, "finish_reason": r.finish_reason, "stop_reason": None,
            }
            obj = "chat.completion"
        else:
            choice = {"index": 0, "text": text, "logprobs": None,
                      "finish_reason": r.finish_reason, "stop_reason": None,
                      "prompt_logprobs": None}
            obj = "text_completion"
        return json_response({"id": rid, "object": obj, "created": created, "model": model,
                                  "choices": [choice], "usage": usage}, dumps=_dumps)
    return await _stream(request, engine, r, rid, created, chat, include_usage)


async def _stream(request: Request, engine: Engine, r: Any, rid: str, created: int,
                  chat: bool, include_usage: bool) -> StreamResponse:
    resp = StreamResponse(headers={"Content-Type": "text/event-stream; charset=utf-8",
                                       "Cache-Control": "no-cache"})
    await resp.prepare(request)
    model_js = json.dumps(engine.model)
    obj = "chat.completion.chunk" if chat else "text_completion"
    head = f'data: {{"id":"{rid}","object":"{obj}","created":{created},"model":{model_js},'
    if chat:
        pre = head + '"choices":[{"index":0,"delta":{"content":"'
        mid = '"},"logprobs":null,"finish_reason":'
        post = "}]}\n\n"
    else:
        pre = head + '"choices":[{"index":0,"text":"'
        mid = '","logprobs":null,"finish_reason":'
        post = ',"stop_reason":null}]}\n\n'
    sent = 0
    try:
        if chat:
            await resp.write((head + '"choices":[{"index":0,"delta":{"role":"assistant",'
                              '"content":""},"logprobs":null,"finish_reason":null}]}\n\n'
                              ).encode())
        while True:
            n = r.output
            if r.failed:
                # simulated restart: the server process went away mid-stream
                if request.transport is not None:
                    request.transport.close()
                return resp
            if n > sent:
                parts = []
                for i in range(sent, n):
                    last = r.done and i == n - 1 and r.finish_reason != "error"
                    fin = f'"{r.finish_reason}"' if last else "null"
                    parts.append(f"{pre}{token_text(r.rid, i)}{mid}{fin}{post}")
                sent = n
                await resp.write("".join(parts).encode())
            if r.done:
                break
            await r.wait()
        if r.finish_reason == "error":  # vLLM's streaming error event, then [DONE]
            err = _dumps({"error": {"message": _ENGINE_ERROR, "type": "InternalServerError",
                                    "param": None, "code": 500}})
            await resp.write(f"data: {err}\n\ndata: [DONE]\n\n".encode())
            return resp
        tail = ""
        if include_usage:
            usage = _dumps({"prompt_tokens": r.prompt_len, "total_tokens": r.prompt_len + r.output,
                            "completion_tokens": r.output})
            tail = f'{head}"choices":[],"usage":{usage}}}\n\n'
        await resp.write((tail + "data: [DONE]\n\n").encode())
    except ConnectionResetError:
        engine.abort(r)  # client went away: free the slot, nothing left to answer
    except asyncio.CancelledError:
        engine.abort(r)
        raise
    return resp


async def completions(request: Request, engine: Engine) -> Response | StreamResponse:
    """``POST /v1/completions``."""
    return await _run(request, engine, chat=False)


async def chat_completions(request: Request, engine: Engine) -> Response | StreamResponse:
    """``POST /v1/chat/completions``."""
    return await _run(request, engine, chat=True)
