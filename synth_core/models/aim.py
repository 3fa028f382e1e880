"""AIM (McKenna, Mullins, Sheldon & Miklau, VLDB 2022, "AIM: An Adaptive and Iterative Mechanism for
Differentially Private Synthetic Data") as a model family, on private-pgm's estimation engine
(`mbi`).

The table is read on the public discretisation (`encoding.TokenEncoder`: public categories, numbers
in public bins). AIM measures every column's marginal, then, round after round, selects with the
exponential mechanism the marginal of the workload (every pair of columns, every triple of the
declared target column with two others, and what they contain) that the current graphical model gets
most wrong, measures it with the Gaussian mechanism, and fits the model to every measurement so far
by mirror descent (mbi). The marginals it may select are those that keep the model within a size
that grows with the budget spent; when a measurement barely moves the model the noise is halved.
Rounds are paid from a zCDP budget (`privacy.selection.RhoBudget`), planned with the run's other
mechanisms (`privacy.planning.plan_rho`); the last round spends what is left.

With `compress` (off by default), the cells the first measurement finds below 3σ are pooled into one
cell of the model (MST's domain compression, post-processing of that measurement): on wide tables of
sparse numbers the later rounds' noise spreads over fewer cells and more pairs and triples fit the
model (King at ε = 0.25: 2-way TVD 0.173 → 0.154, regression R² about 0 → 0.51), while on small
tables it was level or worse (benchmarks/history/2026-11-27.md).

Rows are drawn from the fitted graphical model (mbi's `synthetic_data`) and decoded uniformly within
a numeric bin. Conditions are exact: the model is conditioned on the fixed values (mbi's
constraints) before the rows are drawn. The known total is the row count the run released where it
is public; a noisy one is combined with the totals the first measurement implies (`best_total`).
"""
from __future__ import annotations

import contextlib
import math
import time
from typing import Callable

import numpy as np
import pandas as pd
import torch

from ..encoding import TokenEncoder
from ..privacy import selection
from ..privacy.ledger import SELECTED
from ..privacy.planning import RhoPlan
from ..privacy.randomness import secret_rng
from ..training.engine import StepCount, TrainResult
from . import aim_rounds, graphical, plan_words, recommend
from .cells import EngineCells, RowCells, cells_of
from .aim_config import PRESETS, AIMConfig, mbi, workload  # noqa: F401 - workload: the mechanism's, and its tests'
from .base import SynthModel, register

# the live count of rounds weighs the share of rounds that quadrupled the next one's cost so far
# against the share the count before the run assumed, as if that had been seen on this many rounds
# (3 of 3, 6, 10 tried on 15 runs of 6 tables: benchmarks/history/2026-11-27.md, "Estimates that
# hold")
PRIOR_ROUNDS = 3


@register("aim")
class AIM(SynthModel):
    label = "Adaptive marginals"
    description = ("A graphical model fitted to the table's marginals, each chosen where the model is most wrong "
                   "and measured with noise (AIM, McKenna et al. 2022)")
    when_to_pick = ("Small or medium tables (few rows for their ε), when the columns' overall statistics and pairs "
                    "matter most, and tables of any size made of categories and numbers with few values (counts, "
                    "ages, years, scores); what auto picks for them (a medium table that holds a number of many "
                    "values and has a number as its target goes to DP-TBART).")
    improve_hint = ("A larger ε or a larger model size (a bigger model, more marginals measured) usually helps; "
                    "on a table with many rows, a neural model such as DP-TBART may keep more detail.")
    config_class = AIMConfig
    uses_dp_sgd = False
    measures_marginals = True
    trains_distributed = False
    from_engine = "counts"  # its rounds ask counts of cliques (models.cells)
    step_cost_grows_with_rows = False  # a round reads the answers computed in the first
    # setting up beyond importing Opacus and JAX (worker_imports): 10 runs of 5 tables set up in
    # 3.6-3.8 s in all (benchmarks/bench_estimates.py), and a fresh interpreter imported the two in
    # 3.6-3.8 s (29 Nov 2026)
    setup_s = 0.2
    worker_imports = ("opacus", "mbi")

    @classmethod
    def planning_note(cls, epsilon: float, accountant: str) -> str:
        return f"planning {cls.family}'s rounds for ε = {epsilon:g} (zero-concentrated DP, composed by Rényi DP)"

    dp_mechanism = "AIM: marginals selected (exponential mechanism) and measured (Gaussian mechanism)"
    ledger_kind = SELECTED
    presets = PRESETS
    size_presets = {"quick": "quick", "standard": "cpu", "best": "paper"}

    @classmethod
    def check_schema(cls, schema) -> None:
        """AIM measures the pairs of columns round by round, 16 rounds a column: on 2 CPU cores, 120
        columns of three categories took about 7 minutes at the quick size and 250 about 36 (a round
        every 9 s); past recommend.AIM_MAX_COLUMNS a run would take hours, so it is refused before
        anything is spent."""
        columns, most = len(schema.modelled().columns), recommend.AIM_MAX_COLUMNS
        if columns > most:
            raise ValueError(f"AIM measures the table's pairs of columns round by round; with {columns} modelled "
                             f"columns (more than {most}) a run would take hours. Leave columns out in the "
                             "schema, or choose dp-tbart")

    # --- building ------------------------------------------------------------------------------------
    def build(self) -> None:
        self.config.check()
        # numbers in the configured bins; with 0, in the finest until the rows and ε are known
        # (plan_privacy)
        self.encoder = TokenEncoder(self.schema, n_bins=self.config.n_bins or recommend.AIM_FINE_BINS)
        self.sizes = {c.spec.name: c.size for c in self.encoder.codecs}
        # per compressed column, the public cells kept apart (the rest: one cell)
        self.kept: dict[str, np.ndarray] = {}
        # how a merged cell's rows are shared among its public cells
        self.merged_weights: dict[str, np.ndarray] = {}
        self.net = None
        self.model = None      # mbi's MarkovRandomField once fitted
        self.rounds_log: list = []
        # a time estimate's probe only (timed_plan): the run's rounds expected, and the cliques it
        # holds from its first fit
        self.timing_rounds, self.held_for_timing = 0, 0

    @property
    def n_parameters(self) -> int:
        if self.model is None:
            return 0
        return int(sum(np.size(self.model.potentials[cl].values) for cl in self.model.cliques))

    def planned_rounds(self) -> int:
        return self.config.rounds or 16 * len(self.sizes)

    def plan_privacy(self, n_rows: int, epsilon: float, delta: float, accountant: str = "prv",
                     alongside: tuple = ()) -> RhoPlan:
        """The zCDP plan for the run; numbers' bins left to the run (n_bins 0) are chosen here, from
        the released row count, ε and the columns (public facts: `recommend.aim_bins`), and the
        config records the choice."""
        if self.config.n_bins == 0:
            self.config.n_bins = recommend.aim_bins(n_rows, epsilon, len(self.sizes))
            self.build()
        return super().plan_privacy(n_rows, epsilon, delta, accountant, alongside)

    def opening(self, rho: float, rounds: int) -> dict:
        """How a run with budget ρ and `rounds` planned rounds starts
        (privacy.selection.opening)."""
        return selection.opening(rho, rounds, len(self.sizes), self.config.one_way_share)

    def count_noise(self, plan) -> float:
        return self.opening(plan.rho, plan.rounds)["one_way_sigma"]

    def plan_summary(self, plan, rows: int, epsilon: float, accountant: str, bounds: bool = False,
                     statistics: bool = False):
        return plan_words.rounds_summary(plan, rows, epsilon, self.expected_steps(plan),
                                         self.opening(plan.rho, plan.rounds), bounds)

    def fewest_rounds(self, plan: RhoPlan) -> int:
        """The rounds of the schedule's shortest run: every round after the first hardly moves the
        model, so each costs four times the one before, and the last spends what is left."""
        opening = self.opening(plan.rho, plan.rounds)
        left = selection.rho_after_one_way(plan.rho, len(self.sizes), opening["one_way_sigma"])
        cost = selection.RhoBudget.cost(opening["selection_epsilon"], opening["round_sigma"])
        return 1 + aim_rounds.fewest_left(left, cost)

    @classmethod
    def forget_compiled(cls) -> None:
        mbi()  # first: JAX is set up as the run's worker sets it up
        import jax
        jax.clear_caches()

    def expected_steps(self, plan: RhoPlan) -> int:
        """The rounds expected before the run (`aim_rounds.expected_rounds`: the fewest times what
        runs took beyond them at the signal, columns × released rows × ε); the run is held within
        `config.rounds_band` of them."""
        signal = len(self.sizes) * plan.population * plan.epsilon
        return aim_rounds.expected_rounds(self.fewest_rounds(plan), plan.rounds, signal)

    def timed_plan(self, plan: RhoPlan) -> RhoPlan:
        """The run's plan, the probe's rounds spending as the run's average round: each an equal
        share of what is left over the rounds expected (`aim_rounds.probe_round`), so that it
        selects marginals of the size the average round does (HMDA's last took twice its first).
        Its timed rounds (the 3rd and 4th: runs.timing) hold as many cliques as the run's middle
        round (a round is mostly compiling the model's structure, which grows with them: HMDA's
        took 1.8-2.3 s at the 2nd to 4th of 10, 3.7 s at the 10th) and are of the two kinds runs'
        rounds are, weighed as often as runs take them (`aim_rounds.probe_kind`)."""
        expected = max(2, self.expected_steps(plan))
        self.held_for_timing = max(0, expected // 2 - 2)
        self.timing_rounds = expected
        return plan

    def most_steps(self, plan: RhoPlan) -> int:
        return min(plan.rounds, aim_rounds.band(max(2, self.expected_steps(plan)),
                                                self.config.rounds_band)[1])

    def encode(self, table) -> RowCells | EngineCells:
        """Each row's cell in every column's public discretisation: the rows' cells in memory, or
        a table an engine holds, counted there (models.cells)."""
        return cells_of(table, self.encoder, list(self.sizes))

    @property
    def model_sizes(self) -> dict[str, int]:
        """Each column's cells in the graphical model: its public cells, or those kept apart plus
        the merged one."""
        return {name: len(self.kept[name]) + 1 if name in self.kept else size for name, size in self.sizes.items()}

    def domain(self):
        return mbi().Domain(tuple(self.sizes), tuple(self.model_sizes.values()))

    def _compress(self, first: dict[str, np.ndarray], sigma: float) -> None:
        """MST's domain compression (McKenna et al. 2021), post-processing of the first measurement:
        the cells of a column whose noisy count is below 3σ become one cell of the model (its
        measurement is their noisy counts summed), so that the pairs and triples of sparse columns
        spread the later rounds' noise over fewer cells and more of them fit the model; the rows
        drawn in a merged cell get one of its public cells in proportion to their noisy counts
        (clipped at zero; MST draws uniformly). A column with fewer than two such cells is left as
        it is."""
        for name, y in first.items():
            low = y < 3 * sigma
            if low.sum() >= 2:
                self.kept[name] = np.flatnonzero(~low)
                share = np.clip(y[low], 0.0, None)
                self.merged_weights[name] = share / share.sum() if share.sum() > 0 else np.full(low.sum(), 1 / low.sum())

    def _to_model(self, name: str, cells: np.ndarray) -> np.ndarray:
        """Public cells of a column to the model's cells."""
        if name not in self.kept:
            return cells
        mapping = np.full(self.sizes[name], len(self.kept[name]))
        mapping[self.kept[name]] = np.arange(len(self.kept[name]))
        return mapping[cells]

    def _to_public(self, name: str, cells: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """The model's cells of a column back to public cells: a merged one to one of its cells
        (`_compress`)."""
        if name not in self.kept:
            return cells
        kept = self.kept[name]
        merged = np.setdiff1d(np.arange(self.sizes[name]), kept)
        out = np.empty_like(cells)
        inside = cells < len(kept)
        out[inside] = kept[cells[inside]]
        out[~inside] = rng.choice(merged, size=int((~inside).sum()), p=self.merged_weights[name])
        return out

    def _first_measurement(self, name: str, y: np.ndarray, sigma: float):
        """A column's first measurement as the model reads it: its merged cells summed, weighted by
        1/√k so that the sum's noise is σ again (as mst.py re-expresses it)."""
        m = mbi()
        if name not in self.kept:
            return m.LinearMeasurement(y, (name,), stddev=sigma)
        kept = self.kept[name]
        k = self.sizes[name] - len(kept)
        weights = np.append(np.ones(len(kept)), 1.0 / math.sqrt(k))
        merged_sum = y.sum() - y[kept].sum()
        return m.LinearMeasurement(np.append(y[kept], merged_sum) * weights, (name,), stddev=sigma,
                                   query=lambda factor, w=weights: factor.datavector(flatten=True) * w)

    def best_total(self, count: float, measurements: list) -> float:
        """The row count the estimation holds its model to. A noisy released count (Laplace,
        `count_variance`) is combined, by inverse variance, with the count each measured marginal
        implies (its cells summed, variance stddev² × cells), as private-pgm's
        `minimum_variance_unbiased_total` weighs the marginals alone: post-processing of what was
        paid for. With a noisy count far off the true one, a known total it disagrees with would
        spread the difference over the cells (HMDA at ε = 1: Laplace scale 50 rows, the first
        measurement's implied totals a few rows); a public count is kept exact."""
        if self.count_variance <= 0:
            return float(count)
        values = [float(count)] + [float(np.sum(mm.noisy_measurement)) for mm in measurements]
        variances = [self.count_variance] + [float(mm.stddev) ** 2 * np.size(mm.noisy_measurement)
                                             for mm in measurements]
        return max(1.0, float(np.average(values, weights=1.0 / np.asarray(variances))))

    # --- private training ----------------------------------------------------------------------------
    def train_private(self, data: RowCells | EngineCells, plan: RhoPlan,
                      on_event: Callable[[dict], None] | None,
                      should_stop: Callable[[], bool] | None, steps: StepCount) -> TrainResult:
        m = mbi()
        cfg, start = self.config, time.perf_counter()
        total = float(plan.population)  # the released row count: public, or noisy and paid for
        budget = self.budget  # the plan's ρ, made by `fit`
        rng = secret_rng()
        rounds = plan.rounds
        # a round of the plan spends ρ/rounds, 90% measuring and 10% selecting; the first measures
        # every column
        opening = self.opening(budget.total, rounds)
        epsilon, sigma, first_sigma = opening["selection_epsilon"], opening["round_sigma"], opening["one_way_sigma"]
        steps.started += 1
        first, measurements = self._measure_columns(data, budget, first_sigma, rng)
        one_way = [(name,) for name in self.sizes]
        domain = self.domain()
        candidates = workload(self.model_sizes, cfg.degree, cfg.max_cells, self._target())
        answers = data.answers(candidates, self._to_model, self.model_sizes)
        estimator = m.estimation.MirrorDescent()
        events = []
        total = self.best_total(total, [m.LinearMeasurement(y, (name,), stddev=first_sigma)
                                        for name, y in first.items()])
        if self.held_for_timing:
            measurements += self._timing_measurements(domain, candidates, answers, total, budget,
                                                      rng)
        model = estimator.estimate(domain, measurements, known_total=total, iters=cfg.iters)
        self.model = model
        emit = self._emitter(on_event, events, start)
        # the rounds it is expected to take: first what the estimate before the run expected
        # (expected_steps), then those its budget still pays for, each next round's cost growing by
        # the share of rounds that quadrupled it so far, weighed with the share the first count
        # assumed (benchmarks/history/2026-11-27.md, "Estimates that hold")
        prior = self.timing_rounds or max(2, self.expected_steps(plan))
        low, high = aim_rounds.band(prior, cfg.rounds_band)
        emit(1, prior, None, [list(cl) for cl in one_way])
        assumed = aim_rounds.growth_expected(budget.left, budget.cost(epsilon, sigma), prior - 1)
        cancelled, done, quadrupled = False, 1, 0
        while not budget.exhausted:
            if should_stop is not None and should_stop():
                cancelled = True
                break
            if self.timing_rounds:
                epsilon, sigma = aim_rounds.probe_round(budget, self.timing_rounds, done)
            else:
                epsilon, sigma = aim_rounds.held(budget, epsilon, sigma, done, low, high)
            cost = budget.cost(epsilon, sigma)
            if budget.left < 2 * cost:  # the last round spends what is left
                epsilon, sigma = budget.schedule(budget.left)
            steps.started += 1
            kind, timed = aim_rounds.probe_kind(done) if self.timing_rounds else (None, {})
            chosen = aim_rounds.of_kind(candidates, model.cliques, kind)
            cl, before, bias = self._select(model, chosen, answers, budget, epsilon, sigma, rng)
            y = budget.measure(answers[cl], sigma, rng)
            measurements.append(m.LinearMeasurement(y, cl, stddev=sigma))
            model = estimator.estimate(domain, measurements, known_total=total, iters=cfg.iters, warm_start=model)
            self.model = model
            done += 1
            graphical.release_compiled(done)
            after = np.asarray(model.project(cl).datavector())
            loss = 0.5 * float(np.abs(before - y).sum()) / max(total, 1.0)
            # the measurement hardly moved the model
            if np.abs(after - before).sum() <= bias * after.size:
                (epsilon, sigma), quadrupled = selection.sharpened(epsilon, sigma), quadrupled + 1
            # more rounds quadrupling than assumed shorten the run; fewer do not lengthen it (they
            # come late, as the model nears the data: a run's first rounds seldom quadruple)
            share = max(assumed, (quadrupled + PRIOR_ROUNDS * assumed) / (done - 1 + PRIOR_ROUNDS))
            more = aim_rounds.fewest_left(budget.left, budget.cost(epsilon, sigma), 4.0 ** share)
            expected = done if budget.exhausted else min(high, max(low, done + more))
            emit(done, expected, loss, list(cl), **timed)
        # the pairs chosen (the first measured every column)
        self.rounds_log = [tuple(e["selected"]) for e in events[1:]]
        # the rounds it took when the budget ran out (the plan's count is an upper bound), else
        # those it expected
        planned = done if not cancelled else max(done, events[-1]["steps"] if events else rounds)
        return self.rounds_result(done, planned, cancelled, events, start, len(data))

    def _timing_measurements(self, domain, candidates: dict, answers: dict, total: float, budget,
                             rng) -> list:
        """A time estimate's probe only (`timed_plan`), on random rows from the public schema
        (nothing to protect): `held_for_timing` candidates at random, measured with a round's
        noise outside its budget (its timed rounds are not cut short) and held from its first
        fit, so that each timed round adds one clique to as many as a run's middle round holds.
        Only those a round would select: whose noise's expected error (bias × cells) is at most
        the rows (114 of 120 that runs selected on 11 tables, the rest within 1.4 times:
        benchmarks/aim_selected.py)."""
        m, sigma = mbi(), aim_rounds.probe_round(budget, self.timing_rounds, 1)[1]
        most_cells = total / (math.sqrt(2 / math.pi) * sigma)
        one_way = [(name,) for name in self.sizes]
        picked = graphical.random_cliques(domain, one_way, list(candidates), self.held_for_timing,
                                          self.config.max_model_size / 2, rng, most_cells)
        return [m.LinearMeasurement(answers[c] + rng.normal(0.0, sigma, answers[c].size), c,
                                    stddev=sigma) for c in picked]

    def _measure_columns(self, data: RowCells | EngineCells, budget, sigma: float, rng
                         ) -> tuple[dict, list]:
        """The first round: every column's counts with noise σ (compressed where the config says),
        as the counts and as the model's measurements."""
        first = {name: budget.measure(data.one_way(name, size), sigma, rng, "one-way marginal")
                 for name, size in self.sizes.items()}
        self.kept, self.merged_weights = {}, {}
        if self.config.compress:
            self._compress(first, sigma)
        return first, [self._first_measurement(name, y, sigma) for name, y in first.items()]

    def _select(self, model, candidates: dict, answers: dict, budget, epsilon: float, sigma: float, rng):
        """The exponential mechanism's choice of the marginal the model gets most wrong (its error
        less the noise's expected, weighted), among those whose measurement keeps the model within
        the size its spending allows; with the model's marginal before the measurement, and the
        noise's expected error per cell."""
        fits = graphical.SizeCheck(model, self.config.max_model_size * budget.spent / budget.total)
        keys = list(candidates)
        bias = math.sqrt(2 / math.pi) * sigma
        estimates = graphical.project_many(model, keys)
        weights = np.array([candidates[cl] for cl in keys])
        qualities = weights * np.array([np.abs(answers[cl] - estimates[cl]).sum() - bias * answers[cl].size
                                        for cl in keys])
        allowed = lambda i: fits(keys[i])  # noqa: E731
        cl = keys[budget.select(qualities, epsilon, graphical.largest_allowed(weights, allowed), rng, allowed)]
        return cl, estimates[cl], bias

    def _target(self) -> str | None:
        """The column the schema declares the target (public), when the config adds its sets to the
        workload."""
        if not self.config.target_triples:
            return None
        return next((c.name for c in self.schema.columns if c.role == "target"), None)

    def _emitter(self, on_event, events: list, start: float):
        def emit(done: int, expected: int, loss: float | None, selected: list, **extra) -> None:
            event = self.round_event(done, expected, loss, start, selected=selected,
                                     mechanism="AIM", **extra)
            events.append(event)
            if on_event is not None:
                on_event(event)
        return emit

    def ledger_details(self) -> dict:
        """The marginals its rounds selected and the numbers' bins, beside the ρ charged."""
        return {"marginals": [list(c) for c in self.rounds_log], "bins": self.config.n_bins}

    # --- sampling ------------------------------------------------------------------------------------
    def draw(self, n: int, conditions: dict | None = None, seed: int | None = None, **options) -> pd.DataFrame:
        """n rows from the graphical model; conditions fix their columns exactly (the model is
        conditioned on them before drawing)."""
        self._check_rows(n)
        if self.model is None:
            raise RuntimeError("the model is not fitted")
        m = mbi()
        conditions = self.schema.check_conditions(conditions)
        constraints, fixed = [], {}
        for name, value in conditions.items():
            fixed[name] = self.encoder.encode_value(name, value) - self.encoder.codecs[self.encoder.column_index(name)].offset
            cell = int(self._to_model(name, np.array([fixed[name]]))[0])
            constraints.append(m.Constraint(self.model.domain.project((name,)), valid=np.array([[cell]])))
        model = m.MarkovRandomField(potentials=self.model.potentials, marginals=self.model.marginals,
                                    total=float(n), constraints=tuple(constraints))
        with _numpy_global_seed(seed):
            cells = model.synthetic_data(int(n)).to_dict()
        rng = np.random.default_rng(None if seed is None else seed + 1)
        public = {name: np.full(int(n), fixed[name]) if name in fixed
                  else self._to_public(name, np.asarray(cells[name], np.int64), rng) for name in self.sizes}
        tokens = np.stack([public[c.spec.name] + c.offset for c in self.encoder.codecs], axis=1)
        table = self.encoder.decode(tokens, rng, self.config.numeric_decoding)
        for name, value in conditions.items():
            if self.schema[name].is_numeric and value is not None:
                table[name] = float(value)  # the bin holds the value; report the value asked for
        self.last_sample_info = {"rows": n, "method": "exact" if conditions else "unconditional",
                                 "exact_columns": list(conditions), "rejection_columns": []}
        return table

    # --- persistence ---------------------------------------------------------------------------------
    def weights_to_save(self) -> dict[str, torch.Tensor]:
        if self.model is None:
            return {}
        index = {name: i for i, name in enumerate(self.sizes)}
        return {"potential:" + ",".join(str(index[c]) for c in cl):
                torch.from_numpy(np.array(self.model.potentials[cl].values, dtype=np.float64))
                for cl in self.model.cliques}

    def load_weights(self, weights: dict[str, torch.Tensor], directory) -> None:
        """The saved tables, checked against the model's cells once `restore` knows which were
        merged."""
        names, tables = list(self.sizes), {}
        for key, tensor in weights.items():
            if not key.startswith("potential:"):
                raise KeyError(f"unexpected weight {key!r}")
            tables[tuple(names[int(i)] for i in key.split(":", 1)[1].split(","))] = tensor.numpy()
        self._potentials = tables

    def state(self) -> dict:
        return {**super().state(), "total": self.total, "rounds_log": [list(c) for c in self.rounds_log],
                "merged": {name: {"kept": [int(c) for c in cells],
                                  "weights": [float(w) for w in self.merged_weights[name]]}
                           for name, cells in self.kept.items()}}

    @property
    def total(self) -> float:
        return float(self.model.total) if self.model is not None else 0.0

    def restore(self, state: dict) -> None:
        tables = getattr(self, "_potentials", None)
        self.rounds_log = [tuple(c) for c in state.get("rounds_log", [])]
        merged = state.get("merged") or {}
        self.kept = {name: np.asarray(m["kept"], dtype=np.int64) for name, m in merged.items()}
        self.merged_weights = {name: np.asarray(m["weights"], dtype=np.float64) for name, m in merged.items()}
        if not tables:
            return
        m = mbi()
        domain, sizes = self.domain(), self.model_sizes
        for cl, values in tables.items():
            if values.shape != tuple(sizes[c] for c in cl):
                raise ValueError(f"the saved table of {cl} has shape {values.shape}, not the model's "
                                 f"{tuple(sizes[c] for c in cl)}; train the run again")
        factors = {cl: m.Factor(domain.project(cl), values) for cl, values in tables.items()}
        potentials = m.CliqueVector(domain, tuple(factors), factors)
        total = float(state.get("total") or 1.0)
        oracle = m.marginal_oracles.message_passing_stable
        self.model = m.MarkovRandomField(potentials=potentials, marginals=oracle(potentials, total), total=total)
        del self._potentials


@contextlib.contextmanager
def _numpy_global_seed(seed: int | None):
    """mbi draws rows from numpy's global generator: seed it for a seeded sample, and put it back
    after."""
    if seed is None:
        yield
        return
    state = np.random.get_state()
    np.random.seed(int(seed) % (2 ** 32))
    try:
        yield
    finally:
        np.random.set_state(state)
