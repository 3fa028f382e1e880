"""Refresh the README's screenshots: docs/model.png (step 3), docs/train.png (a run mid-training),
docs/review.png and docs/schema.png (step 2, in a 1280-pixel window).

    python docs/screenshots.py          # needs Debian's chromium and playwright (see .ci/run)

Starts the app on a free localhost port with a throw-away workspace, loads the built-in invented demo
table, trains the standard size at ε = 1 and photographs the train page while it runs and the review page
after it finishes.
"""
from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--no-first-run", "--disable-quic"]


def main() -> None:
    from playwright.sync_api import expect, sync_playwright
    expect.set_options(timeout=120_000)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    home = tempfile.mkdtemp()
    server = subprocess.Popen([sys.executable, "-m", "streamlit", "run", "app.py", "--server.port", str(port)],
                              cwd=ROOT, env={**os.environ, "SYNTH_WORKBENCH_HOME": home},
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://localhost:{port}"
    try:
        for _ in range(200):
            try:
                urllib.request.urlopen(f"{url}/_stcore/health", timeout=2)
                break
            except OSError:
                time.sleep(0.3)
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=shutil.which("chromium"), headless=True, args=ARGS)
            page = browser.new_page(viewport={"width": 1400, "height": 1300})
            page.goto(url)
            page.get_by_role("tab", name="Use a demo table").click()
            page.get_by_role("button", name="Use this demo table").click()
            expect(page.get_by_text("Loaded invented census")).to_be_visible()
            page.set_viewport_size({"width": 1280, "height": 900})  # the schema editor fits a small window
            page.get_by_role("link", name="2 · Public schema").click()
            expect(page.get_by_test_id("stDataFrame").first).to_be_visible()
            page.wait_for_timeout(1500)
            page.screenshot(path=str(ROOT / "docs" / "schema.png"))
            page.set_viewport_size({"width": 1400, "height": 1300})
            page.get_by_role("link", name="3 · Model and budget").click()
            expect(page.get_by_text("What the accountant computed", exact=True)).to_be_visible()
            expect(page.get_by_text("Auto's choice")).to_be_visible()
            page.get_by_text("Moderate harm: ε = 3 in all").click()  # the table's total, asked before its first run
            expect(page.get_by_text("3 of 3 remains")).to_be_visible()
            page.get_by_role("button", name=re.compile("Estimate training time")).click()
            estimate = page.get_by_text(re.compile(r"training rounds of [\d.]+ s"))
            expect(estimate).to_be_visible()
            estimate.scroll_into_view_if_needed()
            page.wait_for_timeout(1000)
            page.screenshot(path=str(ROOT / "docs" / "model.png"), full_page=True)
            page.get_by_role("button", name="Start training").click()
            # auto's family on the demo table at ε = 1 is AIM (rounds); a DP-SGD family shows steps
            expect(page.get_by_text(re.compile("Privacy spent per (step|round)")).first).to_be_visible()
            page.wait_for_timeout(8000)  # some rounds into the run
            page.screenshot(path=str(ROOT / "docs" / "train.png"))
            expect(page.get_by_text("Next: review the synthetic table")).to_be_visible(timeout=600_000)
            page.get_by_role("link", name="5 · Review").click()
            expect(page.get_by_text("Distance to the closest real row", exact=True)).to_be_visible()
            page.wait_for_timeout(2000)
            page.screenshot(path=str(ROOT / "docs" / "review.png"))
            browser.close()
    finally:
        server.terminate()
        shutil.rmtree(home, ignore_errors=True)
    print("wrote docs/model.png, docs/train.png, docs/review.png and docs/schema.png")


if __name__ == "__main__":
    main()
