"""The app on a table too large to read whole (issue 62, item 4): step 1 opens a file by its path,
step 3 starts a run on it, and the run's worker reads the whole file a batch at a time; the
seconds each step takes and the peak memory of the app's process and of the worker.

Drives the app in AppTest (its pages in this process, as a steward's clicks would), in a fresh
workbench home, so the budget book has never seen the file.

    python benchmarks/bench_app_large.py FILE [--model aim] [--preset quick] [--click-only]

FILE: a CSV or Parquet file whose table would take over 1.6 GB read whole (bench_scale.py writes
Adult-shaped ones: `--sizes 10000000 --stages read --keep`). --click-only cancels the run once it
has started (the steps up to the click, without the training).
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def _peak_mb() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024


def _worker_peak_mb(run) -> int:
    """The worker's peak resident memory so far (0 where it cannot be read)."""
    try:
        for line in open(f"/proc/{run.worker_pid()}/status"):
            if line.startswith("VmHWM"):
                return int(line.split()[1]) // 1024
    except (OSError, TypeError, ValueError):
        pass
    return 0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("file")
    ap.add_argument("--model", default="aim")
    ap.add_argument("--preset", default="quick")
    ap.add_argument("--click-only", action="store_true")
    args = ap.parse_args()
    os.environ["SYNTH_WORKBENCH_HOME"] = tempfile.mkdtemp(prefix="bench-app-large-")
    sys.path[:0] = [str(ROOT), str(ROOT / "tests")]
    os.chdir(ROOT)
    from streamlit.testing.v1 import AppTest
    from synth_core.runs import RunDir
    from synth_core.runs.jobs import cancel_job, job_state
    from test_app import APP, RUN_S, choose_family, choose_total, no_exceptions, texts
    out = {"file": str(args.file), "model": args.model, "preset": args.preset}

    start = time.time()
    at = AppTest.from_file(APP, default_timeout=RUN_S).run()
    at.switch_page("app_pages/data.py").run()
    at.text_input(key="open_path").set_value(str(args.file)).run()
    at.button(key="open_path_button").click().run()
    no_exceptions(at)
    out.update(open_s=round(time.time() - start, 1), app_peak_mb_after_open=_peak_mb(),
               said=texts(at.success))
    at.switch_page("app_pages/model.py").run()
    choose_total(at)
    choose_family(at, args.model)
    at.selectbox(key="preset").set_value(args.preset).run()
    at.checkbox(key="accept_draft").check().run()
    clicked = time.time()
    at.button(key="start_training").click().run()
    no_exceptions(at)
    out["click_s"] = round(time.time() - clicked, 1)
    run = RunDir(at.session_state["run_path"])
    if args.click_only:
        cancel_job(run)
    worker_peak = 0
    while job_state(run)["state"] in ("created", "running"):
        worker_peak = max(worker_peak, _worker_peak_mb(run))
        time.sleep(2)
    request = run.request()
    out.update(state=job_state(run)["state"], run_s=round(time.time() - clicked, 1),
               worker_peak_mb=worker_peak, app_peak_mb=_peak_mb(), rows=request.get("rows"),
               holdout_rows=request.get("holdout_rows"),
               worker_log=run.worker_log.read_text().splitlines()[-4:])
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
