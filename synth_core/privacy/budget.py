"""What a privacy budget may be: ε, δ, and the rule for a default δ."""
from __future__ import annotations

import math
import numbers


class BudgetError(ValueError):
    """A privacy budget that cannot be honoured; the message says why."""


def plain_number(value):
    """`value` as a Python int or float when it is a real number of any kind (a NumPy scalar such
    as np.float32(1.0) or np.int64(2), as a table's cell or a computation gives), else as it is: a
    bool, a text or anything else is left for the checks to refuse."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return value
    return int(value) if isinstance(value, numbers.Integral) else float(value)


def default_delta(n_rows: int) -> float:
    """The largest power of ten strictly below 1/n: the usual rule that δ must be well under 1/n."""
    if n_rows < 1:
        raise BudgetError("cannot choose δ for an empty table")
    power = math.floor(math.log10(1.0 / n_rows))
    if 10.0 ** power >= 1.0 / n_rows:  # n a power of ten: strictly below (1e-6, not 1e-5 / 10)
        power -= 1
    return 10.0 ** power


def delta_warning(delta: float, n_rows: int) -> str | None:
    """A plain warning when δ is not below 1/n (then a mechanism may publish a whole row)."""
    if delta >= 1.0 / n_rows:
        return (f"δ = {delta:g} is not below 1/n = {1.0 / n_rows:.3g}: with this δ the guarantee allows "
                f"a whole row to be disclosed. Choose δ below {1.0 / n_rows:.1g}.")
    return None


# Above this ε a differential-privacy guarantee says nothing a steward could rely on (e^100 ≈
# 10^43), and calibrating the noise for it is slow and memory-hungry; a run that wants no privacy is
# not a DP run.
MAX_EPSILON = 100.0


def check_budget(epsilon: float, delta: float) -> None:
    """BudgetError in one line unless ε is a positive finite number at most MAX_EPSILON and δ
    lies in (0, 1) (a NumPy number is a number)."""
    epsilon, delta = plain_number(epsilon), plain_number(delta)
    if isinstance(epsilon, bool) or not isinstance(epsilon, (int, float)) or not math.isfinite(epsilon) or epsilon <= 0:
        raise BudgetError(f"ε must be a positive finite number, not {epsilon!r}")
    if epsilon > MAX_EPSILON:
        raise BudgetError(f"ε = {epsilon:g} is above {MAX_EPSILON:g}, where differential privacy no longer limits "
                          "what the synthetic table can reveal; choose ε between 0.01 and 10")
    if isinstance(delta, bool) or not isinstance(delta, (int, float)) or not (0 < delta < 1):
        raise BudgetError(f"δ must lie strictly between 0 and 1, not {delta!r}")


def parse_epsilon(text: str, what: str = "ε", zero_ok: bool = False) -> float:
    """An ε a person typed ("0.5", "2", "1e-2", "0,5"), or one BudgetError that says what to type:
    text that is not a number is refused, never read as some other value."""
    typed = str(text).strip()
    if not typed:
        raise BudgetError(f"type {what}: a number such as 0.5 or 2")
    if typed.count(",") == 1 and "." not in typed:
        typed = typed.replace(",", ".")  # a decimal comma
    try:
        value = float(typed)
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise BudgetError(f"{what} must be a number such as 0.5 or 2, not {str(text).strip()!r}")
    if value < 0 or (value == 0 and not zero_ok):
        raise BudgetError(f"{what} must be {'0 or more' if zero_ok else 'above 0'} (for example 0.5 or 2), not "
                          f"{value:g}")
    if value > MAX_EPSILON:
        raise BudgetError(f"{what} = {value:g} is above {MAX_EPSILON:g}, where differential privacy no longer limits "
                          "what the synthetic table can reveal; choose between 0.01 and 10")
    return value


def check_run_budget(epsilon: float, delta: float | None, bounds_epsilon: float = 0.0,
                     count_epsilon: float = 0.0, values_epsilon: float = 0.0) -> None:
    """Everything a run's budget must satisfy before anything is spent: ε and δ (check_budget; δ
    None: chosen later from the row count), the part of ε for estimating bounds the schema lacks,
    and what is left for training after that and a noisy row count. The one check the API,
    background jobs and the app make."""
    check_budget(epsilon, 0.5 if delta is None else delta)
    epsilon, bounds_epsilon = plain_number(epsilon), plain_number(bounds_epsilon)
    if isinstance(bounds_epsilon, bool) or not isinstance(bounds_epsilon, (int, float)) \
            or not math.isfinite(bounds_epsilon) or not 0 <= bounds_epsilon < epsilon:
        raise BudgetError(f"the ε for bound estimation ({bounds_epsilon!r}) must be ≥ 0 and below the total ε "
                          f"({epsilon:g})")
    values_epsilon = plain_number(values_epsilon)
    if isinstance(values_epsilon, bool) or not isinstance(values_epsilon, (int, float)) \
            or not math.isfinite(values_epsilon) or not 0 <= values_epsilon < epsilon:
        raise BudgetError(f"the ε for finding value sets ({values_epsilon!r}) must be ≥ 0 and below the total ε "
                          f"({epsilon:g})")
    if bounds_epsilon + count_epsilon >= epsilon:
        raise BudgetError(f"the ε for bound estimation ({bounds_epsilon:g}) leaves nothing for training once the "
                          f"noisy row count ({count_epsilon:.3g}) is paid; give it less")
    if bounds_epsilon + values_epsilon + count_epsilon >= epsilon:
        raise BudgetError(f"the ε for finding value sets ({values_epsilon:g}) and bounds ({bounds_epsilon:g}) "
                          f"leaves nothing for training once the noisy row count ({count_epsilon:.3g}) is paid; "
                          "give them less")


MAX_CALIBRATION_SHARE = 0.9
# the share of ε a run spends measuring marginals unless told otherwise
# (benchmarks/history/2026-11-27.md, issue 15)
DEFAULT_CALIBRATION_SHARE = 0.3


def check_calibration_share(share) -> None:
    share = plain_number(share)
    if isinstance(share, bool) or not isinstance(share, (int, float)) or not 0 <= share <= MAX_CALIBRATION_SHARE:
        raise BudgetError(f"the calibration share is the part of ε measuring marginals takes, a number from 0 to "
                          f"{MAX_CALIBRATION_SHARE:g}, not {share!r}")


MAX_QUANTILE_SHARE = 0.3


def check_quantile_share(share, calibration_share: float = 0.0) -> None:
    share, calibration_share = plain_number(share), plain_number(calibration_share)
    if isinstance(share, bool) or not isinstance(share, (int, float)) or not 0 <= share <= MAX_QUANTILE_SHARE:
        raise BudgetError(f"the quantile share is the part of ε measuring numeric columns' quantiles takes, a number "
                          f"from 0 to {MAX_QUANTILE_SHARE:g}, not {share!r}")
    if share + (calibration_share or 0.0) >= 0.9:
        raise BudgetError(f"the quantile share ({share:g}) and the calibration share ({calibration_share:g}) leave "
                          "too little of ε for training; lower one of them")
