"""A table's budget read as a steward plans it: what a total leaves, whether a run fits in it, and
the releases planned on a table (a quick look, the release, a refresh), whose ε adds up to the total
set with them."""
from __future__ import annotations

from dataclasses import dataclass

from ..format import epsilon as amount
from .budget import BudgetError, check_budget


def remaining(total: float, spent: float) -> float:
    """What a table's total leaves after what its runs spent."""
    return max(0.0, total - spent)


def spends_the_rest(epsilon: float, total: float, spent: float) -> bool:
    """Whether a run of ε fits in what is left of a table's total but leaves nothing of use (under
    1% of the total, or 0.01) for another run."""
    left = remaining(total, spent)
    return 0 <= left * (1 + 1e-9) - epsilon < max(0.01, 0.01 * total)


def check_within(epsilon: float, total: float, spent: float) -> None:
    """BudgetError unless a run's ε fits in what a table's total leaves after what its runs
    spent."""
    remaining_ = remaining(total, spent)
    if epsilon > remaining_ * (1 + 1e-9):
        raise BudgetError(f"this run's ε = {amount(epsilon)} would exceed the table's budget: {amount(spent)} of "
                          f"{amount(total)} is spent by earlier runs, {amount(remaining_)} remains. Lower ε, or raise "
                          "the table's total if you accept the larger risk (on the model page, or `fit "
                          "--table-epsilon TOTAL`)")


@dataclass(frozen=True)
class Release:
    """One release a steward plans on a table: its name and the ε it may spend."""

    name: str
    epsilon: float


def check_plan(releases: list) -> list[Release]:
    """A plan of releases checked: each named once, each ε above 0 (BudgetError naming the first
    that is not)."""
    out, seen = [], set()
    for i, release in enumerate(releases, 1):
        name = str(release.name if isinstance(release, Release) else release.get("name", "")).strip()
        eps = release.epsilon if isinstance(release, Release) else release.get("epsilon")
        if not name:
            raise BudgetError(f"release {i} needs a name (a quick look, the release, a refresh…)")
        if name in seen:
            raise BudgetError(f"the plan names {name!r} twice")
        seen.add(name)
        try:
            check_budget(float(eps), 0.5)
        except (TypeError, ValueError) as e:
            raise BudgetError(f"release {name!r}: {e}") from None
        out.append(Release(name, float(eps)))
    if not out:
        raise BudgetError("a plan holds at least one release")
    return out


def plan_total(releases: list[Release]) -> float:
    """The table's total a plan needs: its releases' ε added up (the runs on one table compose)."""
    return float(sum(r.epsilon for r in releases))


def left_after(releases: list[Release], total: float | None = None) -> list[float]:
    """What the table's total leaves after each release in turn: the total the steward chose, else
    the plan's own; below 0 where the plan goes beyond it (by that much)."""
    total = plan_total(releases) if total is None else float(total)
    out, used = [], 0.0
    for release in releases:
        used += release.epsilon
        out.append(total - used if used > total else remaining(total, used))
    return out
