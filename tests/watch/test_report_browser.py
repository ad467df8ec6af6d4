"""The report in a real browser (Debian's chromium, driven by selenium): it stands alone (no network request,
no console error), its images render, and the answer to "did training help?" is on the first screen."""

from __future__ import annotations

import json
import shutil

import pytest
from report_runs import make_run

from grpo_fast.files import write_json
from grpo_fast.watch.report import write_report

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = shutil.which("chromedriver")
pytestmark = pytest.mark.skipif(not (CHROMIUM and DRIVER), reason="needs Debian's chromium and chromium-driver "
                                "(.ci/run installs them)")


@pytest.fixture
def browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1280,800"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(DRIVER))
    yield driver
    driver.quit()


def test_report_first_screen_in_chromium(browser, tmp_path):
    run = make_run(tmp_path / "run")
    write_json(run / "summary.json", {"steps": 25, "reward_first": 0.6, "reward_last": 2.4,
                                             "reward_max": 3.0, "wall_s": 400.0, "s_per_step": 16.0,
                                             "backend": "transformers"})
    write_json(run / "eval.json", {
        "metric": "accuracy", "settings": {"k": 4},
        "base": {"rows": 100, "examples": [{"prompt": "What is 3 + 4?", "completion": "3 + 4", "correct": False}]},
        "trained": {"rows": 100, "system_prompt": "Answer the question.",
                    "examples": [{"prompt": "What is 3 + 4?", "completion": "<answer>7</answer>", "correct": True}]},
        "comparison": [{"metric": "accuracy", "base": 0.05, "trained": 0.62, "delta": 0.57},
                       {"metric": "format", "base": 0.0, "trained": 0.97, "delta": 0.97}]})
    page = write_report(run)
    browser.get(page.as_uri())

    headline = browser.find_element("id", "headline")
    box = browser.execute_script("const r = arguments[0].getBoundingClientRect();"
                                 "return [r.top, r.bottom, window.innerHeight];", headline)
    assert 0 <= box[0] and box[1] <= box[2], f"headline not on the first screen: {box}"
    assert "Training helped: accuracy (greedy) 0.05 -> 0.62" in headline.text

    images = browser.execute_script("return Array.from(document.images).map(i => [i.complete, i.naturalWidth]);")
    assert len(images) >= 5 and all(done and width > 0 for done, width in images), images
    errors = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    assert errors == [], errors
    requests = [json.loads(e["message"])["message"] for e in browser.get_log("performance")]
    urls = [m["params"]["request"]["url"] for m in requests if m["method"] == "Network.requestWillBeSent"]
    assert all(u.startswith(("file:", "data:")) for u in urls), urls  # nothing leaves the machine
    browser.save_screenshot(str(tmp_path / "first_screen.png"))
    assert (tmp_path / "first_screen.png").stat().st_size > 10_000
