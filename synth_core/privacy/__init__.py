"""The privacy layer: every ε is computed or recorded here.

    budget       what a budget (ε, δ) may be; the default δ
    accounting   ε by Opacus' accountants: the composition of a run's mechanisms, ε after k steps, the live curve
    planning     what a model declares (SamplingShape), and the noise plans calibrated to it before anything is spent
    ledger       every mechanism that touched the private table, and what it cost
    randomness   secret generators for DP noise, Poisson sampling and mechanism draws
    bounds       DP quantiles, and numeric bounds a schema lacks paid from the budget
"""
from .accounting import ACCOUNTANTS, EpsilonCurve, epsilon_after
from .budget import BudgetError, check_budget, check_calibration_share, check_run_budget, default_delta, delta_warning
from .ledger import LedgerEntry, PrivacyLedger
from .planning import NoisePlan, plan_noise
from .randomness import gaussian_noise, secret_generator, secret_rng

__all__ = ["ACCOUNTANTS", "BudgetError", "EpsilonCurve", "LedgerEntry", "NoisePlan", "PrivacyLedger", "check_budget", "check_calibration_share",
           "check_run_budget", "default_delta", "delta_warning", "epsilon_after", "gaussian_noise", "plan_noise",
           "secret_generator", "secret_rng"]
