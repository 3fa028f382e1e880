"""Fairness-controlled generation (DP-LLMTGen §5.4) with any registered model on UCI Adult.

The split and the experiment of bench_llm.py: fit on 80% of Adult with the declared public schema at
ε, then for each share p `fair_sample` (p of the rows generated with conditions that balance income
>50K across sex, the rest unconditioned) and report the demographic-parity difference of the data
and of a classifier trained on it (tested on the real 20%), the classifier's equalized-odds
difference and accuracy.

    python benchmarks/bench_fairness.py --model dp-tbart --epsilon 1 --rows 5000
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_llm import fairness_experiment  # noqa: E402
from bench_tbart import load_split  # noqa: E402
from synth_core import api  # noqa: E402
from synth_core.schema import Schema  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="dp-tbart")
    ap.add_argument("--data", default=str(ROOT.parent / "shared" / "datasets" / "adult.csv"))
    ap.add_argument("--schema", default=str(ROOT / "benchmarks" / "adult.schema.json"))
    ap.add_argument("--epsilon", type=float, default=1.0)
    ap.add_argument("--delta", type=float, default=1e-5)
    ap.add_argument("--preset", default="cpu")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--rows", type=int, default=5000, help="synthetic rows per share")
    ap.add_argument("--shares", default="0,0.1,0.3,0.5")
    ap.add_argument("--json", help="also write the figures to this file")
    args = ap.parse_args()

    schema = Schema.load(args.schema)
    train_split, test_split = load_split(args.data, schema)
    t0 = time.perf_counter()
    result = api.fit(train_split, schema, model=args.model, epsilon=args.epsilon, delta=args.delta,
                     preset=args.preset, seed=args.seed, public_table=True)
    print(f"{args.model}, preset {args.preset}: fit {time.perf_counter() - t0:.0f} s, "
          f"ε spent {result.ledger.spent_epsilon:.4f} of {args.epsilon:g}")
    fair, real = fairness_experiment(result.model, train_split, test_split,
                                     [float(x) for x in args.shares.split(",") if x.strip()], args.rows, args.seed)
    print("share p | data DP diff | classifier DP diff | classifier EO diff | classifier accuracy")
    for r in fair:
        print(f"  p={r['share']:.1f} | {r['data_dp']:.3f} | {r['clf_dp']:.3f} | {r['clf_eo']:.3f} | "
              f"{r['clf_accuracy']:.3f}   ({r['seconds']:.0f} s)")
    print(f"  real train | {real['data_dp']:.3f} | {real['clf_dp']:.3f} | {real['clf_eo']:.3f} | {real['clf_accuracy']:.3f}")
    if args.json:
        Path(args.json).write_text(json.dumps({"model": args.model, "epsilon": args.epsilon, "fairness": fair,
                                               "real_train": real}, indent=2, default=float))


if __name__ == "__main__":
    main()
