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
_STR = r"""(?:'[^'\\]*(?:\\.[^'\\]*)*(?:'|$)|"[^"\\]*(?:\\.[^"\\]*)*(?:"|$))"""
_LIST = r"\[[^\]]*(?:\]|$)"

_KEY_HINTS = ("api_key", "api-key", "apikey", "access_token", "access-token", "auth_token",
              "auth-token", "authtoken", "hf_token", "hf-token", "hftoken", "api_token",
              "api-token", "apitoken", "secret", "passw")
_SECRET_RULES: tuple[tuple[str | tuple[str, ...], re.Pattern[str], str], ...] = (
    # a hint (lower case) that must be in the line for the rule to run, the rule, its answer
    ("authoriz", re.compile(
        r"(?i)(\b(?:proxy-)?authorization\b[\"']?\s*[:=]\s*[\"']?)"
        r"(?:(bearer|basic|token|digest|apikey)\s+)?[^\s\"',;}\]]+"),
     r"\1\2 " + REDACTED),
    ("bearer", re.compile(r"(?i)\b(bearer)\s+(?!\[REDACTED\])[A-Za-z0-9._~+/=:-]{6,}"),
     r"\1 " + REDACTED),
    ("--", re.compile(
        r"(?i)(--(?:[a-z]+-)*(?:api-key|key|token|password|secret)(?:=|\s+))(?!\[REDACTED\])"
        r"(?!-)\S+"),
     r"\1" + REDACTED),
    (_KEY_HINTS, re.compile(
        r"(?i)((?:api[_-]?key|access[_-]?token|auth[_-]?token|hf[_-]?token|api[_-]?token"
        r"|secret|password|passwd)[\"']?\s*[:=]\s*\[?\s*[\"']?)"
        r"(?!\[REDACTED\]|(?:None|null)(?![\w-]))[^\s\"',;}\]]+"),  # None: nothing is set
     r"\1" + REDACTED),
    ("sk-", re.compile(r"\bsk-[A-Za-z0-9_-]{16,}"), REDACTED),
    ("hf_", re.compile(r"\bhf_[A-Za-z0-9]{16,}"), REDACTED),
    ("://", re.compile(r"(\b[a-zA-Z][a-zA-Z0-9+.-]*://[^/\s:@]+:)[^/\s@]+@"),
     r"\1" + REDACTED + "@"),
)

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


# One search says whether any rule could apply (most lines: none).
_ANY_SECRET = re.compile("|".join(re.escape(h) for hint, _, _ in _SECRET_RULES
                                  for h in ((hint,) if isinstance(hint, str) else hint)))
_ANY_PROMPT = re.compile("|".join(re.escape(hint) for hint, _, _, _ in _PROMPT_RULES))


def redact(line: str, keep_prompts: bool = False) -> str:
    """``line`` with its secrets (always) and prompts (unless ``keep_prompts``) replaced."""
    if not keep_prompts and _ANY_PROMPT.search(line) is not None:
        line = _prompts(line)
    lowered = line.lower()
    if _ANY_SECRET.search(lowered) is None:
        return line
    for hint, rule, answer in _SECRET_RULES:
        if isinstance(hint, str):
            if hint not in lowered:
                continue
        elif not any(h in lowered for h in hint):
            continue
        line = rule.sub(answer, line)
    return line


def _prompts(line: str) -> str:
    for hint, rule, label, how in _PROMPT_RULES:
        if hint in line:
            line = rule.sub(lambda m, lb=label, hw=how: m.group(1) + _count(m.group(2), lb, hw),
                            line)
    return line
