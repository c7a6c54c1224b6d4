"""Write ``examples/llmtop-grafana.json``: a Grafana dashboard over the exporter's series.

One row per question the TUI answers. Run ``python scripts/make_grafana_dashboard.py`` after
changing a series (``tests/export/test_grafana.py`` checks the file is this script's output).
"""

from __future__ import annotations

import json
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "examples" / "llmtop-grafana.json"
SEL = 'target=~"$target", model=~"$model", engine=~"$engine"'
ENG = SEL + ', rank=""'
DS = {"type": "prometheus", "uid": "${datasource}"}


def ts(title: str, exprs: list[tuple[str, str]], unit: str = "short", w: int = 8,
       desc: str = "") -> dict:
    return {"type": "timeseries", "title": title, "description": desc, "datasource": DS,
            "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
            "options": {"legend": {"displayMode": "list", "placement": "bottom"},
                        "tooltip": {"mode": "multi"}},
            "targets": [{"datasource": DS, "expr": e, "legendFormat": leg, "refId": chr(65 + i)}
                        for i, (e, leg) in enumerate(exprs)],
            "gridPos": {"w": w, "h": 8}}


def table(title: str, expr: str, desc: str = "", w: int = 24) -> dict:
    return {"type": "table", "title": title, "description": desc, "datasource": DS,
            "targets": [{"datasource": DS, "expr": expr, "format": "table", "instant": True,
                         "refId": "A"}],
            "transformations": [{"id": "organize", "options": {
                "excludeByName": {"Time": True, "Value": True, "__name__": True, "job": True,
                                  "instance": True}}}],
            "gridPos": {"w": w, "h": 8}}


ROWS: list[tuple[str, list[dict]]] = [
    ("Is it up?", [
        table("Engines not ok", f"llmtop_engine_state{{{SEL}, state!=\"ok\"}} == 1",
              "Targets llmtop cannot read (down, http_error, unauthorized, bad_payload, stale) "
              "or that just restarted.", w=12),
        ts("Up", [(f"llmtop_engine_up{{{SEL}}}", "{{target}} {{model}}")], w=12),
    ]),
    ("What is wrong? (llmtop's diagnosis)", [
        table("Active findings", f"llmtop_finding{{{SEL}}}",
              "One row per finding: rule, severity and the sentence (docs/diagnosis.md)."),
        ts("Findings by rule", [(f"count by (rule, severity) (llmtop_finding{{{SEL}}})",
                                 "{{rule}} {{severity}}")], w=12),
        ts("Evidence: value vs threshold",
           [(f"llmtop_finding_value{{{SEL}}}", "{{target}} {{rule}} {{signal}}"),
            (f"llmtop_finding_threshold{{{SEL}}}", "threshold {{rule}} {{signal}}")], w=12),
    ]),
    ("Is it busy?", [
        ts("Running and waiting", [(f"llmtop_engine_running{{{ENG}}}", "running {{target}}"),
                                   (f"llmtop_engine_waiting{{{ENG}}}", "waiting {{target}}"),
                                   (f"llmtop_engine_max_running{{{ENG}}}", "max {{target}}")]),
        ts("KV cache in use", [(f"llmtop_engine_kv_usage_ratio{{{ENG}}}", "{{target}}")],
           "percentunit"),
        ts("Prefix cache hit ratio", [(f"llmtop_engine_prefix_hit_ratio{{{ENG}}}",
                                       "{{target}}")], "percentunit"),
    ]),
    ("Is it fast?", [
        ts("TTFT p95 / p50", [
            (f"llmtop_engine_ttft_seconds{{{ENG}, quantile=\"0.95\"}}", "p95 {{target}}"),
            (f"llmtop_engine_ttft_seconds{{{ENG}, quantile=\"0.5\"}}", "p50 {{target}}")],
           "s", 6),
        ts("ITL p95 / p50", [
            (f"llmtop_engine_itl_seconds{{{ENG}, quantile=\"0.95\"}}", "p95 {{target}}"),
            (f"llmtop_engine_itl_seconds{{{ENG}, quantile=\"0.5\"}}", "p50 {{target}}")],
           "s", 6),
        ts("E2E p95", [(f"llmtop_engine_e2e_seconds{{{ENG}, quantile=\"0.95\"}}",
                        "{{target}}")], "s", 6),
        ts("Queue time p95", [(f"llmtop_engine_queue_seconds{{{ENG}, quantile=\"0.95\"}}",
                               "{{target}}")], "s", 6),
    ]),
    ("How much does it serve?", [
        ts("Generation tokens/s", [(f"llmtop_engine_generation_tokens_per_second{{{ENG}}}",
                                    "{{target}}")]),
        ts("Prompt tokens/s", [(f"llmtop_engine_prompt_tokens_per_second{{{ENG}}}",
                                "{{target}}")]),
        ts("Requests/s", [(f"llmtop_engine_requests_per_second{{{ENG}}}", "{{target}}")],
           "reqps"),
    ]),
    ("What goes wrong?", [
        ts("Preemptions/s", [(f"llmtop_engine_preemptions_per_second{{{ENG}}}",
                              "{{target}}")], w=12),
        ts("Errors/s", [(f"llmtop_engine_errors_per_second{{{ENG}}}", "{{target}}")], w=12),
    ]),
    ("GPUs", [
        ts("Utilization", [("llmtop_gpu_utilization_ratio", "{{host}} #{{gpu}}")],
           "percentunit", 6),
        ts("Memory used", [("llmtop_gpu_memory_used_bytes", "{{host}} #{{gpu}}"),
                           ("llmtop_gpu_memory_total_bytes", "total {{host}} #{{gpu}}")],
           "bytes", 6),
        ts("Power and temperature", [("llmtop_gpu_power_watts", "W {{host}} #{{gpu}}"),
                                     ("llmtop_gpu_temperature_celsius", "°C {{host}} #{{gpu}}")],
           "short", 6),
        ts("Throttled (clock-event reasons)",
           [("llmtop_gpu_throttle_reason", "{{host}} #{{gpu}} {{reason}}")], "short", 6),
        ts("Memory by engine", [("sum by (target) (llmtop_gpu_process_memory_bytes"
                                 "{target=~\"$target\"})", "{{target}}")], "bytes", 24),
    ]),
    ("The exporter", [
        ts("Refresh and scrape duration", [
            ("llmtop_refresh_duration_seconds", "refresh {{instance}}"),
            ("llmtop_scrape_duration_seconds", "scrape {{target}}")], "s", 12),
        ts("Failed scrapes/s", [("rate(llmtop_scrape_errors_total[5m])",
                                 "{{target}} {{state}}"),
                                ("rate(llmtop_refresh_errors_total[5m])",
                                 "refresh {{instance}}")], "short", 12),
    ]),
]


def _var(name: str) -> dict:
    return {"name": name, "type": "query", "datasource": DS, "includeAll": True, "multi": True,
            "allValue": ".*", "current": {"text": "All", "value": "$__all"},
            "query": {"query": f"label_values(llmtop_engine_up, {name})", "refId": name},
            "definition": f"label_values(llmtop_engine_up, {name})", "refresh": 2}


def dashboard() -> dict:
    panels: list[dict] = []
    pid, y = 1, 0
    for title, items in ROWS:
        panels.append({"type": "row", "title": title, "collapsed": False, "id": pid,
                       "gridPos": {"x": 0, "y": y, "w": 24, "h": 1}, "panels": []})
        pid, y, x = pid + 1, y + 1, 0
        for p in items:
            w = p["gridPos"]["w"]
            if x + w > 24:
                x, y = 0, y + 8
            p["gridPos"] = {"x": x, "y": y, "w": w, "h": 8}
            p["id"] = pid
            pid, x = pid + 1, x + w
            panels.append(p)
        y += 8
    return {
        "title": "llmtop: inference engines",
        "uid": "llmtop-engines",
        "description": "llmtop export's normalized series: the same names for every engine "
                       "(docs/exporter.md).",
        "tags": ["llmtop", "llm", "inference"],
        "timezone": "browser", "schemaVersion": 39, "version": 1, "editable": True,
        "refresh": "10s", "time": {"from": "now-1h", "to": "now"},
        "templating": {"list": [
            {"name": "datasource", "type": "datasource", "query": "prometheus",
             "current": {}, "label": "Prometheus"},
            _var("target"), _var("model"), _var("engine")]},
        "annotations": {"list": []},
        "panels": panels,
    }


def main() -> None:
    OUT.write_text(json.dumps(dashboard(), indent=1, ensure_ascii=False) + "\n",
                   encoding="utf-8")


if __name__ == "__main__":
    main()
