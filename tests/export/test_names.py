"""``docs/exporter.md`` lists every series once, equal to ``llmtop/export/names.py``, and the
view serves nothing else."""

from __future__ import annotations

import re
from pathlib import Path

from llmtop.export import view
from llmtop.export.names import SERIES

DOC = Path(__file__).resolve().parents[2] / "docs" / "exporter.md"


def _doc_rows() -> list[tuple[str, str, tuple[str, ...]]]:
    out = []
    for line in DOC.read_text(encoding="utf-8").splitlines():
        m = re.match(r"\| `(llmtop_\w+)` \| (\w+) \| ([^|]*) \|", line)
        if m:
            labels = tuple(re.findall(r"`(\w+)`", m.group(3)))
            out.append((m.group(1), m.group(2), labels))
    return out


def test_doc_table_equals_the_code():
    rows = _doc_rows()
    assert len({r[0] for r in rows}) == len(rows), "a name listed twice"
    assert rows == [(s.name, s.kind, s.labels) for s in SERIES]


def test_the_view_serves_only_listed_names():
    src = Path(view.__file__).read_text(encoding="utf-8")
    src += Path(view.__file__).with_name("routers.py").read_text(encoding="utf-8")
    src += Path(view.__file__).with_name("kv.py").read_text(encoding="utf-8")
    used = set(re.findall(r'"(llmtop_\w+)"', src))
    names = {s.name for s in SERIES}
    assert used <= names, used - names
    from llmtop.export import names as n

    listed = {x[0] for x in (*n.ENGINE_VALUES, *n.QUANTILE_VALUES)}
    assert used | listed == names, names - used - listed
