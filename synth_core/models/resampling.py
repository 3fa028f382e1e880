"""Picking a calibrated sample's rows from its weighted pool (models.calibration): post-processing,
no privacy cost.

    systematic   each pool row is kept about n·weight times, by systematic resampling over the shuffled pool
    balanced     the same chance for each row, and the sample's counts of chosen cells (each column's values,
                 alone; a person's child rows in each of their columns' values) equal the weighted pool's to
                 within a few rows: the cube method (Deville & Tillé, Biometrika 2004, "Efficient balanced
                 sampling: the cube method"), its fast flight phase (Chauvet & Tillé 2006) and a landing that
                 drops the last constraints

Calibration moves the weighted pool to the measured marginals; a sample of n rows drawn from it then
adds the noise of drawing n rows, a good part of the error left on a table of a few thousand rows.
Paired, one fit and four samples each way (benchmarks/bench_resampling.py; RESULTS.md, "Balanced
samples"): guImmun at ε = 4 (1,276 persons), persons' 1-way TVD 0.028 drawn systematically and 0.022
balanced, children's 0.012 and 0.008; Males at ε = 4, persons' 0.032 and 0.023; at ε = 1, where the
model's own error is larger, the persons' 3-10% lower. Single tables against their test split:
within 0.004 either way, lower in most.

The cube method walks the pool's inclusion chances, p + 1 rows at a time, along a direction that
keeps every balanced count, until one of those rows is in or out: one small QR a pool row, about
0.07 ms with BALANCE_CELLS counts on 2 cores (a pool of 60,000 rows and 59 counts: 4.1 s, 7.1 s
with numpy's complete QR). Requests over BALANCE_UP_TO rows are drawn systematically: their pool
would take longer, and the noise of drawing that many rows is small beside the model's own error.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

# counts balanced at most (the columns' values, in the schema's order, while they fit)
BALANCE_CELLS = 64
BALANCE_UP_TO = 20_000    # rows asked for, at most, for a balanced sample
_EPS = 1e-9


def resample(weights: np.ndarray, n: int, rng: np.random.Generator,
             balance: Callable[[], np.ndarray] | None = None) -> np.ndarray:
    """n pool indices, in random order, each pool row kept about n·weight times (few repeats);
    balanced on the counts `balance()` gives (one column per count, a value per pool row:
    `balance_matrix`) where given and n is at most BALANCE_UP_TO, else systematic."""
    balance = balance() if balance is not None and n <= BALANCE_UP_TO else None
    if balance is None or balance.shape[1] == 0:
        return systematic(weights, n, rng)
    expected = n * np.asarray(weights, float) / float(np.sum(weights))
    whole = np.floor(expected)
    extra = cube(expected - whole, np.column_stack([np.ones(len(expected)), balance]), rng)
    return rng.permutation(np.repeat(np.arange(len(expected)), whole.astype(np.int64) + extra))


def systematic(weights: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    """n pool indices drawn by systematic resampling over a shuffled pool, in random order."""
    order = rng.permutation(len(weights))
    cumulative = np.cumsum(weights[order])
    cumulative /= cumulative[-1]
    points = (rng.random() + np.arange(n)) / n
    picked = order[np.minimum(np.searchsorted(cumulative, points), len(order) - 1)]
    return rng.permutation(picked)


def cube(chances: np.ndarray, constraints: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """0/1 for each unit: in with its chance (in [0, 1]), the totals of `constraints`' columns over
    the units in equal to their expectation (Σ chance · column) up to the landing's few units; the
    first column the most kept (the sample's size, where it is all ones), the last dropped first."""
    chance = np.clip(np.asarray(chances, float), 0.0, 1.0)
    p = constraints.shape[1]
    queue = iter(u for u in rng.permutation(len(chance)) if _EPS < chance[u] < 1 - _EPS)
    work: list[int] = []
    while True:
        work += [u for _, u in zip(range(p + 1 - len(work)), queue)]
        if len(work) < 2:
            break
        units = np.array(work)
        # the flight keeps every count; the landing drops the last ones
        kept = min(p, len(units) - 1)
        # a direction that moves no kept count: orthogonal to the kept columns over these units
        direction = _orthogonal(constraints[units, :kept])
        now = chance[units]
        up, down = _rooms(now, direction)
        # a martingale: each unit's chance stays its expectation
        now = now + up * direction if rng.random() * (up + down) < down else now - down * direction
        now[now < _EPS], now[now > 1 - _EPS] = 0.0, 1.0
        chance[units] = now
        work = units[(now > 0.0) & (now < 1.0)].tolist()
    for u in work:  # one unit left with a fractional chance (rounding): in by its chance
        chance[u] = float(rng.random() < chance[u])
    return np.rint(chance).astype(np.int64)


def _orthogonal(block: np.ndarray) -> np.ndarray:
    """A unit vector orthogonal to every column of `block` (more rows than columns): the last
    column of Q in block = QR, applied from LAPACK's reflectors without forming Q (numpy's
    complete QR formed all of it: two thirds of the flight's time, twice this)."""
    from scipy.linalg import lapack
    qr, tau, _, info = lapack.dgeqrf(block)
    last = np.zeros((block.shape[0], 1))
    last[-1] = 1.0
    if info == 0:
        out, _, info = lapack.dormqr("L", "N", qr, tau, last, max(1, block.shape[0]))
    if info != 0:
        return np.linalg.qr(block, mode="complete")[0][:, -1]
    return out[:, 0]


def _rooms(chance: np.ndarray, direction: np.ndarray) -> tuple[float, float]:
    """How far the chances may move along `direction`, and against it, before one of them
    reaches 0 or 1."""
    rising, falling = direction > 1e-12, direction < -1e-12
    up, down = direction[rising], -direction[falling]
    along = min(((1.0 - chance[rising]) / up).min(initial=np.inf),
                (chance[falling] / down).min(initial=np.inf))
    against = min((chance[rising] / up).min(initial=np.inf),
                  ((1.0 - chance[falling]) / down).min(initial=np.inf))
    return float(along), float(against)


def balance_matrix(blocks: list[tuple[np.ndarray, int, np.ndarray | None]], rows: int,
                   limit: int = BALANCE_CELLS) -> np.ndarray:
    """The counts a sample is balanced on, one column each, from `blocks` in order: (cells, size,
    owner), each entry's cell among `size` (a column's values), and its pool row (owner; None: entry
    i is row i, else the entries are a person's child rows, counted per person). A block's last cell
    is left out (its count follows from the others and the sample's size, or from the persons' count
    of child rows); blocks that no longer fit within `limit` counts are skipped."""
    out, used = [], 0
    for cells, size, owner in blocks:
        if size < 2 or used + size - 1 > limit:
            continue
        block = np.zeros((rows, size))
        np.add.at(block, (np.arange(rows) if owner is None else owner, cells), 1.0)
        out.append(block[:, :-1])
        used += size - 1
    return np.column_stack(out) if out else np.zeros((rows, 0))
