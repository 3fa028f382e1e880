"""How a run's ε is split before training, one rule for `fit` and for a page's preview alike.

The noisy row count (unless the rows are declared public) and the DP bounds (the part of ε the
steward gives them) are paid first; what they leave is for training and the measurements that run
alongside it: the quantiles of the numeric columns and the marginals, each at its share of what is
left (what it would spend alone), composed with training by the accountant so that the whole run
ends at its ε.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..schema import Schema
from .accounting import Gaussian, gaussian_for, member_budget
from .budget import check_calibration_share, check_quantile_share, check_run_budget
from .measurements import count_epsilon, delta_may_differ, quantile_columns, run_delta


@dataclass(frozen=True)
class Split:
    """What is left for training and the measurements, and what each measurement spends alone (0:
    none)."""
    left: float
    quantiles: float = 0.0
    marginals: float = 0.0

    def alongside(self, delta: float, schema: Schema, accountant: str = "prv") -> tuple[Gaussian, ...]:
        """The measurements as the accountant composes them with training, for planning: the
        quantiles (none without a numeric column to measure), then the marginals."""
        out: tuple[Gaussian, ...] = ()
        if self.quantiles > 0 and quantile_columns(schema):
            out += (gaussian_for(self.quantiles, delta, accountant),)
        if self.marginals > 0:
            out += (gaussian_for(self.marginals, delta, accountant),)
        return out


def split_left(left: float, calibration_share: float = 0.0, quantile_share: float = 0.0) -> Split:
    """What `left` (the ε the count and bounds left) gives each measurement at its share."""
    check_calibration_share(calibration_share)
    check_quantile_share(quantile_share, calibration_share)
    return Split(left=left, quantiles=quantile_share * left, marginals=calibration_share * left)


# of ε, offered for the DP bounds of numeric columns the schema leaves without them
BOUNDS_SHARE = 0.1


def default_bounds_epsilon(epsilon: float) -> float:
    """The part of ε offered for estimating missing bounds unless the steward types another."""
    return BOUNDS_SHARE * epsilon


def before_training(bounds_epsilon: float | None = 0.0, values_epsilon: float | None = 0.0) -> float:
    """What a run spends on the schema's missing facts before anything else: DP bounds and DP value
    sets, by basic composition (both pure ε)."""
    return float(bounds_epsilon or 0.0) + float(values_epsilon or 0.0)


def epsilon_left(epsilon: float, bounds_epsilon: float = 0.0, rows_public: bool = False) -> float:
    """What a run's ε leaves for training and the measurements once the bounds and, unless the rows
    are public, the noisy count are paid (what `fit` finds left in its ledger when the bounds spend
    what they were given)."""
    return epsilon - bounds_epsilon - (0.0 if rows_public else count_epsilon(epsilon))


def planned_delta(asked: float | None, epsilon: float, rows: int, rows_public: bool
                  ) -> tuple[float, float | None]:
    """(the δ a run of ε on `rows` rows would use, another it may use instead or None): a preview's
    and the forecast's; the run asks run_delta of the count it releases."""
    count = None if rows_public or not epsilon or epsilon <= 0 else count_epsilon(epsilon)
    return run_delta(asked, rows, count), delta_may_differ(asked, rows, count)


def planned_split(epsilon: float, delta: float | None, bounds_epsilon: float = 0.0, rows_public: bool = False,
                  calibration_share: float = 0.0, quantile_share: float = 0.0) -> Split:
    """The split a run of this budget would make, before anything is spent: for a page's preview."""
    check_run_budget(epsilon, delta, bounds_epsilon)
    return split_left(epsilon_left(epsilon, bounds_epsilon, rows_public), calibration_share, quantile_share)


def separate_tables(epsilon: float, delta: float, max_children: int) -> tuple[tuple[float, float], tuple[float, float]]:
    """The baseline for linked tables (benchmarks/bench_linked.py): a parents' and a children's
    table synthesized apart at one total (ε, δ) protecting a person. Half each; the children's half
    is what a run over child rows may spend so that group privacy over a person's max_children rows
    stays within it (accounting.member_budget). Returns ((ε, δ) of the parents' run, (ε, δ) of the
    children's run)."""
    half = (epsilon / 2, delta / 2)
    return half, member_budget(*half, max_children)
