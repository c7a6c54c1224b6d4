"""Every other format, on real lines or lines built from the engine's own logging code.

- Real: SGLang, Triton, llama-server. From source: TGI, LMDeploy, Ollama, TensorRT-LLM.
- The generic fallback.
"""

from __future__ import annotations

import calendar

from logfixtures import READ, events, local

from llmtop.parse.logs import assembler


def _by_head(evs):
    return {e.headline: e for e in evs}


def test_sglang_times_from_its_prefix_and_levels_from_the_message():
    evs = events("sglang-0.5.23-cpu.log", "sglang")
    h = _by_head(evs)
    ready = h["The server is fired up and ready to roll!"]
    assert ready.severity == "info" and ready.stamped
    assert ready.t_wall == local(2026, 12, 7, 9, 28, 44)
    up = h["Application startup complete."]  # Uvicorn's "INFO:     " inside SGLang's prefix
    assert up.severity == "info" and up.stamped
    warns = [e for e in evs if e.severity == "warning"]
    assert warns and all("UserWarning" in e.headline or "DeprecationWarning" in e.headline
                         for e in warns)
    assert all(len(e.lines) >= 2 for e in warns)  # the warning's source line joined
    assert not [e for e in evs if e.severity in ("error", "critical")]


def test_sglang_request_ids_and_prompts():
    evs = events("sglang-0.5.23-cpu.log", "sglang")
    receive = [e for e in evs if e.headline.startswith("Receive: obj=GenerateReqInput")]
    assert receive and all(e.request_id for e in receive)
    assert receive[0].request_id == receive[0].headline.split("rid='")[1].split("'")[0]
    text = "\n".join(x for e in evs for x in e.lines)
    for secret in ("My secret plan", "project bluebird", "The capital city of France"):
        assert secret not in text
    assert "text=[prompt: 30 chars]" in text and "'content': [prompt: 34 chars]" in text
    kept = "\n".join(x for e in events("sglang-0.5.23-cpu.log", "sglang", keep_prompts=True)
                     for x in e.lines)
    assert "My secret plan: launch at dawn" in kept


def test_triton_glog_levels_times_tables_and_quoted_messages():
    evs = events("triton-2.51-cpu.log", "triton")
    first = evs[0]
    assert first.severity == "warning"
    assert first.t_wall == local(2026, 12, 7, 9, 24, 31, 0.179607)
    assert first.headline.startswith("Unable to allocate pinned system memory")  # unquoted
    err = [e for e in evs if e.severity == "error"]
    assert [e.headline for e in err] == [
        "CudaDriverHelper has not been initialized.",
        "Failed to process the request(s) for model 'sleepy_0_0', message: "
        "TritonModelException: negative INPUT0: failing on purpose"]
    assert err[1].lines[1:3] == ("", "At:")  # the escaped newlines, one line each
    tables = [e for e in evs if e.headline.startswith("+--")]
    assert [len(e.lines) for e in tables] == [4, 5, 5, 17]  # the empty message dropped
    assert all(e.stamped for e in tables)
    signal = _by_head(evs)["Signal (15) received."]  # unprefixed, not part of the error
    assert signal.severity == "info" and not signal.stamped


def test_llama_server_levels_and_no_wall_time():
    evs = events("llama-server-b11434-cpu.log", "llamacpp")
    sev = [e.severity for e in evs]
    assert sev.count("warning") == 2 and "error" not in sev
    w = [e for e in evs if e.severity == "warning"]
    assert w[0].headline.startswith("srv  llama_server: security: no API key is set")
    assert w[1].headline.startswith("srv    operator(): got exception: {\"error\":{\"code\":400")
    # its stamps count from the server's start: the read time stands
    assert all(e.t_wall == READ and not e.stamped for e in evs)
    assert all(e.request_id is None for e in evs)


def test_llama_server_jsonl():
    a = assembler("llamacpp")
    evs = a.feed('{"type":"log","time":1206,"level":"error","msg":"failed to load\\n"}', READ)
    evs += a.flush(READ + 1)
    assert [(e.severity, e.lines) for e in evs] == [("error", ("failed to load",))]


def test_tgi_json_lines():
    evs = events("tgi-json-FROM-SOURCE.log", "tgi")
    assert [e.severity for e in evs].count("error") == 3
    oom = next(e for e in evs if e.lines[0].startswith("Shard complete standard error output"))
    assert oom.headline == "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."
    assert oom.t_wall == calendar.timegm((2026, 12, 7, 9, 31, 40)) + 0.700301
    warn = next(e for e in evs if e.severity == "warning")
    assert warn.headline == "Could not find tokenizer config locally and no API specified"
    assert _by_head(evs)["Success"].severity == "info"


def test_lmdeploy_lines_and_its_logged_traceback():
    evs = events("lmdeploy-FROM-SOURCE.log", "lmdeploy")
    assert [e.severity for e in evs] == ["info", "warning", "info", "info", "error"]
    assert evs[1].t_wall == local(2026, 12, 7, 9, 30, 1, 0.201)
    assert evs[-1].lines[0] == "Service registration failed: connection refused"
    assert evs[-1].headline == "RuntimeError: Service registration failed: connection refused"


def test_ollama_slog_and_gin_lines():
    evs = events("ollama-FROM-SOURCE.log", "ollama")
    assert [e.severity for e in evs] == ["info", "info", "info", "warning", "info", "error",
                                         "info"]
    assert evs[1].headline == "Listening on 127.0.0.1:11434 (version 0.13.0)"
    assert evs[1].t_wall == calendar.timegm((2026, 12, 7, 9, 30, 0)) + 0.104
    assert evs[4].t_wall == local(2026, 12, 7, 9, 30, 6)  # gin: local time
    assert evs[5].headline.startswith("chat template prompt error error=")


def test_generic_levels_stamps_json_and_tracebacks():
    a = assembler(None)
    lines = [
        "2026-12-07 09:00:00,250 ERROR something broke",
        "[2026-12-07T09:00:01Z] [warn] disk almost full",
        '{"level": "error", "msg": "json line", "time": "2026-12-07T09:00:02Z"}',
        "INFO:     Shutting down",
        "Traceback (most recent call last):",
        '  File "x.py", line 1, in <module>',
        "ValueError: bad",
        "",
        "During handling of the above exception, another exception occurred:",
        "",
        "Traceback (most recent call last):",
        '  File "x.py", line 3, in <module>',
        "torch.OutOfMemoryError: CUDA out of memory",
        "a plain line with the word error in it",
    ]
    evs = []
    for line in lines:
        evs += a.feed(line, READ)
    evs += a.flush(READ + 1)
    assert [e.severity for e in evs] == ["error", "warning", "error", "info", "error", "info"]
    assert evs[0].t_wall == local(2026, 12, 7, 9, 0, 0, 0.25)
    assert evs[1].t_wall == calendar.timegm((2026, 12, 7, 9, 0, 1))
    assert evs[1].headline == "disk almost full"
    assert evs[2].t_wall == calendar.timegm((2026, 12, 7, 9, 0, 2))
    tb = evs[4]
    assert tb.headline == "torch.OutOfMemoryError: CUDA out of memory"
    assert tb.lines[0] == "Traceback (most recent call last):" and len(tb.lines) == 9
    assert not evs[5].stamped


def test_a_traceback_joins_the_error_record_that_logged_it():
    a = assembler(None)
    evs = []
    for line in ("ERROR:    Exception in ASGI application", "Traceback (most recent call last):",
                 '  File "app.py", line 9, in handle', "KeyError: 'x'",
                 "INFO:     after it"):
        evs += a.feed(line, READ)
    evs += a.flush(READ + 1)
    assert [(e.severity, e.headline, len(e.lines)) for e in evs] == [
        ("error", "KeyError: 'x'", 4), ("info", "after it", 1)]


def test_an_unknown_format_name_reads_generically():
    a = assembler("some-new-engine", "plain")
    evs = a.feed("WARNING: odd", READ) + a.flush(READ + 1)
    assert [(e.severity, e.headline) for e in evs] == [("warning", "odd")]


def test_sglang_scheduler_exception_is_one_error_event():
    evs = events("sglang-0.5.23-scheduler-exception.log", "sglang")
    assert [e.severity for e in evs] == ["info", "error", "info"]
    crash = evs[1]
    assert crash.lines[0] == "Scheduler hit an exception: Traceback (most recent call last):"
    assert crash.headline == "IndexError: list index out of range"
    assert crash.t_wall == local(2026, 12, 7, 9, 38, 6) and crash.stamped
    assert evs[2].headline.startswith("Gracefully exiting")


def test_trtllm_python_and_cpp_lines():
    evs = events("trtllm-FROM-SOURCE.log", "trtllm")
    assert [e.severity for e in evs] == ["info", "info", "warning", "error", "error"]
    assert evs[0].t_wall == local(2026, 12, 7, 9, 30, 0) and evs[0].stamped
    assert evs[1].headline == "Set logger level by INFO" and not evs[1].stamped
    assert evs[3].headline == "Encountered an error in forwardAsync function: CUDA out of memory"
    assert evs[4].headline == "Executor worker exited"


def test_tgi_text_lines_without_json_output():
    # tracing-subscriber's compact format (launcher/src/main.rs without --json-output)
    a = assembler("tgi")
    evs = a.feed("2026-12-07T09:30:00.101234Z  WARN text_generation_launcher: Unkown compute",
                 READ) + a.flush(READ + 1)
    assert [(e.severity, e.headline) for e in evs] == [
        ("warning", "text_generation_launcher: Unkown compute")]
    assert evs[0].t_wall == calendar.timegm((2026, 12, 7, 9, 30, 0)) + 0.101234
