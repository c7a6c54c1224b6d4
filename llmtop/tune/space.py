"""The tune plan (``[probe]`` + ``[tune]`` + ``[tune.space]``) and its expansion.

``start``, ``url`` and ``gpus`` are templates: ``{name}`` is a parameter of the space,
``{port}`` a free port picked per trial. Parameter values are numbers, strings or booleans;
the grid is every combination, numbers sorted ascending within each parameter.
"""

from __future__ import annotations

import ast
import itertools
import json
import operator
import re
from dataclasses import dataclass, field
from typing import Any

from llmtop.errors import ConfigError
from llmtop.loadgen.plan import DEFAULT_READY_TIMEOUT_S, load_toml, probe_table, read_text

__all__ = ["OBJECTIVES", "TunePlan", "expand", "gpus_of", "parse_tune_plan", "read_tune_plan",
           "render", "trial_key", "user_command"]

OBJECTIVES = ("goodput", "cost", "throughput")
_KEYS = {"url", "start", "ready_timeout_s", "gpus", "objective", "budget_s", "strategy",
         "parallel", "gpu_sets", "env", "stop_timeout_s", "max_load", "space", "rate"}
_FIELD = re.compile(r"\{(\w+)\}")


@dataclass(frozen=True, slots=True)
class TunePlan:
    """A parsed tune plan."""

    url: str
    start: str
    space: dict[str, list[Any]]
    probe: dict[str, Any] = field(default_factory=dict)
    ready_timeout_s: float = DEFAULT_READY_TIMEOUT_S
    gpus: str = "1"
    objective: str = "goodput"
    budget_s: float | None = None
    strategy: str = "adaptive"
    parallel: int = 1
    gpu_sets: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    stop_timeout_s: float = 30.0
    max_load: int = 256
    """The doubling never goes past this concurrency (or rate)."""
    rate: bool = False
    """Load levels are request rates (open loop, req/s) instead of concurrencies: set by
    ``[tune] rate = true`` or by a ``rate`` in ``[probe]`` (the first level)."""


def trial_key(params: dict[str, Any]) -> str:
    """The identity of a configuration (the state file's key)."""
    return json.dumps(params, sort_keys=True)


def render(template: str, params: dict[str, Any], port: int | str | None = None) -> str:
    """``template`` with ``{name}`` replaced by the parameter's value and ``{port}`` by
    ``port``; other braces are left alone. Raises ``ConfigError`` on an unknown name."""
    values = {k: _text(v) for k, v in params.items()}
    if port is not None:
        values["port"] = str(port)

    def one(m: re.Match[str]) -> str:
        if m.group(1) not in values:
            raise ConfigError(f"[tune]: {{{m.group(1)}}} in {template!r} is not a parameter "
                              f"of [tune.space] (known: {', '.join(sorted(values))})")
        return values[m.group(1)]

    return _FIELD.sub(one, template)


def user_command(template: str, params: dict[str, Any]) -> str:
    """The start command a user runs: ``{name}`` replaced, ``{port}`` kept as written (the
    free port a trial picked means nothing after it); a plan's fixed port stays as it is."""
    return render(template, params, "{port}")  # type: ignore[arg-type]


def _text(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
        ast.Div: operator.truediv}


def _arith(node: ast.AST) -> float:
    if isinstance(node, ast.Expression):
        return _arith(node.body)
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) \
            and not isinstance(node.value, bool):
        return float(node.value)
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        return float(_OPS[type(node.op)](_arith(node.left), _arith(node.right)))
    raise ValueError("not arithmetic")


def gpus_of(expr: str, params: dict[str, Any]) -> float:
    """GPUs a configuration holds: ``gpus`` rendered with its parameters, then + - * /."""
    text = render(expr, params)
    try:
        return _arith(ast.parse(text, mode="eval"))
    except (SyntaxError, ValueError, ZeroDivisionError):
        raise ConfigError(f"[tune]: gpus = {expr!r} gives {text!r}, not a number") from None


def expand(space: dict[str, list[Any]]) -> list[dict[str, Any]]:
    """Every combination, in the order of the parameters (the first varies slowest)."""
    names = list(space)
    return [dict(zip(names, combo, strict=True))
            for combo in itertools.product(*(space[n] for n in names))]


def _space(raw: Any, source: str) -> dict[str, list[Any]]:
    if not isinstance(raw, dict) or not raw:
        raise ConfigError(f"{source}: [tune.space] needs at least one parameter, e.g. "
                          "max_num_seqs = [32, 64, 128]")
    out: dict[str, list[Any]] = {}
    for name, vals in raw.items():
        if not isinstance(vals, list) or not vals or not all(
                isinstance(v, (int, float, str, bool)) for v in vals):
            raise ConfigError(f"{source}: [tune.space] {name} must be a list of values")
        if len(set(map(repr, vals))) != len(vals):
            raise ConfigError(f"{source}: [tune.space] {name} lists a value twice")
        nums = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in vals)
        out[name] = sorted(vals) if nums else list(vals)
    return out


def _num(t: dict[str, Any], key: str, default: float | None, source: str) -> float | None:
    v = t.get(key, default)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or v <= 0:
        raise ConfigError(f"{source}: [tune] {key} must be a number > 0, got {v!r}")
    return float(v)


def parse_tune_plan(text: str, source: str = "plan") -> TunePlan:
    """TOML text -> ``TunePlan``; raises ``ConfigError`` with the problem."""
    data = load_toml(text, source)
    unknown = sorted(set(data) - {"probe", "tune"})
    if unknown:
        raise ConfigError(f"{source}: unknown table(s) {', '.join(unknown)} "
                          "(expected [probe], [tune] and [tune.space])")
    t = data.get("tune")
    if not isinstance(t, dict):
        raise ConfigError(f"{source}: no [tune] table")
    bad = sorted(set(t) - _KEYS)
    if bad:
        raise ConfigError(f"{source}: [tune] unknown key(s) {', '.join(bad)} "
                          f"(known: {', '.join(sorted(_KEYS))})")
    for key in ("url", "start"):
        if not isinstance(t.get(key), str) or not t[key].strip():
            raise ConfigError(f"{source}: [tune] needs {key} = \"...\" (a string)")
    space = _space(t.get("space"), source)
    objective = t.get("objective", "goodput")
    if objective not in OBJECTIVES:
        raise ConfigError(f"{source}: [tune] objective must be one of {', '.join(OBJECTIVES)}")
    strategy = t.get("strategy", "adaptive")
    if strategy not in ("adaptive", "grid"):
        raise ConfigError(f"{source}: [tune] strategy must be adaptive or grid")
    sets = t.get("gpu_sets", [])
    if not isinstance(sets, list) or not all(isinstance(g, (str, int)) for g in sets):
        raise ConfigError(f"{source}: [tune] gpu_sets must be a list like [\"0\", \"1\"]")
    parallel = int(_num(t, "parallel", 1, source) or 1)
    if parallel > 1 and sets and len(sets) < parallel:
        raise ConfigError(f"{source}: [tune] parallel = {parallel} needs as many gpu_sets")
    if parallel > 1 and "{port}" not in t["start"]:
        raise ConfigError(f"{source}: [tune] parallel trials need {{port}} in start and url")
    if not isinstance(t.get("rate", False), bool):
        raise ConfigError(f"{source}: [tune] rate must be true or false")
    env = t.get("env") or {}
    if not isinstance(env, dict):
        raise ConfigError(f"{source}: [tune] env must be a table of NAME = \"value\"")
    plan = TunePlan(
        url=t["url"], start=t["start"], space=space, probe=probe_table(data, source),
        ready_timeout_s=_num(t, "ready_timeout_s", DEFAULT_READY_TIMEOUT_S, source) or 1.0,
        gpus=str(t.get("gpus", 1)), objective=objective,
        budget_s=_num(t, "budget_s", None, source), strategy=strategy, parallel=parallel,
        gpu_sets=tuple(str(g) for g in sets), env={k: str(v) for k, v in env.items()},
        stop_timeout_s=_num(t, "stop_timeout_s", 30.0, source) or 30.0,
        max_load=int(_num(t, "max_load", 256, source) or 256),
        rate=bool(t.get("rate")) or probe_table(data, source).get("rate") is not None)
    first = expand(space)[0]  # every template must render with the space's names
    for tpl in (plan.start, plan.url):
        render(tpl, first, port=0)
    gpus_of(plan.gpus, first)
    return plan


def read_tune_plan(path: str) -> TunePlan:
    """Read a tune plan file; raises ``ConfigError``."""
    return parse_tune_plan(read_text(path), path)
