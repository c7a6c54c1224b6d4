"""The key footer, fitted to its width: whole keys only, the least important dropped first.

Textual's ``Footer`` lays every shown binding out in a row and cuts the last one at the edge
(``… l Prob`` at 80 columns). ``FitFooter`` gives each binding a rank (``RANK``, by binding
id: 0 = always shown, higher = dropped sooner) and shows, in their usual order, the most
important keys that fit whole. ``?`` (help) lists every key, shown here or not.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from rich.cells import cell_len
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import Footer
from textual.widgets._footer import FooterKey

__all__ = ["DEFAULT_RANK", "RANK", "FitFooter", "fit_keys", "key_width"]

RANK: dict[str, int] = {
    # always: leave, go back, help
    "quit": 0, "help": 0, "detail_back": 0, "gpu_back": 0, "raw_back": 0, "why_back": 0,
    "probe_stop": 0, "help_close": 0, "seek_cancel": 0, "requests_back": 0, "log_back": 0,
    # what the screen is for
    "probe_start": 1, "speed": 1, "seek": 1, "why": 1, "details": 1, "raw": 1,
    "log_search": 1, "log_errors": 1, "log_follow": 1, "log_time": 2, "log_next": 3,
    "logs": 1, "detail_logs": 1, "requests_logs": 2,
    # other screens, the screen's own tools
    "filter": 2, "raw_filter": 2, "gpus": 2, "probe": 2, "probe_form": 2, "probe_chart": 3,
    "travel": 2, "requests": 3, "requests_filter": 2, "requests_window": 3,
    # table tools (also in help)
    "sort": 3, "ranks": 4, "sort_reverse": 5, "requests_sort": 1, "requests_order": 5,
}
"""Footer rank per binding id: lower is more important, kept longer as the width shrinks."""
DEFAULT_RANK = 6
"""Rank of a shown binding that has no entry (or no id): dropped first."""


def key_width(key_display: str, description: str) -> int:
    """Cells one ``FooterKey`` takes: `` key `` then ``description `` (Textual's padding)."""
    return cell_len(key_display) + 2 + (cell_len(description) + 1 if description else 0)


def fit_keys(keys: Iterable[tuple[str | None, int]], width: int) -> list[int]:
    """Positions of the keys to show: ``keys`` are ``(binding id, width)`` in footer order;
    the most important are taken first while they fit whole; ties keep footer order."""
    items = list(keys)
    order = sorted(range(len(items)), key=lambda i: (RANK.get(items[i][0] or "", DEFAULT_RANK),
                                                     i))
    chosen: list[int] = []
    used = 0
    for i in order:
        w = items[i][1]
        if used + w > width:
            break  # a less important key never shows where a more important one does not
        chosen.append(i)
        used += w
    return sorted(chosen)


class FitFooter(Footer):
    """``Footer`` that shows only whole keys, by rank (``RANK``), refitted on resize."""

    def __init__(self, **kw: Any) -> None:
        super().__init__(show_command_palette=False, **kw)
        self._fitted_width = 0

    def _width(self) -> int:
        return self.size.width or self.app.size.width

    def compose(self) -> ComposeResult:
        if not self._bindings_ready:
            return
        self._fitted_width = self._width()
        seen: dict[str, tuple[Binding, bool, str]] = {}
        for _node, binding, enabled, tooltip in self.screen.active_bindings.values():
            if binding.show and binding.action not in seen:
                seen[binding.action] = (binding, enabled, tooltip)
        shown = list(seen.values())
        displays = [self.app.get_key_display(b) for b, _, _ in shown]
        widths = [(b.id, key_width(d, b.description)) for (b, _, _), d in zip(shown, displays,
                                                                              strict=True)]
        for i in fit_keys(widths, self._fitted_width):
            binding, enabled, tooltip = shown[i]
            yield FooterKey(binding.key, displays[i], binding.description, binding.action,
                            disabled=not enabled, tooltip=tooltip or binding.tooltip,
                            ).data_bind(compact=Footer.compact)

    def on_resize(self) -> None:
        if self._bindings_ready and self._width() != self._fitted_width:
            self.call_after_refresh(self.recompose)
