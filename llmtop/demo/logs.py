"""The demo engines' logs: each engine writes its real engine's lines to a file of its own.

- :class:`LogFile`: one engine's log file, appended to and renamed ``.1`` at ``cap_bytes``
  (bounded, and it exercises a follower's rotation).
- :class:`VllmLog`, :class:`SglangLog`, :class:`TritonLog`: the lines each real engine writes
  (start-up, periodic statistics, one access line per finished request, a failed request,
  a crash), in the shapes of the real captures in ``tests/fixtures/logs/`` (each line cites
  its source); :func:`engine_log` picks one by engine kind.

Times are the demo's clock (``llmtop.clock``), written in local time as the engines write
them. Only what the real engine logs at its default level is written: a healthy engine
logs no error (so the calm demo raises no alarm).
"""

from __future__ import annotations

import os
import time as _time
from collections.abc import Iterable
from typing import Any

from llmtop import clock

__all__ = ["CAP_BYTES", "LogFile", "SglangLog", "TritonLog", "VllmLog", "engine_log"]

CAP_BYTES = 2 * 1024 * 1024
"""A demo log is renamed ``<name>.1`` (replacing the older one) once it is this large."""

_STATUS = {200: "OK", 400: "Bad Request", 500: "Internal Server Error",
           503: "Service Unavailable"}


class LogFile:
    """An append-only text file, renamed ``path + ".1"`` when it reaches ``cap_bytes``."""

    def __init__(self, path: str, cap_bytes: int = CAP_BYTES):
        self.path = path
        self.cap_bytes = cap_bytes
        self.rotations = 0
        self._f = open(path, "a", encoding="utf-8", newline="")  # noqa: SIM115 (kept open)
        self._size = self._f.tell()

    def write(self, lines: Iterable[str]) -> None:
        """Append ``lines`` (each without its newline), then rotate when the cap is passed."""
        text = "".join(line + "\n" for line in lines)
        if not text or self._f.closed:
            return
        try:
            self._f.write(text)
            self._f.flush()
        except OSError:
            return  # a full disk costs the demo its log, never its engines
        self._size += len(text.encode("utf-8", "replace"))
        if self._size >= self.cap_bytes:
            self.rotate()

    def rotate(self) -> None:
        """Rename the file to ``.1`` and start a new one (as logrotate's ``create`` does)."""
        try:
            self._f.close()
            os.replace(self.path, self.path + ".1")
            self._f = open(self.path, "a", encoding="utf-8", newline="")  # noqa: SIM115
        except OSError:
            return
        self._size = 0
        self.rotations += 1

    def close(self) -> None:
        self._f.close()


def _client_ports() -> Any:
    """Ephemeral client ports for the access lines, as a kernel hands them out."""
    port = 40000
    while True:
        port = 40000 if port >= 60999 else port + 1
        yield port


class _EngineLog:
    """What every demo engine's log does; the subclasses write their engine's lines."""

    def __init__(self, out: LogFile, port: int, model: str):
        self.out = out
        self.port = port
        self.model = model
        self.pid = os.getpid()
        """The simulated process's pid (a restart or a return from ``down`` takes a new one)."""
        self.up = True
        """False while the simulated process is dead (``down``): it writes nothing."""
        self._ports = _client_ports()
        self._last: dict[str, float] = {}
        self._last_t = clock.monotonic()

    def write(self, lines: Iterable[str]) -> None:
        if self.up:
            self.out.write(lines)

    def new_process(self) -> None:
        """A new simulated process (restart): the next pid, counted from the demo's own."""
        self.pid += 1000

    # the subclasses override what their engine logs
    def startup(self) -> None: ...
    def periodic(self, engine: Any) -> None: ...
    def finished(self, request: Any) -> None: ...
    def scraped(self, status: int = 200) -> None: ...
    def crash(self, in_flight: int) -> None:
        """The process dies: nothing more is written until a new one starts. (Only vLLM's
        crash was captured; the others' is silent here.)"""
        self.up = False

    def _deltas(self, engine: Any, keys: tuple[str, ...]) -> tuple[float, list[float]]:
        """Seconds since the last call and each counter's growth since then (a counter reset
        by a restart counts from 0)."""
        now = clock.monotonic()
        dt, self._last_t = now - self._last_t, now
        out = []
        for k in keys:
            v = float(engine.stats.c.get(k, 0.0))
            before = self._last.get(k, 0.0)
            out.append(v - before if v >= before else v)
            self._last[k] = v
        return dt, out


def _local(fmt: str, t: float) -> str:
    return _time.strftime(fmt, _time.localtime(t))


class VllmLog(_EngineLog):
    """vLLM 0.32's text log (``vllm/logger.py``'s format; the lines of
    ``tests/fixtures/logs/vllm-0.32-text-enginedead.log`` unless a method says otherwise)."""

    def record(self, proc: str, level: str, where: str, message: str,
               pid: int | None = None) -> str:
        """One logging record: ``(APIServer pid=N) INFO MM-DD HH:MM:SS [file.py:line] msg``;
        a multi-line message repeats the prefix on each line, every line but the last ending
        in a carriage return (vLLM's ``NewLineFormatter``, as captured)."""
        prefix = (f"({proc} pid={self.pid if pid is None else pid}) {level} "
                  f"{_local('%m-%d %H:%M:%S', clock.time())} [{where}] ")
        return "\r\n".join(prefix + part for part in message.split("\n"))

    def uvicorn(self, text: str) -> str:
        """Uvicorn's own lines have no prefix: ``INFO:     Shutting down``."""
        return "INFO:     " + text

    def access(self, method: str, path: str, status: int) -> str:
        return self.uvicorn(f'127.0.0.1:{next(self._ports)} - "{method} {path} HTTP/1.1" '
                            f"{status} {_STATUS.get(status, '')}".rstrip())

    def startup(self) -> None:
        # the start-up lines of the capture that say nothing of its CPU build (its warnings
        # are about the missing Triton and libtcmalloc: a GPU server does not write them)
        core = self.pid + 1
        args = {"host": "127.0.0.1", "port": self.port, "model": self.model}
        self.write([
            self.record("APIServer", "INFO", "api_utils.py:286", f"non-default args: {args}"),
            self.record("APIServer", "INFO", "model.py:733",
                        "Resolved architecture: LlamaForCausalLM"),
            self.record("APIServer", "INFO", "model.py:2152", "Using max model len 2048"),
            self.record("EngineCore", "INFO", "core.py:402",
                        "init engine (profile, create kv cache, warmup model) took 2.95 s",
                        pid=core),
            self.record("APIServer", "INFO", "entry.py:136", "Supported tasks: ['generate']"),
            self.record("APIServer", "INFO", "entry.py:140",
                        f"Starting vLLM server on http://127.0.0.1:{self.port}"),
            self.uvicorn(f"Started server process [{self.pid}]"),
            self.uvicorn("Waiting for application startup."),
            self.uvicorn("Application startup complete."),
        ])

    def periodic(self, engine: Any) -> None:
        """vLLM's ``LoggingStatLogger.log`` every 10 s (``vllm/v1/metrics/loggers.py``; the
        line as a real vLLM 0.32 wrote it, ``tests/demo/data/vllm-0.32-stats-lines.log``):
        throughput over the interval, running and waiting now, preemptions when there were
        some, the KV cache use, the prefix cache hit rate once it has seen a query. An idle
        engine logs it at DEBUG, so not at all at the default level. The hit rate is over
        the interval (vLLM's is over its last 1,000 requests)."""
        dt, (prompt, gen, pre, queries, hits) = self._deltas(engine, (
            "prefill_compute_tokens", "generation_tokens", "preemptions", "prefix_queries",
            "prefix_hits"))
        if dt <= 0:
            return
        pt, gt = prompt / dt, gen / dt
        last = self._last.get("_tput", 0.0)
        self._last["_tput"] = pt + gt
        if not (pt or gt or last):
            return
        parts = [f"Avg prompt throughput: {pt:.1f} tokens/s",
                 f"Avg generation throughput: {gt:.1f} tokens/s",
                 f"Running: {len(engine.running)} reqs", f"Waiting: {len(engine.waiting)} reqs"]
        if pre > 0:
            parts.append(f"Preemptions: {pre:.0f}")
        parts.append(f"GPU KV cache usage: {engine.kv_usage() * 100:.1f}%")
        if engine.stats.c.get("prefix_queries", 0.0) > 0:
            rate = hits / queries if queries > 0 else 0.0
            parts.append(f"Prefix cache hit rate: {rate * 100:.1f}%")
        self.write([self.record("APIServer", "INFO", "loggers.py:335",
                                "Engine 000: " + ", ".join(parts))])

    def finished(self, request: Any) -> None:
        """Uvicorn's access line once the response ended. A request that ends in an error
        (``finish_reason`` error) is logged by vLLM first, at ERROR
        (``vllm/entrypoints/generate/base/serving.py:203``, ``_raise_if_error``), and
        answered 500, or, streamed, inside its 200 stream."""
        rid = getattr(request, "req_id", None) or f"cmpl-{request.rid:016x}"
        path = "/v1/chat/completions" if rid.startswith("chatcmpl") else "/v1/completions"
        lines = []
        failed = getattr(request, "finish_reason", None) == "error"
        if failed:
            lines.append(self.record("APIServer", "ERROR", "serving.py:203",
                                     f"Request {rid} failed with an internal error during "
                                     "generation"))
        lines.append(self.access("POST", path, 500 if failed and not request.stream else 200))
        self.write(lines)

    def scraped(self, status: int = 200) -> None:
        self.write([self.access("GET", "/metrics", status)])

    def crash(self, in_flight: int) -> None:
        """The engine core killed: the API server's lines of
        ``vllm-0.32-text-enginedead.log`` from the worker's ``Parent process exited`` to its
        end, with this process's pids and the time now (its ``Request … failed (engine
        dead).`` line left out: vLLM writes it only with ``--enable-log-requests``), an
        access line with 500 for each request in flight (at most 3), then nothing more."""
        api, core = self.pid, self.pid + 1
        site = "/root/.cache/llmtop/vllm-venv/lib/python3.11/site-packages/vllm/v1/engine"
        lines = [self.record("Worker", "INFO", "multiproc_executor.py:843",
                             "Parent process exited, terminating worker queues", pid=core + 1),
                 self.record("APIServer", "WARNING", "core_client.py:817",
                             "[shutdown] MPClient: engine core exited unexpectedly; starting "
                             "cleanup")]
        for where, what in (("770", "start timeout=default"),
                            ("772", "stopping engine manager"),
                            ("774", "engine manager stopped"),
                            ("775", "cleaning up background resources"),
                            ("777", "complete")):
            lines.append(self.record("APIServer", "INFO", f"core_client.py:{where}",
                                     f"[shutdown] MPClient: {what}"))
        lines.append(self.record("APIServer", "ERROR", "async_llm.py:906", "\n".join([
            "AsyncLLM output_handler failed.",
            "Traceback (most recent call last):",
            f'  File "{site}/async_llm.py", line 849, in output_handler',
            "    outputs = await engine_core.get_output_async()",
            "              ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^",
            f'  File "{site}/core_client.py", line 1235, in get_output_async',
            "    raise self._format_exception(outputs) from None",
            "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See "
            "stack trace (above) for the root cause."])))
        lines += [self.access("POST", "/v1/completions", 500)
                  for _ in range(min(3, max(0, in_flight)))]
        lines += [self.uvicorn("Shutting down"), self.uvicorn("Waiting for application shutdown."),
                  self.uvicorn("Application shutdown complete."),
                  self.uvicorn(f"Finished server process [{api}]")]
        lines += _NANOBIND
        self.write(lines)
        self.up = False


_NANOBIND = [
    "nanobind: leaked 4 instances!",
    *(f' - leaked instance 0x7f5eba76c{a} of type "triton._C.libtriton.ir.attribute"'
      for a in ("b48", "b28", "b08", "ae8")),
    "nanobind: leaked 64 types!",
    ' - leaked type "triton._C.libtriton.ir.location"',
    ' - leaked type "TMEM_LOAD_REDUCE_MODIFIER"',
    ' - leaked type "triton._C.libtriton.ir.block"',
    " - ... skipped remainder",
    "nanobind: leaked 514 functions!",
    ' - leaked function "add_fn_asan_attr"',
    ' - leaked function "get_int64"',
    " - ... skipped remainder",
    "nanobind: this is likely caused by a reference counting issue in the binding code.",
    "See https://nanobind.readthedocs.io/en/latest/refleaks.html",
]
"""The end of ``vllm-0.32-text-enginedead.log`` (its lists shortened): after the exit."""


_PROMPT_TOKENS = 300
"""The demo's typical prompt: a second's new sequences are estimated from its new tokens."""


class SglangLog(_EngineLog):
    """SGLang 0.5.23's log (``tests/fixtures/logs/sglang-0.5.23-cpu.log``): ``[YYYY-MM-DD
    HH:MM:SS] message``, Uvicorn's lines under the same stamp."""

    def line(self, message: str) -> str:
        return f"[{_local('%Y-%m-%d %H:%M:%S', clock.time())}] {message}"

    def access(self, method: str, path: str, status: int) -> str:
        return self.line(f'INFO:     127.0.0.1:{next(self._ports)} - "{method} {path} '
                         f'HTTP/1.1" {status} {_STATUS.get(status, "")}'.rstrip())

    def startup(self) -> None:
        # Uvicorn's start and SGLang's ready line; the capture's other start-up lines name
        # its CPU build (memory, no CUDA architecture, import errors)
        self.write([self.line(m) for m in (
            f"INFO:     Started server process [{self.pid}]",
            "INFO:     Waiting for application startup.",
            "INFO:     Application startup complete.",
            f"INFO:     Uvicorn running on http://127.0.0.1:{self.port} (Press CTRL+C to quit)",
            "The server is fired up and ready to roll!")])

    def periodic(self, engine: Any) -> None:
        """Once a second: a ``Prefill batch`` line when prompts were computed (as captured;
        SGLang writes one per prefill batch, the demo one a second with the second's sums),
        and a ``Decode batch`` line while requests run (SGLang writes one every 40 decode
        steps, ``decode_log_interval``; the words of its
        ``managers/scheduler_components/metrics_reporter.py``). ``cuda graph``: the label
        SGLang writes on a CUDA GPU (``cpu graph`` on the CPU, as captured)."""
        dt, (new, cached, gen) = self._deltas(engine, (
            "prefill_compute_tokens", "prompt_tokens_cached", "generation_tokens"))
        if dt <= 0:
            return
        usage = engine.kv_usage()
        # decode runs in CUDA graphs unless the engine launches every kernel from the host
        # (the ``eager`` profile: ``--disable-cuda-graph``)
        graphs = not getattr(getattr(engine, "profile", None), "name", "").endswith("eager")
        lines = []
        if new > 0:
            lines.append(self.line(
                f"Prefill batch, #new-seq: {max(1, round(new / _PROMPT_TOKENS))}, "
                f"#new-token: {new:.0f}, "
                f"#cached-token: {cached:.0f}, token usage: {usage:.2f}, #running-req: "
                f"{len(engine.running)}, #queue-req: {len(engine.waiting)}, #pending-token: 0, "
                f"cuda graph: False, input throughput (token/s): {new / dt:.2f}"))
        if engine.running:
            lines.append(self.line(
                f"Decode batch, #running-req: {len(engine.running)}, #token: "
                f"{engine.used_tokens()}, token usage: {usage:.2f}, cuda graph: {graphs}, "
                f"gen throughput (token/s): {gen / dt:.2f}, #queue-req: {len(engine.waiting)}"))
        self.write(lines)

    def finished(self, request: Any) -> None:
        rid = getattr(request, "req_id", None) or ""
        path = "/v1/chat/completions" if rid.startswith("chatcmpl") else "/v1/completions"
        self.write([self.access("POST", path, 200)])

    def scraped(self, status: int = 200) -> None:
        self.write([self.access("GET", "/metrics", status)])


class TritonLog(_EngineLog):
    """Triton 2.51's glog lines (``tests/fixtures/logs/triton-2.51-cpu.log``):
    ``I1207 09:24:32.528010 27596 server.cc:674] "message"``. Triton logs no request at its
    default level, and what the TensorRT-LLM backend logs for a failed request was never
    captured, so the demo Triton writes only its start-up lines."""

    def glog(self, sev: str, where: str, message: str) -> str:
        t = clock.time()
        stamp = _local("%m%d %H:%M:%S", t) + f".{int(t % 1 * 1e6):06d}"
        return f"{sev}{stamp} {self.pid} {where}] {message}"

    def startup(self) -> None:
        model = self.model
        w = max(6, len(model))
        rule = f"+-{'-' * w}-+---------+--------+"
        self.write([
            self.glog("I", "model_lifecycle.cc:472", f'"loading: {model}:1"'),
            self.glog("I", "model_lifecycle.cc:839", f"\"successfully loaded '{model}'\""),
            self.glog("I", "server.cc:674", ""),
            rule, f"| {'Model':<{w}} | Version | Status |", rule,
            f"| {model:<{w}} | 1       | READY  |", rule, "",
            self.glog("I", "http_server.cc:4713",
                      f'"Started HTTPService at 127.0.0.1:{self.port}"'),
            self.glog("I", "http_server.cc:362",
                      f'"Started Metrics Service at 127.0.0.1:{self.port}"'),
        ])


_KINDS: dict[str, type[_EngineLog]] = {"vllm": VllmLog, "sglang": SglangLog,
                                       "triton": TritonLog}


def engine_log(kind: str, path: str, port: int, model: str,
               cap_bytes: int = CAP_BYTES) -> _EngineLog:
    """The log of a demo engine of ``kind`` (``vllm``, ``sglang``, ``triton``) at ``path``."""
    return _KINDS[kind](LogFile(path, cap_bytes), port, model)
