"""Make ``screenshots/bakeoff-report.png``: the bake-off HTML report in headless Chromium.

    .venv/bin/python scripts/bakeoff_screenshot.py [REPORT.json] [--out PNG] [--height PX]

REPORT.json defaults to ``tests/fixtures/bakeoff/from-two-probes.json`` (real runs against the
demo vLLM and Triton engines, which differ; the bake-off command's own fixtures compare two
engines of the same speed, a flatter picture). The
page is written to a temporary file and opened as ``file://`` (no network); Chromium
(Debian ``chromium``) runs headless with a throwaway profile and is gone when this returns.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from llmtop.report.bakeoff import write_html

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures" / "bakeoff"


def chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if path := shutil.which(name):
            return path
    return None


def main() -> int:
    ap = argparse.ArgumentParser(description="screenshots/bakeoff-report.png")
    ap.add_argument("report", nargs="?", default=None)
    ap.add_argument("--out", default=str(ROOT / "screenshots" / "bakeoff-report.png"))
    ap.add_argument("--width", type=int, default=1100)
    ap.add_argument("--height", type=int, default=2000)
    a = ap.parse_args()
    exe = chromium()
    if exe is None:
        print("no chromium on PATH (apt-get install chromium)", file=sys.stderr)
        return 2
    src = Path(a.report) if a.report else FIXTURES / "from-two-probes.json"
    with tempfile.TemporaryDirectory() as tmp:
        page = Path(tmp) / "bakeoff.html"
        write_html(json.loads(src.read_text(encoding="utf-8")), str(page))
        out = Path(a.out).resolve()
        out.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run([exe, "--headless", "--no-sandbox", "--disable-gpu",
                        "--hide-scrollbars", f"--user-data-dir={tmp}/profile",
                        f"--window-size={a.width},{a.height}", f"--screenshot={out}",
                        page.as_uri()], check=True, timeout=120, capture_output=True)
    print(f"wrote {out.relative_to(ROOT) if out.is_relative_to(ROOT) else out} from {src.name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
