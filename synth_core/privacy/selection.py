"""An adaptive mechanism's privacy: marginals chosen by the exponential mechanism and measured by
the Gaussian mechanism, round after round, within a budget of zero-concentrated DP ρ (AIM, McKenna
et al. 2022).

A `RhoBudget` is what such a mechanism may spend (`accounting.rho_for`: the ρ that, composed with
the run's other Gaussian mechanisms, ends at the run's (ε, δ)). Each round asks it for a schedule
(`next_round`): the selection's ε and the measurement's σ; it refuses a round past the budget, so
however many rounds run and however the schedule adapts, the ρ spent never exceeds it. The draws
come from secret randomness (`randomness.secret_rng`). `record` writes what was spent (ρ, and ε at
the run's δ) to the ledger, as one entry the accountant composes by its ρ, whether the mechanism
finished, was cancelled or failed.
Any family with its own mechanism (no DP-SGD) spends from such a budget: AIM's selections, or
measurements alone (`sigma_for`: equal ones that spend what is left); its entry carries its own
words and kind.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from .accounting import exponential_rho, gaussian_rho, zcdp_epsilon
from .budget import BudgetError
from .ledger import SELECTED, LedgerEntry, PrivacyLedger
from .randomness import noisy_counts

# AIM's split of a round's ρ: this share to the measurement, the rest to the selection
MEASUREMENT_SHARE = 0.9


def opening(rho: float, rounds: int, columns: int, one_way_share: float = 0.0) -> dict:
    """How a run with budget ρ and `rounds` planned rounds starts: the noise σ on every column's
    counts in the first round (in the share of ρ `one_way_share` gives them, each column costing
    1/2σ²; with no share, at the plan's pace and in at most half of ρ when there are few rounds and
    many columns), and the selection's ε and the measurement's σ of a later round at the plan's pace
    (the schedule adapts from there)."""
    budget = RhoBudget(rho)
    epsilon, sigma = budget.schedule(budget.round_cost(rounds))
    first = math.sqrt(columns / (2 * one_way_share * rho)) if one_way_share else max(sigma, math.sqrt(columns / rho))
    return {"one_way_sigma": first, "selection_epsilon": epsilon, "round_sigma": sigma}


def rho_after_one_way(rho: float, columns: int, sigma: float) -> float:
    """What ρ leaves once `columns` columns are measured alone, each with noise σ."""
    return rho - columns * gaussian_rho(sigma)


def sharpened(epsilon: float, sigma: float) -> tuple[float, float]:
    """The next round's (selection ε, measurement σ) when a measurement hardly moved the model:
    twice as sharp a choice, half the noise (AIM's annealing; each such round costs four times the
    one before)."""
    return 2 * epsilon, sigma / 2


@dataclass
class RhoBudget:
    """ρ an adaptive mechanism may spend, and what it has spent (every mechanism counted as it
    starts)."""

    total: float
    spent: float = 0.0
    selections: int = 0
    measurements: int = 0
    log: list = field(default_factory=list)  # (what, ρ) per mechanism, for the ledger

    def __post_init__(self):
        if not self.total > 0:
            raise BudgetError(f"an adaptive mechanism needs a positive ρ, not {self.total}")

    @property
    def left(self) -> float:
        return max(0.0, self.total - self.spent)

    def _spend(self, rho: float, what: str) -> None:
        if self.spent + rho > self.total * (1 + 1e-9):
            raise BudgetError(f"{what} would spend ρ={rho:.4g} with {self.left:.4g} left of {self.total:.4g}")
        self.spent += rho
        self.log.append((what, rho))

    def round_cost(self, rounds: int) -> float:
        """ρ of one of `rounds` equal rounds of the whole budget."""
        return self.total / rounds

    @staticmethod
    def cost(epsilon: float, sigma: float) -> float:
        """ρ of a round: a selection with parameter ε and a measurement of noise σ."""
        return exponential_rho(epsilon) + gaussian_rho(sigma)

    @property
    def exhausted(self) -> bool:
        return self.left <= 1e-12 * self.total

    @property
    def share_spent(self) -> float:
        """The share of the budget spent so far (0 to 1), for a progress bar."""
        return self.spent / self.total

    def sigma_for(self, measurements: int) -> float:
        """σ of each of `measurements` equal Gaussian measurements (L2 sensitivity 1, ρ 1/(2σ²)
        each) that together spend what is left of the budget."""
        if measurements < 1 or self.exhausted:
            raise BudgetError(f"{measurements} measurements cannot spend ρ={self.left:.4g}")
        return math.sqrt(measurements / (2 * self.left))

    def schedule(self, rho: float) -> tuple[float, float]:
        """(the selection's ε, the measurement's σ) of a round that spends ρ."""
        return math.sqrt(8 * (1 - MEASUREMENT_SHARE) * rho), math.sqrt(1 / (2 * MEASUREMENT_SHARE * rho))

    def measure(self, counts: np.ndarray, sigma: float, rng: np.random.Generator | None = None,
                what: str = "measurement") -> np.ndarray:
        """counts (one marginal: a row moves one cell by 1, L2 sensitivity 1) + N(0, σ²) per cell,
        paid; drawn by the secure sampler and rounded (randomness.noisy_counts). `rng` draws the
        selections, not this noise (unused here)."""
        self._spend(gaussian_rho(sigma), what)
        self.measurements += 1
        return noisy_counts(counts, sigma)

    def select(self, qualities: np.ndarray, epsilon: float, sensitivity: float, rng: np.random.Generator,
               allowed: Callable[[int], bool] | None = None) -> int:
        """The exponential mechanism over the candidates `allowed` accepts (every one when None):
        index i drawn with probability ∝ exp(ε·q_i / (2·Δ)) among them, paid. Drawn by the
        Gumbel-max trick: each score plus its own Gumbel noise, the candidates taken from the
        highest, the first allowed wins. That is exactly the mechanism run over the allowed
        candidates alone (the argmax of a subset of Gumbel-perturbed scores), but `allowed` (which
        may be costly) is asked only of the candidates above the one drawn. Δ must bound the
        quality's sensitivity over the allowed candidates; whether a candidate is allowed must not
        depend on the private data."""
        self._spend(exponential_rho(epsilon), "selection")
        self.selections += 1
        q = np.asarray(qualities, float)
        if not np.isfinite(q).any():
            raise ValueError("no candidate has a finite quality")
        scores = 0.5 * epsilon / sensitivity * (q - q[np.isfinite(q)].max()) + rng.gumbel(size=len(q))
        for i in np.argsort(-scores, kind="stable"):
            if not np.isfinite(scores[i]):
                break  # a candidate whose quality cannot be computed is never drawn
            if allowed is None or allowed(int(i)):
                return int(i)
        raise ValueError("no allowed candidate has a finite quality")


def record(ledger: PrivacyLedger, budget: RhoBudget, delta: float, cancelled: bool = False,
           interrupted: bool = False, mechanism: str = "", kind: str = "",
           **details) -> LedgerEntry:
    """Charge what a mechanism paid in ρ spent: its ρ, and ε at δ (what it would cost alone).
    mechanism, kind: the words and entry kind its family declares (`dp_mechanism`, `ledger_kind`);
    "": AIM's."""
    name = mechanism or ("Marginals selected (exponential mechanism) and measured "
                         "(Gaussian mechanism)")
    return ledger.record(name + (" (interrupted)" if interrupted else ""), epsilon=zcdp_epsilon(budget.spent, delta),
                         delta=delta, accountant="zcdp", kind=kind or SELECTED, rho=budget.spent,
                         rho_budget=budget.total,
                         selections=budget.selections, measurements=budget.measurements, cancelled=cancelled,
                         **details)
