"""Rows per second of DP-SGD in 1 and several processes under torchrun (issue 18, item 5).

The same `fit` command, launched by torchrun with N processes (gloo on the CPU, nccl with one GPU
each on CUDA), the threads of the machine's cores shared out between the processes on the CPU.
Reports, per N: the wall time of the whole command, training seconds, the steady rows/s over the
steps (median, warm-up excluded), the ε spent and the processes the ledger records. The row count is
declared public, so every N trains the same plan (σ, q, steps) and only the speed differs.

    python benchmarks/bench_distributed.py --dataset adult --processes 1 2
    python benchmarks/bench_distributed.py --dataset adult --processes 1 2 4 8 --preset large   # a GPU machine
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench_models import DATASETS, load_dataset, steady_rate  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dataset", default="adult", choices=sorted(DATASETS))
    ap.add_argument("--data-dir", default=str(ROOT.parent / "shared" / "datasets"))
    ap.add_argument("--model", default="dp-tbart")
    ap.add_argument("--preset", default="cpu")
    ap.add_argument("--epochs", type=float, default=1.0)
    ap.add_argument("--epsilon", type=float, default=1.0)
    ap.add_argument("--processes", type=int, nargs="+", default=[1, 2])
    args = ap.parse_args()

    import torch
    from synth_core.runs import RunDir

    schema, train, _ = load_dataset(DATASETS[args.dataset], Path(args.data_dir))
    schema = dataclasses.replace(schema, rows=len(train))  # public: the same plan for every N
    work = Path(tempfile.mkdtemp(prefix="bench-dist-"))
    data, schema_path = work / "train.csv", work / "schema.json"
    train.to_csv(data, index=False)
    schema.save(schema_path)
    cores = os.cpu_count() or 1
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    print(f"{args.dataset}: {len(train):,} training rows, {args.model} ({args.preset}), {args.epochs:g} epochs, "
          f"ε = {args.epsilon:g}; {cores} CPU cores, {gpus} GPUs")
    print("| processes | wall s | training s | rows/s (steady) | steps | ε spent | ledger processes |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    base = None
    for n in args.processes:
        out = work / f"run-{n}"
        threads = max(1, cores // n) if not gpus else 1
        env = {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads),
               "PYTHONPATH": str(ROOT), "SYNTH_WORKBENCH_HOME": str(work / f"home-{n}")}  # a table budget each
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={n}",
               "-m", "synth_core", "fit", "--data", str(data), "--schema", str(schema_path), "--model", args.model,
               "--preset", args.preset, "--epochs", str(args.epochs), "--epsilon", str(args.epsilon),
               "--calibration-share", "0", "--out", str(out)]
        started = time.perf_counter()
        done = subprocess.run(cmd, env=env, cwd=work, capture_output=True, text=True)
        wall = time.perf_counter() - started
        if done.returncode:
            errors = [line for line in (done.stdout + done.stderr).splitlines() if line.startswith("error:")]
            print(f"| {n} | failed: {errors[0] if errors else done.stderr.strip()[-2000:]} |")
            continue
        run = RunDir(out)
        training = json.loads((out / "training.json").read_text())
        rate = steady_rate(run.events())
        base = base or rate
        (entry,) = [e for e in run.ledger().entries if e.kind == "dp-sgd"]
        print(f"| {n} | {wall:.1f} | {training['seconds']:.1f} | {rate:,.0f} ({rate / base:.2f}×) | "
              f"{training['steps_done']} | {run.ledger().spent_epsilon:.4f} | {entry.details.get('processes', 1)} |")


if __name__ == "__main__":
    main()
