"""How soon does the app answer after `streamlit run app.py`? (issue 41 item 9)

Starts the app on a free localhost port with a throw-away workbench home, then measures, in Debian's
chromium driven by Playwright: the seconds from starting the server until its health check answers,
until the first page's title is drawn in a fresh browser tab, and the first page drawn again in a
second tab (the modules then imported). Prints each of `--runs` starts, then the median.

    python benchmarks/bench_app_start.py --runs 3
"""
from __future__ import annotations

import argparse
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--no-first-run", "--disable-quic"]


def one_start(browser) -> tuple[float, float, float]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    home = tempfile.mkdtemp(prefix="app-start-")
    start = time.perf_counter()
    server = subprocess.Popen([sys.executable, "-m", "streamlit", "run", "app.py", "--server.port", str(port),
                               "--server.headless", "true"], cwd=ROOT,
                              env={**os.environ, "SYNTH_WORKBENCH_HOME": home},
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://localhost:{port}"
    try:
        while True:
            try:
                if urllib.request.urlopen(f"{url}/_stcore/health", timeout=2).read() == b"ok":
                    break
            except OSError:
                time.sleep(0.05)
        healthy = time.perf_counter() - start
        times = []
        for _ in range(2):
            page = browser.new_page()
            opened = time.perf_counter()
            page.goto(url)
            page.get_by_text("1 · Your data").first.wait_for(timeout=120_000)
            times.append(time.perf_counter() - (start if not times else opened))
            page.close()
        return healthy, times[0], times[1]
    finally:
        server.terminate()
        server.wait(10)
        shutil.rmtree(home, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    from playwright.sync_api import sync_playwright
    rows = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=shutil.which("chromium"), headless=True, args=ARGS)
        for i in range(args.runs):
            rows.append(one_start(browser))
            print(f"start {i + 1}: health check {rows[-1][0]:.2f} s, first page drawn {rows[-1][1]:.2f} s after "
                  f"the start, again in a new tab {rows[-1][2]:.2f} s", flush=True)
        browser.close()
    med = [statistics.median(r[k] for r in rows) for k in range(3)]
    print(f"median: health check {med[0]:.2f} s, first page {med[1]:.2f} s, a new tab {med[2]:.2f} s")


if __name__ == "__main__":
    main()
