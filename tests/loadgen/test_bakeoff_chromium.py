"""The bake-off HTML report opened in headless Chromium (Debian ``chromium`` +
``chromium-driver``, driven by selenium): the charts are drawn (three SVGs, every engine's
curve a painted path, the knee and SLA marks present), no console error, and no request
but the ``file://`` page itself.

Skipped when Chromium, its driver or selenium is missing, unless ``LLMTOP_REQUIRE_CHROMIUM=1``
(set by ``.ci/run``, which installs them): then it fails instead.
"""

from __future__ import annotations

import json
import os
import shutil

import pytest

from llmtop.report.bakeoff import write_html

from .bakeoff_data import COMMAND, REAL, failed, synthetic

pytest.importorskip("pygal")
REQUIRED = os.environ.get("LLMTOP_REQUIRE_CHROMIUM") == "1"


def _missing() -> str | None:
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (pip install -e '.[test]')"
    if not (shutil.which("chromium") or shutil.which("chromium-browser")):
        return "no chromium on PATH (apt-get install chromium)"
    if not shutil.which("chromedriver"):
        return "no chromedriver on PATH (apt-get install chromium-driver)"
    return None


@pytest.fixture
def browser(tmp_path):
    why = _missing()
    if why:
        if REQUIRED:
            pytest.fail(f"LLMTOP_REQUIRE_CHROMIUM=1 but {why}")
        pytest.skip(why)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = shutil.which("chromium") or shutil.which("chromium-browser")
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--no-first-run", "--disable-extensions", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--window-size=1100,1400",
                f"--user-data-dir={tmp_path / 'profile'}", "--remote-debugging-port=0"):
        opts.add_argument(arg)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    service = Service(executable_path=shutil.which("chromedriver"), port=0)
    driver = webdriver.Chrome(options=opts, service=service)
    try:
        yield driver
    finally:
        driver.quit()


CURVES_JS = """
const out = [];
for (const svg of document.querySelectorAll('.chart svg')) {
  const title = (svg.querySelector('.title') || {}).textContent || '';
  const paths = [...svg.querySelectorAll('.series path.line')].map(p => {
    const b = p.getBBox();
    return {len: p.getTotalLength(), w: b.width, h: b.height};
  });
  const dots = svg.querySelectorAll('.series .dots').length;
  const labels = [...svg.querySelectorAll('text')].map(t => t.textContent);
  const r = svg.getBoundingClientRect();
  out.push({title, paths, dots, labels, w: r.width, h: r.height});
}
return out;
"""


def _open(driver, path) -> list[dict]:
    driver.get("about:blank")  # off Chromium's own new-tab page and its chrome:// requests
    driver.get_log("performance")  # drained: what is logged next is the report's
    driver.get_log("browser")
    driver.get(path.as_uri())
    assert driver.execute_script("return document.readyState") == "complete"
    return driver.execute_script(CURVES_JS)


def _requests(driver) -> list[str]:
    urls = []
    for entry in driver.get_log("performance"):
        msg = json.loads(entry["message"])["message"]
        if msg.get("method") == "Network.requestWillBeSent":
            urls.append(msg["params"]["request"]["url"])
    return urls


def test_report_draws_every_engines_curves_offline(browser, tmp_path):
    rep = synthetic(3)
    rep["endpoints"].append(failed())
    page = tmp_path / "bakeoff.html"
    write_html(rep, str(page))
    charts = _open(browser, page)
    assert [c["title"] for c in charts] == ["Output tok/s vs load", "TTFT p95 vs load",
                                            "TTFT p95 vs output tok/s"]
    for c in charts:
        assert c["w"] > 300 and c["h"] > 200, c  # laid out, not collapsed
        drawn = [p for p in c["paths"] if p["len"] > 50 and (p["w"] > 50 or p["h"] > 50)]
        assert len(drawn) >= 3, c["title"]  # one painted curve per engine that ran
        text = " ".join(c["labels"])
        assert "fast-engine: knee c=8" in text and "fast-engine: SLA boundary c=16" in text
        assert "slow-engine: knee = SLA boundary c=4" in text
    errors = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    assert errors == []
    urls = _requests(browser)
    assert urls and all(u.startswith("file://") for u in urls), urls


@pytest.mark.parametrize("fixture", [REAL, COMMAND], ids=["from-two-probes", "from-command"])
def test_real_fixture_report_opens_clean(browser, tmp_path, fixture):
    page = tmp_path / "real.html"
    write_html(json.loads(fixture.read_text(encoding="utf-8")), str(page))
    charts = _open(browser, page)
    assert len(charts) == 3
    for c in charts:
        assert sum(1 for p in c["paths"] if p["len"] > 50) >= 2, c["title"]  # both engines
    assert [e for e in browser.get_log("browser") if e["level"] == "SEVERE"] == []
    assert all(u.startswith("file://") for u in _requests(browser))
