"""Issue 17's GPU checks in one process: every family on UCI Adult at ε = 1, the large presets, and
DP-LLMTGen with the GPT-2-small-sized default and with SmolLM2, each with wall time, training
rows/s, peak GPU memory and the protocol's figures (bench_models.py: 80/20 split with seed 0, TVD
1-3 on 20 quantile bins, detection and train-on-synthetic ROC-AUC with gradient boosting; DP-LLMTGen
also its time per epoch and the fairness table).

A lent GPU machine gives a session about 15 minutes in all, so one call must do a whole group of
checks inside a deadline (`--budget-s`): the table is read and torch imported once, the runs go in
order of importance, a run that would start with less than `--min-left-s` left is listed as not run,
and a run still training at the deadline is stopped (`should_stop`) and reported with what it did
(its rows/s stand; its fidelity is of a model trained on fewer steps, and the line says so). Each
run appends one JSON line to `--out` as it ends, so a call cut off keeps what was done.
`benchmarks/gpu_checks.sh` prepares what the machine lacks and calls this.

    python benchmarks/bench_gpu.py --group families --device cuda --budget-s 300 --out $OUT/gpu.jsonl
    python benchmarks/bench_gpu.py --group llm --device cuda --budget-s 330 --out $OUT/gpu.jsonl
    python benchmarks/bench_gpu.py --group families --device cpu --train-rows 2000 --preset quick  # a dry run here
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing is downloaded
# AIM's JAX must leave the GPU to torch
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import torch  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_llm import fairness_experiment  # noqa: E402
from bench_models import DATASETS, fidelity, load_dataset  # noqa: E402
from bench_tbart import peak_gpu_mib, steady_rate  # noqa: E402
from synth_core import api  # noqa: E402

# (label, family, preset, options): the order is the order of importance within a group
GROUPS: dict[str, list[tuple[str, str, str, dict]]] = {
    "families": [
        ("dp-tbart", "dp-tbart", "cpu", {}),              # issue 17's goal: ≤ 30 s on an H100
        ("tablediffusion-masked", "tablediffusion-masked", "cpu", {}),
        ("tablediffusion-denoiser", "tablediffusion-denoiser", "cpu", {}),
        ("tablediffusion", "tablediffusion", "cpu", {}),
        ("dtgan-d", "dtgan-d", "cpu", {}),
        ("dtgan-g", "dtgan-g", "cpu", {}),
        ("dp-wgan", "dp-wgan", "cpu", {}),
        ("dp-tbart paper", "dp-tbart", "paper", {}),
        ("tablediffusion-masked large", "tablediffusion-masked", "large", {}),
        ("dtgan-d large", "dtgan-d", "large", {}),
        ("aim", "aim", "cpu", {}),  # no DP-SGD; JAX, on the GPU where the image's JAX sees it; stopped between rounds
    ],
    "llm": [
        # SmolLM2 with ~460 k trained weights instead of 5.0 M (benchmarks/history: the noise per
        # step against the signal), 305 steps of 256 rows (SmolLM2 moves with the updates) at
        # learning rate 0.02 (on the CPU at a noise ratio like this one's, 0.02 took 1-way TVD from
        # 0.202 to 0.126 against 5e-3, and 0.05 diverged)
        ("dp-llmtgen smollm2 last-4 r8", "dp-llmtgen", "gpu",
         {"backbone": "smollm2", "lora_last_layers": 4, "lora_r": 8, "lora_alpha": 16, "epochs": 2,
          "batch_size": 256, "lr": 0.02}),
        # the gpu preset's pretrained recipe before 2026-11-27 (LoRA on every block, one epoch of
        # 1,024): 0.218 2-way
        ("dp-llmtgen smollm2 all blocks", "dp-llmtgen", "gpu",
         {"backbone": "smollm2", "lora_last_layers": None, "lora_r": 16, "lora_alpha": 32, "epochs": 1,
          "batch_size": 1024, "lr": 3e-3}),
        ("dp-llmtgen gpt2-small-sized default", "dp-llmtgen", "gpu", {"epochs": 1}),
        ("dp-llmtgen cpu preset", "dp-llmtgen", "cpu", {}),
    ],
}


def run_one(label, family, preset, options, data, args, deadline) -> dict:
    schema, train, test, ds = data
    if args.run_budget_s:
        deadline = min(deadline, time.monotonic() + args.run_budget_s)
    if torch.cuda.is_available():
        torch.cuda.reset_peak_memory_stats()
    stopped = {"at_deadline": False}

    def should_stop() -> bool:
        stopped["at_deadline"] = time.monotonic() > deadline
        return stopped["at_deadline"]

    estimate = (page_estimate(family, preset, options, schema, len(train), args)
                if args.estimate else {})
    t0 = time.perf_counter()
    result = api.fit(train, schema, model=family, epsilon=args.epsilon, delta=args.delta, preset=preset,
                     options=options, seed=args.seed, device=args.device, should_stop=should_stop,
                     calibration_share=0.0, public_table=True)
    t_fit = time.perf_counter() - t0
    model, r = result.model, result.model.train_result
    t1 = time.perf_counter()
    n_synth = args.sample_rows or len(train)
    synth = model.sample(n_synth, seed=args.seed)
    t_sample = time.perf_counter() - t1
    # AIM: rounds, no epochs
    epochs = getattr(model.train_config, "epochs", None) if model.uses_dp_sgd else None
    out = {"run": label, "family": family, "preset": preset, "options": options, "rows": len(train),
           "device": r.device, "torch": torch.__version__,
           "gpu": torch.cuda.get_device_name() if torch.cuda.is_available() else None,
           "epsilon_target": args.epsilon, "epsilon_spent": result.ledger.spent_epsilon,
           "steps": r.steps_done, "steps_planned": r.steps_planned, "stopped_at_deadline": stopped["at_deadline"],
           "parameters": model.n_parameters, "fit_s": t_fit, "train_s": r.seconds, "sample_s": t_sample,
           "fit_plus_sample_s": t_fit + t_sample, "train_rows_per_s": steady_rate(r.events) if r.events else None,
           "sample_rows": n_synth, "sample_rows_per_s": n_synth / t_sample, "peak_gpu_mib": peak_gpu_mib(),
           "epoch_s": (r.seconds / epochs * r.steps_planned / max(r.steps_done, 1)) if epochs else None}
    out.update(estimate)
    plan = model.plan if model.uses_dp_sgd else None
    # what the noise per step against the signal is computed from (benchmarks/history)
    if plan is not None:
        out.update(noise_multiplier=plan.noise_multiplier, expected_batch=plan.expected_batch_size,
                   trained_weights=getattr(model, "n_trainable", None))
    stage1 = getattr(model, "stage1_result", None)
    if stage1 is not None:
        out["stage1_s"] = stage1.seconds
    out["synthetic"] = fidelity(test, synth, train, schema, ds["target"], ds["task"])
    if family == "dp-llmtgen" and args.fair_rows:
        if time.monotonic() < deadline:
            out["fairness"], out["fairness_real_train"] = fairness_experiment(model, train, test, [0.0, 0.5],
                                                                              args.fair_rows, args.seed)
        else:
            out["fairness"] = "not run: past the deadline"
    return out


def page_estimate(family, preset, options, schema, rows, args) -> dict:
    """What the model page says of this fit before any run is stored: timed now, in a fresh cost
    book, on random rows from the public schema, on this machine as it is (issue 61, item 6)."""
    import tempfile

    from synth_core.privacy.split import epsilon_left
    from synth_core.runs.timing import CostBook, estimate_fit_seconds

    t = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        est = estimate_fit_seconds(family, schema, preset, rows,
                                   epsilon_left(args.epsilon, 0.0, True), args.delta,
                                   options=options, device=args.device,
                                   book=CostBook(Path(tmp) / "timings.json"))
    return {"estimate_s": est["seconds"], "estimate_steps": est["steps"],
            "estimate_took_s": time.perf_counter() - t}


def line(rec: dict) -> str:
    if "error" in rec or "skipped" in rec:
        return f"{rec['run']:<36} {rec.get('error') or rec['skipped']}"
    t, f = rec["synthetic"]["tvd"], rec["synthetic"]
    ml = f["ml"].get("roc_auc")
    gpu = f"{rec['peak_gpu_mib']:,.0f} MiB" if rec["peak_gpu_mib"] is not None else "-"
    rate = f"{rec['train_rows_per_s']:,.0f}" if rec["train_rows_per_s"] else "-"
    epoch = f"{rec['epoch_s']:.1f}" if rec["epoch_s"] else "-"
    if "estimate_s" in rec:
        ratio = rec["estimate_s"] / rec["fit_s"]
        gpu += (f"  estimate {rec['estimate_s']:.1f} s ({ratio:.2f} of the fit;"
                f" {rec['estimate_steps']} steps)")
    return (f"{rec['run']:<36} {rec['fit_s']:7.1f} {rec['sample_s']:7.1f} {rate:>9} {epoch:>7} {gpu:>11}  "
            f"{t[1]:.3f} / {t[2]:.3f} / {t[3]:.3f}  {f['detection_auc']:.3f}  "
            f"{'-' if ml is None else format(ml, '.3f')}"
            + (f"  (stopped at the deadline: {rec['steps']} of {rec['steps_planned']} steps)"
               if rec["stopped_at_deadline"] else ""))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--group", choices=sorted(GROUPS), action="append", required=True)
    ap.add_argument("--only", action="append", default=[], help="run only these labels (repeatable)")
    ap.add_argument("--data-dir", default=str(ROOT.parent / "shared" / "datasets"))
    ap.add_argument("--device", default=None)
    ap.add_argument("--epsilon", type=float, default=1.0)
    ap.add_argument("--delta", type=float, default=1e-5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--budget-s", type=float, default=300.0, help="the whole call's time for runs")
    ap.add_argument("--run-budget-s", type=float, default=None,
                    help="stop each run's training this many seconds after it starts (the runs after it get their turn)")
    ap.add_argument("--min-left-s", type=float, default=25.0, help="start no run with less than this left")
    ap.add_argument("--train-rows", type=int, default=None, help="a subset of the training split (a dry run)")
    ap.add_argument("--preset", default=None, help="every run at this preset instead (a dry run: quick)")
    ap.add_argument("--sample-rows", type=int, default=None,
                    help="synthetic rows for the figures (default: as many as the training split)")
    ap.add_argument("--fair-rows", type=int, default=5000, help="rows per fairness setting (0: none)")
    ap.add_argument("--estimate", action="store_true",
                    help="the model page's time estimate before each fit (estimate_s in its line)")
    ap.add_argument("--out", default=None, help="append one JSON line per run here")
    args = ap.parse_args()
    start = time.monotonic()
    deadline = start + args.budget_s

    ds = dict(DATASETS["adult"])
    schema, train, test = load_dataset(ds, Path(args.data_dir))
    if args.train_rows:
        train = train.sample(args.train_rows, random_state=0).reset_index(drop=True)
    data = (schema, train, test, ds)
    cuda = torch.cuda.get_device_name() if torch.cuda.is_available() else "no CUDA"
    print(f"Adult: {len(train)} training rows, {len(test)} test rows; torch {torch.__version__}, {cuda}; "
          f"budget {args.budget_s:.0f} s", flush=True)
    print(f"{'run':<36} {'fit s':>7} {'smpl s':>7} {'rows/s':>9} {'epoch s':>7} {'peak GPU':>11}  "
          f"TVD 1 / 2 / 3  detection  TSTR AUC", flush=True)
    for group in args.group:
        for label, family, preset, options in GROUPS[group]:
            if args.only and label not in args.only:
                continue
            preset = args.preset or preset
            left = deadline - time.monotonic()
            if left < args.min_left_s:
                rec = {"run": label, "skipped": f"not run: {left:.0f} s left of the budget"}
            else:
                try:
                    rec = run_one(label, family, preset, options, data, args, deadline)
                # one family's failure must not cost the others their device time
                except Exception as e:
                    rec = {"run": label, "error": f"failed: {type(e).__name__}: {e}"}
                    traceback.print_exc()
            print(line(rec), flush=True)
            if args.out:
                with open(args.out, "a") as f:
                    f.write(json.dumps(rec, default=float) + "\n")
    print(f"done in {time.monotonic() - start:.0f} s", flush=True)


if __name__ == "__main__":
    main()
