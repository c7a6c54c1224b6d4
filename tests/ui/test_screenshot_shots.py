"""The README's headroom picture (``screenshots/overview-capacity.svg``, made by
``scripts/screenshots.py`` from FakeSource's ``headroom`` scenario) shows what it is there
for: the CAP column, a measured engine near its capacity, one well under it and one with no
profile (``–``). Read from the script's own ``SHOTS`` and ``SIZES``, so a change to the shot
that hides the column fails here before the picture is remade."""

from __future__ import annotations

import ast
from pathlib import Path

from llmtop.ui.widgets.engines import EnginesTable

from .conftest import first_paint, make_app

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "screenshots.py"


def _script_value(name: str):
    """A literal assigned at the script's top level (not imported: it sets TZ on import)."""
    for node in ast.parse(SCRIPT.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == name
                                                for t in node.targets):
            return ast.literal_eval(node.value)
    raise AssertionError(f"no {name} in {SCRIPT}")


async def test_the_headroom_shot_shows_the_cap_column():
    shot = next(s for s in _script_value("SHOTS") if s[0] == "overview-capacity")
    _, scenario, theme, keys = shot
    size = _script_value("SIZES")["overview-capacity"]
    app = make_app(scenario, theme=theme)
    async with app.run_test(size=size) as pilot:
        await first_paint(app, pilot)
        for k in keys:
            await pilot.press(k)
            await pilot.pause()
        table = app.screen.query_one(EnginesTable)
        lines = [table.render_line(y).text for y in range(table.size.height)]
    assert lines[0].rstrip().endswith("CAP"), lines
    cap = {line.split()[0]: line.rstrip().split()[-1] for line in lines[1:] if line.strip()}
    assert cap == {"sglang": "87%", "vllm": "62%", "triton": "–"}, lines
