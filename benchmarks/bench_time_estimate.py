"""How close is the model page's time estimate to the run it predicts? (issue 16, item 5)

The app's own path, in a fresh workbench home: the estimate the model page shows (timed now on rows
from the public schema, since no run was measured yet), then a background job as the app starts it
(10% kept aside, ε = 1, the statistics measured with the default share, a review sample drawn after
training), timed from start_fit_job to its final status. Then the estimate again (now a lookup of
the costs that run stored) and a second run with the same request. Prints each estimate's seconds
and how long it took, each run's seconds and the ratio estimate / actual (the aim: within 0.7-1.3).

    python benchmarks/bench_time_estimate.py --dataset demo --preset cpu
    python benchmarks/bench_time_estimate.py --dataset adult --preset quick
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench_models import DATASETS, load_dataset  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dataset", default="demo", choices=sorted(DATASETS))
    ap.add_argument("--data-dir", default=str(ROOT.parent / "shared" / "datasets"))
    ap.add_argument("--model", default="dp-tbart")
    ap.add_argument("--preset", default="cpu")
    ap.add_argument("--epsilon", type=float, default=1.0)
    ap.add_argument("--runs", type=int, default=2)
    args = ap.parse_args()
    # no stored costs yet
    os.environ["SYNTH_WORKBENCH_HOME"] = tempfile.mkdtemp(prefix="bench-home-")

    from synth_core.privacy import default_delta
    from synth_core.privacy.budget import DEFAULT_CALIBRATION_SHARE
    from synth_core.runs import jobs
    from synth_core.runs.timing import estimate_fit_seconds

    schema, train, _ = load_dataset(DATASETS[args.dataset], Path(args.data_dir))
    holdout_share = 0.1
    n_train = len(train) - int(round(holdout_share * len(train)))
    delta = default_delta(len(train))
    request = {"model": args.model, "preset": args.preset, "epsilon": args.epsilon, "delta": delta,
               "accountant": "prv", "seed": 0, "holdout_share": holdout_share,
               "calibration_share": DEFAULT_CALIBRATION_SHARE, "public_table": True}
    print(f"{args.dataset}: {len(train)} rows ({n_train} trained on), {args.model} {args.preset}, ε = {args.epsilon:g}")
    for i in range(args.runs):
        t0 = time.perf_counter()
        est = estimate_fit_seconds(args.model, schema, args.preset, n_train, args.epsilon, delta,
                                   review_rows=jobs.review_rows_for(n_train), calibrated=True)
        took = time.perf_counter() - t0
        phases = ", ".join(f"{k} {v:.0f} s" for k, v in est["phases"].items())
        print(f"  estimate {i + 1}: {est['seconds']:.0f} s ({phases}; {est['steps']} steps of "
              f"{est['per_step_s']:.2f} s), {est['measured']}; computed in {took:.1f} s", flush=True)
        start = time.time()
        run = jobs.start_fit_job(Path(os.environ["SYNTH_WORKBENCH_HOME"]) / "runs", train, schema,
                                 {**request, "name": f"run {i + 1}"})
        # (seconds since start, the time left the train page shows, steps done, steps planned)
        said = []
        while jobs.job_state(run)["state"] in ("created", "running"):
            p = jobs.progress(run)
            if p["remaining_s"] is not None:
                said.append((time.time() - start, p["remaining_s"], p["steps_done"], p["steps_planned"]))
            time.sleep(1.0)
        status = run.status()
        actual = run.status_time() - start  # when the status was written (private/)
        print(f"  run {i + 1}: {status['state']} in {actual:.0f} s -> estimate / actual = "
              f"{est['seconds'] / actual:.2f}", flush=True)
        # the train page's time left against the time that was left, at a quarter, half and three
        # quarters
        for share in (0.25, 0.5, 0.75):
            near = min(said, key=lambda x: abs(x[0] - share * actual), default=None)
            if near is not None:
                left = actual - near[0]
                print(f"    at {near[0]:.0f} s ({near[2]} of {near[3]} {'steps'}): time left shown "
                      f"{near[1]:.0f} s, actual {left:.0f} s -> {near[1] / max(left, 1e-9):.2f}", flush=True)


if __name__ == "__main__":
    main()
