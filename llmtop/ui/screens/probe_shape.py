"""The probe form's load shapes: synthetic, like the selected engine (its length histograms
and/or prefix hit rate, the CLI's ``--lengths-from`` / ``--prefix-hit-from``) or a dataset
file (``--dataset``). The reading and checking are ``llmtop.loadgen.traffic`` /
``llmtop.loadgen.dataset``; this module only says what to read and puts the answer in words."""

from __future__ import annotations

import os
from typing import Any

from rich.text import Text
from textual.widgets import Input, Select, Static

from llmtop.ui import fmt
from llmtop.units import DASH

__all__ = ["ENGINE_MODES", "LOAD_MODES", "ShapeForm", "dataset_path", "dataset_summary",
           "engine_spec", "read_engine_shape", "shape_text"]

LOAD_MODES = (
    ("synthetic", "synthetic"),
    ("engine lengths", "lengths"),
    ("engine len.+prefix", "lengths+prefix"),
    ("engine prefix hit", "prefix"),
    ("dataset file", "dataset"),
)
"""The form's load choices (label, value); labels fit the 24-cell select at 80 columns."""
ENGINE_MODES = {"lengths": (True, False), "lengths+prefix": (True, True),
                "prefix": (False, True)}
"""Engine-shaped modes: (copy the lengths, copy the prefix hit rate)."""
WHY_LIFETIME = "one scrape when chosen"
"""The window of a reading taken in the form (the CLI's --lengths-window waits for one)."""


def engine_spec(target: Any, engine: str | None) -> str:
    """The target string ``traffic.read_signals`` scrapes: ``vllm@http://host:port/path``."""
    url = target.base_url + (target.metrics_path or "")
    eng = getattr(target, "engine", None) or engine
    return f"{eng}@{url}" if eng else url


async def read_engine_shape(spec: str, mode: str, *, api_key: str | None = None,
                            insecure: bool = False) -> dict[str, Any]:
    """``ProbeOptions.traffic`` for ``mode`` from one scrape of ``spec`` (the engine's
    lifetime, labelled so). Raises ``TrafficError`` with a message for people."""
    from llmtop.loadgen import traffic as tr

    lengths, prefix = ENGINE_MODES[mode]
    first = await tr.read_signals(spec, api_key=api_key, insecure=insecure)
    return tr.build_traffic(first, None, lengths=lengths, prefix=prefix, window_s=0,
                            why_lifetime=WHY_LIFETIME)


def _tok(v: float | None) -> str:
    return DASH if v is None else f"{v:,.0f}"


def shape_text(traffic: dict[str, Any]) -> str:
    """What was taken from the engine, e.g. ``prompt p50 412 / p95 1,830 tok``."""
    from llmtop.loadgen.traffic import dists

    parts = []
    for name, dist in zip(("prompt", "output"), dists(traffic), strict=True):
        if dist is not None:
            parts.append(f"{name} p50 {_tok(dist.quantile(0.5))} / p95 "
                         f"{_tok(dist.quantile(0.95))} tok")
    if traffic.get("prefix_hit_rate") is not None:
        parts.append(f"prefix hit {traffic['prefix_hit_rate']:.0%}")
    n = (traffic.get("prompt") or {}).get("requests")
    seen = f" over {n:,.0f} requests" if n else ""
    return (f"like {traffic.get('source')}, {traffic.get('window')}{seen}: "
            + "; ".join(parts))


def dataset_path(text: str) -> str:
    """The form's path as the probe process opens it: ``~`` expanded, absolute."""
    text = text.strip()
    return os.path.abspath(os.path.expanduser(text)) if text else ""


def dataset_summary(path: str) -> str:
    """``1,204 prompts in FILE`` once the file parses; raises ``ConfigError`` (a
    ``DatasetError`` naming the bad line) or ``OSError``."""
    from llmtop.errors import ConfigError
    from llmtop.loadgen.dataset import load_dataset

    if not path.strip():
        raise ConfigError("name a JSONL or ShareGPT JSON file of prompts")
    path = dataset_path(path)
    if not os.path.isfile(path):
        raise ConfigError(f"no such file: {path}")
    records = load_dataset(path)
    return (f"{len(records):,} prompt{'s' if len(records) != 1 else ''} in "
            f"{os.path.basename(path)}, sent as written")


class ShapeForm:
    """The probe screen's load choice (mixed into ``ProbeScreen``): reads the engine or
    checks the dataset in a worker, shows the result under the form, and says why a start
    must wait or cannot use it."""

    target: str | None
    traffic: dict[str, Any] | None
    shape_error: str | None
    shape_pending: bool
    view: Any
    app: Any
    query_one: Any
    run_worker: Any

    def on_select_changed(self, event: Select.Changed) -> None:
        if event.select.id == "pf-load":
            dataset = event.value == "dataset"
            self.query_one("#pf-dataset-row").display = dataset
            own = dataset or ENGINE_MODES.get(str(event.value), (False,))[0]
            for key in ("prompt_tokens", "output_tokens"):  # lengths come from elsewhere
                self.query_one(f"#pf-{key}", Input).disabled = own
            if dataset:
                self.query_one("#pf-dataset", Input).focus()
            self.check_shape()
            self._show_bounds()  # type: ignore[attr-defined]

    def load_mode(self) -> str:
        return str(self.query_one("#pf-load", Select).value)

    def check_shape(self) -> None:
        """Read the engine's shape or check the dataset for the chosen load (a worker)."""
        mode = self.load_mode()
        self.traffic, self.shape_error, self.shape_pending = None, None, False
        if mode == "synthetic":
            self._show_shape(Text(""))
        elif mode == "dataset":
            path = self.query_one("#pf-dataset", Input).value.strip()
            self.shape_pending = True
            self._show_shape(Text("checking the file \u2026", style="dim"))
            self.run_worker(lambda: self._dataset_checked(path), group="probe-shape",
                            exclusive=True, thread=True, exit_on_error=False)
        elif self.target is None:
            self._shape_failed("select a target on the overview first")
        else:
            self.shape_pending = True
            self._show_shape(Text(f"reading {self.target}'s traffic \u2026", style="dim"))
            self.run_worker(self._read_engine(mode), group="probe-shape", exclusive=True,
                            exit_on_error=False)

    async def _read_engine(self, mode: str) -> None:
        cfg = self.view.config
        target = next((t for t in cfg.targets if t.name == self.target), None)
        if target is None:
            self._shape_failed(f"{self.target} is not in this session's targets")
            return
        snap = self.view.snapshot
        engine = next((r.engine for r in (snap.engines if snap else [])
                       if r.target == self.target and r.engine), None)
        try:
            traffic = await read_engine_shape(
                engine_spec(target, engine), mode, api_key=target.api_key or cfg.api_key,
                insecure=not target.verify_tls)
        except Exception as exc:  # TrafficError, ConfigError: the message is for people
            if self.load_mode() == mode:
                self._shape_failed(f"cannot shape the load like {self.target}: "
                                   f"{str(exc) or type(exc).__name__}")
            return
        if self.load_mode() == mode:
            self.traffic, self.shape_pending = traffic, False
            self._show_shape(Text(shape_text(traffic)))

    def _dataset_checked(self, path: str) -> None:
        try:
            text, err = dataset_summary(path), None
        except Exception as exc:  # DatasetError names the line; OSError the file
            text, err = "", str(exc) or type(exc).__name__
        self.app.call_from_thread(self._dataset_result, path, text, err)

    def _dataset_result(self, path: str, text: str, err: str | None) -> None:
        if self.load_mode() != "dataset" or \
                self.query_one("#pf-dataset", Input).value.strip() != path:
            return  # a later choice or path is being checked
        if err:
            self._shape_failed(err)
        else:
            self.shape_pending = False
            self._show_shape(Text(text))

    def _shape_failed(self, text: str) -> None:
        self.shape_error, self.shape_pending = text, False
        self._show_shape(Text(text, style=fmt.S("gauge-crit")))

    def _show_shape(self, text: Text) -> None:
        box = self.query_one("#probe-shape", Static)
        box.update(text)
        box.display = bool(text.plain)  # synthetic: no empty line under the form

    def shape_not_ready(self) -> str | None:
        """Why the chosen load cannot start (still reading, or unusable), else None."""
        if self.load_mode() == "synthetic":
            return None
        if self.shape_error:
            return f"{self.shape_error}; choose another load"
        if self.shape_pending:
            return "still reading the load's shape: start again in a moment"
        return None
