"""`python -m synth_core`: draft a schema, fit a run, sample from it.

    python -m synth_core schema draft --data adult.csv --out adult.schema.json --missing "?"
    python -m synth_core fit --data adult.csv --schema adult.schema.json --model dp-tbart --epsilon 1 --out runs/adult
    python -m synth_core sample --run runs/adult --rows 1000 --out synth.csv --condition sex=Female

Errors in the input are reported as one plain line (exit code 2), never as a traceback. Ctrl-C during
`fit` stops between steps and keeps the model trained so far (the run is marked cancelled).
"""
from __future__ import annotations

import argparse
import json
import signal
import sys
from pathlib import Path

from tqdm import tqdm

from . import api
from .models import MODELS
from .privacy import ACCOUNTANTS, BudgetError
from .runs import RunError
from .schema import Schema, SchemaError, draft_schema, read_table
from .models.base import SamplingError


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m synth_core", description="Differentially private synthetic tables.")
    sub = p.add_subparsers(dest="command", required=True)

    sch = sub.add_parser("schema", help="work with public schemas")
    sch_sub = sch.add_subparsers(dest="schema_command", required=True)
    d = sch_sub.add_parser("draft", help="draft a schema by READING THE DATA (marked unconfirmed until you confirm it)")
    d.add_argument("--data", required=True, help="CSV or Parquet file")
    d.add_argument("--out", required=True, help="where to write the schema JSON")
    d.add_argument("--missing", action="append", default=[], help="a string that marks a missing value (repeatable)")
    d.add_argument("--max-categories", type=int, default=50)
    c = sch_sub.add_parser("confirm", help="state that every fact in a schema is public")
    c.add_argument("schema")
    v = sch_sub.add_parser("check", help="check a table against a schema")
    v.add_argument("--data", required=True)
    v.add_argument("--schema", required=True)

    f = sub.add_parser("fit", help="train a DP model and save it as a run")
    f.add_argument("--data", required=True, help="the private table (CSV or Parquet)")
    f.add_argument("--schema", required=True, help="the public schema (JSON)")
    f.add_argument("--model", default="dp-tbart", choices=sorted(MODELS))
    f.add_argument("--epsilon", type=float, required=True, help="total privacy budget ε")
    f.add_argument("--delta", type=float, default=None, help="δ (default: a power of ten below 1/rows)")
    f.add_argument("--accountant", default="prv", choices=ACCOUNTANTS)
    f.add_argument("--preset", default="cpu", help="model size preset (cpu, paper, tiny)")
    f.add_argument("--epochs", type=float)
    f.add_argument("--batch-size", type=int, help="expected Poisson batch size")
    f.add_argument("--lr", type=float)
    f.add_argument("--max-grad-norm", type=float)
    f.add_argument("--random-order", action="store_true", help="random column order per row (exact conditioning on any column)")
    f.add_argument("--bins", type=int, help="bins per numeric column (default 100)")
    f.add_argument("--midpoint", action="store_true", help="decode a numeric bin to its midpoint instead of a uniform draw")
    f.add_argument("--bounds-epsilon", type=float, default=0.0,
                   help="part of ε to spend estimating numeric bounds the schema lacks (DP quantiles)")
    f.add_argument("--seed", type=int, default=0)
    f.add_argument("--device", default=None, help="cpu, cuda, cuda:1 (default: cuda when available)")
    f.add_argument("--out", required=True, help="run directory to create")
    f.add_argument("--overwrite", action="store_true")

    s = sub.add_parser("sample", help="sample synthetic rows from a run")
    s.add_argument("--run", required=True)
    s.add_argument("--rows", type=int, required=True)
    s.add_argument("--out", required=True, help="CSV to write")
    s.add_argument("--condition", action="append", default=[], help="column=value to fix (repeatable)")
    s.add_argument("--seed", type=int, default=None)
    s.add_argument("--device", default=None)

    dm = sub.add_parser("demo", help="train and sample on a built-in demo table (invented rows, no files)")
    dm.add_argument("--epsilon", type=float, default=1.0)
    dm.add_argument("--out", default="runs/demo", help="run directory (default runs/demo)")
    dm.add_argument("--rows", type=int, default=1000, help="synthetic rows to write to <out>/samples/synthetic.csv")
    dm.add_argument("--preset", default="cpu")
    dm.add_argument("--epochs", type=float)
    dm.add_argument("--device", default=None)

    r = sub.add_parser("runs", help="show a run's status and ledger")
    r.add_argument("run")
    return p


def _fit(args) -> int:
    schema = Schema.load(args.schema)
    table = read_table(args.data, schema)
    return _fit_table(args, table, schema)


def _demo(args) -> int:
    from .demo import demo_schema, demo_table
    print("demo: 4,000 invented census-like rows (age, sex, education, job, hours, capital gain, income); "
          "the schema is declared public in synth_core/demo.py")
    args.model, args.delta, args.accountant, args.seed, args.overwrite = "dp-tbart", None, "prv", 0, True
    args.batch_size = args.lr = args.max_grad_norm = args.bins = None
    args.random_order = args.midpoint = False
    args.bounds_epsilon = 0.0
    code = _fit_table(args, demo_table(), demo_schema())
    out = Path(args.out) / "samples" / "synthetic.csv"
    table, _ = api.sample(args.out, args.rows, seed=0, out=out)
    print(f"\nwrote {len(table)} synthetic rows to {out}; the first five:")
    print(table.head().to_string(index=False))
    print(f"\nprivacy ledger: {Path(args.out) / 'ledger.json'}")
    return code


def _fit_table(args, table, schema) -> int:
    options = {k: v for k, v in {
        "epochs": args.epochs, "batch_size": args.batch_size, "lr": args.lr, "max_grad_norm": args.max_grad_norm,
        "n_bins": args.bins, "random_order": True if args.random_order else None,
        "numeric_decoding": "midpoint" if args.midpoint else None,
    }.items() if v is not None}
    stop = {"asked": False}

    def on_sigint(signum, frame):
        if stop["asked"]:
            raise KeyboardInterrupt
        stop["asked"] = True
        tqdm.write("stopping after this step; the model trained so far is kept (Ctrl-C again to abort)")

    previous = signal.signal(signal.SIGINT, on_sigint)
    bar = None

    def on_event(e: dict) -> None:
        nonlocal bar
        if bar is None:
            bar = tqdm(total=e["steps"], unit="step", desc="DP-SGD", dynamic_ncols=True)
        bar.update(1)
        bar.set_postfix(loss=f"{e['loss']:.3f}" if e["loss"] is not None else "-",
                        eps=f"{e['epsilon']:.3f}", rows_s=f"{e['samples_per_s']:.0f}", refresh=False)

    print(f"calibrating noise for ε = {args.epsilon:g} with the {args.accountant.upper()} accountant…", flush=True)
    try:
        result = api.fit(table, schema, model=args.model, epsilon=args.epsilon, delta=args.delta,
                         accountant=args.accountant, preset=args.preset, options=options,
                         bounds_epsilon=args.bounds_epsilon, seed=args.seed, device=args.device,
                         run_dir=args.out, overwrite=args.overwrite, on_event=on_event,
                         should_stop=lambda: stop["asked"])
    finally:
        signal.signal(signal.SIGINT, previous)
        if bar is not None:
            bar.close()
    for w in result.warnings:
        print(f"warning: {w}", file=sys.stderr)
    for line in result.validation.summary():
        print(f"note: {line}")
    r = result.model.train_result
    print(f"{result.run.status()['state']}: {r.steps_done}/{r.steps_planned} steps, {r.seconds:.1f} s on {r.device}, "
          f"{r.samples_per_second:.0f} rows/s")
    print(f"privacy: ε spent {result.ledger.spent_epsilon:.4f} of {args.epsilon:g} (δ = {result.ledger.target_delta:g}, "
          f"{args.accountant.upper()} accountant, σ = {result.model.plan.noise_multiplier:.3f})")
    print(f"run saved in {result.run.path}")
    return 0


def _sample(args) -> int:
    from .runs import RunDir
    schema = RunDir(args.run).require().schema()
    conditions = api.parse_conditions(schema, args.condition)
    table, info = api.sample(args.run, args.rows, conditions=conditions, seed=args.seed, out=args.out,
                             device=args.device)
    msg = f"wrote {len(table)} rows to {args.out}"
    if info.get("method") == "rejection":
        msg += f" (rejection sampling on {', '.join(info['rejection_columns'])}: acceptance rate {info['acceptance_rate']:.1%})"
    print(msg)
    return 0


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "schema":
            if args.schema_command == "draft":
                table = read_table(args.data, missing_markers=args.missing)
                schema = draft_schema(table, max_categories=args.max_categories, missing_markers=args.missing)
                schema.save(args.out)
                print(f"wrote {args.out}: {len(schema.columns)} columns, DRAFTED FROM THE DATA. Edit the bounds and "
                      "categories into public facts, then run `python -m synth_core schema confirm` on it; "
                      "until then every run using it is flagged.")
            elif args.schema_command == "confirm":
                schema = Schema.load(args.schema).confirm()
                schema.save(args.schema)
                print(f"{args.schema}: confirmed as public")
            else:
                schema = Schema.load(args.schema)
                from .schema import validate_table
                _, report = validate_table(read_table(args.data, schema), schema)
                print(f"{report.rows} rows fit the schema")
                for line in report.summary():
                    print(f"note: {line}")
            return 0
        if args.command == "fit":
            return _fit(args)
        if args.command == "sample":
            return _sample(args)
        if args.command == "demo":
            return _demo(args)
        if args.command == "runs":
            from .runs import RunDir
            run = RunDir(args.run).require()
            print(json.dumps({"summary": run.summary(), "ledger": run.ledger().to_dict()}, indent=2))
            return 0
    except (SchemaError, BudgetError, RunError, SamplingError, ValueError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("aborted", file=sys.stderr)
        return 130
    return 1
