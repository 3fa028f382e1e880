"""The fault matrix of issue 40 item 3: a fit of 300 demo rows that runs every phase (noisy count, DP bounds,
quantiles, marginals, planning, training, saving, the review sample) is made to fail in each phase by an exception,
a full disk, Ctrl-C, or SIGKILL; prints, for each, the run's status as the next reader finds it, the kinds its
ledger lists, the ε its ledger charges and the ε the table's budget charges, whether a temporary file was left, and
whether `--overwrite` then reuses the folder. Each fault runs in its own process and its own workbench home.

    python benchmarks/fault_matrix.py [--phases count,training] [--faults exception,sigkill]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PHASES = ["count", "bounds", "quantiles", "marginals", "planning", "training", "saving", "review sample"]
FAULTS = ["exception", "disk full", "ctrl-c", "sigkill"]

ONE = r"""
import errno, json, os, sys
sys.path.insert(0, ROOT)
from synth_core import api
from synth_core.demo import demo_schema, demo_table
from synth_core.models import get_model_class
from synth_core.runs import RunDir

phase, fault, run_dir = sys.argv[1], sys.argv[2], sys.argv[3]


def fail(*args, **kwargs):
    if fault == "exception":
        raise RuntimeError("injected")
    if fault == "disk full":
        raise OSError(errno.ENOSPC, "No space left on device")
    if fault == "ctrl-c":
        raise KeyboardInterrupt
    os._exit(9)  # SIGKILL's effect: no handler, no finally


def after(real):
    return lambda *a, **k: (real(*a, **k), fail())[0]


if phase in ("count", "bounds", "quantiles", "marginals"):
    name = {"count": "noisy_count", "bounds": "estimate_missing_bounds", "quantiles": "measure_quantiles",
            "marginals": "measure_marginals"}[phase]
    setattr(api, name, after(getattr(api, name)))
elif phase == "planning":
    get_model_class("dp-tbart").plan_privacy = fail
elif phase == "saving":
    RunDir.save_model = fail
elif phase == "review sample":
    RunDir.write_sample = fail
schema = demo_schema()
schema["hours-per-week"].lower = schema["hours-per-week"].upper = None  # so that DP bounds run
try:
    api.fit(demo_table(300, seed=11), schema, model="dp-tbart", epsilon=3.0, preset="tiny", accountant="rdp",
            run_dir=run_dir, bounds_epsilon=0.2, calibration_share=0.3, quantile_share=0.2, review_rows=20,
            table_epsilon=100.0, on_event=(lambda e: fail() if e["step"] == 3 else None) if phase == "training"
            else None)
except (RuntimeError, OSError, KeyboardInterrupt) as e:
    print(type(e).__name__)
"""

READ = r"""
import json, sys
sys.path.insert(0, ROOT)
from synth_core import api
from synth_core.demo import demo_schema, demo_table
from synth_core.privacy.table_budget import TableBudgets
from synth_core.runs import RunDir, jobs
run = RunDir(sys.argv[1])
state = jobs.job_state(run)["state"]  # the next reader: a dead process is found and charged
ledger = run.ledger()
charge = run.charge()
book = TableBudgets(charge["book"]).account(charge["table"]).charges[charge["key"]]["epsilon"]
tmp = [p.name for p in run.path.rglob("*") if ".tmp" in p.name]
schema = demo_schema()
schema["hours-per-week"].lower = schema["hours-per-week"].upper = None
again = api.fit(demo_table(300, seed=11), schema, model="dp-tbart", epsilon=3.0, preset="tiny", accountant="rdp",
                run_dir=run.path, bounds_epsilon=0.2, calibration_share=0.3, quantile_share=0.2, overwrite=True,
                table_epsilon=100.0).run.status()["state"]
print(json.dumps({"state": state, "kinds": [e.kind for e in ledger.entries], "ledger": ledger.spent_epsilon,
                  "book": book, "tmp": tmp, "overwrite": again}))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--phases", default=",".join(PHASES))
    ap.add_argument("--faults", default=",".join(FAULTS))
    args = ap.parse_args()
    short = {"noisy-count": "count", "dp-bounds": "bounds", "quantiles": "quantiles", "marginals": "marginals",
             "dp-sgd": "dp-sgd", "unfinished": "rest-of-ε"}
    print("| phase | fault | status | ledger lists | ledger ε | book ε | temp files | --overwrite |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for phase in args.phases.split(","):
        for fault in args.faults.split(","):
            with tempfile.TemporaryDirectory() as home:
                env = {**os.environ, "SYNTH_WORKBENCH_HOME": home, "OMP_NUM_THREADS": "1"}
                run_dir = str(Path(home) / "run")
                subprocess.run([sys.executable, "-c", ONE.replace("ROOT", repr(str(ROOT))), phase, fault, run_dir],
                               env=env, capture_output=True, text=True)
                done = subprocess.run([sys.executable, "-c", READ.replace("ROOT", repr(str(ROOT))), run_dir],
                                      env=env, capture_output=True, text=True)
                try:
                    r = json.loads(done.stdout.strip().splitlines()[-1])
                except (IndexError, json.JSONDecodeError):
                    print(f"| {phase} | {fault} | could not read: {done.stderr.strip().splitlines()[-1:]} |")
                    continue
                kinds = ", ".join(short.get(k, k) for k in r["kinds"])
                print(f"| {phase} | {fault} | {r['state']} | {kinds} | {r['ledger']:.3f} | {r['book']:.3f} | "
                      f"{len(r['tmp'])} | {r['overwrite']} |", flush=True)


if __name__ == "__main__":
    main()
