"""What the requests screen draws, apart from the screen.

- Its columns for a width, and each request's cells (the queue / prefill / decode bar among
  them).
- The window's shape in words (from the summary of ``history.request_window``, never
  computed here) and the empty states.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

from rich.console import Group
from rich.table import Table
from rich.text import Text

from llmtop.model.request_records import InflightRequest, RequestRecord
from llmtop.ui import fmt
from llmtop.ui.fmt import DASH
from llmtop.verdict import short_target

if TYPE_CHECKING:
    from llmtop.history.request_window import RequestWindow

__all__ = ["PHASES", "SORT_LABELS", "Col", "empty_text", "inflight_cells", "matches",
           "phase_bar", "request_cells", "request_layout", "selected_text", "shape_text"]

SORT_LABELS = {"ttft_s": "TTFT", "e2e_s": "e2e", "queue_s": "queue", "prefill_s": "prefill",
               "decode_s": "decode", "prompt_tokens": "prompt tokens",
               "output_tokens": "output tokens"}
"""``history.request_window.SORT_KEYS`` in words (the order ``s`` steps through)."""

PHASES = (("queue_s", "\u2592", "yellow", "queue"), ("prefill_s", "\u2593", "cyan", "prefill"),
          ("decode_s", "\u2588", "green", "decode"))
"""(field, glyph, colour, word) of each bar segment: a glyph each, so mono still tells them
apart. What e2e holds beyond the three (detokenising, sending) is ``·``."""

BAR_MIN, BAR_MAX = 12, 40
SCROLLBAR_RESERVE = 1


class Col(NamedTuple):
    key: str
    label: str
    width: int
    right: bool = False


def request_layout(width: int) -> list[Col]:
    """The columns for a screen ``width`` cells wide; the bar takes the rest (``BAR_MIN`` ..
    ``BAR_MAX``). FINISH goes first where the room is short, then SRC; wide screens give the
    names more room."""
    wide = width >= 120
    cols = [Col("target", "ENGINE", 22 if wide else 14), Col("id", "REQUEST", 26 if wide else 13),
            Col("prompt", "PROMPT", 7, True), Col("out", "OUT", 6, True),
            Col("ttft", "TTFT", 7, True), Col("e2e", "E2E", 7, True),
            Col("bar", "QUEUE/PREFILL/DECODE", 0), Col("finish", "FINISH", 8),
            Col("src", "SRC", 8)]
    room = width - SCROLLBAR_RESERVE
    for drop in ("finish", "src"):
        if room - sum(c.width for c in cols) >= BAR_MIN:
            break
        cols = [c for c in cols if c.key != drop]
    bar = max(BAR_MIN // 2, min(BAR_MAX, room - sum(c.width for c in cols)))
    label = "QUEUE/PREFILL/DECODE" if bar >= 21 else "Q/P/D"
    return [c._replace(width=bar, label=label) if c.key == "bar" else c for c in cols]


def _cut_id(rid: str, width: int) -> str:
    """The id in ``width`` cells: its head and tail around ``…`` (the tail tells ids apart)."""
    if len(rid) <= width:
        return rid
    head = max(1, (width - 1) // 3)
    return rid[:head] + "\u2026" + rid[len(rid) - (width - 1 - head):]


def _cell(text: str, col: Col, style: str = "") -> Text:
    w = col.width - 1
    if len(text) > w:
        text = text[: max(0, w - 1)] + "\u2026"
    return Text(" " + (text.rjust(w) if col.right else text.ljust(w)), style=style,
                no_wrap=True)


def phase_bar(r: RequestRecord, width: int) -> Text:
    """``width`` cells split in proportion to the request's queue, prefill and decode over
    its end-to-end time (their sum when the engine gives no e2e); a phase of at least 2 % gets
    a cell. ``–`` when the engine said none of them."""
    parts = [(getattr(r, f), glyph, colour) for f, glyph, colour, _w in PHASES]
    known = [p for p in parts if p[0] is not None and p[0] > 0]
    total = r.e2e_s if r.e2e_s else sum(p[0] for p in known)
    if not known or not total:
        return Text(DASH.ljust(width), style="dim", no_wrap=True)
    cells: list[tuple[int, str, str]] = []
    for v, glyph, colour in known:
        share = min(1.0, v / total)
        n = round(share * width)
        cells.append((max(n, 1 if share >= 0.02 else 0), glyph, colour))
    while sum(n for n, _g, _c in cells) > width:  # rounding up: take from the largest
        i = max(range(len(cells)), key=lambda j: cells[j][0])
        cells[i] = (cells[i][0] - 1, cells[i][1], cells[i][2])
    out = Text(no_wrap=True)
    for n, glyph, colour in cells:
        out.append(glyph * n, style=colour)
    rest = width - out.cell_len
    out.append("\u00b7" * rest if r.e2e_s else " " * rest, style="dim")
    return out


def request_cells(r: RequestRecord, cols: list[Col]) -> list[Text]:
    """One finished request's cells, in ``cols`` order."""
    out = []
    for c in cols:
        if c.key == "target":
            out.append(_cell(short_target(r.target) if r.target else f"{r.engine} ?", c))
        elif c.key == "id":
            out.append(_cell(_cut_id(r.id, c.width - 1), c,
                             "magenta" if r.source == "probe" else ""))
        elif c.key == "prompt":
            out.append(_cell(fmt.fmt_num(r.prompt_tokens), c))
        elif c.key == "out":
            out.append(_cell(fmt.fmt_num(r.output_tokens), c))
        elif c.key == "ttft":
            out.append(_cell(fmt.fmt_s(r.ttft_s), c, "bold"))
        elif c.key == "e2e":
            out.append(_cell(fmt.fmt_s(r.e2e_s), c))
        elif c.key == "bar":
            bar = Text(" ", no_wrap=True)
            bar.append_text(phase_bar(r, c.width - 1))
            out.append(bar)
        elif c.key == "finish":
            out.append(_cell(r.finish_reason or DASH, c))
        else:
            out.append(_cell(r.source, c, "magenta" if r.source == "probe" else "dim"))
    return out


def inflight_cells(r: InflightRequest, cols: list[Col]) -> list[Text]:
    """A request still running: its age in E2E (``>4.2s``: at least that), its tokens so far,
    ``running`` in the bar."""
    out = []
    for c in cols:
        if c.key == "target":
            out.append(_cell(short_target(r.target), c))
        elif c.key == "id":
            slot = f" s{r.slot}" if r.slot is not None else ""
            out.append(_cell(_cut_id(f"{r.id}{slot}", c.width - 1), c))
        elif c.key == "prompt":
            out.append(_cell(fmt.fmt_num(r.prompt_tokens), c))
        elif c.key == "out":
            out.append(_cell(fmt.fmt_num(r.output_tokens), c))
        elif c.key == "e2e":
            out.append(_cell(DASH if r.age_s is None else ">" + fmt.fmt_s(r.age_s), c))
        elif c.key == "bar":
            left = (f" {r.remaining_tokens:.0f} left" if r.remaining_tokens is not None
                    else "")
            out.append(_cell(f"running{left}", c, "italic"))
        elif c.key == "finish":
            out.append(_cell("running", c, "italic"))
        elif c.key == "src":
            out.append(_cell(DASH, c, "dim"))
        else:
            out.append(_cell(DASH, c, "dim"))
    return out


def matches(r: RequestRecord | InflightRequest, needle: str) -> bool:
    """The filter: a substring of the target, engine, id, source or finish reason."""
    if not needle:
        return True
    source, reason = (r.source, r.finish_reason) if isinstance(r, RequestRecord) \
        else ("running", None)
    hay = " ".join(str(x) for x in (r.target, r.engine, r.id, source, reason or "") if x)
    return needle.lower() in hay.lower()


def _tok(v: float | None) -> str:
    return DASH if v is None else fmt.fmt_num(v)


def _targets(counts: Mapping[str, int]) -> str:
    return ", ".join(f"{short_target(t)} {n}" for t, n in
                     sorted(counts.items(), key=lambda kv: -kv[1])) or DASH


def shape_text(s: Mapping[str, Any] | None, window: str, inflight: int) -> Text:
    """The window's shape from ``RequestSummary.to_json()``: how many, the quantiles, and
    how the slowest tenth differs from the rest (prompts, queue, which engines)."""
    out = Text(no_wrap=False)
    if not s:
        return out
    n = s.get("count") or 0
    out.append(f"{n} request{'' if n == 1 else 's'}", style="bold")
    out.append(f" in {window}")
    if s.get("probe"):
        out.append(f" ({s['probe']} the probe's)", style="magenta")
    if inflight:
        out.append(f", {inflight} in flight")
    out.append(f" \u00b7 TTFT p50 {fmt.fmt_s(s.get('ttft_p50_s'))} p95 "
               f"{fmt.fmt_s(s.get('ttft_p95_s'))} \u00b7 e2e p50 {fmt.fmt_s(s.get('e2e_p50_s'))}"
               f" p95 {fmt.fmt_s(s.get('e2e_p95_s'))}")
    k = s.get("slow_count") or 0
    if not k or n < 2:
        return out
    out.append("\n")
    by = SORT_LABELS.get(s.get("by", ""), s.get("by", ""))
    unit = fmt.fmt_s if str(s.get("by", "")).endswith("_s") else _tok
    out.append(f"Slowest {k} ({by} \u2265{unit(s.get('slow_min_s'))}) vs the rest:",
               style="bold")
    bits = [f"prompt {_tok(s.get('slow_prompt_median'))} vs "
            f"{_tok(s.get('rest_prompt_median'))}",
            f"queue {fmt.fmt_s(s.get('slow_queue_median_s'))} vs "
            f"{fmt.fmt_s(s.get('rest_queue_median_s'))} (medians)"]
    if s.get("slow_queue_share") is not None:
        bits.append(f"{s['slow_queue_share'] * 100:.0f} % of their TTFT queued")
    rest, slow = s.get("rest_targets") or {}, s.get("slow_targets") or {}
    if len({*rest, *slow}) > 1:  # one engine in the window: where they ran says nothing
        bits.append(f"on {_targets(slow)} (rest: "
                    + (f"{len(rest)} engines)" if len(rest) > 1 else f"{_targets(rest)})"))
    out.append(" " + " \u00b7 ".join(bits))
    return out


def selected_text(r: RequestRecord | InflightRequest | None) -> Text:
    """The selected request in full: every id and time the engine said."""
    if r is None:
        return Text("")
    if isinstance(r, InflightRequest):
        return Text(f"{r.id} on {r.target}, slot {r.slot}, running "
                    f"{DASH if r.age_s is None else fmt.fmt_s(r.age_s)} (since llmtop first "
                    f"saw it) \u00b7 prompt {_tok(r.prompt_tokens)} \u00b7 decoded "
                    f"{_tok(r.output_tokens)} \u00b7 to go {_tok(r.remaining_tokens)}")
    line = Text(r.id, style="bold")
    line.append(f" {r.target or r.engine + ' (no row matched)'} \u00b7 {r.source}"
                + (f" trace {r.trace_id}" if r.trace_id else ""), style="dim")
    line.append(f"\nqueue {fmt.fmt_s(r.queue_s)} prefill {fmt.fmt_s(r.prefill_s)} decode "
                f"{fmt.fmt_s(r.decode_s)} \u00b7 TTFT {fmt.fmt_s(r.ttft_s)} e2e "
                f"{fmt.fmt_s(r.e2e_s)} \u00b7 prompt {_tok(r.prompt_tokens)} out "
                f"{_tok(r.output_tokens)} \u00b7 finish {r.finish_reason or DASH}")
    return line


SETUP = (
    ("vLLM", "vllm serve M --otlp-traces-endpoint http://127.0.0.1:4318/v1/traces "
             "(OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=http/protobuf)"),
    ("SGLang", "--enable-trace --otlp-traces-endpoint http://127.0.0.1:4318/v1/traces"),
    ("Triton", "--trace-config mode=opentelemetry "
               "--trace-config opentelemetry,url=http://127.0.0.1:4318/v1/traces"),
    ("llama-server", "nothing: its /slots show the requests in flight"),
)
"""What makes each engine send spans (``docs/requests.md``)."""


def empty_text(window: RequestWindow | None, window_label: str, *, replay: bool,
               filtered: str = "") -> Text | Group:
    """Why the table is empty: no receiver (how to turn it on), a receiver and no spans yet
    (what sends them), no request in the window, or the filter."""
    if filtered:
        return Text(f"No request matches {filtered!r} (esc clears the filter).", style="dim")
    head = Text()
    receiver = window.receiver if window is not None else None
    seen = window.spans_seen if window is not None else 0
    active = window is not None and window.active
    if active and seen:
        head.append(f"No request finished in the last {window_label} ({seen} spans received "
                    "so far). v widens the window.", style="bold")
        return head
    if replay and not active:
        head.append("This recording holds no request spans: it was recorded without "
                    "--otlp-listen.", style="bold")
        head.append("\nRecord with llmtop record FILE --otlp-listen 127.0.0.1:4318 "
                    "(docs/requests.md).")
        return head
    if receiver is None:
        head.append("llmtop receives no request spans.", style="bold")
        head.append("\nStart it with --otlp-listen 127.0.0.1:4318 and point the engines at "
                    "it:")
    else:
        url = receiver.get("url") or "the receiver"
        head.append(f"Listening on {url}: no spans yet.", style="bold")
        bad = receiver.get("bad") or 0
        if bad or receiver.get("last_error"):
            head.append(f" {bad} bad bodies; last error: {receiver.get('last_error')}",
                        style="yellow")
        head.append("\nThe engines send them when started with:")
    grid = Table.grid(padding=(0, 1))  # a hanging indent: wrapped flags stay in their column
    grid.add_column(no_wrap=True, style="bold")
    grid.add_column(ratio=1)
    for engine, how in SETUP:
        grid.add_row(f"  {engine}", how)
    return Group(head, grid, Text("See docs/requests.md.", style="dim"))
