"""``llmtop probe compare A.json B.json ...``: did the change help? (pure, plus a file read)

The first report is the baseline. For each other report:

- ``rows``: every load of the baseline, with both reports' output tok/s and TTFT p95 and
  the change. A load the other report did not run is interpolated between its two
  neighbouring steps (linearly in log load; marked ``interpolated``), never extrapolated.
- ``at_equal_load``: the median change of output tok/s and TTFT p95 over those rows.
- ``knee`` / ``sla_boundary`` / ``capacity``: where each was in both, and how far it moved.
"""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path
from typing import Any

from llmtop.errors import ConfigError
from llmtop.loadgen.report import capacity, load_text
from llmtop.units import pct_change as _pct

__all__ = ["compare", "load_report", "load_runs"]


def _read(path: str) -> Any:
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such file") from None
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path}: not a JSON probe report ({exc})") from None


def load_report(path: str) -> dict[str, Any]:
    """A probe JSON report; ``ConfigError`` when it is not one."""
    data = _read(path)
    if not isinstance(data, dict) or not isinstance(data.get("steps"), list):
        raise ConfigError(f"{path}: not a probe report (no 'steps'); write one with --json")
    return data


def load_runs(paths: list[str]) -> tuple[list[dict[str, Any]], list[str], list[str]]:
    """Probe reports and bake-off reports -> (runs, names, skipped). A bake-off report gives
    one run per endpoint (named by the endpoint, ``FILE:name`` when several files are
    given); an endpoint with no finished step is skipped, with why, in ``skipped``."""
    from llmtop.loadgen.bakeoff_summary import engine_name, is_bakeoff

    runs: list[dict[str, Any]] = []
    names: list[str] = []
    skipped: list[str] = []
    for path in paths:
        data = _read(path)
        if not is_bakeoff(data):
            runs.append(load_report(path))
            names.append(path)
            continue
        for i, e in enumerate(data["endpoints"]):
            name = engine_name(e, i) if len(paths) == 1 else f"{path}:{engine_name(e, i)}"
            if not isinstance(e, dict) or not any(
                    isinstance(s, dict) and s.get("requests") for s in e.get("steps") or []):
                why = (e.get("error") if isinstance(e, dict) else None) or "no step finished"
                skipped.append(f"{name}: {why}")
                continue
            runs.append(e)
            names.append(name)
    return runs, names, skipped


def _key(report: dict[str, Any]) -> str:
    steps = report.get("steps") or []
    return "rate" if steps and steps[0].get("rate") and not steps[0].get("concurrency") \
        else "concurrency"


def _points(report: dict[str, Any], key: str) -> list[tuple[float, float | None, float | None]]:
    pts = []
    for s in report.get("steps", []):
        if s.get("partial") or not s.get("requests") or not s.get(key):
            continue
        pts.append((s[key], s.get("output_tokens_per_s"),
                    (s.get("ttft_s") or {}).get("p95")))
    return sorted(pts)


def _at(pts: list[tuple[float, float | None, float | None]], x: float,
        i: int) -> tuple[float | None, bool]:
    """Value ``i`` (1 tok/s, 2 TTFT p95) at load ``x``: exact, interpolated, or None."""
    for p in pts:
        if p[0] == x:
            return p[i], False
    lo = [p for p in pts if p[0] < x]
    hi = [p for p in pts if p[0] > x]
    if not lo or not hi or lo[-1][i] is None or hi[0][i] is None:
        return None, False
    (x0, y0), (x1, y1) = (lo[-1][0], lo[-1][i]), (hi[0][0], hi[0][i])
    f = (math.log(x) - math.log(x0)) / (math.log(x1) - math.log(x0))
    return y0 + f * (y1 - y0), True  # type: ignore[operator]


def _change(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or a == 0:
        return None
    return (b - a) / a


def _where(d: dict[str, Any] | None, key: str) -> float | None:
    if not d or (key == "sla" and not d.get("met")):
        return None
    v = d.get("concurrency") or d.get("rate")
    return float(v) if v else None


def _pair(a: dict[str, Any] | None, b: dict[str, Any] | None, kind: str) -> dict[str, Any]:
    la, lb = _where(a, kind), _where(b, kind)
    out: dict[str, Any] = {"a": la, "b": lb, "a_text": load_text(a) if la else "none",
                           "b_text": load_text(b) if lb else "none", "factor": None}
    if la and lb:
        out["factor"] = lb / la
    return out


def _one(base: dict[str, Any], other: dict[str, Any], name: str) -> dict[str, Any]:
    key = _key(base)
    if _key(other) != key:
        raise ConfigError(f"{name}: a {_key(other)} sweep cannot be compared with a {key} "
                          "sweep")
    pa, pb = _points(base, key), _points(other, key)
    rows = []
    for x, tps_a, ttft_a in pa:
        tps_b, interp1 = _at(pb, x, 1)
        ttft_b, interp2 = _at(pb, x, 2)
        rows.append({key: x, "tokens_per_s": [tps_a, tps_b], "ttft_p95_s": [ttft_a, ttft_b],
                     "tokens_change": _change(tps_a, tps_b),
                     "ttft_change": _change(ttft_a, ttft_b),
                     "interpolated": interp1 or interp2})
    tc = [r["tokens_change"] for r in rows if r["tokens_change"] is not None]
    lc = [r["ttft_change"] for r in rows if r["ttft_change"] is not None]
    ca, cb = capacity(base), capacity(other)
    floors = [bool(ca["limit_hidden_at"]), bool(cb["limit_hidden_at"])]
    return {
        "name": name, "load_key": key, "rows": rows,
        "at_equal_load": {"tokens_change": statistics.median(tc) if tc else None,
                          "ttft_change": statistics.median(lc) if lc else None,
                          "loads": len(tc)},
        "knee": _pair(base.get("saturation"), other.get("saturation"), "knee"),
        "sla_boundary": _pair(base.get("sla_boundary"), other.get("sla_boundary"), "sla"),
        # a floor (client-bound steps hid the limit) has no change to report
        "capacity": {"a": ca["holds_rps"], "b": cb["holds_rps"], "at_least": floors,
                     "change": None if any(floors)
                     else _change(ca["holds_rps"], cb["holds_rps"])},
        "max_tokens_per_s": [(base.get("max_throughput") or {}).get("output_tokens_per_s"),
                             (other.get("max_throughput") or {}).get("output_tokens_per_s")],
    }


def _sentence(c: dict[str, Any], base_name: str) -> str:
    eq = c["at_equal_load"]
    parts = [f"{c['name']} vs {base_name}:"]
    if eq["loads"]:
        parts.append(f"output tok/s {_pct(eq['tokens_change'])}, TTFT p95 "
                     f"{_pct(eq['ttft_change'])} at equal load (median of {eq['loads']});")
    else:
        parts.append("no load in common;")
    k, s = c["knee"], c["sla_boundary"]
    parts.append(f"knee {k['a_text']} \u2192 {k['b_text']};")
    parts.append(f"SLA boundary {s['a_text']} \u2192 {s['b_text']}")
    cap = c["capacity"]
    if cap["a"] is not None and cap["b"] is not None:
        parts[-1] += ";"
        floor = ["\u2265" if f else "" for f in cap.get("at_least") or (False, False)]
        parts.append(f"holds {floor[0]}{cap['a']:,.1f} \u2192 {floor[1]}{cap['b']:,.1f} req/s "
                     f"({_pct(cap['change'])})")
    return " ".join(parts) + "."


def compare(reports: list[dict[str, Any]], names: list[str] | None = None) -> dict[str, Any]:
    """Compare ``reports[1:]`` with ``reports[0]``; see the module docstring."""
    if len(reports) < 2:
        raise ConfigError("compare needs at least two reports")
    names = list(names or [f"report {i}" for i in range(len(reports))])
    out = [_one(reports[0], r, n) for r, n in zip(reports[1:], names[1:], strict=True)]
    for c in out:
        c["sentence"] = _sentence(c, names[0])
    return {"baseline": names[0], "names": names, "comparisons": out}
