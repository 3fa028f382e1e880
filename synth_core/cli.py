"""`python -m synth_core`: draft a schema, fit a run, sample from it.

    python -m synth_core schema draft --data adult.csv --out adult.schema.json --missing "?"
    python -m synth_core fit --data adult.csv --schema adult.schema.json --model dp-tbart --epsilon 1 --out runs/adult
    python -m synth_core sample --run runs/adult --rows 1000 --out synth.csv --condition sex=Female
    python -m synth_core evaluate --real train.csv --holdout test.csv --run runs/adult --target income --out review
    python -m synth_core audit --epsilon 1 [--broken noise-off]

Errors in the input are reported as one plain line (exit code 2), never as a traceback. Ctrl-C
during `fit` stops between steps and keeps the model trained so far (the run is marked cancelled).
"""
from __future__ import annotations

import json
import os
import signal
import sys
import time
from contextlib import suppress
from pathlib import Path

from tqdm import tqdm

# Only what every command needs is imported here: the commands that train or sample import the
# models (and so torch and Opacus) when they run, so that --help, `runs` and the schema commands
# answer at once.
from .cli_args import FAMILY_COMMANDS, build_parser, parse_options
from .cli_review import audit_command, drawing, evaluate_command
from .cli_schema import read_tables, schema_command
from .errors import ProcessLost, SamplingError
from .format import duration, epsilon as epsilon_text, runs as runs_text
from .models.recommend import AUTO
from .privacy.budget import BudgetError
from .request import FitRequest
from .files import atomic_output, check_output_file
from .home import budgets_path
from .release.export import to_csv
from .privacy.table_budget import NotThisRun, TableBudgets
from .runs import RunDir, RunError
from .schema import Schema, SchemaError
from .schema.linked import LinkedSchema, load_schema
from .shape import shape_of


def _fit(args) -> int:
    from .training import distributed
    schema = load_schema(args.schema)
    request = _request(args)
    table = _engine_table(args, schema, request) or read_tables(args, schema)
    # under torchrun: one run across its processes (training.distributed)
    group = distributed.init_from_env()
    try:
        return _fit_table(args, table, schema, request, overwrite=args.overwrite)
    except (SchemaError, BudgetError, RunError, SamplingError, ValueError):
        if group.is_main:
            raise
        return 2  # every rank refuses alike: rank 0 says it
    finally:
        distributed.shutdown()
        if hasattr(table, "close"):
            table.close()


def _engine_table(args, schema, request: FitRequest):
    """The table counted by the embedded engine, never read whole (encoding/engine.py), where
    `--engine` asks for it, or where the file is too large to read whole (schema.batches.too_large)
    and the model takes such a table (`from_engine`, or auto among its candidates); None:
    read it whole."""
    from .encoding.engine import TableStore
    from .schema.batches import too_large
    if not shape_of(schema).engine or not (args.engine or too_large(args.data)):
        return None
    try:
        request.engine_families(schema)
    except (SchemaError, ValueError):
        if args.engine:  # asked for: what it cannot do, in one line
            raise
        return None  # read whole, as before (up to files.FILE_LIMIT)
    print(f"reading {args.data} a batch at a time into the counting engine…", flush=True)
    return TableStore.from_file(args.data, schema)


def _demo(args) -> int:
    from . import api
    from .demo import demo_schema, demo_table
    from .models.options import check_sample_rows
    if args.csv is not None:
        path = check_output_file(args.csv, "CSV file")
        schema_path = check_output_file(path.with_suffix(".schema.json"), "schema file")
        with atomic_output(path) as f:
            to_csv(demo_table(), f)
        demo_schema().save(schema_path)
        print(f"wrote {path} (4,000 invented census-like rows) and its public schema {schema_path}; try:\n"
              f"  python -m synth_core fit --data {path} --schema {schema_path} --model auto --epsilon 1 "
              f"--out {path.parent / 'runs' / 'demo'}")
        return 0
    check_sample_rows(args.rows)  # before the demo trains
    print("demo: 4,000 invented census-like rows (age, sex, education, job, hours, capital gain, income); "
          "the schema is declared public in synth_core/demo.py")
    # invented rows: no one to protect across runs, so no table budget to draw from
    request = FitRequest(model="dp-tbart", epsilon=args.epsilon, preset=args.preset, device=args.device,
                         options={"epochs": args.epochs} if args.epochs is not None else {}, public_table=True)
    code = _fit_table(args, demo_table(), demo_schema(), request, overwrite=True)
    run = RunDir(args.out)
    table, _ = api.sample(args.out, args.rows, seed=0)
    path = run.write_sample(table)
    print(f"\nwrote {len(table)} synthetic rows to {path}; the first five:")
    print(table.head().to_string(index=False))
    print(f"\nprivacy ledger: {run.ledger_path}")
    return code


def _request(args) -> FitRequest:
    """`fit`'s options as the one fit request (its defaults are the request's)."""
    options = {k: v for k, v in {
        "epochs": args.epochs, "batch_size": args.batch_size, "lr": args.lr, "max_grad_norm": args.max_grad_norm,
        "n_bins": args.bins, "random_order": True if args.random_order else None,
        "numeric_decoding": "midpoint" if args.midpoint else None,
    }.items() if v is not None}
    options.update(parse_options(args.option))
    return FitRequest(model=args.model, epsilon=args.epsilon, delta=args.delta, accountant=args.accountant,
                      preset=args.preset, options=options, bounds_epsilon=args.bounds_epsilon,
                      values_epsilon=args.values_epsilon,
                      calibration_share=args.calibration_share, quantile_share=args.quantile_share, seed=args.seed,
                      device=args.device, accept_draft=args.accept_draft, public_table=args.public_table,
                      table_epsilon=args.table_epsilon, book_table=args.book_table, new_table=args.new_table,
                      table_name=Path(args.data).name if getattr(args, "data", None) else None)


class _Progress:
    """The terminal's progress bar over a run's events: the mechanism's steps or rounds, as the
    events call them (a plan whose steps adapt, AIM's rounds, changes its total as it goes)."""

    def __init__(self):
        self.bar = None

    def __call__(self, e: dict) -> None:
        try:
            if self.bar is None:
                self.bar = tqdm(total=e["steps"], unit=str(e.get("unit", "steps")).rstrip("s"),
                                desc=str(e.get("mechanism", "training")), dynamic_ncols=True)
            self.bar.total = max(e["steps"], e["step"])
            self.bar.update(e["step"] - self.bar.n)
            figures = {"loss": f"{e['loss']:.3f}" if e["loss"] is not None else "-",
                       "eps": f"{e['epsilon']:.3f}"}
            if e.get("samples_per_s") is not None:
                figures["rows_s"] = f"{e['samples_per_s']:.0f}"
            self.bar.set_postfix(**figures, refresh=False)
        except OSError:  # the terminal went away (a closed pipe): the fit goes on, unseen
            self.bar = tqdm(disable=True)

    def close(self) -> None:
        if self.bar is not None:
            with suppress(OSError):
                self.bar.close()


def _fit_table(args, table, schema, request: FitRequest, overwrite: bool = False) -> int:
    from . import api
    from .models import get_model_class
    from .training import distributed
    stop = {"asked": False}

    def on_sigint(signum, frame):
        if stop["asked"]:
            raise KeyboardInterrupt
        stop["asked"] = True
        with suppress(OSError):  # the reader went away (a closed pipe): the stop goes on, unsaid
            tqdm.write("stopping after this step; the model trained so far is kept "
                       "(Ctrl-C again to abort)")

    group = distributed.current()
    # every problem at once, before anything is said or spent
    request.check(schema, group.world_size)
    if group.is_main:
        processes = f" across {group.world_size} processes" if group.active else ""
        if request.model == AUTO:
            print(f"choosing a model for ε = {request.epsilon:g} and planning its noise{processes}…", flush=True)
        else:
            print(f"{get_model_class(request.model).planning_note(request.epsilon, request.accountant)}{processes}…",
                  flush=True)
    previous = signal.signal(signal.SIGINT, on_sigint)
    # SIGTERM (kill, a service manager, torchrun stopping its processes) as a Ctrl-C: the run ends
    # cancelled, its ledger and the table's budget saying what it spent
    previous_term = signal.signal(signal.SIGTERM, on_sigint)
    progress = _Progress()
    try:
        result = api.fit(table, schema, request, run_dir=args.out, overwrite=overwrite,
                         on_event=progress if group.is_main else None, should_stop=lambda: stop["asked"])
    finally:
        signal.signal(signal.SIGINT, previous)
        signal.signal(signal.SIGTERM, previous_term)
        progress.close()
    if group.is_main:  # rank 0 reports and writes the run
        _say_fitted(result, request)
    return 0


def _say_fitted(result, request: FitRequest) -> None:
    """What a finished fit says on the terminal: warnings, notes, the steps, the privacy spent,
    auto's choice, the marginals, the table's budget, where the run is."""
    for w in result.warnings:
        print(f"warning: {w}", file=sys.stderr)
    for line in result.validation.summary():
        print(f"note: {line}")
    r, plan = result.model.train_result, result.model.plan
    if plan.steps_adapt:  # an adaptive mechanism's rounds end when its budget does
        done = f"{r.steps_done} {plan.unit}" + (f" of about {r.steps_planned}" if r.cancelled else "")
        print(f"{result.run.status()['state']}: {done}, {r.seconds:.1f} s on {r.device}")
    else:
        unit = shape_of(result.schema).unit
        print(f"{result.run.status()['state']}: {r.steps_done}/{r.steps_planned} {plan.unit}, {r.seconds:.1f} s on "
              f"{r.device}, {r.samples_per_second:.0f} {unit}/s")
    print(f"privacy: ε spent {result.ledger.spent_epsilon:.4f} of {request.epsilon:g} "
          f"(δ = {result.ledger.target_delta:g}, {plan.describe()})")
    config = result.run.public_config()
    auto = config.get("auto")
    if auto:
        size = type(result.model).size_of(auto["preset"])  # the family auto chose, as trained
        print(f"auto chose {auto['family']} ({size} size, calibration share "
              f"{auto['calibration_share']:g}): {auto['reason']}")
    if result.model.calibration is not None:
        print(f"marginals: {len(result.model.calibration.marginals)} measured with noise (share "
              f"{config['calibration_share']:g} of ε, composed with training); samples are calibrated to them")
    if result.table_charge is not None:
        account = result.table_charge.account()
        print(f"this table: ε {epsilon_text(account.spent_epsilon)} spent of {epsilon_text(account.total_epsilon)} "
              f"across its runs, {epsilon_text(account.remaining_epsilon)} left")
    print(f"run saved in {result.run.path}")


def _sample(args) -> int:
    from . import api
    from .models.calibration import summary as calibration_summary
    schema = RunDir(args.run).require().schema()
    conditions = api.parse_conditions(schema, args.condition)
    linked = isinstance(schema, LinkedSchema)
    started = []
    table, info = api.sample(args.run, args.rows, conditions=conditions, seed=args.seed, out=args.out,
                             device=args.device, on_draw=lambda model: started.append(drawing(
                                 model, args.rows, "persons with their child rows" if linked else "rows", args.run)))
    took = f" in {duration(time.perf_counter() - started[0])}"
    if linked:
        print(f"wrote {len(table.parents)} persons to {info['paths']['parents']} and their {len(table.children)} "
              f"child rows to {info['paths']['children']}{took}")
        return 0
    drawn = info.get("rows", len(table))
    msg = f"wrote {drawn} rows to {args.out}{took}" + (
        f" (in {info['parts']} parts, each a sample of its own)" if info.get("parts") else "")
    if info.get("method") == "rejection":
        msg += f" (rejection sampling on {', '.join(info['rejection_columns'])}: acceptance rate {info['acceptance_rate']:.1%})"
    calibrated = calibration_summary(info.get("calibration"), len(table))  # the last part's
    if calibrated:
        msg += f"; {calibrated}"
    print(msg)
    return 0


def _runs(args) -> int:
    if args.book or args.rebuild_book:
        from .cli_book import book_command
        return book_command(args)
    if not args.run:
        raise ValueError("give a run folder (runs RUN), or --book to see every table's budget")
    run = RunDir(args.run).require()
    from .runs.jobs import run_summary
    # first: a run whose process died is marked so, and charged in its ledger
    summary = run_summary(run)
    ledger = run.ledger()
    out = {"summary": summary, "ledger": ledger.to_dict()}
    book = TableBudgets(budgets_path())
    record = run.charge()
    table_id = book.table_of_run(record)
    if record is not None:
        try:
            book.charge_of(run.path, record)
        # a copy, a move, an edited charge.json: said, and it settles nothing
        except NotThisRun as e:
            out["not_its_charge"] = str(e)
    if table_id is not None:
        account = book.account(table_id)
        out["table"] = {"epsilon_total": account.total_epsilon, "epsilon_spent": account.spent_epsilon,
                        "epsilon_remaining": account.remaining_epsilon, "runs": len(account.charges)}
    if args.json:
        print(json.dumps(out, indent=2))
        return 0
    summary = out["summary"]
    print(f"run {run.path}: {summary.get('state')}" + (f" ({summary['message']})" if summary.get("message") else ""))
    if summary.get("model"):
        print(f"model: {summary['model']}")
    print(f"privacy: ε {ledger.spent_epsilon:.4g} spent of {ledger.target_epsilon:g}, δ = {ledger.target_delta:.1e}; "
          f"{ledger.composition}")
    width = max((len(e.mechanism) for e in ledger.entries), default=0)
    for e in ledger.entries:
        print(f"  {e.mechanism:<{width}}  ε {e.epsilon:<8.4g} δ {e.delta:.1e}")
    for w in ledger.warnings():
        print(f"warning: {w}")
    if "not_its_charge" in out:
        print(f"note: {out['not_its_charge']}")
    if "table" in out:
        t = out["table"]
        print(f"this table: ε {epsilon_text(t['epsilon_spent'])} spent of {epsilon_text(t['epsilon_total'])} across "
              f"{runs_text(t['runs'])}, {epsilon_text(t['epsilon_remaining'])} left")
    return 0


def _forecast(args) -> int:
    from .benchmark_model import floor
    from .forecast import check_forecast_rows, forecast
    # before the schema is read
    rows = None if args.rows is None else check_forecast_rows(args.rows)
    schema = load_schema(args.schema)  # a linked one too, which `forecast` refuses in words
    if rows is None and isinstance(schema, Schema):
        rows = schema.rows
        if rows is None:
            raise ValueError("give --rows N: the number of rows, or an upper bound you can state publicly (the "
                             "schema declares none)")
    made = forecast(schema, args.epsilon, rows, args.model, args.delta, calibration_share=args.calibration_share)
    if args.json:
        print(json.dumps({**made.to_dict(), "floor": {k: v.to_dict() for k, v in floor(schema, rows).items()}},
                         indent=2))
        return 0
    print(f"{made.model} at ε = {args.epsilon:g} (δ = {made.delta:g}) on {rows:,} rows: counts released by "
          f"{made.source}" + (f", noise σ = {made.noise_std:.3g} on each" if made.noise_std is not None else ""))
    for c in made.columns:
        print(f"  {c.column}: {c.words()}")
    from .benchmark_model import FIGURES
    for what, interval in made.figures.items():
        print(f"{FIGURES[what]}: about {interval.expected:.3f} (80% interval {interval.low:.3f} to {interval.high:.3f}), "
              "from the project's benchmark results")
    if made.figures:
        print(f"  each as the review will measure it: {made.compares}")
    if made.figures_note:
        print(f"fidelity figures: none ({made.figures_note})")
    if made.extrapolation and made.figures:
        print(f"note: {made.extrapolation}")
    bottom = floor(schema, rows).get("tvd2")
    if bottom is not None:
        print(f"the table's own rows against unseen ones (no ε does better): 2-way TVD about {bottom.expected:.3f}")
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    command = next((a for a in argv if not a.startswith("-")), None)
    args = build_parser(families=command in FAMILY_COMMANDS).parse_args(argv)
    run = {"schema": schema_command, "fit": _fit, "sample": _sample, "demo": _demo,
           "evaluate": evaluate_command, "report": evaluate_command, "audit": audit_command,
           "runs": _runs, "forecast": _forecast}[args.command]
    try:
        code = run(args)
    except (SchemaError, BudgetError, RunError, SamplingError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except ProcessLost as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    # the reader went away (`| head`): nothing to say, and nowhere to say it (below)
    except BrokenPipeError:
        code = 0
    # a file that cannot be read or written: permissions, a full disk, a missing folder
    except OSError as e:
        where = f" ({e.filename})" if getattr(e, "filename", None) else ""
        print(f"error: {e.strerror or e}{where}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("aborted", file=sys.stderr)
        return 130
    # what is left to say, unless its reader went away (a closed pipe: a fit's cancel stays one)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except OSError:
            os.dup2(os.open(os.devnull, os.O_WRONLY), stream.fileno())
    return code
