"""How long will a run take? Modelled from the plan and per-step costs, not guessed.

A run's time is: starting the worker process, setting up (the accountant's plan, the noisy count and
marginals, building the model), the planned DP-SGD steps, and drawing the review sample (a
calibrated sample draws a pool several times its size). Each run measures what its own phases cost
and stores them in the workbench home (`CostBook`, keyed by family, size, device and column count),
so the next estimate for the same model on the same machine is a lookup, scaled to the plan's batch
size: well under a second. Without a stored cost, a few DP-SGD steps on rows drawn from the public
schema alone (no private data, no privacy cost) are timed on the device the run will use. A running
job refines the estimate with its own steps (`runs.jobs.progress`).
"""
from __future__ import annotations

import dataclasses
import json
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from ..training.device import device_label, free_cores, pick_device, torch_threads
from .. import home, import_clock
from ..files import write_atomic
from ..models import get_model_class, model_class_for
from ..models.calibration import MIN_POOL, pool_size
from ..plan import RunPlan, plan_run
from ..privacy.budget import DEFAULT_CALIBRATION_SHARE
from ..privacy.measurements import public_marginals
from ..request import FitRequest
from ..privacy.contribution import bound_children
from ..schema import Schema, random_table
from ..schema.linked import LinkedSchema, link_tables, random_tables
from ..shape import shape_of
from . import worker_start

# starting the worker process before api.fit begins, where it could not be timed in a child process
# (`worker_start`): 2.6-3.0 s measured on a quiet 2-core machine (17 runs of AIM and DP-TBART on 8
# tables, benchmarks/bench_estimates.py); what the last run of the same key measured replaces it
STARTUP_S = 2.8
# setting up before the first step when no run was measured yet (PRV planning with the marginals
# composed, the noisy count and marginals, building the model): 0.8-1.5 s on the same runs; a family
# says its own (`SynthModel.setup_s`) for a probe
SETUP_S = 1.6
# a stored per-step cost is scaled to the plan's batch only within this factor; beyond it, time anew
BATCH_RATIO = 2.0
# the probe's steps hold at most this many rows (and half as many, to extend the cost to the plan's
# batch along a line): the estimate stays within a few seconds on large tables
PROBE_MAX_BATCH = 1024
# a row drawn, for a run's time left when no run of its model was timed: AIM and DP-TBART on Adult
# drew the review sample at 0.14-0.2 ms a row (2 cores)
DRAW_ROW_S = 2e-4
# rows the probe draws: the next size only while a draw takes under PROBE_DRAW_S (a language model
# is slow)
PROBE_DRAW_ROWS = (100, 400, 4000)
PROBE_DRAW_S = 0.3
# a calibrated review sample is timed at most this size (its pool then holds MIN_POOL rows)
PROBE_SAMPLE_ROWS = 1500


@dataclass
class Costs:
    """What one run of a model cost on this machine, per unit."""
    per_step_s: float        # one DP-SGD step at `batch` expected rows
    batch: float
    draw_row_s: float        # drawing one row from the trained model
    setup_s: float = SETUP_S
    startup_s: float = STARTUP_S
    measured: str = "timed on rows from the public schema"
    # the share of its planned steps a run took (an adaptive mechanism's rounds end early as its
    # noise falls; DP-SGD takes them all): the plan's steps times this are the steps to expect; None
    # when no run was measured (a probe), and the model says what to expect
    # (`SynthModel.expected_steps`)
    steps_share: float | None = None


def costs_key(family: str, preset: str, device: str, schema: Schema, options: dict | None = None) -> str:
    """The CostBook's key: family, size, device, columns, and what of the options changes a step's
    cost by a large factor (`SynthModel.timing_variant`: DP-LLMTGen's backbone)."""
    variant = get_model_class(family).timing_variant(options or {})
    # a person's sequence: their columns and max_children rows' columns
    if isinstance(schema, LinkedSchema):
        shape = (f"{len(schema.parent.modelled().columns)}+{schema.max_children}x"
                 f"{len(schema.child.modelled().columns)} columns")
    else:
        shape = f"{len(schema.modelled().columns)} columns"
    return f"{family}|{preset}|{device}|{shape}" + (f"|{variant}" if variant else "")


def stored_costs(family: str, preset: str, schema: Schema, device: str | None = None,
                 options: dict | None = None) -> Costs | None:
    """What the last run of this model on this machine measured, if there was one."""
    return CostBook().get(costs_key(family, preset, device_label(device), schema, options))


class CostBook:
    """Costs measured by past runs, one entry per key (the latest run's), in the workbench home."""

    def __init__(self, path: str | os.PathLike | None = None):
        self.path = Path(path) if path is not None else home.timings_path()

    def _read(self) -> dict:
        try:
            return json.loads(self.path.read_text())
        except (OSError, ValueError):
            return {}

    def get(self, key: str) -> Costs | None:
        entry = self._read().get(key)
        try:
            return Costs(**entry) if entry else None
        except TypeError:  # written by another version
            return None

    def put(self, key: str, costs: Costs) -> None:
        book = self._read()
        book[key] = asdict(costs)
        write_atomic(self.path, json.dumps(book, indent=1), private=True)


def rows_drawn(review_rows: int, calibrated: bool, floor: int = MIN_POOL) -> int:
    """Rows a model draws for a review sample of `review_rows` (a calibrated sample draws a pool). A
    pool that calibration grows (models.calibration.grow_and_calibrate) draws up to the family's
    max_pool_growth × that; the stored cost per row, the whole sample's seconds over these rows,
    carries the growth into the next estimate for the same table."""
    return pool_size(review_rows, floor) if calibrated and review_rows else int(review_rows)


def random_rows(schema: Schema | LinkedSchema, n: int):
    """n rows (linked tables: persons, each with their child rows, bounded as a run bounds them)
    drawn from the public schema alone, for timing a model."""
    if isinstance(schema, LinkedSchema):
        return bound_children(*link_tables(random_tables(schema, n, seed=0), schema), schema.max_children)[0]
    return random_table(schema, n, seed=0)


def _timed_steps(model: str, schema: Schema, preset: str, batch: int, options: dict | None, device: str | None,
                 steps: int, fixed_too: bool = False, run_plan=None):
    """(the fitted probe model, seconds per step after the first, the rows those steps drew on
    average, fixed seconds it times itself): `steps` + 1 DP-SGD steps of `batch` expected rows drawn
    from the public schema. run_plan: a family with its own mechanism runs the run's own plan on as
    many random rows, stopped after `steps` + 1 rounds, so that it selects and measures what the run
    would at its ρ a round (ρ = 1 over 3 rounds picked larger marginals, 1.6 times as slow)."""
    synth = model_class_for(model, schema)(schema, preset=preset, device=device, seed=0, **(options or {}))
    if run_plan is not None:
        probe_rows, plan = max(int(run_plan.population), 100), synth.timed_plan(run_plan)
    else:  # a small sampling rate keeps the probe's accounting cheap; σ does not change a step
        probe_rows = max(20 * batch, 100)
        plan = synth.probe_plan(probe_rows, batch, steps + 1)
    probe = random_rows(schema, probe_rows)
    time_fixed = getattr(synth, "time_fixed_costs", None) if fixed_too else None
    fixed = float(time_fixed(steps)) if time_fixed is not None else 0.0
    stamps: list[float] = []
    rows: list[int] = []
    weights: list[float] = []  # a step's weight in the seconds a step (AIM's: two kinds of round)

    def seen(event: dict) -> None:
        stamps.append(time.perf_counter())
        rows.append(int(event.get("batch_size") or batch))
        weights.append(float(event.get("timing_weight", 1.0)))

    start = time.perf_counter()
    synth.fit(probe, plan.epsilon, plan.delta, "rdp", plan=plan, on_event=seen,
              should_stop=lambda: len(stamps) > steps)
    if len(stamps) >= 2:  # the first step pays for warm-up; time the ones after it
        # a mechanism's rounds: after its second too, its first warm-started fit (AIM's compiled
        # 0.4-1.3 s more than its third on HMDA and gestation)
        skip = 2 if run_plan is not None and len(stamps) >= 3 else 1
        timed, weighed = rows[skip:], weights[skip:]
        spans = [b - a for a, b in zip(stamps[skip - 1:], stamps[skip:])]
        per_step = sum(s * w for s, w in zip(spans, weighed)) / sum(weighed)
        if run_plan is not None:
            # a mechanism's first round is not like the others (AIM measures every column and
            # fits its first model, compiling it): what it took beyond a round and the family's
            # setup, which the run pays once (pbc, wages1: 1 to 1.5 s, bench_estimates.py)
            fixed += max(0.0, stamps[0] - start - per_step - synth.setup_s)
        return synth, per_step, sum(timed) / len(timed), fixed
    return synth, time.perf_counter() - start, float(rows[0] if rows else batch), fixed


def probe_costs(model: str, schema: Schema, preset: str, batch: int, options: dict | None = None,
                device: str | None = None, probe_steps: int = 2, run_plan=None,
                review_rows: int = 0, calibrated: bool = False) -> tuple[Costs, float]:
    """Costs timed now on rows from the public schema: DP-SGD steps at the plan's batch, or, for a
    batch above PROBE_MAX_BATCH, at two smaller batches and extended along the line through them (a
    step costs a fixed part plus a part per row: scaling one small batch in proportion overestimated
    Adult's standard size by 40%); then rows drawn. Also returns fixed seconds a model times itself
    (DP-LLMTGen's format learning). A family whose steps take seconds per row (DP-LLMTGen on a
    pretrained backbone) probes smaller batches (`SynthModel.probe_batch_limit`), extended the same
    way. A family with its own mechanism times three rounds of the run's plan (`run_plan`; its
    rounds differ more). Drawing is timed as the review's draw will be: calibrated to marginals
    where the run measures them (`calibrated`, `review_rows`). What the process compiled for the
    family is forgotten first: a fresh worker compiles it again."""
    klass = model_class_for(model, schema)
    klass.forget_compiled()
    small = min(batch, PROBE_MAX_BATCH, klass.probe_batch_limit(options or {}))
    own = None if klass.uses_dp_sgd else run_plan
    synth, per_step, drew, fixed = _timed_steps(model, schema, preset, small, options, device,
                                                probe_steps + (own is not None), fixed_too=True,
                                                run_plan=own)
    if batch > small and klass.step_cost_grows_with_rows:
        # along the line through the rows the probes' Poisson batches drew, not the rows they
        # expected: over two timed steps those vary by ~15%, and SmolLM2's first estimate extended a
        # nearly flat line (3.6 s a step of 64 rows, against 5.9 s measured)
        _, per_half, drew_half, _ = _timed_steps(model, schema, preset, small // 2, options, device, probe_steps)
        if drew - drew_half >= small / 4:
            per_row = max(0.0, (per_step - per_half) / (drew - drew_half))
            per_step += per_row * (batch - drew)
        # the two probes drew about as many rows: scale the larger one in proportion (an
        # overestimate)
        else:
            per_step *= batch / max(drew, 1.0)
    return Costs(per_step_s=per_step, batch=batch, setup_s=klass.setup_s,
                 draw_row_s=_draw_row_seconds(synth, schema, review_rows, calibrated)), fixed


def _draw_row_seconds(synth, schema: Schema, review_rows: int, calibrated: bool) -> float:
    """A drawn row's seconds, per row of the pool a review sample draws: a calibrated sample of up
    to PROBE_SAMPLE_ROWS rows, weighed to marginals counted on random rows (weighing cost 1.4 to
    9.6 times the draw itself on five tables, the most on the widest), else the fastest of a few
    draws."""
    # the first draw pays for warm-up (AIM's compiles: 1.2 s for 100 rows)
    synth.draw(PROBE_DRAW_ROWS[0], seed=0)
    if calibrated and review_rows and not synth.measures_marginals and not shape_of(schema).links:
        n = min(int(review_rows), PROBE_SAMPLE_ROWS)
        synth.calibration = public_marginals(random_rows(schema, max(n, 1000)), schema)
        start = time.perf_counter()
        synth.sample(n, seed=0)
        return (time.perf_counter() - start) / rows_drawn(n, True, synth.min_pool)
    draw_row_s = float("inf")
    # a fast sampler draws in large chunks: time it at a size where it does
    for rows in PROBE_DRAW_ROWS:
        start = time.perf_counter()
        synth.draw(rows, seed=0)
        took = time.perf_counter() - start
        draw_row_s = min(draw_row_s, took / rows)
        if took > PROBE_DRAW_S:
            break
    return draw_row_s


def estimate_fit_seconds(model: str, schema: Schema, preset: str, n_rows: int, epsilon: float, delta: float,
                         options: dict | None = None, device: str | None = None, probe_steps: int = 2,
                         review_rows: int = 0, calibrated: bool = False, book: CostBook | None = None,
                         steps: int | None = None) -> dict:
    """`estimate_plan` for a run of the family `model` at (ε, δ) on n_rows rows, planned as the
    run plans it (`synth_core.plan.plan_run`; `calibrated`: with the default share of ε for the
    marginals, else none)."""
    request = FitRequest(model=model, preset=preset, options=options, epsilon=epsilon, delta=delta,
                         device=device, quantile_share=0.0,
                         calibration_share=DEFAULT_CALIBRATION_SHARE if calibrated else 0.0)
    return estimate_plan(plan_run(request, schema, n_rows), probe_steps, review_rows, book, steps)


def estimate_plan(plan: RunPlan, probe_steps: int = 2, review_rows: int = 0,
                  book: CostBook | None = None, steps: int | None = None) -> dict:
    """The run's seconds, phase by phase, from its plan (the one the model page shows) and stored
    costs (timed now when none is stored).

    review_rows: the review sample drawn after training (a calibrated one, where the plan measures
    marginals, draws a pool). steps: the steps or rounds the caller already told the steward to
    expect (else the plan's). Timed on the CPU threads the run's worker will take: the cores free
    now."""
    with torch_threads(free_cores()):
        return _estimate(plan, probe_steps, review_rows, book, steps)


def _estimate(planned: RunPlan, probe_steps, review_rows, book, steps) -> dict:
    request, klass = planned.request, planned.family
    model, preset, options, device = request.model, request.preset, request.options, request.device
    schema, calibrated = planned.schema, planned.split.marginals > 0
    plan, batch = planned.noise, planned.batch
    label = device_label(device)
    book = book if book is not None else CostBook()
    costs = book.get(costs_key(klass.family, preset, label, planned.synth().schema, options))
    fixed = 0.0
    # a stored run's setup already holds a model's fixed work (DP-LLMTGen's format learning runs
    # inside its fit)
    if costs is None or not 1 / BATCH_RATIO <= batch / costs.batch <= BATCH_RATIO:
        costs, fixed = probe_costs(model, schema, preset, batch, options, device, probe_steps, plan,
                                   review_rows, calibrated)
        # what its worker imports afresh as it sets up, loaded in this process already
        fixed += sum(import_clock.seconds(name) for name in klass.worker_imports)
        # and what it pays before: its start, its device's first work (timed in a child process)
        start_s, device_s = worker_start.seconds(pick_device(device), STARTUP_S)
        costs, fixed = dataclasses.replace(costs, startup_s=start_s), fixed + device_s
    per_step = costs.per_step_s * batch / costs.batch  # a step's work grows with the rows in it
    # an adaptive mechanism's rounds: what the model expects (the count its run starts from, so that
    # the model page, the train page and the report say one number); else the steps a past run of
    # the model took, as a share of its plan's (DP-SGD takes them all)
    if steps is None:
        steps = planned.steps if plan.steps_adapt or costs.steps_share is None \
            else plan.steps * costs.steps_share
    steps = max(1, int(round(steps)))
    phases = {"start": costs.startup_s, "setup": costs.setup_s + fixed, "training": per_step * steps,
              "sampling": rows_drawn(review_rows, calibrated, klass.min_pool) * costs.draw_row_s}
    seconds = sum(phases.values())
    return {"seconds": seconds, "phases": phases, "per_step_s": per_step, "steps": steps,
            "batch_size": batch, "device": label, "measured": costs.measured,
            # an adaptive mechanism ends when its budget is spent: at most after the most steps
            # its model allows (AIM's band)
            "steps_adapt": plan.steps_adapt, "steps_at_most": planned.most_steps,
            "at_most_s": seconds + per_step * max(0, planned.most_steps - steps)}


def sampling_seconds(synth, preset: str, rows: int, book: CostBook | None = None, guess: bool = False
                     ) -> float | None:
    """Seconds the trained `synth` will take to draw `rows` rows (the review sample, or a steward's
    request), from the stored costs (None: unknown; `guess`: at DRAW_ROW_S a row when no run of the
    model was timed)."""
    costs = (book if book is not None else CostBook()).get(
        costs_key(synth.family, preset, device_label(synth.device), synth.schema, dataclasses.asdict(synth.config)))
    if costs is None and not guess:
        return None
    return rows_drawn(rows, synth.calibration is not None, synth.min_pool) * (costs.draw_row_s if costs else DRAW_ROW_S)


def step_seconds(synth, preset: str, batch: float, book: CostBook | None = None) -> float | None:
    """Seconds a step (an adaptive mechanism's round) of `synth` takes at `batch` expected rows,
    from the stored costs (None: unknown): the train page's time left until the run has timed its
    own."""
    costs = (book if book is not None else CostBook()).get(
        costs_key(synth.family, preset, device_label(synth.device), synth.schema, dataclasses.asdict(synth.config)))
    if costs is None:
        return None
    return costs.per_step_s * (batch / costs.batch if synth.step_cost_grows_with_rows else 1.0)


class RunClock:
    """Measures a run's phases inside api.fit and stores them in the CostBook for the next
    estimate."""

    def __init__(self, created: float | None = None):
        self.start = time.time()
        self.startup_s = self.start - created if created and 0 < self.start - created < 600 else None
        self.train_start = self.train_end = None

    def training_starts(self) -> None:
        self.train_start = time.time()

    def training_ends(self) -> None:
        self.train_end = time.time()

    def record(self, synth, preset: str, draw_seconds: float, drawn: int, book: CostBook | None = None
               ) -> Costs | None:
        """Store what this run's phases cost (None, nothing stored, when too little was
        measured)."""
        result = synth.train_result
        if self.train_end is None or result is None or result.steps_done < 2 or drawn < 1:
            return None
        # wrapping the model, saving
        overhead = max(0.0, (self.train_end - self.train_start) - result.seconds)
        costs = Costs(per_step_s=result.seconds / result.steps_done,
                      batch=float(synth.plan.expected_batch_size),
                      draw_row_s=draw_seconds / drawn, setup_s=self.train_start - self.start + overhead,
                      startup_s=self.startup_s if self.startup_s is not None else STARTUP_S,
                      measured=f"measured on a run of {time.strftime('%d %b %H:%M')}",
                      steps_share=min(1.0, result.steps_done / max(1, synth.plan.steps)))
        key = costs_key(synth.family, preset, device_label(synth.device), synth.schema, dataclasses.asdict(synth.config))
        (book if book is not None else CostBook()).put(key, costs)
        return costs
