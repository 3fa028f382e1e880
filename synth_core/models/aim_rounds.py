"""How many rounds an AIM run takes, and the band that holds it near the count expected before it.

AIM ends when its zCDP budget is spent, and a round whose measurement hardly moved the model
makes the next one cost four times as much (its annealing). The count of rounds therefore follows
the private rows and the noise: on one table at one ε, two runs took 5 and 12 rounds
(DoctorVisits at ε = 0.25, benchmarks/results/grid). A steward is told the run's time before it
starts, rounds times a round's seconds, so the count is held within a band around the count
expected from public facts (`expected_rounds`): a round spends at least what lets the rounds up to
the band's top spend the rest with each quadrupling the next (AIM's own shape), and at most an
equal share of the rest over the rounds down to its bottom. The band is public (the plan's
numbers); the rounds' costs stay inside the one budget, so the guarantee is unchanged.
"""
from __future__ import annotations

import math

# what runs took beyond the fewest rounds grows with columns × rows × ε (the signal, public: the
# released count): 1 + 2 log10(signal / 15,000) times, from 1 to 3.5 (fitted to 128 runs on 32
# tables: 8 R packages' tables, Adult, King County and the demo; benchmarks/RESULTS.md "AIM's
# rounds"; RMS log error 0.29, against 0.42 for the two steps it replaced)
SIGNAL_FROM, TIMES_PER_DECADE, MOST_TIMES = 15_000, 2.0, 3.5


def fewest_left(left: float, cost: float, growth: float = 4.0, most: int = 100_000) -> int:
    """The rounds `left` of ρ pays for from a round costing `cost`, each next one costing `growth`
    times as much, the last spending what is left: the fewest when every round quadruples the next
    one's cost (its measurement hardly moved the model: 4, the default), the most when none does
    (1)."""
    rounds, total = 0, left
    while left > 1e-12 * total and rounds < most:
        rounds += 1
        if left < 2 * cost:
            break
        left, cost = left - cost, cost * growth
    return rounds


def growth_expected(left: float, cost: float, rounds: int) -> float:
    """The share of rounds that quadruple the next one's cost (0 to 1) with which `left` and `cost`
    take `rounds` rounds: what the count expected before the run assumes, for the count during it
    to start from."""
    low, high = 0.0, 1.0
    if fewest_left(left, cost, 4.0) >= rounds:
        return 1.0
    if fewest_left(left, cost, 1.0, most=rounds + 1) <= rounds:
        return 0.0
    for _ in range(30):
        mid = (low + high) / 2
        over = fewest_left(left, cost, 4.0 ** mid, most=rounds + 1) > rounds
        low, high = (mid, high) if over else (low, mid)
    return (low + high) / 2


def expected_rounds(fewest: int, planned: int, signal: float) -> int:
    """The rounds expected before the run: the fewest times what runs took beyond them at this
    signal, at most those planned."""
    times = 1 + TIMES_PER_DECADE * math.log10(max(signal / SIGNAL_FROM, 1.0))
    return min(planned, math.ceil(fewest * min(times, MOST_TIMES)))


def band(expected: int, width: float) -> tuple[int, int]:
    """(the fewest, the most) rounds a run expecting `expected` may take: within `width` times
    that either way (width 0: unbounded, AIM's own)."""
    if not width:
        return 2, 10 ** 9
    low = max(2, math.ceil(expected / width))
    return low, max(low, math.floor(expected * width))


def held(budget, epsilon: float, sigma: float, done: int, low: int, high: int
         ) -> tuple[float, float]:
    """The next round's (selection ε, measurement σ), after `done` rounds, held within the band:
    it spends at least what lets the rounds up to `high` spend the rest if each quadruples the
    next one's cost, and at most an equal share of the rest over the rounds up to `low`."""
    cost, left = budget.cost(epsilon, sigma), budget.left
    if done < high:
        remaining = high - done
        least = left * 3 / (4.0 ** remaining - 1) if remaining < 40 else 0.0
        if cost < least:
            return budget.schedule(least)
    # a hair below the equal share, so that rounding does not make it the last round early
    share = left / (low - done) * (1 - 1e-9) if done < low else math.inf
    if cost > share:
        return budget.schedule(share)
    return epsilon, sigma


def probe_round(budget, rounds: int, done: int) -> tuple[float, float]:
    """A time estimate's probe's next (selection ε, measurement σ), after `done` rounds: an equal
    share of what is left over the `rounds` the run expects, as the run's average round spends (on
    random rows a measurement hardly moves the model, and annealing spent it by the third)."""
    return budget.schedule(budget.left / max(1, rounds - done))


# a run's rounds are of two kinds: a clique of two or more columns the model did not hold (its
# structure grows and is compiled anew) or a marginal measured again (a column, mostly: cheaper).
# Runs at ε = 1 took the first in 90 of 126 rounds on 16 tables new to the benchmarks (0 to 1 of a
# table's, median 0.83; ames 0.95, CPS1988 0.83, Hitters 0.3: benchmarks/RESULTS.md, "What AIM's
# rounds select"). A table whose runs measure columns again is small and its rounds cheap, so the
# weight leans to the first. On random rows, whose columns are independent, a probe's own choice
# was either, at random: its rounds read 0.55 or 1.0 of ames' (columns measured again or pairs)
PROBE_NEW_SHARE = 0.8


def probe_kind(done: int) -> tuple[bool | None, dict]:
    """The kind of a time estimate's probe's round after `done` rounds (True: a new clique, False:
    one measured again, None: either, its untimed warm-up, the 2nd), and its event's weight in the
    probe's seconds a round (`runs.timing`): its 3rd round adds a clique, its 4th measures one
    again, weighed as often as runs take each kind."""
    if done < 2:
        return None, {}
    new = done % 2 == 0
    return new, {"timing_weight": PROBE_NEW_SHARE if new else 1 - PROBE_NEW_SHARE}


def of_kind(candidates: dict, held, new: bool | None) -> dict:
    """The candidates of a kind (`probe_kind`): cliques of two or more columns within none the
    model holds (`held`), or the others; all of them for None, or where none is of the kind."""
    if new is None:
        return candidates
    held = [set(c) for c in held]
    kept = {c: w for c, w in candidates.items()
            if (len(c) > 1 and not any(set(c) <= h for h in held)) == new}
    return kept or candidates
