"""The serving stack in the TUI at 80×24, keys only: routers head their backends (through
P/D pools), ``c`` folds a group, Enter opens the router detail with the TTFT path."""

from __future__ import annotations

import asyncio
import re
from dataclasses import replace

from llmtop.model import EngineRow
from llmtop.ui.fake import FakeSource, demo_snapshot
from llmtop.ui.groups import RowKind, fold_key, grouped, model_groups, stack_groups
from llmtop.ui.textshot import screen_lines

from .conftest import first_paint, make_app


def _lines(keys=(), source=None) -> list[list[str]]:
    """The screen after the first paint and after each key."""
    async def go():
        app = make_app("stack", source=source)
        async with app.run_test(size=(80, 24)) as pilot:
            await first_paint(app, pilot)
            shots = [screen_lines(app)]
            for k in keys:
                await pilot.press(k)
                await pilot.pause()
                app.paint()
                await pilot.pause()
                shots.append(screen_lines(app))
            return shots

    return asyncio.run(go())


def _rows(lines: list[str]) -> list[str]:
    """The engines table's rows: the lines between its header and the GPU lines."""
    start = next(i for i, ln in enumerate(lines) if ln.startswith(" ENGINE"))
    end = next(i for i, ln in enumerate(lines) if ln.startswith(" GPUs"))
    return lines[start + 1:end]


def test_routers_head_their_backends_and_pools():
    rows = _rows(_lines()[0])
    assert rows[0].startswith(" ▾ router :29000 rr") and "2/2 UP" in rows[0]
    assert rows[1].startswith("  vllm :8001 50%/89%")  # request share / capacity share
    assert rows[2].startswith("  vllm :8002 50%/11%") and " 1/1 " in rows[2]
    assert rows[3].startswith(" ▾ router :29001 rr") and "4/4 UP" in rows[3]
    assert rows[4].startswith("  ▾ prefill pool (2)") and " 5/8 " in rows[4]  # summed
    assert rows[5].startswith("   vllm :8101 P 50%/50%")
    assert rows[7].startswith("  ▾ decode pool (2)") and "11/32" in rows[7]
    assert rows[8].startswith("   vllm :8201 D")
    assert " 2.4s" in rows[3]  # the router's own TTFT p95


def test_fold_keys_fold_a_router_a_pool_and_back():
    shots = _lines(["c", "c", "down", "down", "down", "down", "down", "c", "c"])
    opened, folded, again, pool, pool_again = shots[0], shots[1], shots[2], shots[8], shots[9]
    assert _rows(folded)[0].startswith(" ▸ router :29000")
    assert not any(":8001" in r or ":8002" in r for r in _rows(folded))
    assert _rows(again) == _rows(opened)
    # the cursor on a member (:8101): c folds its pool, the cursor moves to the pool's row
    assert any(r.startswith("  ▸ prefill pool (2)") for r in _rows(pool))
    assert not any(":8101" in r for r in _rows(pool)) and any(":8201" in r for r in _rows(pool))
    assert _rows(pool_again) == _rows(opened)


def test_enter_opens_the_router_detail_with_the_ttft_path():
    shots = _lines(["down", "down", "down", "enter", "end"])
    assert "Router detail: vllm-router@127.0.0.1:29001" in shots[-2][0]
    assert any(ln.startswith("  healthy backends    4/4") for ln in shots[-2])
    text = "\n".join(shots[-1])  # scrolled to the end with keys: the TTFT path
    for stage in ("router", "prefill queue", "prefill", "transfer / pending"):
        assert f"\n  {stage} " in text, stage
    assert "router decode-pending" in text


def test_a_backends_detail_names_its_router_and_path():
    async def go():
        app = make_app("stack")
        async with app.run_test(size=(80, 60)) as pilot:
            await first_paint(app, pilot)
            for k in ("down", "enter"):
                await pilot.press(k)
                await pilot.pause()
            return "\n".join(screen_lines(app))

    text = asyncio.run(go())
    assert "Router: vllm-router@127.0.0.1:29000  role –" in text
    assert "requests 50% of the router's, capacity 89% of the pool's" in text
    assert "TTFT path of its router" in text and "first token" in text
    assert re.search(r"\n  transfer / pending +– +– +not reported", text)  # a dash, not 0


def test_the_routers_view_of_a_backend_shows_in_state():
    snap = demo_snapshot("stack")
    rr = snap.routers[0]
    rr.backends[1] = replace(rr.backends[1], breaker_open=True, healthy=False)
    rr.open_breakers, rr.healthy_backends = 1, 1
    rows = _rows(_lines(source=FakeSource(snap))[0])
    assert "1 BREAKER" in rows[0]
    assert rows[2].startswith("  vllm :8002") and "BREAKER" in rows[2]
    rr.open_breakers = 0
    rr.backends[1] = replace(rr.backends[1], breaker_open=False)
    rows = _rows(_lines(source=FakeSource(snap))[0])
    assert "1/2 UP" in rows[0] and "UNHEALTHY" in rows[2]


def test_one_fold_mechanism_for_model_totals_and_routers():
    """``grouped`` puts members under model totals and under routers alike; a folded head
    keeps its own row."""
    snap = demo_snapshot("stack")
    total = EngineRow(key="total|other", target="total (1)", model="other")
    lone = EngineRow(key="x@h:1|other", target="x@h:1", model="other")
    groups = model_groups([total], [lone]) + stack_groups(snap.engines, snap.routers)
    flat = [*groups.heads, lone, *snap.engines]
    keys = [r.key for r in grouped(flat, set(), groups)]
    assert keys.index("total|other") + 1 == keys.index("x@h:1|other")
    r0 = keys.index("router|vllm-router@127.0.0.1:29000")
    assert keys[r0 + 1].startswith("vllm@127.0.0.1:800")
    folded = [r.key for r in grouped(flat, {"total|other",
                                            "router|vllm-router@127.0.0.1:29001"}, groups)]
    assert "x@h:1|other" not in folded and "total|other" in folded
    assert not any(k.startswith(("pool|", "vllm@127.0.0.1:81", "vllm@127.0.0.1:82"))
                   for k in folded)


def test_what_a_row_is_comes_from_its_group_not_its_key():
    """Each head says its kind (model total, router, P/D pool), every other row is an
    engine; a total keyed any way heads its model, and a row whose key or target only looks
    like a head's (``pool|…``, ``… pool``) is an engine row in the group it belongs to."""
    snap = demo_snapshot("stack")
    total = EngineRow(key="sum of other", target="total (2)", model="other")
    look = EngineRow(key="pool|x@h:1|other", target="prefill pool", model="other")
    groups = model_groups([total], [look]) + stack_groups(snap.engines, snap.routers)
    kinds = {h.key: groups.kind(h.key) for h in groups.heads}
    assert kinds["sum of other"] is RowKind.MODEL_TOTAL
    assert kinds["router|vllm-router@127.0.0.1:29000"] is RowKind.ROUTER
    assert {k for k, v in kinds.items() if v is RowKind.POOL} == {
        f"pool|{r.target}|{role}" for r in snap.routers for role in ("prefill", "decode")
        if any(b.role == role for b in r.backends)}
    assert groups.kind(look.key) is RowKind.ENGINE
    assert all(groups.kind(r.key) is RowKind.ENGINE for r in snap.engines)
    keys = [r.key for r in grouped([*groups.heads, look, *snap.engines], set(), groups)]
    assert keys.index("sum of other") + 1 == keys.index(look.key)
    assert fold_key(groups, look.key) == "sum of other"
    assert groups.depth(look.key) == 0  # model totals do not indent
