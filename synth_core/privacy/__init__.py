"""The privacy layer: every ε is computed or recorded here.

    budget       what a budget (ε, δ) may be; the default δ
    accounting   ε by Opacus' accountants: the composition of a run's mechanisms, ε after k steps, the live curve
    planning     what a model declares (SamplingShape), and the noise plans calibrated to it before anything is spent
    ledger       every mechanism that touched the private table, and what it cost
    randomness   secret generators for DP noise, Poisson sampling and mechanism draws
    bounds       DP quantiles, and numeric bounds a schema lacks paid from the budget

The names below are imported from their modules when first asked for (PEP 562): Opacus and torch
load only where an ε is computed or noise drawn, so that the CLI's listing and schema commands
answer at once.
"""
from __future__ import annotations

import importlib

_HOMES = {
    "accounting": ("ACCOUNTANTS", "EpsilonCurve", "epsilon_after"),
    "budget": ("BudgetError", "check_budget", "check_calibration_share", "check_run_budget", "default_delta",
               "delta_warning"),
    "ledger": ("LedgerEntry", "PrivacyLedger"),
    "measurements": ("delta_may_differ", "run_delta"),
    "planning": ("NoisePlan", "plan_noise"),
    "randomness": ("gaussian_noise", "secret_generator", "secret_rng"),
}
_HOME_OF = {name: module for module, names in _HOMES.items() for name in names}

__all__ = sorted(_HOME_OF)


def __getattr__(name: str):
    if name in _HOME_OF:
        value = getattr(importlib.import_module(f".{_HOME_OF[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
