"""A noise plan in a steward's words, before anything is spent: the figures the model page shows,
the line under them and the warnings. A family's `plan_summary` hook gives it
(models.traits.Described); the page renders any summary and never asks which family or which kind of
plan it has."""
from __future__ import annotations

from dataclasses import dataclass, field

# σ above this: the synthetic table will be poor (the noise drowns what a step learns)
LARGE_NOISE_MULTIPLIER = 10.0


@dataclass(frozen=True)
class Figure:
    label: str
    value: str
    help: str = ""


@dataclass(frozen=True)
class PlanSummary:
    figures: list[Figure]
    caption: str
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def paid_alongside(bounds: bool, statistics: bool) -> str:
    """What the run composes with its training, in words: ', the bounds and the statistics'."""
    parts = ["the row count"] + (["the bounds"] if bounds else []) + (["the statistics"] if statistics else [])
    return ", ".join(parts[:-1]) + (" and " if len(parts) > 1 else "") + parts[-1]


def dp_sgd_summary(plan, rows: int, epsilon: float, epochs: float, parameters: int, asked_accountant: str,
                   bounds: bool, statistics: bool, unit: str = "row") -> PlanSummary:
    """DP-SGD's plan: σ, the batch, the steps, the sampling rate and what training alone would cost.
    unit: what one example is ("row", or "person" on linked tables: their row with all their child
    rows)."""
    units = f"{unit}s"
    figures = [
        Figure("Noise added (σ)", f"{plan.noise_multiplier:.3g}",
               "The noise multiplier: the random noise added at each step, in units of the most one row may move "
               "the model. Larger means more private and less faithful."),
        Figure(f"{units.capitalize()} per step (batch)", f"{plan.expected_batch_size:,.0f}",
               f"The expected batch size: each {unit} joins a step at random, so the count varies a little."),
        Figure("Training steps", f"{plan.steps:,}", "How many times the model is updated. Each step spends a "
                                                    "little of ε."),
        Figure(f"Share of {units} per step (q)", f"{plan.sample_rate:.3g}",
               f"The sampling rate: the chance that a given {unit} joins a step (Poisson sampling)."),
        Figure("Training's ε alone", f"{plan.planned_epsilon:.3g}",
               "What training would cost if it were the only use of the data; combined with the row count and "
               "the statistics, the whole run stays within your ε."),
    ]
    whole = " (their row and all their child rows together)" if unit == "person" else ""
    caption = (f"{epochs:g} epochs over {rows:,} training {units} with Poisson sampling; each {unit}'s gradient"
               f"{whole} is clipped to norm {plan.max_grad_norm:g} and Gaussian noise of σ × that norm is added. "
               f"Model: {parameters:,} parameters. Accountant: {plan.accountant.upper()}. The run's whole ε, with "
               f"{paid_alongside(bounds, statistics)} composed, stays within {epsilon:g}.")
    notes = [f"The {plan.accountant.upper()} accountant is used at this ε: {asked_accountant.upper()} would take "
             "minutes to compute it."] if plan.accountant != asked_accountant else []
    warnings = ["The noise is very large for this table and ε: expect a poor synthetic table. A larger ε, more rows "
                "or the quick size helps."] if plan.noise_multiplier > LARGE_NOISE_MULTIPLIER else []
    return PlanSummary(figures, caption, notes, warnings)


def rounds_summary(plan, rows: int, epsilon: float, rounds: int, opening: dict, bounds: bool) -> PlanSummary:
    """An adaptive mechanism's plan (AIM): rounds paid from a zero-concentrated budget ρ."""
    figures = [
        Figure("Rounds, about", f"{rounds:,}",
               "Each round picks the overall statistic the model gets most wrong and measures it with noise. The "
               "rounds adapt: when a measurement hardly helps, the next ones get less noise and there are fewer of "
               "them; the run ends when its budget is spent. This is how many runs like this one "
               "took, and the run is held within a quarter of it either way, so that its time is "
               "known before it starts; the train page counts them as they happen."),
        Figure("Noise on the columns (σ)", f"{opening['one_way_sigma']:.3g}",
               "The Gaussian noise added to each count of the first round, which measures every column alone, in "
               f"rows. A later round measures a pair of columns with noise of about {opening['round_sigma']:.3g} at "
               "the start; the rounds adapt from there."),
        Figure("Budget (ρ, zero-concentrated)", f"{plan.rho:.3g}",
               "What the rounds may spend together, in the unit their noise is planned in; the rounds stop when it "
               "is spent."),
        Figure("Its ε alone", f"{plan.planned_epsilon:.3g}",
               "What the rounds would cost if they were the only use of the data; with the row count, the whole "
               "run stays within your ε."),
    ]
    caption = (f"Every column's counts first, then about {rounds:,} rounds over {rows:,} rows: each selects a pair "
               f"of columns (ε = {opening['selection_epsilon']:.3g} per choice) and measures it. The accountant "
               f"composes them by zero-concentrated DP; the run's whole ε, with {paid_alongside(bounds, False)}, "
               f"stays within {epsilon:g}. σ is the spread of the noise added to each count, in rows; ρ is the same "
               "budget in the unit in which zero-concentrated DP adds rounds up.")
    return PlanSummary(figures, caption)


def rho_summary(plan, rows: int, epsilon: float, rounds: int, mechanism: str, bounds: bool,
                statistics: bool) -> PlanSummary:
    """A family's own mechanism paid in ρ (zero-concentrated DP), in the words it declares."""
    figures = [
        Figure("Rounds" if rounds == plan.rounds else "Rounds, about", f"{rounds:,}",
               "How many times the mechanism reads the table; each round spends part of ρ."),
        Figure("Budget (ρ, zero-concentrated)", f"{plan.rho:.3g}",
               "What the mechanism may spend, in the unit its noise is planned in."),
        Figure("Its ε alone", f"{plan.planned_epsilon:.3g}",
               "What the mechanism would cost if it were the only use of the data; with the rest "
               "of the run, the whole run stays within your ε."),
    ]
    caption = (f"{mechanism}, over {rows:,} rows, paid from ρ = {plan.rho:.3g}. The accountant "
               f"composes it by zero-concentrated DP; the run's whole ε, with "
               f"{paid_alongside(bounds, statistics)}, stays within {epsilon:g}.")
    return PlanSummary(figures, caption)
