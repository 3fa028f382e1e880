"""ε by Opacus' accountants (PRV by default, RDP available): the composition of a run's mechanisms,
ε after k steps, the σ that ends at a target (`calibrate_noise`), and the live curve. Nothing else
computes an ε; `planning` asks this module for every figure it plans to.

Mechanisms of one run compose here (`compose`): every Gaussian mechanism (DP-SGD's subsampled steps,
a Gaussian measurement of marginals, which is the same mechanism with sampling rate 1) is composed
by the accountant exactly. A mechanism known by its zero-concentrated DP ρ (`ZCDP`: the exponential
mechanism's selections and the Gaussian measurements of an adaptive mechanism such as AIM) composes
with them by Rényi DP, where its curve is αρ at every order α (`rho_for` finds the ρ such a
mechanism may spend beside others). Group privacy (`group_privacy`, `member_budget`) converts a
mechanism's (ε, δ) to that of rows that move several of its inputs. `EpsilonCurve` is what a planned
run has spent after each step, for live display.
"""
from __future__ import annotations

import functools
import math
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING

from types import SimpleNamespace

import numpy as np

from .. import import_clock
from .budget import BudgetError, check_budget

if TYPE_CHECKING:
    from .planning import NoisePlan

@functools.cache
def _opacus() -> SimpleNamespace:
    """Opacus' accountants, imported when an ε is first computed: importing Opacus imports torch,
    seconds that the CLI's listing and schema commands (and a ledger read from disk, whose
    composition it keeps) need not wait. Its RDP curve is remembered (`_remembered`)."""
    with import_clock.timed("opacus", "opacus"):
        from opacus.accountants import RDPAccountant, create_accountant
        from opacus.accountants.analysis import rdp
    if not hasattr(rdp.compute_rdp, "remembered"):
        rdp.compute_rdp = _remembered(rdp.compute_rdp)
    return SimpleNamespace(rdp=rdp, create_accountant=create_accountant,
                           orders=list(RDPAccountant.DEFAULT_ALPHAS))


def _remembered(compute_rdp):
    """Opacus' `compute_rdp` with each (q, σ, orders) computed once: its curve after k steps is k
    times the one-step curve, which is what Opacus returns too (the same array times k, so the same
    bits). Planning a tiny fit asked it 94 times for about 30 curves, and PRV asks RDP for its
    domain on every evaluation: with fractional orders and a small σ a curve takes 40-60 ms (a
    series summed in Python per order), a third of a small fit's time."""
    @functools.lru_cache(maxsize=4096)
    def one_step(q: float, noise_multiplier: float, orders) -> np.ndarray:
        return compute_rdp(q=q, noise_multiplier=noise_multiplier, steps=1,
                           orders=list(orders) if isinstance(orders, tuple) else orders)

    @functools.wraps(compute_rdp)
    def remembered(*, q: float, noise_multiplier: float, steps: int, orders):
        key = orders if isinstance(orders, float) else tuple(orders)
        return one_step(float(q), float(noise_multiplier), key) * steps

    remembered.remembered = True
    return remembered


ACCOUNTANTS = ("prv", "rdp")
# PRV's calibration grows slow and memory-hungry as ε grows (about 10 s at ε = 10, a minute at 100,
# out of memory at 1000 for Adult's plan); above this ε the RDP accountant (a looser bound, computed
# in a second) is used, and the plan says so.
PRV_MAX_EPSILON = 10.0


def accountant_for(epsilon: float, accountant: str) -> str:
    """The accountant a plan for ε uses when `accountant` is asked for (see PRV_MAX_EPSILON)."""
    if accountant not in ACCOUNTANTS:
        raise BudgetError(f"accountant must be one of {', '.join(ACCOUNTANTS)}, not {accountant!r}")
    return "rdp" if accountant == "prv" and epsilon > PRV_MAX_EPSILON else accountant


def group_privacy(epsilon: float, delta: float, k: int) -> tuple[float, float]:
    """(ε, δ) between tables k neighbours apart, for an (ε, δ)-DP mechanism: (kε, δ·Σ_{i<k}
    e^{iε})."""
    return k * epsilon, delta * sum(math.exp(i * epsilon) for i in range(k))


def member_budget(epsilon: float, delta: float, k: int) -> tuple[float, float]:
    """The (ε, δ) a mechanism may spend so that group privacy over k neighbours stays within (ε,
    δ)."""
    return epsilon / k, delta / sum(math.exp(i * epsilon / k) for i in range(k))


@dataclass(frozen=True)
class Gaussian:
    """A Gaussian mechanism as an accountant composes it: `steps` draws, each of noise
    `noise_multiplier` times the L2 sensitivity, on a Poisson sample of rate `sample_rate` (1: the
    whole table)."""

    noise_multiplier: float
    sample_rate: float = 1.0
    steps: int = 1


@dataclass(frozen=True)
class ZCDP:
    """A mechanism known by its ρ of zero-concentrated DP (Bun & Steinke 2016): its Rényi divergence
    of every order α is at most αρ. The exponential mechanism with parameter ε is ε²/8-zCDP (Cesar &
    Rogers 2021), a Gaussian mechanism on the whole table of noise multiplier σ is 1/(2σ²)-zCDP, and
    ρs add up."""

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
    """The largest ρ a zCDP mechanism may spend so that it and the mechanisms `alongside`, composed,
    stay within (ε, δ)."""
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


def gaussian_for(epsilon: float, delta: float, accountant: str = "prv") -> Gaussian:
    """One Gaussian mechanism on the whole table that alone spends (ε, δ): its noise multiplier."""
    check_budget(epsilon, delta)
    try:
        return Gaussian(calibrate_noise(epsilon, delta, 1.0, 1, accountant_for(epsilon, accountant)), 1.0, 1)
    except ValueError as e:
        raise BudgetError(f"no noise level reaches ε={epsilon:g}, δ={delta:g}: {e}") from None


@functools.cache
def zcdp_orders() -> tuple:
    """Rényi orders for a composition with zCDP terms: Opacus' orders and larger ones, where the
    conversion of a small ρ (ε = 0.25 is about ρ = 0.002) finds its best order."""
    return tuple(_opacus().orders) + (80, 100, 128, 160, 200, 256, 320, 400, 512, 640, 800, 1024, 1600, 2048, 3200,
                                      4096, 8192)


def _is_spent(m) -> bool:
    return m.rho > 0 if isinstance(m, ZCDP) else m.steps > 0


def _orders_for(mechanisms: tuple, integer: bool = False) -> tuple:
    """The Rényi orders RDP composes `mechanisms` on (larger ones with a zCDP term); `integer`:
    only the whole ones, whose curves cost a tenth and whose bound is looser (fewer orders)."""
    zcdp = any(isinstance(m, ZCDP) for m in mechanisms)
    orders = zcdp_orders() if zcdp else tuple(_opacus().orders)
    return tuple(o for o in orders if float(o).is_integer()) if integer else orders


def _rdp_spent(mechanisms: tuple, delta: float, orders: tuple) -> tuple[float, float]:
    """ε at δ of the mechanisms' Rényi curves added up, on `orders` (Opacus' conversion), and the
    order that gave it."""
    curve = sum(m.rho * np.asarray(orders) if isinstance(m, ZCDP)
                else _rdp_one_step(m.noise_multiplier, m.sample_rate, orders) * m.steps
                for m in mechanisms)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        eps, order = _opacus().rdp.get_privacy_spent(orders=list(orders), rdp=curve, delta=delta)
    return float(eps), float(order)


def _rdp_epsilon(mechanisms: tuple, delta: float, orders: tuple) -> float:
    return _rdp_spent(mechanisms, delta, orders)[0]


@functools.lru_cache(maxsize=256)
def compose(mechanisms: tuple, delta: float, accountant: str = "prv") -> float:
    """ε of the composition of mechanisms (`Gaussian`, `ZCDP`) at δ, by the accountant (PRV composes
    heterogeneous Gaussian mechanisms numerically; RDP adds their Rényi curves, and composes zCDP
    terms, whatever accountant is asked for). 0 for none."""
    mechanisms = tuple(m for m in mechanisms if _is_spent(m))
    if not mechanisms:
        return 0.0
    if accountant == "rdp" or any(isinstance(m, ZCDP) for m in mechanisms):
        return _rdp_epsilon(mechanisms, delta, _orders_for(mechanisms))
    acc = _opacus().create_accountant(mechanism=accountant)
    acc.history = [(m.noise_multiplier, m.sample_rate, m.steps) for m in mechanisms]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            prv = float(acc.get_epsilon(delta=delta))
        except (ValueError, RuntimeError, MemoryError):
            prv = float("inf")
    # PRV's numerical bound, never above what RDP proves
    return min(prv, compose(mechanisms, delta, "rdp"))


@functools.lru_cache(maxsize=128)
def calibrate_noise(epsilon: float, delta: float, sample_rate: float, steps: int, accountant: str,
                    alongside: tuple[Gaussian, ...] = ()) -> float:
    """σ such that `steps` Poisson-sampled Gaussian steps of rate `sample_rate`, composed with the
    Gaussian mechanisms `alongside` (a run's measurements), end at (ε, δ) by the accountant,
    within 0.5% of ε; remembered (a run plans once and reports it, the model page on every
    rerun).

    Each σ tried is a new Rényi curve, 40-100 ms at a tiny fit's rate (Opacus sums a series in
    Python per fractional order): 13 of them made planning a third of a small fit's time. A bound
    on fewer orders is looser, so a σ found on them is enough on all. So RDP's σ is found on the
    integer orders (4 ms a curve), narrowed on the orders within 1 of the best of them, and checked
    on all; PRV, tighter, searches below it."""
    if alongside and compose(alongside, delta, accountant) >= epsilon:
        spent = compose(alongside, delta, accountant)
        raise BudgetError(f"the measurements alone spend ε={spent:.3g} of {epsilon:g}: nothing is "
                          "left for training; lower the share they take")
    everything = _orders_for(alongside)
    whole = _orders_for(alongside, integer=True)

    def total(sigma: float, how) -> float:
        """ε by an accountant's name, or by RDP on a tuple of orders."""
        mechanisms = (Gaussian(sigma, sample_rate, steps), *alongside)
        if isinstance(how, tuple):
            return _rdp_epsilon(mechanisms, delta, how)
        return compose(mechanisms, delta, how)

    def excess(how):
        return lambda sigma: total(sigma, how) - epsilon

    def bisect(how, low: float, high: float, ratio: float) -> tuple[float, float]:
        """[low, high] narrowed on a log scale until high / low ≤ ratio; high stays within ε."""
        while high / low > ratio:
            mid = math.sqrt(low * high)
            low, high = (mid, high) if total(mid, how) > epsilon else (low, mid)
        return low, high

    def narrow(how, high: float) -> float:
        """Down from `high` (within ε by `how`) to where `how` spends ε, within 0.2% of it."""
        step = 1.002
        while total(high / step, how) <= epsilon and high / step > 0.05:
            high, step = high / step, 1.04
        return _search_down(excess(how), high / step, high, 0.002 * epsilon)[1]

    low, high = 0.05, 1e4
    if total(high, whole) <= epsilon:
        high = bisect(whole, low, high, 1.002)[1]
        best = _rdp_spent((Gaussian(high, sample_rate, steps), *alongside), delta, whole)[1]
        near = tuple(o for o in everything if o in whole or abs(o - best) < 1)
        high = narrow(near, high)
        if accountant == "rdp" and total(high, "rdp") < 0.998 * epsilon:
            high = narrow("rdp", high)  # the best order is further off
    elif total(high, "rdp") <= epsilon:
        high = narrow("rdp", bisect("rdp", low, high, 1.002)[1])
    else:
        if accountant != "prv" or total(high, "prv") > epsilon:
            raise BudgetError("even σ = 10,000 spends more" + (" with the measurements alongside"
                                                               if alongside else ""))
        # at a small ε RDP's bound on the measurements alone exceeds it (a Gaussian PRV sets to
        # ε = 0.025 costs 0.10 by RDP at δ = 1e-5): bisect with PRV itself, about ten evaluations
        low, high = bisect("prv", low, high, 1.05)
        return _search_down(excess("prv"), low, high, 0.005 * epsilon)[1]
    if accountant == "prv":
        low = 0.85 * high
        while total(low, "prv") <= epsilon and low > 0.05:
            high, low = low, 0.85 * low
        low, high = _search_down(excess("prv"), low, high, 0.005 * epsilon)
    return high


def _search_down(excess, low: float, high: float, tolerance: float,
                 max_evaluations: int = 12) -> tuple[float, float]:
    """Narrow [low, high] (excess(low) > 0 ≥ excess(high), excess decreasing) by regula falsi
    (Illinois), until high spends within `tolerance` of the target. Returns the bracket; high is
    always safe."""
    f_low, f_high = None, excess(high)
    side = 0
    for _ in range(max_evaluations):
        if -f_high <= tolerance or high - low <= 1e-4 * high:
            break
        if f_low is None:
            f_low = excess(low)
        mid = (high - f_high * (high - low) / (f_high - f_low) if f_low != f_high
               else (low + high) / 2)
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


@functools.lru_cache(maxsize=256)
def _rdp_one_step(noise_multiplier: float, sample_rate: float, orders: tuple | None = None):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return _opacus().rdp.compute_rdp(q=sample_rate, noise_multiplier=noise_multiplier, steps=1,
                                         orders=list(orders) if orders else _opacus().orders)


def epsilon_after(noise_multiplier: float, sample_rate: float, steps: int, delta: float, accountant: str) -> float:
    """ε spent after `steps` Poisson-sampled Gaussian steps (0 before the first)."""
    if steps <= 0:
        return 0.0
    if accountant == "rdp":
        # what Opacus' RDPAccountant computes (RDP composes linearly in the steps), with the
        # expensive one-step RDP curve computed once per (σ, q)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            eps, _ = _opacus().rdp.get_privacy_spent(orders=_opacus().orders,
                                                     rdp=_rdp_one_step(noise_multiplier, sample_rate) * steps,
                                                     delta=delta)
        return float(eps)
    acc = _opacus().create_accountant(mechanism=accountant)
    acc.history = [(noise_multiplier, sample_rate, steps)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return float(acc.get_epsilon(delta=delta))


class EpsilonCurve:
    """ε the run has spent after each step of a plan, for live display without an expensive
    accountant call per step: the ε spent before training (`NoisePlan.prior_epsilon`) plus the
    training's, composed with the plan's measurements alongside when there are any.

    A PRV accountant call takes 0.1-0.6 s, so the chosen accountant is evaluated exactly on a grid
    of steps (the final step included, so the last value is exact). Between grid points the curve
    reports the smaller of two upper bounds on ε(step): the accountant's value at the next grid
    point (ε grows with steps) and the RDP bound at this step (RDP composes linearly, so the whole
    RDP curve costs one call). Group privacy is applied to the training's ε (NoisePlan.group_size);
    measurements alongside a group are then added by their own ε.
    """

    def __init__(self, plan: "NoisePlan", points: int = 8):
        self.plan = plan
        self.alongside = plan.gaussians_alongside()
        self.composed = bool(self.alongside) and plan.group_size == 1
        self.grid = sorted({max(1, round(plan.steps * (i + 1) / points)) for i in range(points)} | {plan.steps})
        self._orders = _opacus().orders
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
        """The RDP accountant's bound on the mechanism's ε after `step` steps (with the measurements
        composed; no group privacy)."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            eps, _ = _opacus().rdp.get_privacy_spent(orders=self._orders,
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
