"""Statistics of the private table released with noise and paid from the budget: the row count.

A run needs the number of rows n to plan its training (the sampling rate, the default δ) and a steward
needs it for the synthetic table's size. Unless the steward declares n public (Schema.rows), it is measured
once with the Laplace mechanism (sensitivity 1 when a row is added or removed) from a small share of ε and
recorded in the ledger; everything downstream (the plan, δ, the report, the default number of synthetic
rows) uses that noisy count, never the exact one.
"""
from __future__ import annotations

import math

from .ledger import COUNT, PrivacyLedger
from .randomness import secret_rng

COUNT_SHARE = 0.02          # of ε, for the noisy row count (ε = 1: Laplace noise of scale 50 rows)
COUNT_EPSILON_FLOOR = 0.01  # but at least this (a count from less is too noisy to plan with) ...
COUNT_SHARE_CAP = 0.05      # ... and never more than this share of ε
TAIL = 1e-3                 # the noisy count plus its (1 − TAIL) upper tail bounds n from above


def count_epsilon(epsilon: float) -> float:
    """The part of ε a noisy row count costs."""
    return min(max(COUNT_SHARE * epsilon, COUNT_EPSILON_FLOOR), COUNT_SHARE_CAP * epsilon)


def noisy_count(n: int, epsilon: float, ledger: PrivacyLedger) -> int:
    """n + Laplace(1/ε), rounded, at least 2; recorded in the ledger (ε-DP, δ = 0)."""
    scale = 1.0 / epsilon
    value = max(2, int(round(n + secret_rng().laplace(0.0, scale))))
    ledger.record("Noisy row count (Laplace mechanism)", epsilon=epsilon, delta=0.0, kind=COUNT,
                  noise_scale=scale, count=value)
    return value


def rows_upper_bound(count: int, epsilon: float | None) -> int:
    """A number of rows n stays below with chance at least 1 − TAIL, given its count (exact if ε is None)."""
    if epsilon is None:
        return int(count)
    return int(count + math.ceil(math.log(1 / (2 * TAIL)) / epsilon))
