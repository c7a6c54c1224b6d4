"""Reports: JSON (the full report), CSV (one row per step) and Markdown (a summary).

Pure formatting plus file writes; the report dict never carries the API key.
"""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path
from typing import Any

from llmtop.capacity.ceiling import above_boundary
from llmtop.units import DASH

__all__ = ["CSV_COLUMNS", "capacity", "honesty_lines", "knee_text", "lengths_lines", "load_text",
           "partial_report", "slo_text", "to_csv", "to_json", "to_markdown", "unmet_sla_text",
           "write_reports"]

_LAT = ("ttft_s", "itl_s", "itl_request_s", "tpot_s", "e2e_s")
_Q = ("p50", "p90", "p95", "p99", "mean")
CSV_COLUMNS = (
    "index", "concurrency", "rate", "achieved_concurrency", "achieved_rate", "requests",
    "errors_total", "error_rate", "output_tokens", "prompt_tokens", "duration_s",
    "requests_per_s", "output_tokens_per_s", "goodput_per_s",
    *(f"{k}_{q}" for k in _LAT for q in _Q),
    "errors", "retry_after_count", "client_bound", "client_cpu", "loop_lag_ms", "partial",
    "stall_count", "stall_total_s", "send_lateness_p99_s", "ttft_from_schedule_p95_s",
)


def _clean(v: Any) -> Any:
    if isinstance(v, float) and (math.isnan(v) or math.isinf(v)):
        return None
    if isinstance(v, dict):
        return {k: _clean(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_clean(x) for x in v]
    return v


def to_json(report: dict[str, Any]) -> str:
    """The report as JSON text (NaN/Inf become null)."""
    return json.dumps(_clean(report), indent=2, sort_keys=False) + "\n"


_EXTRA = {"stall_count": ("stalls", "count"), "stall_total_s": ("stalls", "total_s"),
          "send_lateness_p99_s": ("send_lateness_s", "p99"),
          "ttft_from_schedule_p95_s": ("ttft_from_schedule_s", "p95")}


def _row(step: dict[str, Any]) -> dict[str, Any]:
    row: dict[str, Any] = {}
    for c in CSV_COLUMNS:
        if c == "errors":
            row[c] = ";".join(f"{k}={v}" for k, v in sorted(step.get("errors", {}).items()))
        elif c == "retry_after_count":
            row[c] = (step.get("retry_after") or {}).get("count", 0)
        elif c in _EXTRA:
            key, sub = _EXTRA[c]
            row[c] = (step.get(key) or {}).get(sub)
        elif any(c.startswith(k + "_") and c[len(k) + 1:] in _Q for k in _LAT):
            k, q = c.rsplit("_", 1)
            row[c] = (step.get(k) or {}).get(q)
        else:
            row[c] = step.get(c)
    return row


def to_csv(report: dict[str, Any]) -> str:
    """One row per step, latencies flattened (``ttft_s_p95``...)."""
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(CSV_COLUMNS), lineterminator="\n")
    w.writeheader()
    for s in report.get("steps", []):
        w.writerow({k: ("" if v is None else v) for k, v in _row(s).items()})
    return buf.getvalue()


def _f(v: Any, scale: float = 1.0, digits: int = 1) -> str:
    if v is None:
        return DASH  # None: not measured
    if isinstance(v, bool):
        return "yes" if v else "no"
    return f"{v * scale:.{digits}f}"


def load_text(d: dict[str, Any] | None) -> str:
    """A load as people read it: ``c=8`` (concurrency) or ``8 req/s`` (rate); never bare."""
    d = d or {}
    if d.get("concurrency"):
        return f"c={d['concurrency']}"
    if d.get("rate"):
        return f"{d['rate']:g} req/s"
    return DASH


def knee_text(sat: dict[str, Any]) -> str:
    """Where the fitted knee lies, as a load: ``c=39.3`` or ``39.3 req/s``."""
    k = sat.get("knee_load")
    if k is None:
        return DASH
    return f"{k:.1f} req/s" if sat.get("rate") and not sat.get("concurrency") else f"c={k:.1f}"


def _dur(s: float) -> str:
    return f"{s * 1000:.0f} ms" if s < 1 else f"{s:g} s"


def slo_text(slo: dict[str, float | None] | None) -> str:
    """``{"ttft": 0.5, "itl": None}`` -> ``TTFT p95 ≤ 500 ms``; ``no SLO`` when none is set."""
    names = (("ttft", "TTFT"), ("itl", "ITL"), ("tpot", "TPOT"))
    parts = [f"{label} p95 \u2264 {_dur(slo[k])}" for k, label in names
             if slo and slo.get(k) is not None]
    return ", ".join(parts) if parts else "no SLO"


def _n(v: float, digits: int = 1) -> str:
    return f"{v:,.{digits}f}"


def _cut_text(report: dict[str, Any], step: dict[str, Any], *, capital: bool = False) -> str:
    """How a step was cut short: ``stopped 3.2 s into the first step (c=4)``."""
    which = ("the first step (" + load_text(step) + ")" if step.get("index") == 0
             else f"the {load_text(step)} step")
    dur = step.get("duration_s")
    into = f"{dur:.1f} s into {which}" if dur is not None else f"during {which}"
    reason = report.get("stop_reason")
    if reason == "error_rate":
        rate = step.get("error_rate")
        limit = (report.get("options") or {}).get("max_error_rate")
        why = "over the limit" if rate is None or limit is None else \
            f"{rate:.0%} over the {limit:.0%} limit"
        text = f"stopped {into} by its error rate ({why})"
    elif reason == "stopped":
        text = f"stopped {into}"
    else:
        why = {"duration": "the time budget ran out",
               "max_requests": "the request bound was reached"}.get(reason or "", reason)
        text = f"cut short {into} ({why or 'the run ended'})"
    return text[0].upper() + text[1:] if capital else text


def _no_whole_step(report: dict[str, Any], cut: dict[str, Any] | None) -> str:
    """Why there is no capacity figure when no step ran its whole measurement."""
    if cut is not None:
        return (f"{_cut_text(report, cut, capital=True)}: its numbers are partial, and no "
                "capacity figure follows (that needs at least one whole step).")
    dur = report.get("duration_s")
    if report.get("stop_reason") == "stopped" and dur is not None:
        return (f"Stopped after {dur:.1f} s, before the first step's measurement began "
                "(setup or warm-up): nothing measured, no capacity figure.")
    return "No step was measured: no capacity figure."


def _load(step: dict[str, Any]) -> float:
    return step.get("concurrency") or step.get("rate") or 0


def _loads(steps: list[dict[str, Any]]) -> list[str]:
    """``["c=8", "c=32"]``: the steps' loads, lowest first."""
    return [load_text(s) for s in sorted(steps, key=_load)]


def _whole(report: dict[str, Any]) -> list[dict[str, Any]]:
    """The steps that ran their whole measurement and finished a request."""
    return [s for s in report.get("steps", []) if s.get("requests") and not s.get("partial")]


def unmet_sla_text(report: dict[str, Any]) -> str:
    """Why no step met the SLO, in words: client-bound steps are not judged."""
    whole = _whole(report)
    if whole and all(s.get("client_bound") for s in whole):
        return "not judged: the load generator was client-bound at every step"
    if any(s.get("client_bound") for s in whole):
        return "no step the load generator drove met the SLO"
    return "no step met the SLO"


def capacity(report: dict[str, Any], target_rate: float | None = None) -> dict[str, Any]:
    """The capacity answer: ``sentence`` (one line people read first), ``holds_rps`` (req/s
    within the SLO, or the peak without one; None when not determined), with a
    ``target_rate`` the ``replicas`` that rate needs, and ``limit_hidden_at``: the loads whose
    client-bound steps left the server's limit unfound (empty otherwise; with ``holds_rps``
    set, that figure is only a floor)."""
    steps = _whole(report)
    sla, sat, mx = (report.get("sla_boundary"), report.get("saturation"),
                    report.get("max_throughput"))
    opts = report.get("options") or {}
    target_rate = target_rate if target_rate is not None else opts.get("target_rate")
    out: dict[str, Any] = {"holds_rps": None, "holds_tokens_per_s": None, "replicas": None,
                           "target_rate": target_rate, "limit_hidden_at": []}
    cut = next((s for s in reversed(report.get("steps", [])) if s.get("partial")), None)
    if not steps:
        out["sentence"] = _no_whole_step(report, cut)
        return out
    sweep = bool(opts.get("sweep", len(steps) > 1))
    base = None
    bound = [s for s in steps if s.get("client_bound")]
    usable = [s for s in steps if not s.get("client_bound")]
    above = above_boundary(steps, sla)
    if not usable:  # every whole step was the generator's numbers, not the server's
        out["limit_hidden_at"] = _loads(bound)
        head = ("No capacity figure: the load generator was client-bound at every step "
                f"({', '.join(out['limit_hidden_at'])})")
    elif above and all(s.get("client_bound") for s in above):
        # the only steps past the boundary were the generator's numbers: no ceiling found
        base = sla
        out["limit_hidden_at"] = _loads(above)
        head = (f"Holds at least {_n(sla['requests_per_s'])} req/s "
                f"({_n(sla['output_tokens_per_s'], 0)} output tok/s) of this traffic with "
                f"{slo_text(sla.get('slo'))}; the load generator was client-bound at "
                f"{', '.join(out['limit_hidden_at'])} above it, so the server's limit was "
                "not found")
    elif sla and sla.get("met"):
        base = sla
        head = (f"Holds {_n(sla['requests_per_s'])} req/s ({_n(sla['output_tokens_per_s'], 0)} "
                f"output tok/s) of this traffic with {slo_text(sla.get('slo'))}")
    elif sla:
        first = min(usable, key=_load)
        p95 = (first.get("ttft_s") or {}).get("p95")
        head = (f"No load met {slo_text(sla.get('slo'))}: at {load_text(first)} TTFT p95 was "
                f"{_ms_text(p95)}")
        below = [s for s in bound if _load(s) < _load(first)]
        if below:
            head += (f" (the load generator was client-bound at {', '.join(_loads(below))} "
                     "below it, so those loads were not judged)")
    elif mx:
        base = mx
        head = (f"Peaks at {_n(mx['requests_per_s'])} req/s ({_n(mx['output_tokens_per_s'], 0)}"
                f" output tok/s) of this traffic at {load_text(mx)} (no SLO set)")
    else:
        head = "No capacity figure"
    if out["limit_hidden_at"]:
        pass  # no knee or "no saturation" beside a limit the generator hid
    elif sat:
        head += f"; saturates at {load_text(sat)}"
    elif sweep:
        top = max(steps, key=_load)
        head += f"; no saturation found up to {load_text(top)}"
        if report.get("stop_reason") == "ttft_slo":
            head += " (the sweep stopped at the SLO)"
    if base is not None and base.get("client_bound"):
        head += " (client-bound there: the server may hold more)"
    if base is not None:
        out["holds_rps"] = base["requests_per_s"]
        out["holds_tokens_per_s"] = base["output_tokens_per_s"]
    sentence = head + "."
    if cut is not None:
        sentence += f" {_cut_text(report, cut, capital=True)}: its partial numbers are not counted."
    if target_rate:
        if out["holds_rps"]:
            n = math.ceil(target_rate / out["holds_rps"] - 1e-9)
            out["replicas"] = n
            sentence += (f" {target_rate:g} req/s of it needs {n} such "
                         f"replica{'s' if n != 1 else ''}.")
        else:
            sentence += f" Replicas for {target_rate:g} req/s: not determined."
    out["sentence"] = sentence
    return out


def _qs(q: dict[str, Any] | None) -> str:
    if not q:
        return DASH
    return " / ".join(DASH if q.get(k) is None else f"{q[k]:,.0f}"
                      for k in ("p50", "p90", "p99"))


def lengths_lines(report: dict[str, Any]) -> list[str]:
    """Where the load came from, and lengths asked for next to those sent and generated
    (the server's ``usage``), as p50 / p90 / p99 tokens."""
    tr = report.get("traffic") or {}
    lines = []
    kind = tr.get("kind")
    if kind == "dataset":
        lines.append(f"Load: prompts from {tr.get('dataset')} (sent as written, seed "
                     f"{tr.get('seed')})")
    elif kind == "engine":
        what = [w for w in ("prompt", "output") if tr.get(w)]
        lines.append(f"Load: shaped like {tr.get('source')} ({tr.get('engine')}), "
                     f"{tr.get('window')}; seed {tr.get('seed')}")
        for w in what:
            d = tr[w]
            q = d.get("quantiles") or {}
            mean = d.get("mean")
            lines.append(f"  engine's {w} lengths: p10/p50/p90/p99 "
                         + " / ".join(DASH if q.get(k) is None else f"{q[k]:,.0f}"
                                      for k in ("p10", "p50", "p90", "p99"))
                         + f" tokens, mean {'–' if mean is None else f'{mean:,.0f}'}"
                         f" over {d.get('requests', 0):,.0f} requests")
        if tr.get("prefix_hit_rate") is not None:
            lines.append(f"  engine's prefix hit rate: {tr['prefix_hit_rate']:.0%} (matched by "
                         "a shared document at the start of each prompt)")
        if not what:
            lines.append(f"  lengths: synthetic, prompt {tr.get('prompt_tokens')} / output "
                         f"{tr.get('output_tokens')} tokens ({tr.get('length_dist')})")
    elif kind == "synthetic":
        lines.append(f"Load: synthetic, prompt {tr.get('prompt_tokens')} / output "
                     f"{tr.get('output_tokens')} tokens ({tr.get('length_dist')}), seed "
                     f"{tr.get('seed')}")
    ln = report.get("lengths") or {}
    asked, got = ln.get("asked") or {}, ln.get("actual") or {}
    if asked or got:
        lines.append("Lengths, p50 / p90 / p99 tokens: prompt asked "
                     f"{_qs(asked.get('prompt'))}, sent {_qs(got.get('prompt'))}; output asked "
                     f"{_qs(asked.get('output'))}, generated {_qs(got.get('output'))}")
    return lines


def _ms_text(v: float | None) -> str:
    return DASH if v is None else f"{v * 1000:,.0f} ms"


def honesty_lines(report: dict[str, Any]) -> list[str]:
    """What the load generator owes the reader, in words: each client-bound step and why,
    its stalls, how late ``--rate`` requests went out (and the latency from the schedule),
    and whether the counts add up. Every view prints these."""
    out = []
    for i, s in enumerate(report.get("steps") or []):
        n = s.get("index", i) + 1
        if s.get("client_bound_reasons"):
            out.append(f"step {n} client-bound (not counted as capacity): "
                       + "; ".join(s["client_bound_reasons"]))
        st = s.get("stalls") or {}
        if st.get("count") and not s.get("client_bound"):
            out.append(f"step {n}: generator paused {st['count']} time"
                       f"{'s' if st['count'] != 1 else ''}, {st['total_s']:.2f} s in all "
                       f"(longest {st['longest_s']:.2f} s)")
        late = s.get("send_lateness_s")
        if late:
            sched = (s.get("ttft_from_schedule_s") or {}).get("p95")
            sent = (s.get("ttft_s") or {}).get("p95")
            out.append(f"step {n}: sent late by p50 {_ms_text(late['p50'])}, p99 "
                       f"{_ms_text(late['p99'])}, max {_ms_text(late['max'])}; TTFT p95 "
                       f"{_ms_text(sched)} from the schedule, {_ms_text(sent)} "
                       "from the send")
    prot = (report.get("client") or {}).get("protection") or {}
    if prot.get("cpu_pin") or prot.get("nice") is not None:
        out.append(f"load generator protected: CPUs {prot.get('cpu_pin') or 'all'}, nice "
                   f"{'–' if prot.get('nice') is None else prot['nice']}")
    for refused in prot.get("refused") or []:
        out.append(f"WARNING: not applied: {refused}")
    rec = report.get("reconciliation")
    if rec:
        srv = rec.get("server_generation_tokens")
        reqs = rec.get("server_requests")
        pf = report.get("preflight") or {}
        line = (f"{rec['sent']} requests sent: {rec['finished']} finished, {rec['failed']} "
                f"failed, {rec['cancelled']} cancelled ({rec['cancelled_tokens']:,} tokens "
                f"received before the cut); {rec['output_tokens']:,} output tokens; "
                + (f"preflight (before the load: endpoint and calibration) "
                   f"{pf.get('requests', 0)} requests, {pf.get('output_tokens', 0):,} output "
                   f"tokens, {pf.get('prompt_tokens', 0):,} prompt tokens; " if pf else "")
                + f"server counted {'–' if srv is None else f'{srv:,}'} tokens"
                + ("" if reqs is None else f" and {reqs:,} finished requests")
                + (" (preflight included)" if rec.get("preflight_requests") else ""))
        if rec.get("ok"):
            out.append("Counts add up: " + line)
        else:
            out.append("WARNING: counts do not add up: " + "; ".join(rec.get("warnings") or [])
                       + f" ({line})")
    return out


def to_markdown(report: dict[str, Any]) -> str:
    """A human summary: header, one table row per step, saturation and SLA boundary."""
    lines = [f"# llmtop probe: {report.get('target')}", "",
             f"**{capacity(report)['sentence']}**", "",
             *(f"- {ln.strip()}" for ln in lengths_lines(report)),
             f"- model: `{report.get('model')}` ({report.get('endpoint')})",
             f"- started: {report.get('started')}",
             f"- stop reason: {report.get('stop_reason')}", ""]
    lines += ["| step | load | achieved | req/s | out tok/s | goodput/s | TTFT p50 ms "
              "| TTFT p95 ms | ITL p50 ms | TPOT p50 ms | E2E p95 s | errors | client-bound |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for s in report.get("steps", []):
        load = load_text(s)
        errs = ", ".join(f"{k}: {v}" for k, v in sorted(s.get("errors", {}).items())) or "0"
        lines.append(
            f"| {s['index'] + 1}{' (partial)' if s.get('partial') else ''} | {load} "
            f"| {_f(s.get('achieved_concurrency'))} | {_f(s.get('requests_per_s'), 1, 2)} "
            f"| {_f(s.get('output_tokens_per_s'), 1, 0)} | {_f(s.get('goodput_per_s'), 1, 2)} "
            f"| {_f(s['ttft_s']['p50'], 1000)} | {_f(s['ttft_s']['p95'], 1000)} "
            f"| {_f(s['itl_s']['p50'], 1000)} | {_f(s['tpot_s']['p50'], 1000)} "
            f"| {_f(s['e2e_s']['p95'], 1, 2)} | {errs} | {_f(s.get('client_bound'))} |")
    lines.append("")
    sat = report.get("saturation")
    mx = report.get("max_throughput")
    sla = report.get("sla_boundary")
    if sat:
        load = load_text(sat)
        lines.append(f"**Saturation point:** {load} (knee at {knee_text(sat)}), "
                     f"{sat['output_tokens_per_s']:.0f} output tok/s")
    else:
        lines.append("**Saturation point:** not found")
    if mx:
        load = load_text(mx)
        lines.append(f"**Max throughput:** {mx['output_tokens_per_s']:.0f} output tok/s "
                     f"at {load}")
    if sla and sla.get("met"):
        lines.append(f"**SLA boundary:** {load_text(sla)}, goodput "
                     f"{sla['goodput_per_s']:.2f} req/s (SLO: {slo_text(sla['slo'])})")
    elif sla:
        lines.append(f"**SLA boundary:** {unmet_sla_text(report)} (SLO: {slo_text(sla['slo'])})")
    if any(s.get("client_bound") for s in report.get("steps", [])):
        lines.append("")
        lines.append("> Some steps were client-bound: the client, not the server, was the "
                     "limit there.")
    honest = honesty_lines(report)
    if honest:
        lines += ["", *(f"- {ln}" for ln in honest)]
    return "\n".join(lines) + "\n"


def write_reports(report: dict[str, Any], *, json_path: str | None = None,
                  csv_path: str | None = None, md_path: str | None = None) -> list[str]:
    """Write the requested files; returns the paths written."""
    out = []
    for path, fn in ((json_path, to_json), (csv_path, to_csv), (md_path, to_markdown)):
        if path:
            Path(path).write_text(fn(report), encoding="utf-8")
            out.append(path)
    return out


def partial_report(options: Any, steps: list[dict[str, Any]]) -> dict[str, Any]:
    """A report built from the steps seen, when the worker gave none (``options``: the
    ``ProbeOptions`` of the run)."""
    from llmtop.loadgen import knee
    from llmtop.loadgen.options import redact_url

    slo = {"ttft": options.ttft_slo, "itl": options.itl_slo, "tpot": options.tpot_slo}
    rep = {"target": redact_url(options.url), "model": options.model, "started": None,
           "options": options.to_json(), "steps": steps,
           "saturation": knee.saturation(steps) if options.sweep else None,
           "max_throughput": knee.max_throughput(steps),
           "sla_boundary": knee.sla_boundary(steps, slo, options.max_error_rate),
           "stop_reason": "stopped", "partial": True}
    rep["capacity"] = capacity(rep)
    return rep
