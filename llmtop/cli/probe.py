"""``llmtop probe URL [options]``: the headless load probe.

Asks before sending load to a non-loopback host (``--yes`` skips; a non-interactive stdin
without ``--yes`` refuses). Ctrl-C stops at once and still writes the partial report; a
second Ctrl-C kills the worker. The API key comes from ``--api-key``, ``LLMTOP_API_KEY`` or
the config file, and is never printed or written.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import signal
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

from llmtop.errors import ConfigError
from llmtop.loadgen.options import (
    ProbeOptions,
    parse_cpus,
    parse_levels,
    parse_shared_prefix,
    split_url,
)
from llmtop.urls import is_loopback

__all__ = ["build_compare_parser", "build_parser", "compare_main", "confirm_target", "main",
           "options_from_args", "read_traffic", "resolve_api_key"]


def build_parser() -> argparse.ArgumentParser:
    """The ``llmtop probe`` argument parser (the interface scripts depend on)."""
    p = argparse.ArgumentParser(
        prog="llmtop probe",
        description="Send OpenAI-compatible streaming load to URL and measure TTFT, ITL, "
        "TPOT, throughput and where the server saturates (see docs/probe.md).",
        epilog="Compare runs: llmtop probe compare BEFORE.json AFTER.json [--html FILE].")
    a = p.add_argument
    a("url", metavar="URL", nargs="*",
      help="server URL, e.g. http://127.0.0.1:8000 (or .../v1/completions); several URLs: "
      "a bake-off (the same requests to each, one after the other)")
    a("--concurrency", type=int, default=None, metavar="N",
      help="requests in flight (closed loop); with --rate: a cap on requests in flight")
    a("--rate", type=float, default=None, metavar="R", help="requests per second (open loop)")
    a("--poisson", action="store_true", help="Poisson arrivals with --rate")
    a("--sweep", action="store_true",
      help="concurrency ladder 1,2,4,... up to --max-concurrency (with --rate: R,2R,4R,...)")
    a("--max-concurrency", type=int, default=256, metavar="N", help="sweep bound (default 256)")
    a("--duration", type=float, default=None, metavar="S",
      help="total time bound (default 60 s; sweep 600 s)")
    a("--max-requests", type=int, default=None, metavar="N", help="total request bound")
    a("--prompt-tokens", type=int, default=256, metavar="N", help="prompt length (default 256)")
    a("--output-tokens", type=int, default=128, metavar="N", help="output length (default 128)")
    a("--length-dist", default="fixed", choices=["fixed", "uniform", "normal"],
      help="length distribution of prompts and outputs (default fixed)")
    a("--shared-prefix", default=None, metavar="N:P",
      help="N shared prefixes of P tokens, each followed by a unique suffix")
    a("--endpoint", default=None, choices=["completions", "chat"],
      help="default: from the URL path, else detected")
    a("--model", default=None, metavar="M", help="default: the first model of /v1/models")
    a("--api-key", default=None, metavar="K",
      help="bearer token (or LLMTOP_API_KEY, or the config file); never printed")
    a("--ttft-slo", type=float, default=None, metavar="S", help="TTFT SLO (p95), seconds")
    a("--itl-slo", type=float, default=None, metavar="S", help="per-request ITL SLO (p95)")
    a("--tpot-slo", type=float, default=None, metavar="S", help="TPOT SLO (p95), seconds")
    a("--max-error-rate", type=float, default=0.5, metavar="F",
      help="stop when the error rate exceeds F (default 0.5)")
    a("--warmup", type=float, default=None, metavar="S",
      help="warm-up per step, excluded (default 3 s in a sweep, else 0)")
    a("--step-duration", type=float, default=10.0, metavar="S",
      help="measurement window per sweep step (default 10 s)")
    a("--cpu-pin", default=None, metavar="CPUS",
      help="run the load generator on these CPUs only, e.g. 0 or 2,3 (away from the server)")
    a("--nice", type=int, default=None, metavar="N",
      help="the load generator's nice value (e.g. -5: before a busy server; needs privilege)")
    a("--json", default=None, metavar="FILE", help="write the JSON report")
    a("--csv", default=None, metavar="FILE", help="write one CSV row per step")
    a("--md", default=None, metavar="FILE", help="write a Markdown summary")
    a("--seed", type=int, default=0, metavar="N",
      help="seed of every random choice (lengths, prompts, arrivals, dataset draws); default 0")
    a("--lengths-from", default=None, metavar="TARGET",
      help="draw prompt and output lengths from TARGET's own length histograms "
      "(vllm@host:port, host:port, a URL, an llmtop recording file, or prometheus:URL "
      "with --match)")
    a("--lengths-window", type=float, default=600.0, metavar="S",
      help="window of --lengths-from / --prefix-hit-from: two scrapes S apart (default 600; "
      "0 = the engine's lifetime; Ctrl-C while waiting uses the lifetime)")
    a("--match", default=None, metavar="SEL",
      help='with prometheus:URL, the series to read, e.g. \'namespace="prod",model_name="m"\'')
    a("--prefix-hit-from", default=None, metavar="TARGET",
      help="match TARGET's windowed prefix-cache hit rate with a shared document per prompt")
    a("--dataset", default=None, metavar="FILE",
      help="JSONL ({prompt|messages, max_tokens}) or ShareGPT JSON; sent as written")
    a("--context", type=int, default=None, metavar="N",
      help="model context in tokens, caps drawn lengths (default: /v1/models max_model_len)")
    a("--target-rate", type=float, default=None, metavar="R",
      help="req/s to plan for: the summary says how many such replicas R needs")
    a("--html", default=None, metavar="FILE",
      help="write a self-contained HTML report with charts")
    a("--svg", default=None, metavar="PREFIX",
      help="write the charts alone as PREFIX-<chart>.svg")
    a("--plan", default=None, metavar="FILE",
      help="a bake-off plan (TOML): engines to start, run and stop one at a time "
      "(see docs/probe.md)")
    a("--gpu-hour-price", type=float, default=None, metavar="USD",
      help="bake-off: price of one GPU-hour, for $ per 1M output tokens")
    a("--levels", default=None, metavar="C1,C2,...",
      help="sweep these concurrencies (e.g. 1,10,50,100) instead of 1,2,4,...")
    a("--requests-per-step", type=int, default=None, metavar="N",
      help="bake-off: measured requests per level, at least 4x its concurrency (default 32)")
    a("--yes", action="store_true", help="do not ask before loading a non-loopback host")
    a("--insecure", action="store_true", help="do not verify TLS certificates")
    return p


def resolve_api_key(flag: str | None, env: dict[str, str] | None = None,
                    base_url: str | None = None) -> str | None:
    """``--api-key``, else ``LLMTOP_API_KEY``, else the config file: the ``api_key`` of a
    configured target with the same base URL, else the file's top-level ``api_key``."""
    if flag:
        return flag
    env = dict(os.environ) if env is None else env
    if env.get("LLMTOP_API_KEY"):
        return env["LLMTOP_API_KEY"]
    try:  # a broken or missing config file never blocks a probe
        from llmtop.settings import build_config

        config = build_config(argparse.Namespace(), environ=env)
    except Exception:
        return None
    if base_url:
        for t in config.targets:
            if t.api_key and t.base_url.rstrip("/") == base_url.rstrip("/"):
                return t.api_key
    return config.api_key


def confirm_target(host: str, *, yes: bool, interactive: bool,
                   ask: Callable[[str], str] | None = None) -> tuple[bool, str | None]:
    """May load go to ``host``? Returns ``(allowed, message)``; asks only when interactive."""
    if is_loopback(host) or yes:
        return True, None
    if not interactive:
        return False, (f"refusing to send load to non-loopback host {host!r} without --yes "
                       "(stdin is not a terminal)")
    answer = (ask or input)(f"Send load to {host}? This may disturb a production server. "
                            "[y/N] ")
    if answer.strip().lower() in ("y", "yes"):
        return True, None
    return False, "aborted"


def options_from_args(ns: argparse.Namespace, api_key: str | None) -> ProbeOptions:
    """Parsed flags -> validated ``ProbeOptions``."""
    url = ns.url[0] if isinstance(ns.url, list) else ns.url
    return ProbeOptions(
        url=url, concurrency=ns.concurrency, rate=ns.rate, poisson=ns.poisson,
        sweep=ns.sweep or bool(getattr(ns, "levels", None)),
        max_concurrency=ns.max_concurrency, duration=ns.duration,
        max_requests=ns.max_requests, prompt_tokens=ns.prompt_tokens,
        output_tokens=ns.output_tokens, length_dist=ns.length_dist,
        shared_prefix=parse_shared_prefix(ns.shared_prefix) if ns.shared_prefix else None,
        endpoint=ns.endpoint, model=ns.model, api_key=api_key, ttft_slo=ns.ttft_slo,
        itl_slo=ns.itl_slo, tpot_slo=ns.tpot_slo, max_error_rate=ns.max_error_rate,
        warmup=ns.warmup, step_duration=ns.step_duration, insecure=ns.insecure, seed=ns.seed,
        dataset=ns.dataset, context=ns.context, target_rate=ns.target_rate,
        levels=parse_levels(ns.levels) if getattr(ns, "levels", None) else None,
        requests_per_step=getattr(ns, "requests_per_step", None),
        cpu_pin=parse_cpus(ns.cpu_pin) if getattr(ns, "cpu_pin", None) else None,
        nice=getattr(ns, "nice", None),
    ).validate()


def run(options: ProbeOptions, ns: argparse.Namespace) -> int:
    """Run the probe with the live display; write the reports; return the exit code."""
    from llmtop.console.probe_view import ProbeLiveView, print_summary
    from llmtop.loadgen.api import start_probe
    from llmtop.loadgen.report import partial_report, write_reports

    stops = [0]

    def on_sigint(_sig: int, _frm: Any) -> None:
        stops[0] += 1

    old = signal.signal(signal.SIGINT, on_sigint)
    handle = start_probe(options)
    view = ProbeLiveView(options)
    report = None
    t_stop = None
    try:
        with view.live():
            while not handle.finished:
                if stops[0] == 1 and t_stop is None:
                    t_stop = time.monotonic()
                    handle.stop()
                    view.note("stopping: cancelling requests in flight…")
                if stops[0] >= 2 or (t_stop is not None and time.monotonic() - t_stop > 10):
                    handle.kill()
                    break
                for ev in handle.wait(0.1):
                    view.update(ev)
        report = handle.result()
    finally:
        signal.signal(signal.SIGINT, old)
        if not handle.finished:
            handle.kill()
    for msg in handle.errors:
        print(f"llmtop probe: {msg}", file=sys.stderr)
    if report is None and handle.steps:
        report = partial_report(options, handle.steps)
    if report is None:
        return 130 if stops[0] else 2
    print_summary(report)
    written = write_reports(report, json_path=ns.json, csv_path=ns.csv, md_path=ns.md)
    if ns.html or ns.svg:
        from llmtop.report import write_charts

        written += write_charts([report], html_path=ns.html, svg_prefix=ns.svg)
    for path in written:
        print(f"wrote {path}", file=sys.stderr)
    from llmtop.cli.capacity import save_probe_capacity

    save_probe_capacity(report)
    return 130 if stops[0] else 0


def _countdown(end: float) -> None:
    """Sleep until ``end``; on a terminal, show the time left (one line, rewritten)."""
    tty = sys.stderr.isatty()
    while (left := end - time.monotonic()) > 0:
        if tty:
            print(f"\r  {int(left) // 60}:{int(left) % 60:02d} left (Ctrl-C: use the lifetime)",
                  end="", file=sys.stderr, flush=True)
        time.sleep(min(1.0, left))


def _read_one(spec: str, ns: argparse.Namespace, api_key: str | None, *, lengths: bool,
              prefix: bool) -> dict[str, Any]:
    """Read one target's (or recording's) traffic over the window, waiting when needed."""
    import asyncio

    from llmtop.loadgen import traffic as tr

    window = ns.lengths_window
    if spec.startswith("prometheus:"):
        from llmtop.loadgen.traffic_prom import prometheus_traffic

        return asyncio.run(prometheus_traffic(spec[len("prometheus:"):], ns.match, window,
                                              lengths=lengths, prefix=prefix))
    if os.path.isfile(spec):
        first, second = tr.recording_signals(spec, window)
        return tr.build_traffic(first, second, lengths=lengths, prefix=prefix, window_s=window,
                                why_lifetime="one scrape in the recording's window")
    first = asyncio.run(tr.read_signals(spec, api_key=api_key, insecure=ns.insecure))
    why = tr.lifetime_reason(first, window)
    second = None
    if why is None:
        print(f"llmtop probe: reading {first.source}'s traffic over the next {window:g} s "
              "(Ctrl-C: use its lifetime histograms instead)", file=sys.stderr)
        t0 = time.monotonic()
        try:
            _countdown(t0 + window)
            second = asyncio.run(tr.read_signals(spec, api_key=api_key, insecure=ns.insecure))
        except KeyboardInterrupt:
            why = f"the window wait was stopped after {time.monotonic() - t0:.0f} s"
        finally:
            if sys.stderr.isatty():
                print(file=sys.stderr)
    return tr.build_traffic(first, second, lengths=lengths, prefix=prefix, window_s=window,
                            why_lifetime=why)


def read_traffic(ns: argparse.Namespace, api_key: str | None) -> dict[str, Any] | None:
    """``--lengths-from`` / ``--prefix-hit-from`` -> ``ProbeOptions.traffic`` (or None)."""
    lf, pf = ns.lengths_from, ns.prefix_hit_from
    if not lf and not pf:
        return None
    if lf and pf and lf != pf:
        out = _read_one(lf, ns, api_key, lengths=True, prefix=False)
        hit = _read_one(pf, ns, api_key, lengths=False, prefix=True)
        out["prefix_hit_rate"] = hit["prefix_hit_rate"]
        out["prefix_source"] = f"{hit['source']}, {hit['window']}"
        return out
    return _read_one(lf or pf, ns, api_key, lengths=bool(lf), prefix=bool(pf))


def _check_charts(ns: argparse.Namespace) -> None:
    if getattr(ns, "html", None) or getattr(ns, "svg", None):
        from llmtop.report import charts_available

        if (why := charts_available()) is not None:
            raise ConfigError(why)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``llmtop probe`` (and ``llmtop probe compare``)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] == "compare":
        return compare_main(args[1:])
    parser = build_parser()
    ns = parser.parse_intermixed_args(args)
    plan = None
    if ns.plan or len(ns.url) > 1:  # a bake-off: the same preparation, then every engine
        from llmtop.cli.bakeoff import load_plan

        plan = load_plan(ns, parser, args)
        ns.url = [plan.engines[0].url]
    elif ns.gpu_hour_price is not None or ns.requests_per_step is not None:
        raise ConfigError("--gpu-hour-price and --requests-per-step are bake-off options: "
                          "give several URLs or --plan FILE")
    if not ns.url:
        raise ConfigError("llmtop probe needs a URL (several URLs or --plan FILE: a bake-off)")
    ns.url = ns.url[0]
    base, _host, _ep = split_url(ns.url)
    api_key = resolve_api_key(ns.api_key, base_url=base)
    options = options_from_args(ns, api_key)
    _check_charts(ns)
    if options.dataset:
        from llmtop.loadgen.dataset import load_dataset

        load_dataset(options.dataset)  # a bad line stops here: nothing is sent
    hosts = [split_url(e.url)[1] for e in plan.engines] if plan else [split_url(options.url)[1]]
    for host in dict.fromkeys(hosts):
        ok, msg = confirm_target(host, yes=ns.yes, interactive=sys.stdin.isatty())
        if not ok:
            raise ConfigError(msg or "aborted")
    traffic = read_traffic(ns, api_key)
    if traffic is not None:
        options = dataclasses.replace(options, traffic=traffic).validate()
    if plan is not None:
        from llmtop.cli.bakeoff import run_plan

        return run_plan(plan, options, ns)
    return run(options, ns)


def build_compare_parser() -> argparse.ArgumentParser:
    """``llmtop probe compare A.json B.json [...]``."""
    p = argparse.ArgumentParser(
        prog="llmtop probe compare",
        description="Compare probe reports (JSON): side-by-side table, change at equal load, "
        "how far the knee and the SLA boundary moved. The first report is the baseline.")
    p.add_argument("reports", nargs="+", metavar="REPORT.json")
    p.add_argument("--html", default=None, metavar="FILE",
                   help="a self-contained HTML comparison with the curves overlaid")
    p.add_argument("--svg", default=None, metavar="PREFIX", help="the overlaid charts alone")
    p.add_argument("--json", default=None, metavar="FILE", help="the comparison as JSON")
    return p


def compare_main(argv: Sequence[str]) -> int:
    """Entry point of ``llmtop probe compare``."""
    import json

    from llmtop.console.probe_view import print_comparison
    from llmtop.loadgen.compare import compare, load_runs

    ns = build_compare_parser().parse_intermixed_args(list(argv))
    _check_charts(ns)
    reports, names, skipped = load_runs(ns.reports)
    for why in skipped:
        print(f"llmtop probe compare: skipped {why}", file=sys.stderr)
    if len(reports) < 2:
        raise ConfigError("compare needs at least two runs: two probe reports, or a bake-off "
                          "report with two engines that finished a step")
    result = compare(reports, names=names)
    print_comparison(result)
    written = []
    if ns.json:
        from pathlib import Path

        Path(ns.json).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
        written.append(ns.json)
    if ns.html or ns.svg:
        from llmtop.report import write_charts

        written += write_charts(reports, html_path=ns.html, svg_prefix=ns.svg,
                                names=names, comparison=result)
    for path in written:
        print(f"wrote {path}", file=sys.stderr)
    return 0
