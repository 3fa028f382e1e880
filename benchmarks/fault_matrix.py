"""The fault matrix of issue 40 item 3: a fit of 300 demo rows that runs every phase (noisy count,
DP bounds, quantiles, marginals, planning, training, saving, the review sample) is made to fail in
each phase by an exception, a full disk, Ctrl-C, or SIGKILL; prints, for each, the run's status as
the next reader finds it, the kinds its ledger lists, the ε its ledger charges and the ε the table's
budget charges, whether a temporary file was left, and whether `--overwrite` then reuses the folder.
Each fault runs in its own process and its own workbench home.

    python benchmarks/fault_matrix.py [--phases count,training] [--faults exception,sigkill]
    python benchmarks/fault_matrix.py --linked     # the same on linked tables: PBC's patients and their visits

With --linked the fit is of the demo's linked tables (312 patients, their 1,945 visits; the persons'
count, both levels' marginals, DP-SGD over persons, the review sample's persons): there are no DP
bounds or quantiles (a linked schema declares its bounds), so those phases are left out.
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

# the table each fit reads (both scripts): 300 demo rows whose hours-per-week has no bounds (so that
# DP bounds run) and quantiles measured, or the demo's linked tables
TABLE = r"""
def TABLE(linked):
    if linked:
        return pbcseq_tables(), pbcseq_schema(), {}
    schema = demo_schema()
    schema["hours-per-week"].lower = schema["hours-per-week"].upper = None
    return demo_table(300, seed=11), schema, dict(bounds_epsilon=0.2, quantile_share=0.2)
"""

ONE = r"""
import errno, json, os, sys
sys.path.insert(0, ROOT)
from synth_core import api, pipeline
from synth_core.demo import demo_schema, demo_table, pbcseq_schema, pbcseq_tables
from synth_core.models.base import model_class_for
from synth_core.runs import RunDir

TABLE_HERE
phase, fault, run_dir, linked = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4] == "linked"


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


if phase in ("count", "bounds", "quantiles", "marginals"):  # the mechanisms before training (synth_core.pipeline)
    name = {"count": "noisy_count", "bounds": "estimate_missing_bounds", "quantiles": "measure_quantiles",
            "marginals": "measure_person_marginals" if linked else "measure_marginals"}[phase]
    setattr(pipeline, name, after(getattr(pipeline, name)))
elif phase == "planning":  # the class the fit builds: linked tables have their own DP-TBART
    model_class_for("dp-tbart", TABLE(linked)[1]).plan_privacy = fail
elif phase == "saving":
    RunDir.save_model = fail
elif phase == "review sample":
    RunDir.write_sample = fail
table, schema, options = TABLE(linked)
try:
    api.fit(table, schema, model="dp-tbart", epsilon=3.0, preset="tiny", accountant="rdp", run_dir=run_dir,
            calibration_share=0.3, review_rows=20, table_epsilon=100.0,
            on_event=(lambda e: fail() if e["step"] == 3 else None) if phase == "training" else None, **options)
except (RuntimeError, OSError, KeyboardInterrupt) as e:
    print(type(e).__name__)
"""


READ = r"""
import json, sys
sys.path.insert(0, ROOT)
from synth_core import api
from synth_core.demo import demo_schema, demo_table, pbcseq_schema, pbcseq_tables
from synth_core.privacy.table_budget import TableBudgets
from synth_core.runs import RunDir, jobs
TABLE_HERE
run, linked = RunDir(sys.argv[1]), sys.argv[2] == "linked"
state = jobs.job_state(run)["state"]  # the next reader: a dead process is found and charged
ledger = run.ledger()
from synth_core.home import budgets_path
charge = TableBudgets(budgets_path()).charge_of(run.path, run.charge())
book = charge.account().charges[charge.key]["epsilon"]
tmp = [p.name for p in run.path.rglob("*") if ".tmp" in p.name]
table, schema, options = TABLE(linked)
again = api.fit(table, schema, model="dp-tbart", epsilon=3.0, preset="tiny", accountant="rdp", run_dir=run.path,
                calibration_share=0.3, overwrite=True, table_epsilon=100.0, **options).run.status()["state"]
print(json.dumps({"state": state, "kinds": [e.kind for e in ledger.entries], "ledger": ledger.spent_epsilon,
                  "book": book, "tmp": tmp, "overwrite": again}))
"""


def script(text: str) -> str:
    """A script as its process runs it: the checkout on its path, TABLE defined before its first
    use."""
    return text.replace("ROOT", repr(str(ROOT))).replace("TABLE_HERE", TABLE)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--phases", default=",".join(PHASES))
    ap.add_argument("--faults", default=",".join(FAULTS))
    ap.add_argument("--linked", action="store_true", help="the demo's linked tables instead of 300 demo rows")
    args = ap.parse_args()
    kind = "linked" if args.linked else "table"
    phases = [p for p in args.phases.split(",") if not (args.linked and p in ("bounds", "quantiles"))]
    short = {"noisy-count": "count", "dp-bounds": "bounds", "quantiles": "quantiles", "marginals": "marginals",
             "dp-sgd": "dp-sgd", "unfinished": "rest-of-ε"}
    print("| phase | fault | status | ledger lists | ledger ε | book ε | temp files | --overwrite |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for phase in phases:
        for fault in args.faults.split(","):
            with tempfile.TemporaryDirectory() as home:
                env = {**os.environ, "SYNTH_WORKBENCH_HOME": home, "OMP_NUM_THREADS": "1"}
                run_dir = str(Path(home) / "run")
                subprocess.run([sys.executable, "-c", script(ONE), phase, fault, run_dir,
                                kind], env=env, capture_output=True, text=True)
                done = subprocess.run([sys.executable, "-c", script(READ), run_dir, kind],
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
