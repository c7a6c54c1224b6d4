"""Bad input is shown safely, and secrets and prompts never reach an event.

- Binary, invalid UTF-8, huge lines, endless events.
- Secrets in every shape listed in ``redact``; the real logged prompts of vLLM.
"""

from __future__ import annotations

import json
import re

import pytest
from logfixtures import READ, events

from llmtop.parse.logs import assembler
from llmtop.parse.logs.clean import LINE_MAX
from llmtop.parse.logs.redact import REDACTED, redact

_UNSAFE = re.compile(r"[\x00-\x08\x0a-\x1f\x7f-\x9f]")


def _all(a, lines, t=READ):
    out = []
    for line in lines:
        out += a.feed(line, t)
    return out + a.flush(t + 1)


@pytest.mark.parametrize("envelope", ["plain", "docker", "cri", "journal"])
def test_a_binary_log_is_shown_safely(envelope):
    blob = bytes(range(256)) * 4
    evs = _all(assembler("vllm", envelope), [blob, b"\xff\xfe\x00garbage\x1b[31m", b"ok line"])
    assert evs and evs[-1].headline == "ok line"
    for e in evs:
        for x in e.lines:
            assert not _UNSAFE.search(x), repr(x)
            assert len(x) <= LINE_MAX + 40


def test_a_chunk_of_several_lines_is_split():
    evs = _all(assembler(None), [b"ERROR one\nWARNING two\n", "INFO three\nfour"])
    assert [(e.severity, e.headline) for e in evs] == [
        ("error", "one"), ("warning", "two"), ("info", "three"), ("info", "four")]


def test_invalid_utf8_is_replaced_not_raised():
    evs = _all(assembler(None), [b"caf\xc3 \xe9 ok", "surrogate \udcff here"])
    assert [e.headline for e in evs] == ["caf\ufffd \ufffd ok", "surrogate \ufffd here"]


def test_a_huge_line_is_cut_at_a_separator_and_marked():
    line = ("word " * 400_000).encode()  # 2 MB
    (ev,) = _all(assembler("vllm"), [line])
    (text,) = ev.lines
    assert len(text) < LINE_MAX + 40
    assert text.endswith("characters cut]")
    cut = int(text.rsplit("[… ", 1)[1].split()[0])
    assert cut + len(text.split(" [… ")[0]) == len(line)
    assert text.split(" [… ")[0].endswith(" ")  # never half a word (or half a secret)


def test_a_huge_docker_line_in_parts_is_bounded():
    a = assembler(None, "docker")
    part = json.dumps({"log": "z" * 16384, "stream": "stdout", "time": "2026-12-07T09:00:00Z"})
    for _ in range(200):  # 3.2 MB of one line
        assert a.feed(part, READ) == []
    end = json.dumps({"log": "end\n", "stream": "stdout", "time": "2026-12-07T09:00:00Z"})
    (ev,) = a.feed(end, READ) + a.flush(READ + 1)
    assert len(ev.lines[0]) < LINE_MAX + 40 and ev.lines[0].endswith("characters cut]")


def test_an_endless_traceback_keeps_its_head_its_tail_and_its_exception_line():
    lines = ["Traceback (most recent call last):"]
    lines += [f'  File "r.py", line {i}, in f' for i in range(1000)]
    lines += ["RecursionError: maximum recursion depth exceeded"]
    (ev,) = _all(assembler(None), lines)
    assert len(ev.lines) == 200
    assert ev.lines[0] == lines[0] and ev.lines[-1] == lines[-1]
    assert ev.lines[100] == "[… 803 lines cut]"  # 1002 lines, 199 kept
    assert ev.headline == "RecursionError: maximum recursion depth exceeded"
    assert ev.severity == "error"


def test_an_event_that_never_ends_is_closed_all_the_same():
    a = assembler(None, max_lines=10)
    out = a.feed("nanobind: leaked", READ)
    for _ in range(2000):
        out += a.feed(" - leaked instance", READ)
    assert len(out) >= 3 and all(len(e.lines) <= 10 for e in out)


# -- secrets

SECRETS = [
    ("curl -H 'Authorization: Bearer tok_abcdefghij0123' http://127.0.0.1:8000", "tok_abcdef"),
    ('{"headers": {"authorization": "Basic dXNlcjpwYXNzd29yZA=="}}', "dXNlcjpw"),
    ("sent bearer abcdefghijklmnop0123 upstream", "abcdefghijklmnop"),
    ("python -m vllm.entrypoints.openai.api_server --api-key hunter2hunter2 --port 1",
     "hunter2"),
    ("serve --api-key=hunter2hunter2", "hunter2"),
    ("non-default args: {'api_key': ['sk-proj-abcdefghijklmnop0123'], 'port': 8000}",
     "sk-proj"),
    ("OPENAI_API_KEY=sk-abcdefghijklmnopqrstuvwxyz", "sk-abc"),
    ("using token hf_abcdefghijklmnopqrstuvwxyz0123 for the hub", "hf_abc"),
    ("HF_TOKEN: hf_zyxwvutsrqponmlkjihgfedcba", "hf_zyx"),
    ("x-api-key: abcdef123456", "abcdef123456"),
    ("connecting to postgres://admin:s3cretpw@127.0.0.1/db", "s3cretpw"),
    ('{"password": "correct horse battery"}', "correct horse"),
]


@pytest.mark.parametrize(("line", "secret"), SECRETS)
def test_secrets_never_reach_an_event(line, secret):
    for envelope, raw in (("plain", line),
                          ("docker", json.dumps({"log": line + "\n", "stream": "stderr",
                                                 "time": "2026-12-07T09:00:00Z"})),
                          ("journal", json.dumps({"MESSAGE": line, "PRIORITY": "6"}))):
        (ev,) = _all(assembler("vllm", envelope), [raw])
        assert secret not in "\n".join(ev.lines) + ev.headline, envelope
        assert REDACTED in ev.headline


def test_secrets_in_a_traceback_and_in_the_headline():
    (ev,) = _all(assembler(None), [
        "Traceback (most recent call last):",
        '  File "c.py", line 3, in call',
        "openai.AuthenticationError: Incorrect API key provided: sk-abcdefghijklmnopqrstuv"])
    assert "sk-abc" not in ev.headline and ev.headline.endswith(REDACTED)


def test_words_that_only_look_like_secrets_stay():
    line = ("Prefill batch, #new-seq: 1, #new-token: 12, token usage: 0.00, max_tokens=16, "
            "the keys: 3, passwordless ssh, 'ssl_keyfile_password': None, \"api_key\": null")
    assert redact(line) == line
    assert redact("api_key=Nonesuch") == "api_key=[REDACTED]"


def test_the_real_vllm_lines_carry_no_key_and_no_prompt():
    text = "\n".join(x for e in events("vllm-0.32-text-enginedead.log", "vllm")
                     for x in e.lines)
    assert "sk-llmtop-fixture" not in text
    assert "'api_key': '[REDACTED]'" in text  # vLLM's own '***' is redacted as well
    debug = events("vllm-0.32-debug-color.log", "vllm")
    text = "\n".join(x for e in debug for x in e.lines)
    for prompt in ("My secret plan", "at dawn", "project bluebird", "fixrite"):
        assert prompt not in text
    details = next(e for e in debug if "details: prompt:" in e.headline)
    assert details.headline.endswith(
        "details: prompt: [prompt: 42 chars], prompt_token_ids: [prompt: 21 tokens], "
        "prompt_embeds shape: None.")
    assert details.request_id == "cmpl-ace1a46518e34162-0"
    body = next(e for e in debug if "JSON body:" in e.headline)
    assert body.headline.endswith("JSON body: [request body: 93 chars]")
    out = next(e for e in debug if e.headline.startswith("Generated response") and
               "finish_reason" in e.headline)
    assert "output: [output: 27 chars], finish_reason: length" in out.headline


def test_prompts_are_kept_when_asked():
    debug = events("vllm-0.32-debug-color.log", "vllm", keep_prompts=True)
    text = "\n".join(x for e in debug for x in e.lines)
    assert "prompt: 'My secret plan: \"launch\" at dawn\\nline two'" in text
    assert "Tell nobody about project bluebird" in text


def test_a_coloured_line_just_over_the_bound_is_not_cut_once_its_colours_are_gone():
    words = ("w" * 9 + " ") * 810  # 8100 characters of text
    line = "\x1b[32m" + words[:4000] + "\x1b[0m" * 60 + words[4000:]
    assert len(line) > LINE_MAX
    (ev,) = _all(assembler(None), [line])
    assert ev.lines == (words,)
