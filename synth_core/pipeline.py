"""A fit as a short sequence of named stages, each with a typed result; `api.fit` runs them in this
order.

    admit     the request and the table checked against the public schema; nothing is spent   -> Admitted
    charge    the run's ε reserved from its table's budget (privacy.table_budget)              -> TableCharge
    pay       what precedes training: the noisy count, δ, DP bounds and value sets, auto's choice, the
              quantiles and the marginals (privacy.split says what each gets)                   -> Paid
    build     the model, and the noise plan calibrated to what is left                          -> Built
    train     DP-SGD (or the family's own mechanism); the model charges the steps it starts
    save      the model, the ledger, the training record and the review sample; the status
    settle    what the ledger spent, charged to the table's budget however the run ended (api.fit's finally)

Under torchrun rank 0 alone pays and plans, and sends the results to the other ranks
(training.distributed).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from .home import budgets_path
from .encoding.engine import Counting
from .models import SynthModel, model_class_for
from .privacy import PrivacyLedger, delta_warning, run_delta
from .privacy.bounds import DEFAULT_COARSE_RANGE, estimate_missing_bounds
from .privacy.measurements import (Marginals, count_epsilon, measure_marginals, measure_quantiles,
                                   noisy_count, rows_to_draw)
from .privacy.person_marginals import measure_person_marginals
from .privacy.planning import NoisePlan
from .privacy.split import Split, split_left
from .privacy.table_budget import TableBudgets, TableCharge
from .privacy.value_sets import find_value_sets
from .plan import RunPlan
from .request import REVIEW_RELEASED, FitRequest, check_rows, review_rows_for
from .runs import RunDir
from .runs.lifecycle import Events, say_trained
from .forecast import run_forecast
from .privacy.contribution import bound_children
from .schema import Schema, SchemaError, ValidationReport, validate_table
from .schema.linked import LinkedReport, LinkedRows, LinkedSchema, LinkedTables, link_tables
from .shape import shape_of
from .training.device import device_label
from .runs.timing import RunClock, rows_drawn, sampling_seconds, step_seconds


@dataclass
class Admitted:
    """A request and a table that may be trained on: the rows validated against the public
    schema."""
    request: FitRequest
    schema: Schema | LinkedSchema
    rows: pd.DataFrame | LinkedRows    # linked tables: persons, each with their child rows bounded
    report: ValidationReport | LinkedReport
    warnings: list[str] = field(default_factory=list)

    @property
    def count_epsilon(self) -> float:
        """What the noisy row count costs (nothing where the count is declared public)."""
        return 0.0 if self.schema.rows is not None else count_epsilon(self.request.epsilon)


def admit(table: pd.DataFrame, schema: Schema, request: FitRequest, world_size: int = 1) -> Admitted:
    """Every problem with the request and the schema at once, then the table against the schema
    (columns, types, categories; declared bounds clip); nothing is spent."""
    shape_of(schema)  # a Schema or a LinkedSchema (SchemaError, one line, for anything else)
    request.check(schema, world_size)
    if isinstance(table, Counting):  # a table an engine holds: validated as it was read
        request.engine_families(schema, table.answers)
        rows, report = table, table.report
        check_rows(len(rows))
    # persons: linked, then each one's child rows bounded (secret draws)
    elif isinstance(schema, LinkedSchema):
        rows, report = bound_children(*link_tables(table, schema), schema.max_children)
        check_rows(len(rows), "the parents' table")
    else:
        if isinstance(table, LinkedTables):
            raise SchemaError("two tables were given, but the schema describes one: draft the schema from both "
                              "(`schema draft --data PARENTS --child CHILDREN --key COLUMN`)")
        rows, report = validate_table(table, schema)
        check_rows(len(rows))
    # the public count is the table's as the steward holds it: the rows a rule drops are counted on
    # their screen
    if schema.rows is not None and schema.rows != len(rows) + report.dropped_for_rules:
        unit = shape_of(schema).unit
        raise SchemaError(f"the schema declares {schema.rows} {unit} as public, but the table has "
                          f"{len(rows) + report.dropped_for_rules}: correct the schema's count, or remove it to "
                          "pay for a noisy count instead")
    warning = schema.provenance["warning"]
    return Admitted(request, schema, rows, report, [warning] if warning else [])


def open_ledger(admitted: Admitted) -> PrivacyLedger:
    """The run's ledger: the exact count only where it is public, as declared (the rows a rule drops
    are not taken off it: their number is the steward's alone; the ledger is written to the run
    folder from its first entry on); a draft accepted unconfirmed says so first."""
    schema, request = admitted.schema, admitted.request
    provenance = {**schema.provenance, **({"accepted_unconfirmed": True} if schema.provenance["warning"] else {})}
    public = schema.rows is not None
    return PrivacyLedger(target_epsilon=request.epsilon, target_delta=request.delta or 0.0,
                         n_rows=schema.rows if public else None, schema_provenance=provenance,
                         rows_public=public)


def charge(admitted: Admitted, table: pd.DataFrame, given: TableCharge | None, run_dir, is_main: bool
           ) -> TableCharge | None:
    """The charge the run draws on its table's budget, its whole ε reserved (refused if the table
    has less left): the one given (a background job reserved it), or one of its own in the workbench
    home's book, on the table the file is (privacy.table_identity: its validated rows, however
    written; a file that resembles a known table is asked about, SameTable); none for a table the
    steward declares public, or on a torchrun rank other than 0."""
    request = admitted.request
    if given is not None and (request.public_table or request.table_epsilon is not None):
        raise ValueError("a run draws from the table_charge it is given: public_table and table_epsilon are for a "
                         "run that opens its own")
    if given is None and not request.public_table and is_main:
        book = TableBudgets(budgets_path())
        found = book.identify(table, admitted.schema)
        given = TableCharge(book, book.account_for(found, request.epsilon, request.table_epsilon,
                                                   request.book_table, request.new_table,
                                                   label=request.table_name))
    if given is not None and not given.reserved:
        where = run_dir.path if isinstance(run_dir, RunDir) else run_dir
        given.reserve(request.epsilon, request.delta or 0.0, run=str(Path(where).resolve()) if where else "")
    return given


@dataclass
class Paid:
    """What the mechanisms before training released, and the request they resolve (auto's choice
    applied)."""
    ledger: PrivacyLedger
    request: FitRequest        # resolved: every default filled in
    delta: float
    # with DP bounds and quantiles where they were measured: the run's schema
    schema: Schema
    calibration: Marginals | None
    # the measurements' mechanisms, for the accountant to compose with training
    alongside: tuple
    split: Split               # what the count and bounds left, and each measurement's share of it
    spent_before: float        # what the count and bounds spent

    @property
    def left(self) -> float:
        """What the count and bounds left: for training and the measurements."""
        return self.split.left


def pay(admitted: Admitted, ledger: PrivacyLedger, world_size: int = 1) -> tuple[Paid, pd.DataFrame, ValidationReport]:
    """The mechanisms before training, and the choices that follow from their results: the noisy
    count (unless public), δ from the count it leaves plausible, DP bounds the schema lacks, auto's
    choice (from the declared schema and the released count), then the quantiles and the marginals
    at their shares of what is left. Returns the rows and their report validated against the bounds
    as well."""
    request, rows, report = admitted.request, admitted.rows, admitted.report
    if not ledger.rows_public:
        ledger.n_rows = noisy_count(len(rows), admitted.count_epsilon, ledger,
                                    of=shape_of(admitted.schema).unit)
    # below 1/n for every n the count leaves plausible (privacy.run_delta: what the page and
    # forecast show)
    count_epsilon_paid = None if ledger.rows_public else admitted.count_epsilon
    delta = run_delta(request.delta, ledger.n_rows, count_epsilon_paid)
    ledger.target_delta = delta
    schema = admitted.schema
    if shape_of(schema).dp_bounds:  # else every bound is declared (FitRequest.check)
        schema = estimate_missing_bounds(rows, schema, request.bounds_epsilon, ledger,
                                         request.coarse_range or DEFAULT_COARSE_RANGE)
    schema.require_bounds()
    if request.values_epsilon:  # value sets and point masses the schema lacks, found with DP
        schema = find_value_sets(rows, schema, request.values_epsilon, ledger, ledger.n_rows)
    if schema is not admitted.schema:  # new bounds or value sets: clip, snap and count against them
        rows, report = ((rows, rows.held_to(schema)) if isinstance(rows, Counting)
                        else validate_table(rows, schema))
    # public facts and the released count only
    among = request.engine_families(schema, rows.answers) if isinstance(rows, Counting) else None
    resolved = request.resolved(admitted.schema, ledger.n_rows, among)
    model_class_for(resolved.model, schema).check_processes(world_size)
    left, spent = ledger.remaining_epsilon, ledger.spent_epsilon
    split = split_left(left, resolved.calibration_share, resolved.quantile_share)
    calibration, alongside = None, ()
    # the numeric columns' bins follow their quantiles from here on (the run's schema)
    if split.quantiles:
        schema, mechanism = measure_quantiles(rows, schema, split.quantiles, delta, ledger, request.accountant)
        alongside += (mechanism,) if mechanism is not None else ()
    if split.marginals and isinstance(schema, LinkedSchema):  # both levels, protecting a person
        calibration, mechanism = measure_person_marginals(rows, schema, split.marginals, delta, ledger,
                                                          ledger.n_rows, request.accountant)
        alongside += (mechanism,)
    elif split.marginals:
        calibration, mechanism = measure_marginals(rows, schema, split.marginals, delta, ledger, rows=ledger.n_rows,
                                                   accountant=request.accountant)
        alongside += (mechanism,)
    return Paid(ledger, resolved, delta, schema, calibration, alongside, split, spent), rows, report


@dataclass
class Built:
    model: SynthModel
    plan: NoisePlan
    review_rows: int


def build(paid: Paid, share=lambda compute: compute()) -> Built:
    """The model on the run's schema, and its noise plan calibrated to what the count and bounds
    left, composed with the measurements (`share`: under torchrun, rank 0 plans and sends the
    plan)."""
    request = paid.request
    synth = model_class_for(request.model, paid.schema)(paid.schema, preset=request.preset, device=request.device,
                                           seed=request.seed, **(request.options or {}))
    synth.calibration = paid.calibration
    # the one plan a preview makes too (synth_core.plan), from the count released and what is left
    planned = RunPlan(request, paid.schema, paid.ledger.n_rows, paid.delta, paid.split,
                      alongside=paid.alongside, model=synth)
    plan = share(lambda: planned.noise)
    plan.prior_epsilon = paid.spent_before  # the live ε is the whole run's
    review = request.review_rows
    review = (review_rows_for(rows_to_draw(paid.ledger.n_rows, paid.calibration)) if review == REVIEW_RELEASED
              else int(review or 0))
    return Built(synth, plan, review)


def run_config(admitted: Admitted, paid: Paid, built: Built, charged: bool) -> dict:
    """What the run's config.json says: the request as resolved, its plan, and what the next
    estimate needs."""
    request, synth = paid.request, built.model
    return {
        "model": request.model, "preset": request.preset, "size": type(synth).size_of(request.preset),
        "options": request.options or {}, "epsilon": request.epsilon, "delta": paid.delta,
        "accountant": request.accountant, "bounds_epsilon": request.bounds_epsilon,
        "values_epsilon": request.values_epsilon, "seed": request.seed,
        "rows": len(admitted.rows),
        "table_budget": charged,  # False: the steward declared the table public
        "calibration_share": request.calibration_share, "quantile_share": request.quantile_share,
        **({"auto": request.choice.to_dict()} if request.choice is not None else {}),
        # counts of clipped or missing values describe the private table: the steward's, never
        # exported (when the run was created is the run folder's own, in private/: RunDir.create)
        "private_validation_counts": admitted.report.to_dict(),
        "plan": built.plan.to_dict(), "device": device_label(synth.device),
        "sampling_estimate_s": sampling_seconds(synth, request.preset, built.review_rows, guess=True),
        "step_estimate_s": step_seconds(synth, request.preset, built.plan.expected_batch_size),
        # from public facts and the released count only (forecast.py): the review sets it beside
        # what it measures
        "forecast": run_forecast(paid.schema, paid.ledger.n_rows, request.epsilon, request.model)
        if shape_of(paid.schema).forecast else None,
    }


def train(built: Built, rows: pd.DataFrame, paid: Paid, events: Events, clock: RunClock) -> None:
    """DP-SGD (or the family's own mechanism) on the validated rows; the model charges the steps it
    starts to the ledger, however it stops."""
    clock.training_starts()
    built.model.fit(rows, paid.left, paid.delta, paid.request.accountant, ledger=paid.ledger, on_event=events.emit,
                    should_stop=events.stop, plan=built.plan)
    clock.training_ends()
    events.raise_if_gone()


def save(run: RunDir | None, built: Built, paid: Paid, clock: RunClock) -> None:
    """The model, the ledger, the training record and the review sample in the run folder, then its
    status; the review sample's time is stored for the next estimate."""
    if run is None:
        return
    synth, result = built.model, built.model.train_result
    run.save_model(synth)
    run.write_ledger(paid.ledger)
    run.write_training({k: v for k, v in result.__dict__.items() if k != "events"})
    if built.review_rows:
        started = time.time()
        run.write_sample(synth.sample(built.review_rows, seed=paid.request.seed), run.review_sample.name)
        if not result.cancelled:
            clock.record(synth, paid.request.preset, time.time() - started,
                         rows_drawn(built.review_rows, synth.calibration is not None, synth.min_pool))
    say_trained(run, result, built.plan.unit)


def warnings_after(admitted: Admitted, paid: Paid) -> list[str]:
    return admitted.warnings + [w for w in [delta_warning(paid.delta, paid.ledger.n_rows)] if w]
