"""DP-LLMTGen on UCI Adult: time, format compliance, fidelity, and fairness-controlled generation.

Protocol (issue 2, as bench_tbart.py): adult.csv split 80/20 with seed 0; fit on the 80% with the
declared public schema benchmarks/adult.schema.json; sample as many rows as the training split
(constrained decoding); compare with the 20% test split: mean k-way TVD (k = 1, 2, 3), detection
ROC-AUC, and train-on-synthetic / test-on-real for `income`. Format compliance is measured on the
full sample with constrained decoding and on `--unconstrained-rows` rows without it.

Fairness (DP-LLMTGen §5.4): for each share p of value-specified rows, `fair_sample` on `sex` /
`income` (positive ">50K"), then the data's demographic-parity difference, and a classifier trained
on the synthetic rows and tested on the real test split: its demographic-parity and equalized-odds
differences and accuracy.

    python benchmarks/bench_llm.py --epsilon 1 [--preset cpu] [--data ../shared/datasets/adult.csv]
    python benchmarks/bench_llm.py --train-rows 2000 --option backbone=smollm2 --fair-shares 0,0.5   (issue 17)
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing is downloaded

import torch  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_tbart import fidelity, load_split, peak_gpu_mib, peak_rss_mib, steady_rate  # noqa: E402
from synth_core import api  # noqa: E402
from synth_core.cli_args import parse_options  # noqa: E402
from synth_core.evaluate.fairness import fairness_figures  # noqa: E402
from synth_core.release.fair_sampling import fair_sample  # noqa: E402
from synth_core.models import SamplingError  # noqa: E402
from synth_core.schema import Schema  # noqa: E402


def fairness_experiment(model, train_split, test_split, shares: list[float], rows: int, seed: int):
    """DP-LLMTGen §5.4 on Adult: for each share p, `fair_sample` (p of the rows value-specified so
    that `income` >50K is balanced across `sex`) and the figures of the data and of a classifier
    trained on it, tested on the real test split; and the same figures for the real training
    split."""
    def figures_of(table, **kw):
        f = fairness_figures(table, "sex", "income", ">50K", classifier_on=table, test=test_split, seed=seed)
        return {**kw, "data_dp": f["data"]["demographic_parity_difference"],
                "clf_dp": f["classifier"]["demographic_parity_difference"],
                "clf_eo": f["classifier"]["equalized_odds_difference"],
                "clf_accuracy": f["classifier"]["accuracy"]}

    fair = []
    for p in shares:
        t0 = time.perf_counter()
        gen = fair_sample(model, rows, "sex", "income", ">50K", share=p, seed=seed, pilot_rows=rows)
        fair.append(figures_of(gen.table, share=p, seconds=time.perf_counter() - t0))
    return fair, figures_of(train_split)


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default=str(ROOT.parent / "shared" / "datasets" / "adult.csv"))
    ap.add_argument("--schema", default=str(ROOT / "benchmarks" / "adult.schema.json"))
    ap.add_argument("--epsilon", type=float, default=1.0)
    ap.add_argument("--delta", type=float, default=1e-5)
    ap.add_argument("--preset", default="cpu")
    ap.add_argument("--option", action="append", default=[], help="model/train override key=value")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", default=None)
    ap.add_argument("--rows", type=int, default=None, help="synthetic rows (default: the training split's size)")
    ap.add_argument("--train-rows", type=int, default=None,
                    help="fit on this many rows drawn from the training split (seed 0); the test split stays whole")
    ap.add_argument("--unconstrained-rows", type=int, default=2000)
    ap.add_argument("--fair-shares", default="0,0.1,0.3,0.5")
    ap.add_argument("--fair-rows", type=int, default=None, help="rows per fairness setting (default: --rows)")
    ap.add_argument("--calibration-share", type=float, default=None,
                    help="share of ε for the marginals the samples are calibrated to (default: api.fit's)")
    ap.add_argument("--json", help="also write the figures to this file")
    return ap


def _say(args, figures: dict, rows: int) -> None:
    t = figures["synthetic"]["tvd"]
    f = figures["synthetic"]
    print(f"\nε target {args.epsilon:g}, spent {figures['epsilon_spent']:.4f} (δ={args.delta:g}); σ={figures['noise_multiplier']:.3f}, "
          f"{figures['steps']} steps of ~{figures['batch_size']:.0f} rows; {figures['parameters']:,} parameters "
          f"({figures['stage2_parameters']:,} trained in stage 2) on {figures['device']}")
    print(f"fit {figures['fit_s']:.1f} s (stage 1 {figures['stage1_s']:.1f} s, stage 2 {figures['stage2_s']:.1f} s) + sample {figures['sample_s']:.1f} s "
          f"({rows} rows) = {figures['fit_plus_sample_s']:.1f} s wall; peak RSS {figures['peak_rss_mib']:.0f} MiB"
          + (f", peak GPU memory {figures['peak_gpu_mib']:.0f} MiB" if figures["peak_gpu_mib"] is not None else ""))
    print(f"format compliance: constrained {figures['format_compliance_constrained']:.1%}, unconstrained "
          + (f"{figures['format_compliance_unconstrained']:.1%} of {figures['unconstrained_rows_tried']} rows "
             f"(rejected: {figures['unconstrained_rejected']})" if args.unconstrained_rows else "not measured"))
    print(f"DP-LLMTGen synthetic 1-way {t[1]:.3f}  2-way {t[2]:.3f}  3-way {t[3]:.3f}  detection {f['detection_auc']:.3f}  "
          f"ML acc {f['ml']['accuracy']:.3f}  ML ROC-AUC {f['ml']['roc_auc']:.3f}")


def main() -> None:
    args = _parser().parse_args()
    options = parse_options(args.option)

    schema = Schema.load(args.schema)
    train_split, test_split = load_split(args.data, schema)
    if args.train_rows:
        train_split = train_split.sample(args.train_rows, random_state=0).reset_index(drop=True)
    rows = args.rows or len(train_split)
    print(f"Adult: {len(train_split)} training rows, {len(test_split)} test rows; torch threads {torch.get_num_threads()}")

    def progress(event: dict) -> None:
        if event["step"] % 10 == 0 or event["step"] == event["steps"]:
            print(f"  stage 2 step {event['step']}/{event['steps']}  loss {event['loss']:.3f}  "
                  f"ε {event['epsilon']:.3f}  {event['elapsed_s']:.0f} s", flush=True)

    t0 = time.perf_counter()
    result = api.fit(train_split, schema, model="dp-llmtgen", epsilon=args.epsilon, delta=args.delta,
                     preset=args.preset, options=options, seed=args.seed, device=args.device, on_event=progress,
                     **({} if args.calibration_share is None else {"calibration_share": args.calibration_share}),
                     public_table=True)
    t_fit = time.perf_counter() - t0
    model = result.model
    s1, s2 = model.stage1_result, model.train_result
    print(f"stage 1 (public schema, ε=0): {s1.steps_done} steps, {s1.seconds:.1f} s; stage 2 (DP-SGD): "
          f"{s2.steps_done} steps, {s2.seconds:.1f} s, ε spent {result.ledger.spent_epsilon:.4f}")

    t1 = time.perf_counter()
    synth = model.sample(rows, seed=args.seed)
    t_sample = time.perf_counter() - t1
    constrained_info = dict(model.last_sample_info)
    t2 = time.perf_counter()
    unconstrained_info = {"format_compliance": None, "rows_tried": 0, "rejected": {}}
    if args.unconstrained_rows:  # 0: not measured
        try:
            model.sample(args.unconstrained_rows, seed=args.seed + 1, constrained=False, max_tries_factor=1)
        except SamplingError:
            pass  # fewer well-formed rows than asked: the compliance figure is what we want
        unconstrained_info = dict(model.last_sample_info)
    t_unc = time.perf_counter() - t2

    figures = {
        "preset": args.preset, "options": options, "epsilon_target": args.epsilon, "delta": args.delta,
        "epsilon_spent": result.ledger.spent_epsilon, "noise_multiplier": model.plan.noise_multiplier,
        "steps": s2.steps_done, "batch_size": model.plan.expected_batch_size,
        "parameters": model.n_parameters, "stage2_parameters": model.n_trainable, "device": s2.device,
        "stage1_s": s1.seconds, "stage1_steps": s1.steps_done, "stage2_s": s2.seconds,
        "stage2_rows_per_s": steady_rate(s2.events) if s2.events else None,
        "fit_s": t_fit, "sample_s": t_sample, "sample_rows": rows, "fit_plus_sample_s": t_fit + t_sample,
        "peak_rss_mib": peak_rss_mib(), "peak_gpu_mib": peak_gpu_mib(),
        "format_compliance_constrained": constrained_info["format_compliance"],
        "format_compliance_unconstrained": unconstrained_info["format_compliance"],
        "unconstrained_rows_tried": unconstrained_info["rows_tried"],
        "unconstrained_rejected": unconstrained_info["rejected"], "unconstrained_s": t_unc,
    }
    figures["synthetic"] = fidelity(test_split, synth, train_split, schema, "income")

    _say(args, figures, rows)
    figures["fairness"], figures["fairness_real_train"] = fairness_experiment(
        model, train_split, test_split, [float(x) for x in args.fair_shares.split(",") if x.strip()],
        args.fair_rows or rows, args.seed)
    fair = figures["fairness"]

    print("fairness (sex / income >50K): share p | data DP diff | classifier DP diff | classifier EO diff | accuracy")
    for r in fair:
        print(f"  p={r['share']:.1f} | {r['data_dp']:.3f} | {r['clf_dp']:.3f} | {r['clf_eo']:.3f} | {r['clf_accuracy']:.3f}")
    rr = figures["fairness_real_train"]
    print(f"  real train | {rr['data_dp']:.3f} | {rr['clf_dp']:.3f} | {rr['clf_eo']:.3f} | {rr['clf_accuracy']:.3f}")
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2, default=float))


if __name__ == "__main__":
    main()
