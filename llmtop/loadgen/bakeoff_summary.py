"""A bake-off report as text, for every face (console table, CSV, HTML): pure formatting.

The report is the bake-off JSON (``docs/probe.md``, "Bake-off JSON"): ``endpoints`` (each a
probe report plus ``name``, ``url``, ``engine``, ``engine_version``, ``error``,
``cold_start_s``, ``server``, ``cost_per_mtok_usd``, ``short_outputs``, maybe ``comparable``
and ``settings``), ``traffic`` and ``warnings``. Any field may be missing or null: shown as
``–``, never 0.
"""

from __future__ import annotations

from typing import Any

from llmtop.loadgen.report import capacity, knee_text, load_text, slo_text
from llmtop.units import DASH

__all__ = ["METRICS", "books_text", "engine_lines", "engine_name", "engine_what",
           "is_bakeoff", "level_key", "levels", "table_rows", "traffic_text"]

METRICS = (
    # (key, header, lower is better (None: never marked best), format)
    ("tps", "out tok/s", False, "{:,.0f}"),
    ("ttft50", "TTFT p50", True, "{:,.0f}"),
    ("ttft95", "TTFT p95", True, "{:,.0f}"),
    ("itl95", "ITL p95", True, "{:,.1f}"),
    ("errors", "errors", None, "{:,d}"),
)
"""The columns per engine; latencies in ms."""
LOG_LINES = 8
"""Lines of a failed engine's log shown under its error."""


def is_bakeoff(data: Any) -> bool:
    """A bake-off report (``kind: bakeoff`` or an ``endpoints`` list), not a probe report."""
    return isinstance(data, dict) and (data.get("kind") == "bakeoff"
                                       or isinstance(data.get("endpoints"), list))


def level_key(report: dict[str, Any]) -> str:
    """``concurrency`` or ``rate``: what the levels of this bake-off are."""
    for e in report.get("endpoints") or []:
        for s in e.get("steps") or []:
            if s.get("rate") and not s.get("concurrency"):
                return "rate"
            if s.get("concurrency"):
                return "concurrency"
    return "concurrency"


def levels(report: dict[str, Any]) -> list[float]:
    """Every load level any engine ran, ascending."""
    key = level_key(report)
    return sorted({s[key] for e in report.get("endpoints") or [] for s in e.get("steps") or []
                   if s.get(key)})


def engine_name(e: dict[str, Any], i: int) -> str:
    """The name a reader sees: ``name``, else the URL, else ``engine N``."""
    return str(e.get("name") or e.get("url") or f"engine {i + 1}")


def engine_what(e: dict[str, Any]) -> str:
    """``vllm 0.11.0`` (what is known of the engine and its version), or ``–``."""
    return " ".join(str(x) for x in (e.get("engine"), e.get("engine_version")) if x) or DASH


def _step(e: dict[str, Any], key: str, level: float) -> dict[str, Any] | None:
    for s in e.get("steps") or []:
        if s.get(key) == level:
            return s
    return None


def _ms(s: dict[str, Any], field: str, q: str) -> float | None:
    v = (s.get(field) or {}).get(q)
    return None if v is None else v * 1000.0


def _values(s: dict[str, Any] | None) -> dict[str, Any]:
    if s is None:
        return {k: None for k, *_ in METRICS}
    errs = s.get("errors_total")
    if errs is None and isinstance(s.get("errors"), dict):
        errs = sum(s["errors"].values())
    return {"tps": s.get("output_tokens_per_s") if s.get("requests") else None,
            "ttft50": _ms(s, "ttft_s", "p50"), "ttft95": _ms(s, "ttft_s", "p95"),
            "itl95": _ms(s, "itl_s", "p95"), "errors": None if errs is None else int(errs)}


def _best(cells: list[dict[str, Any]], key: str, lower: bool) -> set[int]:
    """Engines holding the row's best value as shown (equal shown values are all marked);
    none when fewer than two engines have one. A throughput that is not comparable never
    wins."""
    vals = [(i, float(c["text"][key].replace(",", ""))) for i, c in enumerate(cells)
            if c["values"][key] is not None and not (key == "tps" and c["not_comparable"])]
    if len(vals) < 2:
        return set()
    target = (min if lower else max)(v for _i, v in vals)
    return {i for i, v in vals if v == target}


def table_rows(report: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per level: ``load`` (text), ``level`` and ``engines``, per engine ``values``
    (raw), ``text`` (formatted, ``–`` when missing), ``best`` (keys where it is the row's
    best), ``not_comparable`` and ``partial``."""
    key = level_key(report)
    eps = report.get("endpoints") or []
    out = []
    for lv in levels(report):
        cells = []
        for e in eps:
            s = _step(e, key, lv)
            vals = _values(s)
            cells.append({"values": vals, "not_comparable": e.get("comparable") is False,
                          "partial": bool(s and s.get("partial")), "best": set(),
                          "text": {k: DASH if vals[k] is None else f.format(vals[k])
                                   for k, _h, _l, f in METRICS}})
        for k, _h, lower, _f in METRICS:
            if lower is not None:
                for i in _best(cells, k, lower):
                    cells[i]["best"].add(k)
        out.append({"load": load_text({key: lv}), "level": lv, "engines": cells})
    return out


def _peaks(srv: dict[str, Any] | None) -> str:
    srv = srv or {}

    def n(v: Any) -> str:
        return DASH if v is None else f"{v:,.0f}"

    def pct(v: Any) -> str:
        return DASH if v is None else f"{v:.1%}" if v < 0.1 else f"{v:.0%}"

    kv = pct(srv.get("kv_peak"))
    if srv.get("kv_capacity_tokens") is not None:
        kv += f" of {srv['kv_capacity_tokens']:,.0f} tokens"
    mem = srv.get("gpu_mem_peak_bytes", srv.get("gpu_memory_peak_bytes"))
    running = n(srv.get("running_peak"))
    if srv.get("max_running") is not None:
        running += f" (max {srv['max_running']:,.0f})"
    text = (f"running {running}, waiting {n(srv.get('waiting_peak'))}, "
            f"KV {kv}, preemptions {n(srv.get('preemptions'))}, GPU memory "
            f"{DASH if mem is None else f'{mem / 2**30:,.1f} GiB'}"
            f"{' (whole GPU)' if mem is not None and srv.get('gpu_memory_of') == 'gpu' else ''}"
            ", GPU util "
            f"{pct(srv.get('gpu_util_peak'))}")
    return text + (f" ({srv['note']})" if srv.get("note") else "")


def _settings(settings: dict[str, Any]) -> str:
    """``k=v, ...``; a nested dict (SGLang's ``server_info``) is flattened, None left out."""
    top = {k: v for k, v in settings.items() if not isinstance(v, dict) and v is not None}
    parts = [f"{k}={v}" for k, v in top.items()]
    for v in settings.values():
        if isinstance(v, dict):  # what the top level already says is left out
            parts += [f"{kk}={vv}" for kk, vv in v.items() if vv is not None and kk not in top
                      and not (isinstance(vv, str) and vv in top.values())
                      and not (kk == "context_length" and vv == top.get("max_model_len"))]
    return ", ".join(parts) or DASH


def _cold(e: dict[str, Any]) -> str:
    cs, ready = e.get("cold_start_s"), e.get("ready_s")
    if cs is not None:
        return f"{cs:,.1f} s" + (f" (ready after {ready:,.1f} s)" if ready is not None else "")
    if e.get("started_by_llmtop"):
        return f"{DASH} (started by llmtop; no first token)"
    return f"{DASH} (not started by llmtop)"


def books_text(e: dict[str, Any]) -> str:
    """Every request llmtop sent the engine: the run, its preflight and the cold start's
    first token, and whether the server's counters agree."""
    pf, cold = e.get("preflight") or {}, e.get("cold_start_requests") or {}
    rec = e.get("reconciliation") or {}
    n = (e.get("requests_sent") or 0) + pf.get("requests", 0) + cold.get("requests", 0)
    agree = ("counts add up with the server's counters" if rec.get("ok") else
             "counts do NOT add up" if rec else "not reconciled")
    return (f"{n:,} sent: {e.get('requests_sent') or 0:,} in the run, "
            f"{pf.get('requests', 0)} preflight ({pf.get('output_tokens', 0)} tokens), "
            f"{cold.get('requests', 0)} for the cold start; {agree}")


def _usd(v: float | None) -> str:
    return DASH if v is None else f"${v:,.3f}" if v < 1 else f"${v:,.2f}"


def engine_lines(e: dict[str, Any]) -> list[tuple[str, str]]:
    """(label, text) lines for one engine. One that failed shows its error first (and what
    it measured before, if anything); one with no step shows nothing else but cold start."""
    out: list[tuple[str, str]] = []
    if e.get("error"):
        out.append(("error", str(e["error"])))
    if e.get("log"):
        out.append(("log", str(e["log"])))
    if e.get("error") and e.get("log_tail"):
        tail = [ln for ln in str(e["log_tail"]).splitlines() if ln.strip()][-LOG_LINES:]
        out += [("log tail", ln) for ln in tail]
    cold = _cold(e)
    if not any(s.get("requests") for s in e.get("steps") or []):
        if not e.get("error"):
            out.append(("error", "no step finished"))
        if e.get("cold_start_s") is not None:
            out.append(("cold start", cold))
        return out
    out.append(("capacity", capacity(e)["sentence"]))
    sat, sla, mx = e.get("saturation"), e.get("sla_boundary"), e.get("max_throughput")
    out.append(("saturation", f"{load_text(sat)} (knee {knee_text(sat)}), "
                f"{sat['output_tokens_per_s']:,.0f} out tok/s" if sat
                else "not found (no accepted knee)"))
    if mx:
        out.append(("max throughput", f"{mx['output_tokens_per_s']:,.0f} out tok/s at "
                                      f"{load_text(mx)}"))
    if sla and sla.get("met"):
        out.append(("SLA boundary", f"{load_text(sla)} ({slo_text(sla.get('slo'))}), "
                                    f"{sla['output_tokens_per_s']:,.0f} out tok/s"))
    elif sla:
        out.append(("SLA boundary", f"no level met {slo_text(sla.get('slo'))}"))
    else:
        out.append(("SLA boundary", f"{DASH} (no SLO set)"))
    out.append(("cold start", cold))
    cost = e.get("cost_per_mtok_usd")
    out.append(("$/1M out tokens", f"{DASH} (no GPU-hour price given)" if cost is None else
                f"{_usd(cost.get('sla'))} at the SLA boundary, {_usd(cost.get('max'))} at "
                "max throughput"))
    out.append(("server peaks", _peaks(e.get("server"))))
    out.append(("requests", books_text(e)))
    short = e.get("short_outputs")
    if short is not None:
        out.append(("short outputs", f"{short:.0%} of requests ended before their max tokens"
                    + ("; throughput not comparable" if e.get("comparable") is False else "")))
    if isinstance(e.get("settings"), dict):
        out.append(("settings", _settings(e["settings"])))
    return out


def _level(k: Any, key: str) -> str:
    try:
        v = float(k)
    except (TypeError, ValueError):
        return str(k)
    return load_text({key: int(v) if v.is_integer() else v})


def _per_step(rps: Any, key: str) -> str:
    if isinstance(rps, dict):  # {level: requests}
        counts = set(rps.values())
        if len(counts) == 1:
            return f"{counts.pop()} requests per step"
        return "requests per step " + ", ".join(f"{_level(k, key)}: {v}"
                                                for k, v in rps.items())
    return f"{DASH if rps is None else rps} requests per step"


def traffic_text(report: dict[str, Any]) -> str:
    """One line: what traffic every engine received."""
    tr = report.get("traffic") or {}
    h, seed = tr.get("hash"), tr.get("seed")
    parts = [f"Traffic: {tr.get('kind') or DASH}"]
    if tr.get("prompt_tokens") is not None and tr.get("kind") == "synthetic":
        parts.append(f"prompt {tr['prompt_tokens']} / output {tr.get('output_tokens')} tokens"
                     + (f" ({tr['length_dist']})" if tr.get("length_dist") else ""))
    if tr.get("exact_lengths"):
        parts.append(f"exact lengths ({tr['exact_lengths']})")
    parts += [f"seed {DASH if seed is None else seed}",
              _per_step(tr.get("requests_per_step"), level_key(report))]
    if tr.get("warmup"):
        parts.append(f"warm-up: {tr['warmup']}")
    text = ", ".join(parts)
    if h:
        text += f"; the same request list for every engine (hash {str(h)[:12]})"
    elif tr.get("identical") is False:
        text += "; the engines did NOT receive identical request lists"
    return text + ("; stopped early (partial report)" if report.get("partial") else "")
