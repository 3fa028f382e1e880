"""The synthesis core's front door, used by the CLI and the app: fit a run, sample from a run.

fit: one FitRequest (synth_core.request) run through the stages of synth_core.pipeline: admit it,
pay for what precedes training, build the model and its plan, train, save, settle the table's
budget; everything is kept in a run directory. sample: load a run's model and write synthetic rows.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import pandas as pd

from . import pipeline
from .encoding.engine import Counting
from .files import atomic_output, check_output_file, check_output_folder
from .models import SynthModel
from .models.options import MAX_FILE_ROWS, MAX_SAMPLE_ROWS, check_sample_rows
from .privacy import PrivacyLedger
from .privacy.table_budget import TableCharge
from .release.export import to_csv, write_linked
from .request import REVIEW_RELEASED, FitRequest  # noqa: F401 - REVIEW_RELEASED: the API's name for it
from .runs import RunDir, RunError
from .runs.lifecycle import Events, keep_ledger, open_run, say_ended, say_training
from .schema import Schema, SchemaError, ValidationReport, validate_table
from .schema.linked import LinkedSchema, LinkedTables
from .shape import shape_of
from .training import distributed
from .runs.timing import RunClock


@dataclass
class FitResult:
    model: SynthModel
    ledger: PrivacyLedger
    validation: ValidationReport
    run: RunDir | None
    schema: Schema
    warnings: list[str] = field(default_factory=list)
    table_charge: TableCharge | None = None  # what the run drew from its table's budget


def fit(table: pd.DataFrame, schema: Schema, request: FitRequest | str | None = None, *,
        run_dir: str | Path | RunDir | None = None, overwrite: bool = False,
        on_event: Callable[[dict], None] | None = None, should_stop: Callable[[], bool] | None = None,
        table_charge: TableCharge | None = None, **options) -> FitResult:
    """Train a model on the private `table` within the request's budget (ε, δ) and return it with
    its ledger.

    request: what to fit (synth_core.request.FitRequest: the model or "auto", ε, δ, shares, …; its
    defaults are the only ones), or a model's name; `options` change single fields of it
    (`fit(table, schema, "aim", epsilon=1)`).
    run_dir: a path for a new run directory, or a RunDir already created (by a background job).
    The table's budget across runs (privacy.table_budget): every fit draws from it. The whole ε is
    reserved first, under a charge of the run's own (refused if the table has less left), and what
    the ledger spent is settled however the run ends. table_charge: the charge to draw (reserved
    already by a background job); by default the workbench home's book. The stages are
    synth_core.pipeline's.
    If the run folder is deleted during training, training stops after the step and RunGone is
    raised; the folder is never re-created."""
    if isinstance(request, str):
        request = FitRequest(model=request)
    if request is not None and not isinstance(request, FitRequest):
        raise TypeError(f"a fit request is a FitRequest or a model's name, not {type(request).__name__}")
    request = (request or FitRequest()).replace(**options)
    # several processes under torchrun: rank 0 alone writes and pays what precedes training
    group = distributed.current()
    admitted = pipeline.admit(table, schema, request, group.world_size)
    ledger = pipeline.open_ledger(admitted)
    table_charge = pipeline.charge(admitted, table, table_charge, run_dir, group.is_main)
    try:
        run = open_run(run_dir, overwrite, table_charge, writes=group.is_main)
        keep_ledger(run, ledger)
        prepared = isinstance(run_dir, RunDir)  # by a background job, with its schema and request
        # its phases
        clock = RunClock(run.request().get("created") if prepared and run is not None else None)
        try:
            paid, rows, report = _pay(admitted, ledger, group)
            ledger = paid.ledger
            built = pipeline.build(paid, group.share)
            # the schema the run trains with, unless a job wrote it and no bounds changed it
            if run is not None:
                say_training(run, pipeline.run_config(dataclasses.replace(admitted, report=report), paid, built,
                                                      charged=table_charge is not None), ledger,
                             schema=paid.schema if not prepared or paid.schema is not schema else None)
            pipeline.train(built, rows, paid, Events(run, on_event, should_stop), clock)
            pipeline.save(run, built, paid, clock)
        except BaseException as e:
            say_ended(run, ledger, e)
            raise
        return FitResult(model=built.model, ledger=ledger, validation=report, run=run, schema=paid.schema,
                         warnings=pipeline.warnings_after(admitted, paid), table_charge=table_charge)
    finally:
        if table_charge is not None:
            # what the run spent, from the ledger in memory, however it ended
            table_charge.settle(ledger)


def _pay(admitted: pipeline.Admitted, ledger: PrivacyLedger, group) -> tuple:
    """pipeline.pay on rank 0 (alone, under torchrun: it sends what was paid to the others, whose
    rows are then validated against the same bounds)."""
    mine: dict = {}

    def compute() -> pipeline.Paid:
        paid, mine["rows"], mine["report"] = pipeline.pay(admitted, ledger, group.world_size)
        return paid

    paid = group.share(compute)
    if "rows" in mine:
        return paid, mine["rows"], mine["report"]
    if paid.schema.to_dict() != admitted.schema.to_dict():
        if isinstance(admitted.rows, Counting):  # a table the engine holds: held there
            return paid, admitted.rows, admitted.rows.held_to(paid.schema)
        return (paid, *validate_table(admitted.rows, paid.schema))
    return paid, admitted.rows, admitted.report


def load_model(run_dir: str | Path, device: str | None = None) -> SynthModel:
    """The trained model of a run that completed or was cancelled (a cancelled run keeps what it
    learned)."""
    run = RunDir(run_dir).require()
    state = run.status().get("state")
    if state not in ("completed", "cancelled"):
        raise RunError(f"the run at {run.path} is {state}, not completed or cancelled: it has no trained model to sample")
    if not run.has_model():
        raise RunError(f"the run at {run.path} has no trained model (state: {state})")
    from .models.base import SynthModel as _Base
    return _Base.load(run.model_dir, device=device)


def parse_conditions(schema: Schema | LinkedSchema, pairs: list[str]) -> dict:
    """"col=value" strings to a conditions dict, with numbers for numeric columns (linked tables:
    the parents')."""
    if isinstance(schema, LinkedSchema):
        schema.check_conditions({pair.split("=", 1)[0].strip(): None for pair in pairs if "=" in pair
                                 and pair.split("=", 1)[0].strip() in schema.child})  # a child column: refused
        schema = schema.parent
    conditions = {}
    for pair in pairs:
        if "=" not in pair:
            raise SchemaError(f"a condition is written column=value, not {pair!r}")
        name, value = pair.split("=", 1)
        name = name.strip()
        if name not in schema:
            raise SchemaError(f"cannot condition on {name!r}: no such column")
        if name in conditions:
            raise SchemaError(f"column {name!r} is fixed twice; a row has one value in each column: give one "
                              "--condition for it")
        if schema[name].is_numeric:
            try:
                conditions[name] = float(value)
            except ValueError:
                raise SchemaError(f"column {name!r} is numeric; {value!r} is not a number") from None
        else:
            conditions[name] = value
    # values the columns can hold, before a model is loaded
    return schema.check_conditions(conditions)


# a draw of more rows than this into a file is drawn and written a part at a time where the
# table's shape allows (single tables: rows are independent), each part a sample of its own
# (calibrated where the run measured marginals): memory holds a part, not the table (10M rows of
# Adult held whole are some 8 GB; benchmarks/RESULTS.md, "Scale curve")
PART_ROWS = 1_000_000


def _sample_in_parts(model: SynthModel, rows: int, conditions, seed, out: Path) -> tuple:
    """`rows` rows drawn PART_ROWS at a time into the CSV `out` (written atomically, as a whole
    draw is); returns the first part and the draw's info (`rows`: all of them, `parts`)."""
    sizes = [PART_ROWS] * (rows // PART_ROWS) + ([rows % PART_ROWS] if rows % PART_ROWS else [])
    first, info = None, {}
    with atomic_output(out, make_parent=False) as f:
        for i, size in enumerate(sizes):
            part = model.sample(size, conditions=conditions,
                                seed=None if seed is None else seed + 104_729 * i)
            to_csv(part, f, header=i == 0)
            first = part if first is None else first
            info = dict(model.last_sample_info)
    info.update(rows=rows, parts=len(sizes), path=str(out))
    return first, info


def sample(run_dir: str | Path, rows: int, conditions: dict | None = None, seed: int | None = None,
           out: str | Path | None = None, device: str | None = None,
           on_draw: Callable[[SynthModel], None] | None = None) -> tuple[pd.DataFrame | LinkedTables, dict]:
    """Sample `rows` synthetic rows from a saved run, optionally writing a CSV; returns (table,
    info). A run on linked tables draws `rows` persons with their child rows (LinkedTables), and
    `out` is a folder that receives parents.csv and children.csv. `on_draw(model)`: called once the
    request is found sound, before the draw (a caller that says what is being drawn). More than
    PART_ROWS rows of a single table into `out` are drawn and written a part at a time: the table
    returned is then the first part, and `info` says `rows` and `parts`."""
    run = RunDir(run_dir)
    # a missing run: load_model says so
    linked = run.exists() and isinstance(run.schema(), LinkedSchema)
    if out is not None and linked:
        check_output_folder(out, "folder for the two tables")
    elif out is not None:
        out = check_output_file(out, "CSV file")
        if not out.parent.is_dir():
            raise RunError(f"the folder {out.parent} does not exist; create it or write elsewhere")
    model = load_model(run_dir, device=device)
    parts = out is not None and not linked and shape_of(model.schema).chunks
    check_sample_rows(rows, MAX_FILE_ROWS if parts else MAX_SAMPLE_ROWS)
    if on_draw is not None:
        on_draw(model)
    if parts and rows > PART_ROWS:
        return _sample_in_parts(model, rows, conditions, seed, out)
    table = model.sample(rows, conditions=conditions, seed=seed)
    info = dict(model.last_sample_info)
    if out is not None and linked:  # parents.csv and children.csv, safe to open in a spreadsheet
        info["paths"] = write_linked(table, out)
    elif out is not None:  # leaves the machine: safe to open in a spreadsheet
        with atomic_output(out, make_parent=False) as f:
            to_csv(table, f)
        info["path"] = str(out)
    return table, info
