"""The CLI's review commands: `evaluate` and `report` (one table, or linked tables: the review of
synthetic rows against the real ones, with the figures, charts and a report folder) and `audit`
(a DP audit of a family's training on a table)."""
from __future__ import annotations

import json
import time
from pathlib import Path

from tqdm import tqdm

from .files import check_output_file, check_output_folder, write_atomic
from .format import duration
from .runs import RunDir, RunError
from .schema import Schema, SchemaError, left_out, read_table, schema_columns
from .schema.linked import LinkedSchema, LinkedTables, load_schema


def drawing(model, rows: int, what: str, run) -> float:
    """Says what is being drawn and, where this machine timed a run of the model, about how long it
    takes (a model draws for seconds to minutes, a calibrated one a pool first); returns the
    clock."""
    from .runs.timing import sampling_seconds
    try:
        seconds = sampling_seconds(model, str(RunDir(run).public_config().get("preset", "")), rows)
    except (RunError, OSError, ValueError):  # a config it cannot read costs only the estimate
        seconds = None
    about = (f" (about {duration(seconds)}, at this machine's last run of the model)" if seconds
             else "")
    print(f"drawing {rows:,} {what} from {run}{about}…", flush=True)
    return time.perf_counter()


class _Sections:
    """The terminal's progress bar over an evaluation's sections (`evaluate`'s progress: share done,
    section)."""

    def __init__(self):
        self.bar = tqdm(total=100, desc="evaluating", unit="%", dynamic_ncols=True)

    def __call__(self, share: float, section: str) -> None:
        self.bar.update(max(0, int(round(100 * share)) - self.bar.n))
        self.bar.set_postfix_str(f"{section} done", refresh=True)

    def close(self) -> None:
        self.bar.close()


def _labelled(items: list[str], prefix: str) -> list[tuple[str, str]]:
    out = []
    for i, item in enumerate(items):
        label, _, path = item.rpartition("=") if "=" in item else ("", "", item)
        named = (Path(path).name if prefix == "run"
                 else f"synthetic {i + 1}" if len(items) > 1 else "synthetic")
        out.append((label or named, path))
    return out


# a table too large to read whole is reviewed from a uniform random sample of this many rows
REVIEW_ROWS = 1_000_000


def _review_table(path, schema: Schema, what: str):
    """A table the review reads: the file whole, or where reading it whole would take over 1.6 GB
    (schema.batches.too_large, as `fit` decides), a uniform random REVIEW_ROWS of its rows read
    a batch at a time, said on the terminal."""
    from .files import input_file
    from .schema.batches import sample_rows, too_large
    if not too_large(input_file(path, "data file", SchemaError)):
        return read_table(path, schema)
    table, rows = sample_rows(path, REVIEW_ROWS, schema.missing_markers, schema=schema)
    if rows > len(table):
        print(f"note: {what} is too large to read whole: the review reads a random "
              f"{len(table):,} of its {rows:,} rows", flush=True)
    return table


def evaluate_command(args) -> int:
    from .evaluate import EvaluationError, build_report, quick_figures

    if args.out is not None:
        check_output_folder(args.out, "report folder")
    runs = _labelled(args.run, "run")
    files = _labelled(args.synthetic, "file")
    if not runs and not files:
        raise EvaluationError("give at least one --synthetic FILE or --run DIR")
    if args.schema:
        schema = load_schema(args.schema)
    elif runs:
        schema = RunDir(runs[0][1]).require().schema()
    else:
        raise EvaluationError("give --schema (or a --run whose schema.json is used)")
    if isinstance(schema, LinkedSchema) or args.real_child:
        return _evaluate_linked(args, schema, runs, files)
    for name, what in ((args.target, "target"), (args.sensitive, "sensitive column")):
        if name is not None and name not in schema:
            raise EvaluationError(f"the {what} {name!r} is not a column of the schema")
    # the file as the steward has it
    real, dropped = schema_columns(_review_table(args.real, schema, "the real table"), schema)
    holdout = (schema_columns(_review_table(args.holdout, schema, "the held-out table"), schema)[0]
               if args.holdout else None)
    if left_out(dropped):
        print(f"note: {left_out(dropped)}")
    synthetic, ledgers = {}, {}
    for label, path in runs:
        run = RunDir(path).require()
        sample = run.sample_path()
        if not sample.exists():
            raise EvaluationError(f"the run {path} has no {sample.relative_to(run.path)}; run "
                                  f"`sample --run {path} --out {sample}` first")
        synthetic[label] = _review_table(sample, schema, f"{label}'s sample")
        ledgers[label] = run.ledger_dict()
    for label, path in files:
        synthetic[label] = _review_table(path, schema, label)
        ledgers[label] = None
    if args.quick:
        for label, table in synthetic.items():
            print(f"{label}:")
            for f in quick_figures(real, table, schema, target=args.target, seed=args.seed):
                print(f"  {f.name:32s} {f.value:8.4f}  {f.verdict:5s} {f.meaning}")
        return 0
    sections = _Sections()
    try:
        html_path, json_path = build_report(
            real, synthetic, schema, holdout=holdout, target=args.target,
            sensitive=args.sensitive, ledger=ledgers, out_dir=args.out, seed=args.seed,
            include_umap=not args.no_umap, n_threads=args.threads, progress=sections)
    finally:
        sections.close()
    print(f"wrote {html_path} and {json_path}")
    return 0


def _evaluate_linked(args, schema, runs: list, files: list) -> int:
    """`evaluate` of linked tables: each run draws as many persons as the real table holds (--seed),
    each --synthetic folder holds parents.csv and children.csv; report.html and report.json in
    --out."""
    from . import api
    from .evaluate.linked import canonical, review_linked, write_linked_report
    from .release.export import LINKED_FILES
    if not isinstance(schema, LinkedSchema) or args.real_child is None:
        raise SchemaError("linked tables are reviewed with a linked schema (a --run of linked "
                          "tables, or --schema), --real PARENTS and --real-child CHILDREN")
    if args.out is None:
        raise SchemaError("give --out, the folder for report.html and report.json")
    real = canonical(LinkedTables(read_table(args.real, schema.parent),
                                  read_table(args.real_child, schema.child)), schema)
    synthetic, ledgers = {}, {}
    for label, path in runs:
        what = "persons with their child rows (as many as the real persons)"
        synthetic[label], _ = api.sample(
            path, len(real.parents), seed=args.seed,
            on_draw=lambda model: drawing(model, len(real.parents), what, path))
        ledgers[label] = RunDir(path).ledger_dict()
    for label, path in files:
        folder = Path(path)
        parts = (("parents", schema.parent), ("children", schema.child))
        synthetic[label] = LinkedTables(*(read_table(folder / LINKED_FILES[which], part)
                                          for which, part in parts))
    holdout = canonical(LinkedTables(read_table(args.holdout, schema.parent),
                                     read_table(args.holdout_child, schema.child)), schema) \
        if args.holdout and args.holdout_child else None
    training = " and training on the synthetic persons" if holdout is not None else ""
    print(f"measuring both levels' figures{training}…", flush=True)
    review = review_linked(real, synthetic, schema, holdout, args.target, seed=args.seed)
    html_path, json_path = write_linked_report(review, args.out, ledgers)
    print(f"wrote {html_path} and {json_path}")
    return 0


def audit_command(args) -> int:
    from .evaluate.audit import run_audit

    if args.json:
        check_output_file(args.json, "JSON file")  # before minutes of training
    table = schema = None
    if args.data or args.schema:
        if not (args.data and args.schema):
            raise SchemaError("--data and --schema go together")
        schema = Schema.load(args.schema)
        table = read_table(args.data, schema)
    options = {"epochs": args.epochs} if args.epochs else None
    print(f"training {args.model} once on base rows + {args.canaries} random canaries (each in "
          "with probability 1/2)…", flush=True)
    result = run_audit(args.model, epsilon=args.epsilon, delta=args.delta, broken=args.broken,
                       table=table, schema=schema, n_canaries=args.canaries, options=options,
                       seed=args.seed)
    print(result.summary())
    for g in result.guesses:
        print(f"  top/bottom {g['k_plus']}: {g['correct']} of {g['guesses']} guesses right "
              f"-> ε ≥ {g['epsilon_lower_bound']:.3f}")
    print(f"can prove: {result.can_prove}\ncannot prove: {result.cannot_prove}")
    if args.json:
        write_atomic(args.json, json.dumps(result.to_dict(), indent=2))
    return 1 if result.violation else 0
