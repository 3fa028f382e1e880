"""Planning a run's noise within its budget, before anything is spent: what a model declares
(`SamplingShape`), and the plans the accountant's figures give for it (`NoisePlan` for DP-SGD,
`RhoPlan` for an adaptive zCDP mechanism).

A model declares how its DP training samples (`SamplingShape`: what each step samples from, the
expected batch, the epochs, the clipping norm, and how many of the mechanism's neighbours one row
can move); `plan` turns that and a budget into a `NoisePlan`: the noise multiplier σ that makes the
planned Poisson-sampled steps end at the target (ε, δ). A plan then says what any number of its
steps cost (`NoisePlan.spent`), group privacy included, and gives the live curve
(`NoisePlan.curve`). A plan may be calibrated with the run's Gaussian measurements alongside it
(`plan(alongside=...)`), so that the run as a whole, not each part, ends at the target. Every ε here
comes from `accounting`.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields

from .accounting import (ZCDP, EpsilonCurve, Gaussian, accountant_for, calibrate_noise, compose, epsilon_after,
                         group_privacy, member_budget, rho_for)
from .budget import BudgetError, check_budget


@dataclass(frozen=True)
class SamplingShape:
    """How a model's DP training touches the data, declared by the model; `plan` calibrates the
    noise to it.

    population: what each step samples from (rows; DTGAN_G's critics); expected_batch: the expected
    Poisson batch, in items; epochs: passes over the population (steps = epochs / sampling rate);
    max_grad_norm: the clipping norm; group_size: how many of the mechanism's neighbouring inputs
    one row can move (DTGAN_G: a row's critic answers on both neighbouring tables, 2);
    min_noise_multiplier: the TAN rule (Sander et al. 2023), the batch doubles (up to half the
    population) until σ reaches it, 0 for off."""

    population: int
    expected_batch: float
    epochs: float
    max_grad_norm: float = 1.0
    group_size: int = 1
    min_noise_multiplier: float = 0.0


@dataclass
class NoisePlan:
    """What the accountant computed before training: the run's DP-SGD parameters."""

    noise_multiplier: float
    sample_rate: float
    expected_batch_size: float
    steps: int
    epsilon: float          # the target ε for DP-SGD
    delta: float
    accountant: str
    max_grad_norm: float
    planned_epsilon: float  # the accountant's ε after all planned steps (≤ target)
    # see SamplingShape; σ is calibrated to the member budget (member_budget)
    group_size: int = 1
    # the run's other mechanisms, for what the whole run has spent after k steps (the live curve):
    # Gaussian measurements composed with training ([σ, q, steps] each), and the ε spent before
    # (the noisy count, DP bounds)
    alongside: list = field(default_factory=list)
    prior_epsilon: float = 0.0
    # the ε the plan was asked for when training got only what the measurements left (a group size
    # above 1: they compose by basic composition), None when it is `epsilon`
    asked_epsilon: float | None = None

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "NoisePlan":
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})

    @property
    def mechanism_delta(self) -> float:
        """The δ the subsampled Gaussian mechanism itself was calibrated to."""
        return member_budget(self.epsilon, self.delta, self.group_size)[1]

    def spent(self, steps: int) -> tuple[float, float]:
        """(ε, δ) after `steps` of this plan's steps (0, 0 before the first), group privacy
        applied."""
        if steps <= 0:
            return 0.0, 0.0
        e1 = epsilon_after(self.noise_multiplier, self.sample_rate, steps, self.mechanism_delta, self.accountant)
        return group_privacy(e1, self.mechanism_delta, self.group_size)

    def gaussians_alongside(self) -> tuple[Gaussian, ...]:
        return tuple(Gaussian(float(a), float(b), int(c)) for a, b, c in self.alongside)

    def curve(self, points: int = 8) -> "EpsilonCurve":
        return EpsilonCurve(self, points)

    unit = "steps"  # what its steps are called
    steps_adapt = False  # DP-SGD takes every planned step

    def describe(self) -> str:
        """The plan in a few words, for a person."""
        return f"{self.accountant.upper()} accountant, σ = {self.noise_multiplier:.3f}"

    def matches(self, epsilon: float, delta: float, accountant: str) -> bool:
        """Whether this plan was calibrated for this budget."""
        asked = self.epsilon if self.asked_epsilon is None else self.asked_epsilon
        return (asked, self.delta) == (epsilon, delta) and self.accountant == accountant_for(self.epsilon, accountant)


@dataclass
class RhoPlan:
    """What a family's own zCDP mechanism (AIM's adaptive rounds, or any without DP-SGD) may spend:
    ρ such that it and the run's Gaussian measurements alongside, composed, end at (ε, δ). The
    rounds are those planned at the start; the mechanism's schedule may adapt, and its budget
    (`privacy.selection.RhoBudget`) bounds what it spends, not the rounds."""

    rho: float
    rounds: int
    epsilon: float
    delta: float
    planned_epsilon: float
    # the row count as the run released it (public or noisy): the model's known total
    population: int = 0
    accountant: str = "zcdp"
    alongside: list = field(default_factory=list)
    prior_epsilon: float = 0.0
    kind: str = "zcdp"
    # its family's ledger words and entry kind (`SynthModel.dp_mechanism`, `ledger_kind`): a process
    # that dies is charged in them ("": AIM's, in a plan saved before they were kept)
    mechanism: str = ""
    ledger_kind: str = ""

    @property
    def steps(self) -> int:
        return self.rounds

    @property
    def expected_batch_size(self) -> float:
        """The rows a round reads: all of them."""
        return float(self.population)

    unit = "rounds"  # what its steps are called
    steps_adapt = True  # the mechanism may end before its planned rounds

    def describe(self) -> str:
        """The plan in a few words, for a person."""
        return f"ρ = {self.rho:.4g} (zCDP), in as many rounds as it takes to spend it"

    def to_dict(self) -> dict:
        return {**asdict(self), "steps": self.rounds}

    @classmethod
    def from_dict(cls, data: dict) -> "RhoPlan":
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})

    def matches(self, epsilon: float, delta: float, accountant: str) -> bool:
        return (self.epsilon, self.delta) == (epsilon, delta)

    def gaussians_alongside(self) -> tuple[Gaussian, ...]:
        return tuple(Gaussian(float(a), float(b), int(c)) for a, b, c in self.alongside)

    def spent_after(self, rho: float) -> float:
        """The whole run's ε once the mechanism has spent ρ: what was spent before, plus it composed
        with the measurements alongside."""
        return self.prior_epsilon + compose((ZCDP(float(rho)), *self.gaussians_alongside()), self.delta, "rdp")

    def rounds_spent(self, rho: float) -> float:
        """What the rounds and the measurements composed with them spent, without what was spent
        before."""
        return self.spent_after(rho) - self.prior_epsilon


def plan_rho(epsilon: float, delta: float, rounds: int, rows: int,
             alongside: tuple[Gaussian, ...] = (), mechanism: str = "",
             ledger_kind: str = "") -> RhoPlan:
    """The ρ a mechanism of `rounds` planned rounds (adaptive, or one) may spend within (ε, δ), its
    Gaussian measurements `alongside` composed with it, on a table of `rows` rows (as the run
    released the count); mechanism, ledger_kind: its family's ledger words and entry kind."""
    if rounds < 1:
        raise BudgetError(f"a mechanism paid in ρ needs at least one round, not {rounds}")
    rho = rho_for(epsilon, delta, tuple(alongside))
    out = RhoPlan(rho=rho, rounds=int(rounds), epsilon=epsilon, delta=delta, planned_epsilon=0.0, population=int(rows),
                  alongside=[[g.noise_multiplier, g.sample_rate, g.steps] for g in alongside],
                  mechanism=mechanism, ledger_kind=ledger_kind)
    out.planned_epsilon = out.spent_after(rho)
    return out


def plan_class(data: dict) -> "type[NoisePlan] | type[RhoPlan]":
    """The kind of plan a saved one is (what its steps are called, whether they adapt), without
    reading it."""
    return RhoPlan if data.get("kind") == "zcdp" else NoisePlan


def plan_from_dict(data: dict) -> "NoisePlan | RhoPlan":
    """A saved plan as the kind it was saved as."""
    return plan_class(data).from_dict(data)


def plan(shape: SamplingShape, epsilon: float, delta: float, accountant: str = "prv",
         alongside: tuple[Gaussian, ...] = ()) -> NoisePlan:
    """The noise plan for a model's sampling shape within (ε, δ).

    alongside: Gaussian mechanisms of the same run (measurements); σ is then calibrated so that the
    training and they, composed by the accountant, end at (ε, δ). With a group size above 1 they are
    not composable with the training, and the training gets what they leave by basic composition."""
    if shape.group_size < 1:
        raise BudgetError(f"the group size must be at least 1, not {shape.group_size}")
    check_budget(epsilon, delta)
    alongside = tuple(alongside)
    if alongside and shape.group_size > 1:
        left = epsilon - compose(alongside, delta, accountant)
        if left <= 0:
            raise BudgetError("the measurements leave nothing of ε for training")
        out = plan(shape, left, delta, accountant)
        out.alongside = [[g.noise_multiplier, g.sample_rate, g.steps] for g in alongside]
        out.asked_epsilon = epsilon
        return out
    eps1, delta1 = member_budget(epsilon, delta, shape.group_size)
    batch = shape.expected_batch

    inner = plan_noise(shape.population, batch, shape.epochs, eps1, delta1, accountant, shape.max_grad_norm, alongside)
    while inner.noise_multiplier < shape.min_noise_multiplier and batch * 2 <= shape.population / 2:
        batch *= 2
        inner = plan_noise(shape.population, batch, shape.epochs, eps1, delta1, accountant, shape.max_grad_norm,
                           alongside)
    out = NoisePlan(noise_multiplier=inner.noise_multiplier, sample_rate=inner.sample_rate,
                    expected_batch_size=inner.expected_batch_size, steps=inner.steps, epsilon=epsilon, delta=delta,
                    accountant=inner.accountant, max_grad_norm=shape.max_grad_norm, planned_epsilon=0.0,
                    group_size=shape.group_size,
                    alongside=[[g.noise_multiplier, g.sample_rate, g.steps] for g in alongside])
    out.planned_epsilon = out.spent(out.steps)[0]
    return out


def plan_noise(n_rows: int, expected_batch_size: float, epochs: float, epsilon: float, delta: float,
               accountant: str = "prv", max_grad_norm: float = 1.0, alongside: tuple[Gaussian, ...] = ()) -> NoisePlan:
    """Calibrate σ so that `epochs` worth of Poisson-sampled steps end at (ε, δ); with Gaussian
    measurements `alongside`, so that the steps and they, composed by the accountant, do."""
    check_budget(epsilon, delta)
    accountant = accountant_for(epsilon, accountant)
    if n_rows < 2:
        raise BudgetError("DP-SGD needs at least two rows")
    if epochs <= 0:
        raise BudgetError(f"epochs must be positive, not {epochs}")
    sample_rate = min(1.0, float(expected_batch_size) / n_rows)
    steps = max(1, int(round(epochs / sample_rate)))
    try:
        sigma = calibrate_noise(epsilon, delta, sample_rate, steps, accountant, tuple(alongside))
    except ValueError as e:
        raise BudgetError(f"no noise level reaches ε={epsilon:g}, δ={delta:g} in {steps} steps: {e}") from None
    planned = epsilon_after(sigma, sample_rate, steps, delta, accountant)
    return NoisePlan(noise_multiplier=float(sigma), sample_rate=sample_rate,
                     expected_batch_size=sample_rate * n_rows, steps=steps, epsilon=epsilon, delta=delta,
                     accountant=accountant, max_grad_norm=max_grad_norm, planned_epsilon=planned)
