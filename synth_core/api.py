"""The synthesis core's front door, used by the CLI and the app: fit a run, sample from a run.

fit: validate the private table against the public schema, estimate missing numeric bounds with DP if
asked (paid from the budget), calibrate DP-SGD to what is left, train, and keep everything in a run
directory. sample: load a run's model and write synthetic rows.
"""
from __future__ import annotations

import os
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import pandas as pd

from .models import SynthModel, get_model_class
from .models.base import check_sample_rows
from .models.recommend import AUTO, CANDIDATES, recommend
from .privacy import ACCOUNTANTS, BudgetError, PrivacyLedger, check_calibration_share, check_run_budget, default_delta, delta_warning
from .privacy.budget import check_quantile_share
from .privacy.bounds import DEFAULT_COARSE_RANGE, estimate_missing_bounds
from .privacy.planning import NoisePlan
from .privacy.measurements import (count_epsilon, epsilon_left, marginals_alongside, marginals_epsilon, measure_marginals,
                                   measure_quantiles, noisy_count, quantiles_alongside, rows_upper_bound)
from .files import atomic_output, check_output_file
from .home import budgets_path
from .privacy.table_budget import TableBudgets, TableCharge
from .release.export import to_csv
from .runs import RunDir, RunError, RunGone
from .runs.jobs import job_state, review_rows_for
from .schema import Schema, SchemaError, ValidationReport, validate_table
from .training import distributed
from .training.device import device_label
from .training.timing import RunClock, rows_drawn, sampling_seconds, step_seconds

# review_rows: as many rows as the run releases it trained on
REVIEW_RELEASED = "released"


@dataclass
class FitResult:
    model: SynthModel
    ledger: PrivacyLedger
    validation: ValidationReport
    run: RunDir | None
    schema: Schema
    warnings: list[str] = field(default_factory=list)
    table_charge: TableCharge | None = None  # what the run drew from its table's budget


def fit(table: pd.DataFrame, schema: Schema, model: str = "dp-tbart", epsilon: float = 1.0,
        delta: float | None = None, accountant: str = "prv", preset: str | None = None, options: dict | None = None,
        bounds_epsilon: float = 0.0, coarse_range: tuple[float, float] = DEFAULT_COARSE_RANGE,
        seed: int | None = 0, device: str | None = None, run_dir: str | Path | None = None,
        overwrite: bool = False, on_event: Callable[[dict], None] | None = None,
        should_stop: Callable[[], bool] | None = None, review_rows: int | None = None,
        accept_draft: bool = False, table_charge: TableCharge | None = None, table_epsilon: float | None = None,
        public_table: bool = False, calibration_share: float | None = None,
        quantile_share: float | None = None) -> FitResult:
    """Train `model` on the private `table` within a total budget (ε, δ) and return it with its ledger.

    run_dir: a path for a new run directory, or a RunDir already created (by a background job).
    review_rows: also sample this many rows into the run's review sample before it is marked done;
    REVIEW_RELEASED: as many as the run releases it trained on (its noisy count, never the exact one), at most
    runs.jobs.REVIEW_ROWS.
    accept_draft: train on a schema drafted from the data and never confirmed (refused otherwise); the
    ledger and every report then say so first.
    The table's budget across runs (privacy.table_budget): every fit draws from it. The whole ε is reserved
    first, under a charge of the run's own (refused if the table has less left), and what the ledger spent is
    settled however the run ends. table_charge: the charge to draw (reserved already by a background job);
    by default the workbench home's book, the table's account opened with a total of `table_epsilon` (for a
    table the book has never seen, this run's ε when not given). public_table: the steward says the table is
    public or invented: it draws from no table's budget (the run's config says so).
    calibration_share: measure the table's marginals with this share of what the count and bounds leave
    of ε (privacy.measurements), composed with DP-SGD by the accountant; samples are then calibrated to
    them (models.calibration). 0: no measurement; None: 0 for a named family, the recommendation's for auto.
    quantile_share: measure the quantiles of the numeric columns with this share of what the count and bounds
    leave (privacy.measurements.measure_quantiles): the run's schema then carries them, and every model's bins
    follow them (`ColumnSpec.edges`). 0: none; None: 0 for a named family, the recommendation's for auto.
    model "auto": the family, preset (unless given) and shares are recommended (models.recommend) from the
    public schema and the row count the run releases; the run's config records the choice and why.
    If the run folder is deleted during training, training stops after the step and RunGone is raised;
    the folder is never re-created."""
    if not isinstance(schema, Schema):
        raise SchemaError(f"the schema must be a Schema (see Schema.load), not {type(schema).__name__}")
    schema.check()
    if schema.provenance["warning"] and not accept_draft:
        raise SchemaError("the schema was drafted by reading the private table and never confirmed as public: "
                          "edit it into public facts and confirm it (`schema confirm`), or accept training on it "
                          "as it is (--accept-draft; every report will say so)")
    auto = model == AUTO
    if auto:
        if options:
            raise ValueError("options belong to a model family; with --model auto the family is chosen for you: "
                             "name a family to set its options")
        klass = None
        for family in CANDIDATES if preset else ():  # a size every family auto may pick has
            get_model_class(family).configure(preset, None, seed=seed, device=device)
    else:
        klass = get_model_class(model)
        preset = preset or "cpu"
        klass.configure(preset, options, seed=seed, device=device)  # refuse bad options before anything is spent
        klass.check_schema(schema)
    group = distributed.current()  # several processes under torchrun: rank 0 alone writes and pays what precedes training
    if klass is not None:
        klass.check_processes(group.world_size)
    if accountant not in ACCOUNTANTS:
        raise BudgetError(f"unknown accountant {accountant!r}; choose one of {', '.join(ACCOUNTANTS)}")
    if review_rows not in (None, 0, REVIEW_RELEASED):
        check_sample_rows(review_rows)  # before anything is spent
    if calibration_share is not None:
        check_calibration_share(calibration_share)
    if quantile_share is not None:
        check_quantile_share(quantile_share, calibration_share or 0.0)
    clean, report = validate_table(table, schema)  # columns, types, categories, nulls; clips declared bounds
    n = len(clean)
    if n < 2:
        raise BudgetError("DP training needs at least two rows")
    if schema.rows is not None and schema.rows != n:
        raise SchemaError(f"the schema declares {schema.rows} rows as public, but the table has {n}: correct the "
                          "schema's row count, or remove it to pay for a noisy count instead")
    check_run_budget(epsilon, delta, bounds_epsilon)
    count_eps = 0.0 if schema.rows is not None else count_epsilon(epsilon)
    check_run_budget(epsilon, delta, bounds_epsilon, count_eps)  # and something left for training
    if not bounds_epsilon:
        schema.require_bounds()  # nothing pays for missing bounds: refuse before a run is made
    warnings = [schema.provenance["warning"]] if schema.provenance["warning"] else []
    provenance = {**schema.provenance, **({"accepted_unconfirmed": True} if schema.provenance["warning"] else {})}
    # n_rows: the row count the run releases, declared public or noisy (measured below); δ and the plan use it
    if table_charge is not None and (public_table or table_epsilon is not None):
        raise ValueError("a run draws from the table_charge it is given: public_table and table_epsilon are for a "
                         "run that opens its own")
    if table_epsilon is not None:
        check_run_budget(table_epsilon, None)
    # the exact count only where it is public: a ledger is written to the run folder from its first entry on
    ledger = PrivacyLedger(target_epsilon=epsilon, target_delta=delta if delta is not None else 0.0,
                           n_rows=n if schema.rows is not None else None, schema_provenance=provenance,
                           rows_public=schema.rows is not None)
    if table_charge is None and not public_table and group.is_main:  # rank 0 alone draws under torchrun
        book = TableBudgets(budgets_path())
        table_charge = TableCharge(book, book.table_id(table))
        book.open_account(table_charge.table_id, table_epsilon, epsilon)
    if table_charge is not None and not table_charge.reserved:
        where = run_dir.path if isinstance(run_dir, RunDir) else run_dir
        table_charge.reserve(epsilon, delta or 0.0, run=str(Path(where).resolve()) if where is not None else "")
    try:
        prepared = isinstance(run_dir, RunDir)  # by a background job (synth_core.runs.jobs), with its schema
        if not group.is_main:
            run = None  # under torchrun rank 0 alone writes the run folder
        elif prepared:
            run = run_dir.require()
        else:
            if overwrite and run_dir is not None and RunDir(run_dir).exists():
                job_state(RunDir(run_dir))  # a run whose process died is marked so (and charged): it may go
            run = RunDir.create(run_dir, overwrite=overwrite) if run_dir is not None else None
            if run is not None:
                run.write_worker(os.getpid())  # a reader tells a run this process no longer trains (runs.process)
                if table_charge is not None:
                    run.write_charge(table_charge.to_dict())
        if run is not None:  # every mechanism is on disk as soon as it is recorded
            run.write_ledger(ledger)
            ledger.on_record = run.write_ledger
        # its phases, for the next estimate
        clock = RunClock(run.request().get("created") if prepared and run is not None else None)
        gone: list[RunGone] = []  # the run folder was deleted during training: stop, write nothing more

        def emit(event: dict) -> None:
            if run is not None and not gone:
                try:
                    run.append_event(event)
                except RunGone as e:
                    gone.append(e)
            if on_event is not None:
                on_event(event)

        def stop() -> bool:
            return bool(gone) or (should_stop is not None and should_stop())

        try:
            def pay_before_training() -> dict:
                """The mechanisms before training (the noisy count, DP bounds, the marginals) and the choices
                that follow from their results; under torchrun rank 0 alone runs them and sends the results."""
                nonlocal clean, report
                # from here on whatever the private table pays is in `ledger`, and the ledger is in the run
                if not ledger.rows_public:
                    ledger.n_rows = noisy_count(n, count_eps, ledger)
                run_delta = delta
                if run_delta is None:  # below 1/n for every n the count leaves plausible
                    run_delta = default_delta(rows_upper_bound(ledger.n_rows,
                                                               None if ledger.rows_public else count_eps))
                ledger.target_delta = run_delta
                estimated = estimate_missing_bounds(clean, schema, bounds_epsilon, ledger, coarse_range)
                estimated.require_bounds()
                if estimated is not schema:  # new bounds: clip and count against them
                    clean, report = validate_table(clean, estimated)
                # the declared schema, as the model page asks it: bounds estimated here do not change the choice
                choice = recommend(schema, ledger.n_rows, epsilon) if auto else None
                family, size, share, chosen = model, preset, calibration_share, options
                q_share = quantile_share
                if choice is not None:  # from public facts and the released count only
                    family, size = choice.family, preset or choice.preset
                    chosen = choice.options_for(size)
                    get_model_class(family).check_processes(group.world_size)
                    get_model_class(family).configure(size, chosen, seed=seed, device=device)
                    if share is None:
                        share = choice.calibration_share
                    if q_share is None:
                        q_share = choice.quantile_share
                share, q_share = share or 0.0, q_share or 0.0
                check_quantile_share(q_share, share)
                # what the count and the bounds left: for training and the measurements, composed by the accountant
                left, spent = ledger.remaining_epsilon, ledger.spent_epsilon
                measured, alongside = None, ()
                if q_share:  # the numeric columns' bins follow their quantiles from here on (the run's schema)
                    estimated, q_mechanism = measure_quantiles(clean, estimated, q_share * left, run_delta, ledger,
                                                               accountant)
                    alongside += (q_mechanism,) if q_mechanism is not None else ()
                if share:
                    measured, mechanism = measure_marginals(
                        clean, estimated, marginals_epsilon(left, share), run_delta, ledger,
                        rows=ledger.n_rows, accountant=accountant)
                    alongside += (mechanism,)
                return {"ledger": ledger, "delta": run_delta, "schema": estimated, "choice": choice,
                        "model": family, "preset": size, "options": chosen, "calibration_share": share,
                        "quantile_share": q_share,
                        "calibration": measured,
                        "alongside": alongside, "left": left, "spent_before": spent}

            paid = group.share(pay_before_training)
            ledger, delta, estimated, choice = paid["ledger"], paid["delta"], paid["schema"], paid["choice"]
            model, preset, calibration_share = paid["model"], paid["preset"], paid["calibration_share"]
            options = paid["options"]
            klass = get_model_class(model)
            warnings += [w for w in [delta_warning(delta, ledger.n_rows)] if w]
            if review_rows == REVIEW_RELEASED:
                review_rows = review_rows_for(ledger.n_rows)
            if not group.is_main and estimated.to_dict() != schema.to_dict():  # rank 0 did it above
                clean, report = validate_table(clean, estimated)
            synth = klass(estimated, preset=preset, device=device, seed=seed, **(options or {}))
            synth.calibration = paid["calibration"]
            sgd_epsilon, spent_before = paid["left"], paid["spent_before"]  # the count and the bounds spent before
            plan = group.share(lambda: synth.plan_privacy(ledger.n_rows, sgd_epsilon, delta, accountant,
                                                          paid["alongside"]))
            plan.prior_epsilon = spent_before  # the live ε is the whole run's
            if run is not None:
                if not prepared or estimated is not schema:  # the schema the run trains with
                    run.write_schema(estimated)
                run.write_config({
                    "model": model, "preset": preset, "size": klass.size_of(preset), "options": options or {},
                    "epsilon": epsilon, "delta": delta,
                    "accountant": accountant, "bounds_epsilon": bounds_epsilon, "seed": seed, "rows": n,
                    "table_budget": table_charge is not None,  # False: the steward declared the table public
                    "calibration_share": calibration_share, "quantile_share": paid["quantile_share"],
                    **({"auto": choice.to_dict()} if choice is not None else {}),
                    # counts of clipped or missing values describe the private table: the steward's, never exported
                    "created": time.time(), "private_validation_counts": report.to_dict(),
                    "plan": plan.to_dict(), "device": device_label(synth.device),
                    "sampling_estimate_s": sampling_seconds(synth, preset, review_rows or 0, guess=True),
                    "step_estimate_s": step_seconds(synth, preset, plan.expected_batch_size),
                })
                run.write_ledger(ledger)
                run.set_status("running", "training")
            # the model charges the steps it starts to the ledger, however it stops
            clock.training_starts()
            synth.fit(clean, sgd_epsilon, delta, accountant, ledger=ledger, on_event=emit, should_stop=stop,
                      plan=plan)
            clock.training_ends()
            if gone:
                raise gone[0]
            result = synth.train_result
            if run is not None:
                run.save_model(synth)
                run.write_ledger(ledger)
                run.write_training({k: v for k, v in result.__dict__.items() if k != "events"})
                if review_rows:
                    started = time.time()
                    run.write_sample(synth.sample(int(review_rows), seed=seed), run.review_sample.name)
                    if not result.cancelled:
                        clock.record(synth, preset, time.time() - started,
                                     rows_drawn(int(review_rows), synth.calibration is not None))
                if result.cancelled:
                    run.set_status("cancelled", f"cancelled after {result.steps_done} of {result.steps_planned} "
                                   f"{plan.unit}; the model trained so far was kept")
                else:
                    run.set_status("completed", f"{result.steps_done} {plan.unit} in {result.seconds:.0f} s on "
                                   f"{result.device}")
        except RunGone:
            raise  # nothing can be written where the run was
        except BaseException as e:
            if run is not None:  # each record on its own: a full disk that refuses one may take the other
                state = "cancelled" if isinstance(e, KeyboardInterrupt) else "failed"
                for write in (lambda: run.write_ledger(ledger),
                              lambda: run.set_status(state, f"{type(e).__name__}: {e}",
                                                     traceback=traceback.format_exc(limit=5))):
                    try:
                        write()
                    except (RunGone, OSError):
                        pass  # what cannot be written now, a reader finds out from the dead process (runs.jobs)
            raise
        schema = estimated
        return FitResult(model=synth, ledger=ledger, validation=report, run=run, schema=schema, warnings=warnings,
                         table_charge=table_charge)
    finally:
        if table_charge is not None:
            table_charge.settle(ledger)  # what the run spent, from the ledger in memory, however it ended


def preview_plan(model: SynthModel, n_rows: int, epsilon: float, delta: float, accountant: str = "prv",
                 bounds_epsilon: float = 0.0, calibration_share: float = 0.0, rows_public: bool = False,
                 quantile_share: float = 0.0) -> NoisePlan:
    """The noise plan a run of `model` would train with on about n_rows rows, ε split as `fit` splits it (the
    noisy count unless the rows are public, the bounds, the marginals): for a page to show before anything
    is spent."""
    check_run_budget(epsilon, delta, bounds_epsilon)
    check_calibration_share(calibration_share)
    left = epsilon_left(epsilon, bounds_epsilon, rows_public)
    check_quantile_share(quantile_share, calibration_share)
    alongside = (quantiles_alongside(quantile_share * left, delta, model.full_schema, accountant)
                 + marginals_alongside(left, calibration_share, delta, accountant))
    return model.plan_privacy(n_rows, left, delta, accountant, alongside)


def load_model(run_dir: str | Path, device: str | None = None) -> SynthModel:
    """The trained model of a run that completed or was cancelled (a cancelled run keeps what it learned)."""
    run = RunDir(run_dir).require()
    state = run.status().get("state")
    if state not in ("completed", "cancelled"):
        raise RunError(f"the run at {run.path} is {state}, not completed or cancelled: it has no trained model to sample")
    if not run.has_model():
        raise RunError(f"the run at {run.path} has no trained model (state: {state})")
    from .models.base import SynthModel as _Base
    return _Base.load(run.model_dir, device=device)


def parse_conditions(schema: Schema, pairs: list[str]) -> dict:
    """"col=value" strings to a conditions dict, with numbers for numeric columns."""
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
    return schema.check_conditions(conditions)  # values the columns can hold, before a model is loaded


def sample(run_dir: str | Path, rows: int, conditions: dict | None = None, seed: int | None = None,
           out: str | Path | None = None, device: str | None = None) -> tuple[pd.DataFrame, dict]:
    """Sample `rows` synthetic rows from a saved run, optionally writing a CSV; returns (table, info)."""
    if out is not None:
        out = check_output_file(out, "CSV file")
        if not out.parent.is_dir():
            raise RunError(f"the folder {out.parent} does not exist; create it or write elsewhere")
    model = load_model(run_dir, device=device)
    table = model.sample(rows, conditions=conditions, seed=seed)
    info = dict(model.last_sample_info)
    if out is not None:  # leaves the machine: safe to open in a spreadsheet
        with atomic_output(out, make_parent=False) as f:
            to_csv(table, f)
        info["path"] = str(out)
    return table, info
