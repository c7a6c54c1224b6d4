"""``llmtop capacity list [--json] [--capacity FILE]``: the capacity profiles saved (or in
FILE) and the engines they are for (``docs/capacity.md``)."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from typing import Any

from llmtop.units import DASH

__all__ = ["build_parser", "main", "save_capacity", "save_probe_capacity"]


def build_parser() -> argparse.ArgumentParser:
    """The ``llmtop capacity`` parser."""
    p = argparse.ArgumentParser(
        prog="llmtop capacity",
        description="Capacity profiles: what probe / bake-off runs measured each engine to "
        "hold within its SLOs (saved in $XDG_STATE_HOME/llmtop/capacity).")
    sub = p.add_subparsers(dest="cmd", required=True)
    ls = sub.add_parser("list", help="show the saved profiles, newest first")
    ls.add_argument("--json", action="store_true", help="one JSON array")
    ls.add_argument("--capacity", default=None, metavar="FILE",
                    help="the profiles of this report or profile instead of the saved ones")
    return p


def _num(v: Any, fmt: str) -> str:
    return DASH if v is None else format(v, fmt)


def _slo(slo: dict[str, Any]) -> str:
    parts = [f"{k} {v * 1000:.0f}ms" for k, v in slo.items() if v is not None]
    return " ".join(parts) or DASH


def rows(profiles: Sequence[Any]) -> list[list[str]]:
    """The table's lines: one per profile."""
    out = []
    for p in profiles:
        when = time.strftime("%Y-%m-%d %H:%M", time.gmtime(p.measured_unix))
        shape = (f"{_num(p.shape.get('prompt_mean'), '.0f')}/"
                 f"{_num(p.shape.get('output_mean'), '.0f')}")
        out.append([when, p.url, p.engine or DASH, p.model or DASH, p.gpu or DASH,
                    f"{p.requests_per_s:.2f}", _num(p.output_tokens_per_s, ".0f"),
                    _slo(p.slo), shape, p.source])
    return out


HEAD = ["MEASURED (UTC)", "URL", "ENGINE", "MODEL", "GPU", "REQ/S", "TOK/S", "SLO",
        "PROMPT/OUT", "FROM"]


def main(argv: Sequence[str]) -> int:
    """Entry point of ``llmtop capacity``."""
    from llmtop.capacity import load_profiles, profile_dir

    args = build_parser().parse_args(list(argv))
    profiles = load_profiles(args.capacity)
    if args.json:
        print(json.dumps([{**p.to_json(), "path": p.path} for p in profiles], indent=2))
        return 0
    if not profiles:
        where = args.capacity or str(profile_dir())
        print(f"no capacity profiles in {where}: a probe or bake-off sweep with an SLO "
              "(llmtop probe URL --sweep --ttft-slo 0.5) saves one", file=sys.stderr)
        return 0
    table = [HEAD, *rows(profiles)]
    widths = [max(len(r[i]) for r in table) for i in range(len(HEAD))]
    for r in table:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())
    return 0


def save_capacity(profiles: Sequence[Any]) -> None:
    """Save the capacity profiles a run found (``docs/capacity.md``) and say where; a state
    folder that cannot be written is a warning, not a failure of the run."""
    from llmtop.capacity import save_profile

    for p in profiles:
        if p is None:
            continue
        try:
            path = save_profile(p)
        except OSError as exc:
            print(f"llmtop: capacity profile not saved ({exc})", file=sys.stderr)
            continue
        print(f"saved capacity profile {path} ({p.requests_per_s:.2f} req/s within the SLOs)",
              file=sys.stderr)


def save_probe_capacity(report: dict[str, Any]) -> None:
    """Save a probe run's capacity profile; when client-bound steps hid the server's limit
    from a run with an SLO, say why none was saved and what to do."""
    from llmtop.capacity import profile_from_report
    from llmtop.loadgen.report import capacity

    save_capacity([profile_from_report(report)])
    hidden = capacity(report)["limit_hidden_at"]  # then profile_from_report found no ceiling
    if hidden and report.get("sla_boundary"):
        print(f"llmtop probe: no capacity profile saved: the load generator was client-bound "
              f"at {', '.join(hidden)}, so no step showed the server's limit; give it CPUs the "
              "server's threads do not use (--cpu-pin) and run again", file=sys.stderr)
