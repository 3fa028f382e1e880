"""Noise calibration and ε after k steps, by Opacus' accountants (PRV by default, RDP available).

A model declares how its DP training samples (`SamplingShape`: what each step samples from, the expected
batch, the epochs, the clipping norm, and how many of the mechanism's neighbours one row can move); `plan`
turns that and a budget into a `NoisePlan`: the noise multiplier σ that makes the planned Poisson-sampled
steps end at the target (ε, δ). A plan then says what any number of its steps cost (`NoisePlan.spent`),
group privacy included, and gives the live curve (`NoisePlan.curve`). Nothing else computes an ε.

Mechanisms of one run compose here too (`compose`): every Gaussian mechanism (DP-SGD's subsampled steps, a
Gaussian measurement of marginals, which is the same mechanism with sampling rate 1) is composed by the
accountant exactly, and a plan may be calibrated with such measurements alongside it (`plan(alongside=...)`),
so that the run as a whole, not each part, ends at the target. A mechanism known by its zero-concentrated
DP ρ (`ZCDP`: the exponential mechanism's selections and the Gaussian measurements of an adaptive mechanism
such as AIM) composes with them by Rényi DP, where its curve is αρ at every order α (`rho_for` finds the ρ
such a mechanism may spend beside others).
"""
from __future__ import annotations

import functools
import math
import warnings
from dataclasses import asdict, dataclass, field, fields

import numpy as np
from opacus.accountants import RDPAccountant, create_accountant
from opacus.accountants.analysis import rdp as rdp_analysis
from opacus.accountants.utils import get_noise_multiplier

from .budget import BudgetError, check_budget

ACCOUNTANTS = ("prv", "rdp")
# PRV's calibration grows slow and memory-hungry as ε grows (about 10 s at ε = 10, a minute at 100, out of
# memory at 1000 for Adult's plan); above this ε the RDP accountant (a looser bound, computed in a second)
# is used, and the plan says so.
PRV_MAX_EPSILON = 10.0


def accountant_for(epsilon: float, accountant: str) -> str:
    """The accountant a plan for ε uses when `accountant` is asked for (see PRV_MAX_EPSILON)."""
    if accountant not in ACCOUNTANTS:
        raise BudgetError(f"accountant must be one of {', '.join(ACCOUNTANTS)}, not {accountant!r}")
    return "rdp" if accountant == "prv" and epsilon > PRV_MAX_EPSILON else accountant


def group_privacy(epsilon: float, delta: float, k: int) -> tuple[float, float]:
    """(ε, δ) between tables k neighbours apart, for an (ε, δ)-DP mechanism: (kε, δ·Σ_{i<k} e^{iε})."""
    return k * epsilon, delta * sum(math.exp(i * epsilon) for i in range(k))


def member_budget(epsilon: float, delta: float, k: int) -> tuple[float, float]:
    """The (ε, δ) a mechanism may spend so that group privacy over k neighbours stays within (ε, δ)."""
    return epsilon / k, delta / sum(math.exp(i * epsilon / k) for i in range(k))


@dataclass(frozen=True)
class SamplingShape:
    """How a model's DP training touches the data, declared by the model; `plan` calibrates the noise to it.

    population: what each step samples from (rows; DTGAN_G's critics); expected_batch: the expected Poisson
    batch, in items; epochs: passes over the population (steps = epochs / sampling rate); max_grad_norm: the
    clipping norm; group_size: how many of the mechanism's neighbouring inputs one row can move (DTGAN_G: a
    row's critic answers on both neighbouring tables, 2); min_noise_multiplier: the TAN rule (Sander et al.
    2023), the batch doubles (up to half the population) until σ reaches it, 0 for off."""

    population: int
    expected_batch: float
    epochs: float
    max_grad_norm: float = 1.0
    group_size: int = 1
    min_noise_multiplier: float = 0.0


@dataclass(frozen=True)
class Gaussian:
    """A Gaussian mechanism as an accountant composes it: `steps` draws, each of noise `noise_multiplier`
    times the L2 sensitivity, on a Poisson sample of rate `sample_rate` (1: the whole table)."""

    noise_multiplier: float
    sample_rate: float = 1.0
    steps: int = 1


@dataclass(frozen=True)
class ZCDP:
    """A mechanism known by its ρ of zero-concentrated DP (Bun & Steinke 2016): its Rényi divergence of every
    order α is at most αρ. The exponential mechanism with parameter ε is ε²/8-zCDP (Cesar & Rogers 2021), a
    Gaussian mechanism on the whole table of noise multiplier σ is 1/(2σ²)-zCDP, and ρs add up."""

    rho: float


def gaussian_rho(noise_multiplier: float) -> float:
    """ρ of a Gaussian mechanism on the whole table whose noise is σ times its L2 sensitivity."""
    return 1.0 / (2.0 * noise_multiplier ** 2)


def exponential_rho(epsilon: float) -> float:
    """ρ of the exponential mechanism with parameter ε (ε²/8, Cesar & Rogers 2021)."""
    return epsilon ** 2 / 8.0


def zcdp_epsilon(rho: float, delta: float) -> float:
    """ε at δ of a ρ-zCDP mechanism (by its Rényi curve, as `compose` converts it)."""
    return compose((ZCDP(float(rho)),), delta, "rdp") if rho > 0 else 0.0


def rho_for(epsilon: float, delta: float, alongside: tuple = ()) -> float:
    """The largest ρ a zCDP mechanism may spend so that it and the mechanisms `alongside`, composed, stay
    within (ε, δ)."""
    check_budget(epsilon, delta)
    alongside = tuple(alongside)
    if compose(alongside, delta, "rdp") >= epsilon:
        raise BudgetError(f"the mechanisms alongside spend ε={compose(alongside, delta, 'rdp'):.3g} of {epsilon:g} "
                          "already: nothing is left")
    low, high = 0.0, max(1.0, epsilon)
    while compose((ZCDP(high), *alongside), delta, "rdp") <= epsilon:
        low, high = high, 2 * high
    while high - low > 1e-6 * high:
        mid = (low + high) / 2
        if compose((ZCDP(mid), *alongside), delta, "rdp") <= epsilon:
            low = mid
        else:
            high = mid
    return low


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
    group_size: int = 1     # see SamplingShape; σ is calibrated to the member budget (member_budget)
    # the run's other mechanisms, for what the whole run has spent after k steps (the live curve): Gaussian
    # measurements composed with training ([σ, q, steps] each), and the ε spent before
    # (the noisy count, DP bounds)
    alongside: list = field(default_factory=list)
    prior_epsilon: float = 0.0

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
        """(ε, δ) after `steps` of this plan's steps (0, 0 before the first), group privacy applied."""
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
        return (self.epsilon, self.delta, self.accountant) == (epsilon, delta, accountant_for(epsilon, accountant))


@dataclass
class RhoPlan:
    """What an adaptive zCDP mechanism (AIM) may spend: ρ such that it and the run's Gaussian measurements
    alongside, composed, end at (ε, δ). The rounds are those planned at the start; the mechanism's schedule
    adapts, and its budget (`privacy.selection.RhoBudget`) bounds what it spends, not the rounds."""

    rho: float
    rounds: int
    epsilon: float
    delta: float
    planned_epsilon: float
    population: int = 0     # the row count as the run released it (public or noisy): the model's known total
    accountant: str = "zcdp"
    alongside: list = field(default_factory=list)
    prior_epsilon: float = 0.0
    kind: str = "zcdp"

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
        return f"ρ = {self.rho:.4g} (zCDP) over about {self.rounds} rounds"

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
        """The whole run's ε once the mechanism has spent ρ: what was spent before, plus it composed with
        the measurements alongside."""
        return self.prior_epsilon + compose((ZCDP(float(rho)), *self.gaussians_alongside()), self.delta, "rdp")


def plan_rho(epsilon: float, delta: float, rounds: int, rows: int, alongside: tuple[Gaussian, ...] = ()) -> RhoPlan:
    """The ρ an adaptive mechanism of `rounds` planned rounds may spend within (ε, δ), its Gaussian
    measurements `alongside` composed with it, on a table of `rows` rows (as the run released the count)."""
    if rounds < 1:
        raise BudgetError(f"an adaptive mechanism needs at least one round, not {rounds}")
    rho = rho_for(epsilon, delta, tuple(alongside))
    out = RhoPlan(rho=rho, rounds=int(rounds), epsilon=epsilon, delta=delta, planned_epsilon=0.0, population=int(rows),
                  alongside=[[g.noise_multiplier, g.sample_rate, g.steps] for g in alongside])
    out.planned_epsilon = out.spent_after(rho)
    return out


def plan_from_dict(data: dict) -> "NoisePlan | RhoPlan":
    """A saved plan as the kind it was saved as."""
    return RhoPlan.from_dict(data) if data.get("kind") == "zcdp" else NoisePlan.from_dict(data)


def plan(shape: SamplingShape, epsilon: float, delta: float, accountant: str = "prv",
         alongside: tuple[Gaussian, ...] = ()) -> NoisePlan:
    """The noise plan for a model's sampling shape within (ε, δ).

    alongside: Gaussian mechanisms of the same run (measurements); σ is then calibrated so that the
    training and they, composed by the accountant, end at (ε, δ). With a group size above 1 they are not
    composable with the training, and the training gets what they leave by basic composition."""
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


def _calibrate_composed(epsilon: float, delta: float, sample_rate: float, steps: int, accountant: str,
                        alongside: tuple[Gaussian, ...]) -> float:
    """σ for DP-SGD such that it and the `alongside` mechanisms, composed, end at (ε, δ): RDP's answer for the
    composition (RDP bounds ε from above, so its σ is enough), then with PRV a search below it."""
    if compose(alongside, delta, accountant) >= epsilon:
        raise BudgetError(f"the measurements alone spend ε={compose(alongside, delta, accountant):.3g} of "
                          f"{epsilon:g}: nothing is left for training; lower the share they take")

    def total(sigma: float, how: str) -> float:
        return compose((Gaussian(sigma, sample_rate, steps), *alongside), delta, how)

    def bisect(how: str, low: float, high: float, ratio: float) -> tuple[float, float]:
        """[low, high] narrowed on a log scale until high / low ≤ ratio; total(high) stays within ε."""
        while high / low > ratio:
            mid = math.sqrt(low * high)
            low, high = (mid, high) if total(mid, how) > epsilon else (low, mid)
        return low, high

    # RDP's σ for the composition (an upper bound on ε, so enough noise), by bisection: microseconds an evaluation
    low, high = 0.05, 1e4
    if total(high, "rdp") > epsilon:
        if accountant != "prv" or total(high, "prv") > epsilon:
            raise BudgetError(f"no noise level reaches ε={epsilon:g}, δ={delta:g} with the measurements alongside")
        # at a small ε RDP's bound on the measurements alone exceeds it (a Gaussian PRV sets to ε = 0.025 costs 0.10
        # by RDP at δ = 1e-5): bisect with PRV itself, about ten evaluations
        low, high = bisect("prv", low, high, 1.05)
        return _search_down(lambda sigma: total(sigma, "prv") - epsilon, low, high, 0.005 * epsilon)[1]
    low, high = bisect("rdp", low, high, 1.002)
    if accountant == "prv":  # PRV, tighter, needs less noise: bracket it below RDP's σ, then narrow it
        low = 0.85 * high
        while total(low, "prv") <= epsilon and low > 0.05:
            high, low = low, 0.85 * low
        low, high = _search_down(lambda sigma: total(sigma, "prv") - epsilon, low, high, 0.005 * epsilon)
    return high


def _search_down(excess, low: float, high: float, tolerance: float, max_evaluations: int = 12) -> tuple[float, float]:
    """Narrow [low, high] (excess(low) > 0 ≥ excess(high), excess decreasing) by regula falsi (Illinois), until
    high spends within `tolerance` of the target. Returns the bracket; high is always safe."""
    f_low, f_high = None, excess(high)
    side = 0
    for _ in range(max_evaluations):
        if -f_high <= tolerance or high - low <= 1e-4 * high:
            break
        if f_low is None:
            f_low = excess(low)
        mid = high - f_high * (high - low) / (f_high - f_low) if f_low != f_high else (low + high) / 2
        mid = min(max(mid, low + 0.02 * (high - low)), high - 0.02 * (high - low))
        f_mid = excess(mid)
        if f_mid > 0:
            low, f_low = mid, f_mid
            if side == -1:
                f_high /= 2
            side = -1
        else:
            high, f_high = mid, f_mid
            if side == 1:
                f_low /= 2
            side = 1
    return low, high


def gaussian_for(epsilon: float, delta: float, accountant: str = "prv") -> Gaussian:
    """One Gaussian mechanism on the whole table that alone spends (ε, δ): its noise multiplier."""
    check_budget(epsilon, delta)
    try:
        return Gaussian(_calibrate(epsilon, delta, 1.0, 1, accountant_for(epsilon, accountant)), 1.0, 1)
    except ValueError as e:
        raise BudgetError(f"no noise level reaches ε={epsilon:g}, δ={delta:g}: {e}") from None


# Rényi orders for a composition with zCDP terms: Opacus' orders and larger ones, where the conversion of a
# small ρ (ε = 0.25 is about ρ = 0.002) finds its best order
ZCDP_ORDERS = tuple(RDPAccountant.DEFAULT_ALPHAS) + (80, 100, 128, 160, 200, 256, 320, 400, 512, 640, 800, 1024,
                                                      1600, 2048, 3200, 4096, 8192)


def _is_spent(m) -> bool:
    return m.rho > 0 if isinstance(m, ZCDP) else m.steps > 0


@functools.lru_cache(maxsize=256)
def compose(mechanisms: tuple, delta: float, accountant: str = "prv") -> float:
    """ε of the composition of mechanisms (`Gaussian`, `ZCDP`) at δ, by the accountant (PRV composes
    heterogeneous Gaussian mechanisms numerically; RDP adds their Rényi curves, and composes zCDP terms,
    whatever accountant is asked for). 0 for none."""
    mechanisms = tuple(m for m in mechanisms if _is_spent(m))
    if not mechanisms:
        return 0.0
    zcdp = any(isinstance(m, ZCDP) for m in mechanisms)
    if accountant == "rdp" or zcdp:
        orders = ZCDP_ORDERS if zcdp else tuple(RDPAccountant.DEFAULT_ALPHAS)
        curve = sum(m.rho * np.asarray(orders) if isinstance(m, ZCDP)
                    else _rdp_one_step(m.noise_multiplier, m.sample_rate, orders) * m.steps for m in mechanisms)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            eps, _ = rdp_analysis.get_privacy_spent(orders=list(orders), rdp=curve, delta=delta)
        return float(eps)
    acc = create_accountant(mechanism=accountant)
    acc.history = [(m.noise_multiplier, m.sample_rate, m.steps) for m in mechanisms]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            prv = float(acc.get_epsilon(delta=delta))
        except (ValueError, RuntimeError, MemoryError):
            prv = float("inf")
    # PRV's numerical bound, never above what RDP proves
    return min(prv, compose(mechanisms, delta, "rdp"))


def plan_noise(n_rows: int, expected_batch_size: float, epochs: float, epsilon: float, delta: float,
               accountant: str = "prv", max_grad_norm: float = 1.0, alongside: tuple[Gaussian, ...] = ()) -> NoisePlan:
    """Calibrate σ so that `epochs` worth of Poisson-sampled steps end at (ε, δ); with Gaussian measurements
    `alongside`, so that the steps and they, composed by the accountant, do."""
    check_budget(epsilon, delta)
    accountant = accountant_for(epsilon, accountant)
    if n_rows < 2:
        raise BudgetError("DP-SGD needs at least two rows")
    if epochs <= 0:
        raise BudgetError(f"epochs must be positive, not {epochs}")
    sample_rate = min(1.0, float(expected_batch_size) / n_rows)
    steps = max(1, int(round(epochs / sample_rate)))
    try:
        sigma = (_calibrate_composed(epsilon, delta, sample_rate, steps, accountant, tuple(alongside)) if alongside
                 else _calibrate(epsilon, delta, sample_rate, steps, accountant))
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
def _rdp_one_step(noise_multiplier: float, sample_rate: float, orders: tuple | None = None):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return rdp_analysis.compute_rdp(q=sample_rate, noise_multiplier=noise_multiplier, steps=1,
                                        orders=list(orders) if orders else RDPAccountant.DEFAULT_ALPHAS)


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
    """ε the run has spent after each step of a plan, for live display without an expensive accountant call
    per step: the ε spent before training (`NoisePlan.prior_epsilon`) plus the training's, composed with
    the plan's measurements alongside when there are any.

    A PRV accountant call takes 0.1-0.6 s, so the chosen accountant is evaluated exactly on a grid of
    steps (the final step included, so the last value is exact). Between grid points the curve reports
    the smaller of two upper bounds on ε(step): the accountant's value at the next grid point (ε grows
    with steps) and the RDP bound at this step (RDP composes linearly, so the whole RDP curve costs one
    call). Group privacy is applied to the training's ε (NoisePlan.group_size); measurements alongside a
    group are then added by their own ε.
    """

    def __init__(self, plan: NoisePlan, points: int = 8):
        self.plan = plan
        self.alongside = plan.gaussians_alongside()
        self.composed = bool(self.alongside) and plan.group_size == 1
        self.grid = sorted({max(1, round(plan.steps * (i + 1) / points)) for i in range(points)} | {plan.steps})
        self._orders = RDPAccountant.DEFAULT_ALPHAS
        self._rdp_one_step = _rdp_one_step(plan.noise_multiplier, plan.sample_rate)
        self._rdp_alongside = sum((_rdp_one_step(g.noise_multiplier, g.sample_rate) * g.steps
                                   for g in self.alongside), 0.0) if self.composed else 0.0
        self._separate = 0.0 if self.composed or not self.alongside else compose(
            self.alongside, plan.delta, plan.accountant)
        self.values = [self._mechanism(k) for k in self.grid]

    def _mechanism(self, step: int) -> float:
        p = self.plan
        if self.composed:
            return compose((Gaussian(p.noise_multiplier, p.sample_rate, step), *self.alongside), p.mechanism_delta,
                           p.accountant)
        return epsilon_after(p.noise_multiplier, p.sample_rate, step, p.mechanism_delta, p.accountant)

    def rdp_bound(self, step: int) -> float:
        """The RDP accountant's bound on the mechanism's ε after `step` steps (with the measurements composed;
        no group privacy)."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            eps, _ = rdp_analysis.get_privacy_spent(orders=self._orders,
                                                    rdp=self._rdp_one_step * step + self._rdp_alongside,
                                                    delta=self.plan.mechanism_delta)
        return float(eps)

    def at(self, step: int) -> float:
        before = self.plan.prior_epsilon
        if step <= 0:
            return before + (compose(self.alongside, self.plan.delta, self.plan.accountant) if self.alongside else 0.0)
        e1 = None
        for k, v in zip(self.grid, self.values):
            if k == step:
                e1 = v
                break
            if k > step:
                e1 = min(v, self.rdp_bound(step))
                break
        if e1 is None:
            e1 = self._mechanism(step)
        return before + self._separate + group_privacy(e1, self.plan.mechanism_delta, self.plan.group_size)[0]
