"""Noise calibration and ε after k steps, by Opacus' accountants (PRV by default, RDP available).

Calibration searches the noise multiplier that makes the planned number of Poisson-sampled steps end at
the target (ε, δ).
"""
from __future__ import annotations

import functools
import warnings
from dataclasses import asdict, dataclass

from opacus.accountants import RDPAccountant, create_accountant
from opacus.accountants.analysis import rdp as rdp_analysis
from opacus.accountants.utils import get_noise_multiplier

from .budget import BudgetError, check_budget

ACCOUNTANTS = ("prv", "rdp")


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

    def to_dict(self) -> dict:
        return asdict(self)


def plan_noise(n_rows: int, expected_batch_size: float, epochs: float, epsilon: float, delta: float,
               accountant: str = "prv", max_grad_norm: float = 1.0) -> NoisePlan:
    """Calibrate σ so that `epochs` worth of Poisson-sampled steps end at (ε, δ)."""
    check_budget(epsilon, delta)
    if accountant not in ACCOUNTANTS:
        raise BudgetError(f"accountant must be one of {', '.join(ACCOUNTANTS)}, not {accountant!r}")
    if n_rows < 2:
        raise BudgetError("DP-SGD needs at least two rows")
    if epochs <= 0:
        raise BudgetError(f"epochs must be positive, not {epochs}")
    sample_rate = min(1.0, float(expected_batch_size) / n_rows)
    steps = max(1, int(round(epochs / sample_rate)))
    try:
        sigma = _calibrate(epsilon, delta, sample_rate, steps, accountant)
    except ValueError as e:
        raise BudgetError(f"no noise level reaches ε={epsilon:g}, δ={delta:g} in {steps} steps: {e}") from None
    planned = epsilon_after(sigma, sample_rate, steps, delta, accountant)
    return NoisePlan(noise_multiplier=float(sigma), sample_rate=sample_rate,
                     expected_batch_size=sample_rate * n_rows, steps=steps, epsilon=epsilon, delta=delta,
                     accountant=accountant, max_grad_norm=max_grad_norm, planned_epsilon=planned)


@functools.lru_cache(maxsize=128)
def _calibrate(epsilon: float, delta: float, sample_rate: float, steps: int, accountant: str) -> float:
    """Opacus' σ search, remembered: a run plans once and reports, tests plan the same budget many times."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # RDP's "optimal order is the largest alpha" is noise here
        return float(get_noise_multiplier(target_epsilon=epsilon, target_delta=delta, sample_rate=sample_rate,
                                          steps=steps, accountant=accountant, epsilon_tolerance=0.005 * epsilon))


@functools.lru_cache(maxsize=256)
def _rdp_one_step(noise_multiplier: float, sample_rate: float):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return rdp_analysis.compute_rdp(q=sample_rate, noise_multiplier=noise_multiplier, steps=1,
                                        orders=RDPAccountant.DEFAULT_ALPHAS)


def epsilon_after(noise_multiplier: float, sample_rate: float, steps: int, delta: float, accountant: str) -> float:
    """ε spent after `steps` Poisson-sampled Gaussian steps (0 before the first)."""
    if steps <= 0:
        return 0.0
    if accountant == "rdp":
        # what Opacus' RDPAccountant computes (RDP composes linearly in the steps), with the expensive
        # one-step RDP curve computed once per (σ, q)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            eps, _ = rdp_analysis.get_privacy_spent(orders=RDPAccountant.DEFAULT_ALPHAS,
                                                    rdp=_rdp_one_step(noise_multiplier, sample_rate) * steps,
                                                    delta=delta)
        return float(eps)
    acc = create_accountant(mechanism=accountant)
    acc.history = [(noise_multiplier, sample_rate, steps)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return float(acc.get_epsilon(delta=delta))


class EpsilonCurve:
    """ε spent after each step, for live display without an expensive accountant call per step.

    A PRV accountant call takes 0.1-0.6 s, so the chosen accountant is evaluated exactly on a grid of
    steps (the final step included, so the last value is exact). Between grid points the curve reports
    the smaller of two upper bounds on ε(step): the accountant's value at the next grid point (ε grows
    with steps) and the RDP bound at this step (RDP composes linearly, so the whole RDP curve costs one
    call).
    """

    def __init__(self, plan: NoisePlan, points: int = 8):
        self.plan = plan
        self.grid = sorted({max(1, round(plan.steps * (i + 1) / points)) for i in range(points)} | {plan.steps})
        self.values = [epsilon_after(plan.noise_multiplier, plan.sample_rate, k, plan.delta, plan.accountant)
                       for k in self.grid]
        self._orders = RDPAccountant.DEFAULT_ALPHAS
        self._rdp_one_step = _rdp_one_step(plan.noise_multiplier, plan.sample_rate)

    def rdp_bound(self, step: int) -> float:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            eps, _ = rdp_analysis.get_privacy_spent(orders=self._orders, rdp=self._rdp_one_step * step,
                                                    delta=self.plan.delta)
        return float(eps)

    def at(self, step: int) -> float:
        if step <= 0:
            return 0.0
        for k, v in zip(self.grid, self.values):
            if k == step:
                return v
            if k > step:
                return min(v, self.rdp_bound(step))
        return epsilon_after(self.plan.noise_multiplier, self.plan.sample_rate, step,
                             self.plan.delta, self.plan.accountant)
