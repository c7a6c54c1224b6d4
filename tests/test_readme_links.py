"""The README and the docs it leads to, read as a new user clicks through them: every
relative link and picture points at a file that exists (and a ``#heading`` at a heading
there), and every picture the README shows is one a screenshot script makes."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]

LINK = re.compile(r"!?\[[^\]]*\]\(([^()\s]+)\)")
SCRIPTS = {".svg": REPO / "scripts" / "screenshots.py",
           ".png": REPO / "scripts" / "bakeoff_screenshot.py"}
MADE_OTHERWISE = {
    "screenshots/probe-chart.svg": "llmtop probe URL --sweep --svg PREFIX against a demo vLLM "
                                   "(docs/probe.md, Charts)",
}
"""README pictures no screenshot script makes, and what made them."""


def _prose(path: Path) -> str:
    """The text without its fenced code blocks (a link there is an example, not a link)."""
    return re.sub(r"^```.*?^```", "", path.read_text(encoding="utf-8"), flags=re.S | re.M)


def links(path: Path) -> list[str]:
    """The relative targets of ``path``'s links and pictures."""
    return [t for t in LINK.findall(_prose(path))
            if not re.match(r"[a-z]+:", t)]  # http:, https:, mailto:


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower().replace("`", ""))
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for line in _prose(path).splitlines():
        if m := re.match(r"#{1,6} (.+)", line):
            s = slug(m.group(1))
            n = seen.get(s, 0)
            seen[s] = n + 1
            out.add(s if n == 0 else f"{s}-{n}")
    return out


def broken(path: Path) -> list[str]:
    out = []
    for target in links(path):
        file, _, anchor = target.partition("#")
        dest = (path.parent / file).resolve() if file else path
        if not dest.exists():
            out.append(f"{target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            out.append(f"{target}: no heading #{anchor} in {dest.name}")
    return out


def test_the_readme_leads_to_the_docs_and_pictures():
    targets = links(REPO / "README.md")
    assert sum(t.startswith("docs/") for t in targets) >= 15
    assert {"screenshots/tune-report.png", "screenshots/overview-capacity.svg"} <= set(targets)


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.relative_to(REPO).as_posix())
def test_every_link_resolves(doc):
    assert broken(doc) == []


def test_a_broken_link_is_found(tmp_path):
    (tmp_path / "b.md").write_text("# Two words\n\n## Two words\n")
    page = tmp_path / "a.md"
    page.write_text("[ok](b.md#two-words) [dup](b.md#two-words-1) [no](c.md) "
                    "[bad](b.md#three) ![pic](x.png) [web](https://example.com/c.md)\n"
                    "```\n[code](missing.md)\n```\n")
    assert broken(page) == ["c.md: no such file", "b.md#three: no heading #three in b.md",
                            "x.png: no such file"]


def test_every_readme_picture_is_made_by_a_script():
    """``screenshots/NAME.svg`` is a shot of ``scripts/screenshots.py``, ``NAME.png`` a page
    of ``scripts/bakeoff_screenshot.py``: pictures are generated, never drawn by hand."""
    pictures = [t for t in links(REPO / "README.md") if t.startswith("screenshots/")]
    assert pictures
    for pic in pictures:
        if pic in MADE_OTHERWISE:
            continue
        name = Path(pic)
        script = SCRIPTS[name.suffix].read_text(encoding="utf-8")
        assert f'"{name.name}"' in script or f'("{name.stem}"' in script, pic
