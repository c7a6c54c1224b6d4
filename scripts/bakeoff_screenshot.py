"""Make the HTML reports' pictures in headless Chromium: ``screenshots/bakeoff-report.png``
(the bake-off) and ``screenshots/tune-report.png`` (the tuner).

    .venv/bin/python scripts/bakeoff_screenshot.py                 # both, from the fixtures
    .venv/bin/python scripts/bakeoff_screenshot.py REPORT.json [--out PNG] [--height PX]
    .venv/bin/python scripts/bakeoff_screenshot.py --remake-tune-fixture   # ~3 min, then both

With no REPORT both are drawn: the bake-off from ``tests/fixtures/bakeoff/from-two-probes.json``
(real runs against the demo vLLM and Triton engines, which differ; the bake-off command's own
fixtures compare two engines of the same speed, a flatter picture) and the tuner from
``tests/fixtures/tune/demo-run.json`` (a real ``llmtop tune --plan examples/tune-demo.toml``
run; its ``made_by`` says how). A REPORT's ``kind`` (``bakeoff`` or ``tune``) picks the page.
The page is written to a temporary file and opened as ``file://`` (no network); Chromium
(Debian ``chromium``) runs headless with a throwaway profile and is gone when this returns.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from llmtop.report import bakeoff, tune

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"

PICTURES = {
    # kind: (report module, default report, picture, height in px: the table and a chart)
    "bakeoff": (bakeoff, FIXTURES / "bakeoff" / "from-two-probes.json",
                ROOT / "screenshots" / "bakeoff-report.png", 2300),
    "tune": (tune, FIXTURES / "tune" / "demo-run.json",
             ROOT / "screenshots" / "tune-report.png", 1480),
}


def chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if path := shutil.which(name):
            return path
    return None


def shoot(exe: str, src: Path, out: Path | None, width: int, height: int | None) -> Path:
    """Draw ``src``'s HTML page (its ``kind`` picks bake-off or tune) to ``out`` (PNG)."""
    report = json.loads(src.read_text(encoding="utf-8"))
    module, _, default_out, default_height = PICTURES[report.get("kind", "bakeoff")]
    out = (out or default_out).resolve()
    with tempfile.TemporaryDirectory() as tmp:
        page = Path(tmp) / "report.html"
        module.write_html(report, str(page))
        out.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run([exe, "--headless", "--no-sandbox", "--disable-gpu",
                        "--hide-scrollbars", f"--user-data-dir={tmp}/profile",
                        f"--window-size={width},{height or default_height}",
                        f"--screenshot={out}", page.as_uri()],
                       check=True, timeout=120, capture_output=True)
    print(f"wrote {out.relative_to(ROOT) if out.is_relative_to(ROOT) else out} from {src.name}")
    return out


def remake_tune_fixture() -> Path:
    """Run the README's tune plan for real and save its JSON report as the tuner's fixture,
    with a ``made_by`` that says how (the run's traces stay in a temporary folder)."""
    src = PICTURES["tune"][1]
    cmd = ["llmtop", "tune", "--plan", "examples/tune-demo.toml", "--json", "tune.json"]
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "XDG_STATE_HOME": f"{tmp}/state"}  # no capacity profile saved
        started = time.monotonic()
        subprocess.run([sys.executable, "-m", "llmtop", *cmd[1:4], "--json", f"{tmp}/tune.json",
                        "--log-dir", f"{tmp}/logs"], check=True, cwd=ROOT, env=env,
                       stdin=subprocess.DEVNULL, timeout=900)
        took = time.monotonic() - started
        report = json.loads(Path(f"{tmp}/tune.json").read_text(encoding="utf-8"))
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, text=True,
                            capture_output=True).stdout.strip() or "unknown"
    made_by = (f"a real run, nothing edited but this key: {' '.join(cmd)} against the demo "
               f"vLLM it starts ({took / 60:.1f} min wall, {time.strftime('%Y-%m-%d')}, "
               f"llmtop at {commit}; scripts/bakeoff_screenshot.py --remake-tune-fixture); "
               "scripts/bakeoff_screenshot.py draws screenshots/tune-report.png from it")
    out = {"kind": report["kind"], "made_by": made_by,
           **{k: v for k, v in report.items() if k != "kind"}}
    src.write_text(json.dumps(out, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {src.relative_to(ROOT)}")
    return src


def main() -> int:
    ap = argparse.ArgumentParser(description="screenshots/bakeoff-report.png and "
                                 "screenshots/tune-report.png")
    ap.add_argument("report", nargs="?", default=None)
    ap.add_argument("--out", default=None, help="with REPORT: the PNG (default by its kind)")
    ap.add_argument("--width", type=int, default=1100)
    ap.add_argument("--height", type=int, default=None)
    ap.add_argument("--remake-tune-fixture", action="store_true",
                    help="first run examples/tune-demo.toml for real (~3 min) and save its "
                    "report as tests/fixtures/tune/demo-run.json")
    a = ap.parse_args()
    exe = chromium()
    if exe is None:
        print("no chromium on PATH (apt-get install chromium)", file=sys.stderr)
        return 2
    if a.remake_tune_fixture:
        remake_tune_fixture()
    if a.report:
        shoot(exe, Path(a.report), Path(a.out) if a.out else None, a.width, a.height)
        return 0
    for _module, src, out, _height in PICTURES.values():
        shoot(exe, src, out, a.width, a.height)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
