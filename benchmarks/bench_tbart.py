"""DP-TBART on UCI Adult: time, memory, DP vs non-private throughput, and fidelity.

Protocol (issue 2): adult.csv split 80/20 with seed 0; fit on the 80% with the declared public
schema benchmarks/adult.schema.json (category lists from the UCI documentation, round public bounds;
nothing drafted from the data); sample as many rows as the training split; compare with the 20% test
split: mean k-way TVD for k = 1, 2, 3 (numeric columns in 20 quantile bins fitted on the training
split), detection ROC-AUC (gradient boosting, 5-fold), and train-on-synthetic / test-on-real for
`income`. The same figures for the real training split itself are the floor.

    python benchmarks/bench_tbart.py --epsilon 1 [--preset cpu] [--data ../shared/datasets/adult.csv]
"""
from __future__ import annotations

import argparse
import json
import resource
import sys
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from synth_core import api  # noqa: E402
from synth_core.cli_args import parse_options  # noqa: E402
from synth_core.training.engine import train  # noqa: E402
from synth_core.evaluate import detection_auc, ml_efficacy  # noqa: E402
from synth_core.evaluate import protocol  # noqa: E402
from synth_core.models import get_model_class  # noqa: E402
from synth_core.schema import Schema, read_table, validate_table  # noqa: E402


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def peak_gpu_mib() -> float | None:
    """The most GPU memory torch held at once in this process (None without CUDA)."""
    return torch.cuda.max_memory_allocated() / 2**20 if torch.cuda.is_available() else None


def steady_rate(events: list[dict], skip: int = 2) -> float:
    """Median over steps of rows per second, the first `skip` steps (warm-up) excluded: robust to a
    passing hiccup on a shared machine."""
    ev = events[skip:] if len(events) > skip + 2 else events
    rates = [b["batch_size"] / (b["elapsed_s"] - a["elapsed_s"]) for a, b in zip(ev, ev[1:])
             if b["elapsed_s"] > a["elapsed_s"]]
    return float(np.median(rates)) if rates else float("nan")


def fidelity(real_test, synth, train_split, schema, target):
    numeric = schema.numeric_columns
    tvd = protocol.tvd(protocol.comparison(train_split, synth, real_test), numeric)
    det = detection_auc(real_test, synth, numeric)
    ml = ml_efficacy(synth, real_test, target, numeric)
    return {"tvd": tvd, "detection_auc": det, "ml": ml}


def load_split(data: str | Path, schema: Schema):
    """The protocol's split: the table validated against the public schema, shuffled with seed 0,
    the first 80% for training and the rest (index reset) for testing."""
    table, _ = validate_table(read_table(data, schema), schema)
    shuffled = table.sample(frac=1.0, random_state=0).reset_index(drop=True)
    n_train = int(round(0.8 * len(shuffled)))
    return shuffled.iloc[:n_train], shuffled.iloc[n_train:].reset_index(drop=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default=str(ROOT.parent / "shared" / "datasets" / "adult.csv"))
    ap.add_argument("--schema", default=str(ROOT / "benchmarks" / "adult.schema.json"))
    ap.add_argument("--epsilon", type=float, default=1.0)
    ap.add_argument("--delta", type=float, default=1e-5)
    ap.add_argument("--preset", default="cpu")
    ap.add_argument("--option", action="append", default=[], help="model/train override key=value")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", default=None)
    ap.add_argument("--skip-floor", action="store_true")
    ap.add_argument("--json", help="also write the figures to this file")
    ap.add_argument("--save-synth", help="also write the synthetic table to this CSV")
    args = ap.parse_args()
    options = parse_options(args.option)

    schema = Schema.load(args.schema)
    train_split, test_split = load_split(args.data, schema)
    print(f"Adult: {len(train_split)} training rows, {len(test_split)} test rows; torch threads {torch.get_num_threads()}")

    t0 = time.perf_counter()
    result = api.fit(train_split, schema, model="dp-tbart", epsilon=args.epsilon, delta=args.delta,
                     preset=args.preset, options=options, seed=args.seed, device=args.device,
                     public_table=True)
    t_fit = time.perf_counter() - t0
    model = result.model
    t1 = time.perf_counter()
    synth = model.sample(len(train_split), seed=args.seed)
    t_sample = time.perf_counter() - t1
    dp_rate = steady_rate(model.train_result.events)
    if args.save_synth:
        synth.to_csv(args.save_synth, index=False)

    # the same model, same batches, no clipping or noise: what privacy costs in speed
    np_model = get_model_class("dp-tbart")(schema, preset=args.preset, seed=args.seed, device=args.device,
                                           **{**options, "epochs": min(3.0, model.train_config.epochs)})
    np_result = train(np_model.net, np_model.encode(train_split), np_model.loss_fn, np_model.train_config, None)
    np_rate = steady_rate(np_result.events)

    figures = {
        "preset": args.preset, "options": options, "epsilon_target": args.epsilon, "delta": args.delta,
        "epsilon_spent": result.ledger.spent_epsilon, "noise_multiplier": model.plan.noise_multiplier,
        "steps": model.train_result.steps_done, "batch_size": model.plan.expected_batch_size,
        "parameters": model.n_parameters, "device": model.train_result.device,
        "fit_s": t_fit, "sample_s": t_sample, "fit_plus_sample_s": t_fit + t_sample,
        "peak_rss_mib": peak_rss_mib(), "peak_gpu_mib": peak_gpu_mib(),
        "dp_rows_per_s": dp_rate, "nonprivate_rows_per_s": np_rate, "dp_over_nonprivate": dp_rate / np_rate,
    }
    t2 = time.perf_counter()
    figures["synthetic"] = fidelity(test_split, synth, train_split, schema, "income")
    figures["eval_s"] = time.perf_counter() - t2
    if not args.skip_floor:
        figures["real_train_floor"] = fidelity(test_split, train_split, train_split, schema, "income")

    def row(name, f):
        t = f["tvd"]
        return (f"{name:<18} 1-way {t[1]:.3f}  2-way {t[2]:.3f}  3-way {t[3]:.3f}  detection {f['detection_auc']:.3f}  "
                f"ML acc {f['ml']['accuracy']:.3f}  ML ROC-AUC {f['ml']['roc_auc']:.3f}")

    print(f"\nε target {args.epsilon:g}, spent {figures['epsilon_spent']:.4f} (δ={args.delta:g}); σ={figures['noise_multiplier']:.3f}, "
          f"{figures['steps']} steps of ~{figures['batch_size']:.0f} rows; {figures['parameters']:,} parameters on {figures['device']}")
    print(f"fit {t_fit:.1f} s + sample {t_sample:.1f} s = {t_fit + t_sample:.1f} s wall; peak RSS {figures['peak_rss_mib']:.0f} MiB")
    print(f"throughput: DP-SGD {dp_rate:.0f} rows/s, non-private {np_rate:.0f} rows/s, ratio {dp_rate / np_rate:.2f}")
    print(row("DP-TBART synthetic", figures["synthetic"]))
    if "real_train_floor" in figures:
        print(row("real train (floor)", figures["real_train_floor"]))
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2, default=float))


if __name__ == "__main__":
    main()
