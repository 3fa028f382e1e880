"""Privacy budget, noise calibration and the ledger of every ε spent on a run.

The accountant is Opacus' (PRV by default, RDP available). Calibration searches the noise multiplier
that makes the planned number of Poisson-sampled steps end at the target (ε, δ). The ledger lists every
mechanism that touched the private table; its total is the basic-composition sum of the entries,
which is an upper bound on the run's privacy loss.

DP randomness (the noise added to gradients and statistics, Poisson sampling, a mechanism's draws) comes
from `secret_generator` / `secret_rng`: fresh entropy from the operating system on every call, never
derived from the run's seed and never stored. An attacker who reads the code and knows the seed, the
other rows and the released output still cannot replay a run. The run's seed governs only what is not
part of a privacy mechanism: initial weights, splits, and sampling from the trained model.
"""
from __future__ import annotations

import functools
import math
import secrets
import time
import warnings
from dataclasses import asdict, dataclass, field

import numpy as np
import torch
from opacus.accountants import RDPAccountant, create_accountant
from opacus.accountants.analysis import rdp as rdp_analysis
from opacus.accountants.utils import get_noise_multiplier
from opacus.optimizers.optimizer import _generate_noise

ACCOUNTANTS = ("prv", "rdp")


class BudgetError(ValueError):
    """A privacy budget that cannot be honoured; the message says why."""


def secret_generator(device: torch.device | str = "cpu") -> torch.Generator:
    """A torch generator for DP randomness on `device`, seeded with 64 bits from the OS's CSPRNG.

    A new one for every run (and every mechanism): the seed is held nowhere but in the generator, so
    neither the run's seed nor anything in the run folder can replay the noise or the batches."""
    gen = torch.Generator(device=device)
    gen.manual_seed(secrets.randbits(64))
    return gen


def secret_rng() -> np.random.Generator:
    """A numpy generator for a mechanism's draws (DP quantiles, measurements), seeded with 128 bits from
    the OS's CSPRNG and never stored."""
    return np.random.Generator(np.random.PCG64(secrets.randbits(128)))


def gaussian_noise(std: float, like: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """N(0, std²) noise shaped like `like`, drawn as Opacus' secure mode does (the sum of four draws
    halved, the first draw thrown away), which resists attacks on the floating-point representation of a
    single Gaussian draw (Mironov 2012; Holohan et al. 2021)."""
    return _generate_noise(std, like, generator=generator, secure_mode=True)


def default_delta(n_rows: int) -> float:
    """The largest power of ten strictly below 1/n: the usual rule that δ must be well under 1/n."""
    if n_rows < 1:
        raise BudgetError("cannot choose δ for an empty table")
    delta = 10.0 ** math.floor(math.log10(1.0 / n_rows))
    return delta / 10 if delta >= 1.0 / n_rows else delta


def delta_warning(delta: float, n_rows: int) -> str | None:
    """A plain warning when δ is not below 1/n (then a mechanism may publish a whole row)."""
    if delta >= 1.0 / n_rows:
        return (f"δ = {delta:g} is not below 1/n = {1.0 / n_rows:.3g}: with this δ the guarantee allows "
                f"a whole row to be disclosed. Choose δ below {1.0 / n_rows:.1g}.")
    return None


def check_budget(epsilon: float, delta: float) -> None:
    if not isinstance(epsilon, (int, float)) or not math.isfinite(epsilon) or epsilon <= 0:
        raise BudgetError(f"ε must be a positive finite number, not {epsilon!r}")
    if not isinstance(delta, (int, float)) or not (0 < delta < 1):
        raise BudgetError(f"δ must lie strictly between 0 and 1, not {delta!r}")


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


@dataclass
class LedgerEntry:
    mechanism: str
    epsilon: float
    delta: float = 0.0
    accountant: str | None = None
    details: dict = field(default_factory=dict)
    time: float = field(default_factory=time.time)


@dataclass
class PrivacyLedger:
    """Every mechanism that touched the private table, and what it cost.

    total ε and δ are sums over entries (basic composition): an upper bound, and what reports show.
    """

    target_epsilon: float
    target_delta: float
    n_rows: int
    schema_provenance: dict = field(default_factory=dict)
    entries: list[LedgerEntry] = field(default_factory=list)

    @property
    def spent_epsilon(self) -> float:
        return float(sum(e.epsilon for e in self.entries))

    @property
    def spent_delta(self) -> float:
        return float(sum(e.delta for e in self.entries))

    @property
    def remaining_epsilon(self) -> float:
        return self.target_epsilon - self.spent_epsilon

    def record(self, mechanism: str, epsilon: float, delta: float = 0.0, accountant: str | None = None,
               **details) -> LedgerEntry:
        entry = LedgerEntry(mechanism=mechanism, epsilon=float(epsilon), delta=float(delta),
                            accountant=accountant, details=details)
        self.entries.append(entry)
        return entry

    def warnings(self) -> list[str]:
        out = []
        if self.schema_provenance.get("warning"):
            out.append(self.schema_provenance["warning"])
        w = delta_warning(self.target_delta, self.n_rows)
        if w:
            out.append(w)
        if self.spent_epsilon > self.target_epsilon * 1.0001:
            out.append(f"spent ε {self.spent_epsilon:.4g} exceeds the target {self.target_epsilon:g}")
        return out

    def to_dict(self) -> dict:
        return {
            "target_epsilon": self.target_epsilon,
            "target_delta": self.target_delta,
            "n_rows": self.n_rows,
            "spent_epsilon": self.spent_epsilon,
            "spent_delta": self.spent_delta,
            "composition": "basic (sum of entries)",
            "schema_provenance": self.schema_provenance,
            "warnings": self.warnings(),
            "entries": [asdict(e) for e in self.entries],
        }

    @classmethod
    def from_dict(cls, data: dict) -> "PrivacyLedger":
        ledger = cls(target_epsilon=data["target_epsilon"], target_delta=data["target_delta"],
                     n_rows=data["n_rows"], schema_provenance=data.get("schema_provenance", {}))
        ledger.entries = [LedgerEntry(**e) for e in data.get("entries", [])]
        return ledger
