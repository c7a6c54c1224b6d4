"""Secrets and prompts out of log lines, before an event is made of them.

- Secrets, always: ``Authorization:`` headers and bearer tokens, ``api_key=`` / ``"api_key":``
  / ``--api-key X`` and their kin (tokens, secrets, passwords), ``sk-...`` style keys,
  ``hf_...`` tokens, passwords in URLs. Each becomes ``[REDACTED]``.
- Prompts and outputs an engine logs (vLLM ``--enable-log-requests``: ``prompt: '...'``,
  ``prompt_token_ids: [...]``, ``JSON body: {...}``, ``output: '...'``,
  ``output_token_ids: [...]``; SGLang ``--log-requests``: ``text='...'``,
  ``input_ids=[...]``, ``messages=[...]``, ``'prompt': '...'``, ``'content': '...'``, and its
  outputs ``'text': '...'``,
  ``'output_ids': [...]``) become ``[prompt: N chars]``, ``[prompt: N tokens]``,
  ``[output: N chars]``, unless the caller keeps them.
"""

from __future__ import annotations

import re

__all__ = ["REDACTED", "redact"]

REDACTED = "[REDACTED]"

# A quoted Python repr or JSON string (may run to the end of a cut line).
_STR = r"""(?:'(?:[^'\\]|\\.)*(?:'|$)|"(?:[^"\\]|\\.)*(?:"|$))"""
_LIST = r"\[[^\]]*(?:\]|$)"

_SECRET_RULES: tuple[tuple[str, re.Pattern[str], str], ...] = (
    # a hint (lower case) that must be in the line for the rule to run, the rule, its answer
    ("authoriz", re.compile(
        r"(?i)(\b(?:proxy-)?authorization\b[\"']?\s*[:=]\s*[\"']?)"
        r"(?:(bearer|basic|token|digest|apikey)\s+)?[^\s\"',;}\]]+"),
     r"\1\2 " + REDACTED),
    ("bearer", re.compile(r"(?i)\b(bearer)\s+(?!\[REDACTED\])[A-Za-z0-9._~+/=:-]{6,}"),
     r"\1 " + REDACTED),
    ("--", re.compile(
        r"(?i)(--(?:[a-z-]*api-key|[a-z-]*token|password|secret)(?:=|\s+))(?!\[REDACTED\])"
        r"(?!-)\S+"),
     r"\1" + REDACTED),
    ("", re.compile(
        r"(?i)([\"']?\b(?:x-)?(?:[a-z]+[_-])?(?:api[_-]?key|apikey|access[_-]?token|auth[_-]?token"
        r"|hf[_-]?token|api[_-]?token|secret[_-]?key|client[_-]?secret|secret|password|passwd)"
        r"[\"']?\s*[:=]\s*\[?\s*[\"']?)(?!\[REDACTED\])[^\s\"',;}\]]+"),
     r"\1" + REDACTED),
    ("sk-", re.compile(r"\bsk-[A-Za-z0-9_-]{16,}"), REDACTED),
    ("hf_", re.compile(r"\bhf_[A-Za-z0-9]{16,}"), REDACTED),
    ("://", re.compile(r"(\b[a-zA-Z][a-zA-Z0-9+.-]*://[^/\s:@]+:)[^/\s@]+@"),
     r"\1" + REDACTED + "@"),
)
_SECRET_HINTS = ("key", "token", "secret", "passw", "passwd")

# Prompt-bearing fields: (hint, pattern: the field name as group 1 and its value as 2, what
# the value is: its label and how it is counted)
_PROMPT_RULES: tuple[tuple[str, re.Pattern[str], str, str], ...] = (
    ("prompt", re.compile(r"(\bprompt: )(" + _STR + ")"), "prompt", "str"),
    ("prompt_token_ids", re.compile(r"(\bprompt_token_ids: )(" + _LIST + ")"), "prompt", "ids"),
    ("output", re.compile(r"(\boutput: )(" + _STR + ")"), "output", "str"),
    ("output_token_ids", re.compile(r"(\boutput_token_ids: )(" + _LIST + ")"), "output", "ids"),
    ("JSON body", re.compile(r"(\bJSON body: )(\{.*)$"), "request body", "raw"),
    ("text=", re.compile(r"(\b(?:text|prompt)=)(" + _STR + ")"), "prompt", "str"),
    ("output_text=", re.compile(r"(\boutput_text=)(" + _STR + ")"), "output", "str"),
    ("input_ids=", re.compile(r"(\binput_ids=)(" + _LIST + ")"), "prompt", "ids"),
    ("output_ids=", re.compile(r"(\boutput_ids=)(" + _LIST + ")"), "output", "ids"),
    ("messages=", re.compile(r"(\bmessages=)(" + _LIST + ")"), "prompt", "raw"),
    ("'prompt': ", re.compile(r"('prompt': )(" + _STR + ")"), "prompt", "str"),
    ("'content': ", re.compile(r"('content': )(" + _STR + ")"), "prompt", "str"),
    ("'text': ", re.compile(r"('text': )(" + _STR + ")"), "output", "str"),
    ("'output_ids': ", re.compile(r"('output_ids': )(" + _LIST + ")"), "output", "ids"),
)


def _count(value: str, label: str, how: str) -> str:
    if how == "ids":
        inner = value.strip("[]").strip()
        return f"[{label}: {inner.count(',') + 1 if inner else 0} tokens]"
    size = len(value) if how == "raw" else max(0, len(value) - 2)
    return f"[{label}: {size} chars]"


def redact(line: str, keep_prompts: bool = False) -> str:
    """``line`` with its secrets (always) and prompts (unless ``keep_prompts``) replaced."""
    lowered = line.lower()
    if not keep_prompts:
        for hint, rule, label, how in _PROMPT_RULES:
            if hint in line:
                line = rule.sub(lambda m, lb=label, hw=how: m.group(1) + _count(m.group(2), lb, hw),
                                line)
        lowered = line.lower()
    for hint, rule, answer in _SECRET_RULES:
        if hint == "":
            if not any(h in lowered for h in _SECRET_HINTS):
                continue
        elif hint not in lowered:
            continue
        line = rule.sub(answer, line)
    return line
