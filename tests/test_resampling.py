"""Picking a calibrated sample's rows from its weighted pool (models.resampling): a balanced sample
keeps each pool row's chance and the size asked for, and its counts of each column's values equal
the weighted pool's to within a few rows, where systematic resampling leaves the noise of drawing n
rows."""
import numpy as np
import pandas as pd
import pytest

from synth_core.models.calibration import balance_persons, balance_rows
from synth_core.models.resampling import balance_matrix, cube, resample, systematic
from synth_core.privacy.measurements import Marginal, Marginals
from synth_core.schema import ColumnSpec, Schema


def _pool(rows: int, seed: int = 0) -> tuple[pd.DataFrame, Schema, Marginals, np.ndarray]:
    rng = np.random.default_rng(seed)
    schema = Schema(columns=[ColumnSpec("g", "categorical", categories=["a", "b", "c"]),
                             ColumnSpec("h", "categorical", categories=["x", "y"]),
                             ColumnSpec("n", "integer", lower=0, upper=4)])
    pool = pd.DataFrame({"g": rng.choice(["a", "b", "c"], rows, p=[.6, .3, .1]), "h": rng.choice(["x", "y"], rows),
                         "n": rng.integers(0, 5, rows)})
    marginals = Marginals(n_bins=10, noise_std=1.0, rows=rows, marginals=[
        Marginal(("g",), (3,), np.zeros(3)), Marginal(("h",), (2,), np.zeros(2)), Marginal(("n",), (5,), np.zeros(5)),
        Marginal(("g", "h"), (3, 2), np.zeros(6))])
    return pool, schema, marginals, rng.gamma(2.0, size=rows)


def _gaps(pool: pd.DataFrame, weights: np.ndarray, picked: np.ndarray, n: int) -> float:
    """The largest difference, in rows, between the sample's count of a column's value and the
    weighted pool's."""
    gaps = []
    for column in pool.columns:
        expected = pd.Series(weights / weights.sum() * n).groupby(pool[column].to_numpy()).sum()
        got = pool[column].iloc[picked].value_counts().reindex(expected.index, fill_value=0)
        gaps.append(float(np.abs(got - expected).max()))
    return max(gaps)


def test_a_balanced_sample_matches_the_weighted_pools_counts_of_every_columns_values():
    pool, schema, marginals, weights = _pool(3000)
    n = 1000
    balanced = [_gaps(pool, weights, resample(weights, n, np.random.default_rng(s),
                                              lambda: balance_rows(pool, marginals, schema)), n) for s in range(5)]
    drawn = [_gaps(pool, weights, systematic(weights, n, np.random.default_rng(s)), n) for s in range(5)]
    assert max(balanced) <= 3 and np.mean(drawn) > 3 * np.mean(balanced), (balanced, drawn)
    picked = resample(weights, n, np.random.default_rng(0), lambda: balance_rows(pool, marginals, schema))
    assert len(picked) == n and picked.min() >= 0 and picked.max() < len(pool)
    assert list(picked) != sorted(picked)  # in random order, not the pool's


def test_each_row_keeps_its_chance_and_the_sample_its_size():
    chances = np.array([0.5, 0.25, 0.75, 0.5, 0.1, 0.9, 0.6, 0.4])  # sum 4; the first four's sum 2
    constraints = np.column_stack([np.ones(8), [1, 1, 1, 1, 0, 0, 0, 0]])
    rng = np.random.default_rng(0)
    draws = np.array([cube(chances, constraints, rng) for _ in range(4000)])
    assert set(draws.sum(axis=1)) == {4}
    assert np.abs(draws.mean(axis=0) - chances).max() < 0.03
    # balanced: two of the first four in (nearly) every draw; drawn by their chances alone, in 37%
    # of draws
    first = draws[:, :4].sum(axis=1)
    assert np.mean(first == 2) > 0.9 and set(first) <= {1, 2, 3}


def test_a_weight_above_one_row_is_kept_its_whole_times_and_a_zero_weight_never():
    weights = np.array([2.5, 0.0, 1.0, 0.5, 0.0, 1.0])
    pool = pd.DataFrame({"g": ["a", "b", "a", "b", "a", "b"]})
    schema = Schema(columns=[ColumnSpec("g", "categorical", categories=["a", "b"])])
    marginals = Marginals(n_bins=10, noise_std=1.0, rows=5, marginals=[Marginal(("g",), (2,), np.zeros(2))])
    for seed in range(20):
        picked = resample(weights, 5, np.random.default_rng(seed), lambda: balance_rows(pool, marginals, schema))
        counts = np.bincount(picked, minlength=6)
        assert counts.sum() == 5 and counts[1] == counts[4] == 0 and counts[0] in (2, 3)


def test_a_large_request_is_drawn_systematically_without_building_the_counts(monkeypatch):
    from synth_core.models import resampling
    monkeypatch.setattr(resampling, "BALANCE_UP_TO", 100)
    asked = []
    picked = resample(np.ones(500), 200, np.random.default_rng(0), lambda: asked.append(1))
    assert len(picked) == 200 and not asked


def test_the_counts_leave_out_each_columns_last_value_and_stop_at_the_limit():
    cells = [(np.array([0, 1, 2, 1]), 3, None), (np.array([1, 0, 1, 1]), 2, None), (np.array([0, 0, 0, 0]), 1, None)]
    assert balance_matrix(cells, 4).tolist() == [[1, 0, 0], [0, 1, 1], [0, 0, 0], [0, 1, 0]]
    # the first no longer fits
    assert balance_matrix(cells, 4, limit=1).tolist() == [[0], [1], [0], [0]]
    # a person's child rows, counted per person
    children = [(np.array([0, 1, 1, 0]), 2, np.array([0, 0, 1, 2]))]
    assert balance_matrix(children, 3).tolist() == [[1], [0], [1]]  # person 0: p and q; 1: q; 2: p


@pytest.mark.parametrize("n", [40, 300])
def test_a_sample_of_persons_matches_the_pools_counts_of_their_child_rows(n):
    from synth_core.privacy.person_marginals import PersonMarginals
    from synth_core.schema.linked import LinkedSchema
    rng = np.random.default_rng(1)
    parent = Schema(columns=[ColumnSpec("g", "categorical", categories=["a", "b"])])
    child = Schema(columns=[ColumnSpec("v", "categorical", categories=["p", "q", "r"])])
    schema = LinkedSchema(parent=parent, child=child, key="id", max_children=3)
    persons_n = 3 * n
    k = rng.integers(0, 4, persons_n)
    person = np.repeat(np.arange(persons_n), k)
    persons = pd.DataFrame({"g": rng.choice(["a", "b"], persons_n)}).assign(**{schema.persons().names[-1]: k})
    children = pd.DataFrame({"v": rng.choice(["p", "q", "r"], len(person), p=[.5, .3, .2])})
    marginals = PersonMarginals(
        Marginals(n_bins=10, noise_std=1.0, rows=persons_n, marginals=[
            Marginal(("g",), (2,), np.zeros(2)), Marginal((schema.persons().names[-1],), (4,), np.zeros(4))]),
        Marginals(n_bins=10, noise_std=1.0, rows=persons_n, marginals=[Marginal(("v",), (3,), np.zeros(3))]))
    weights = rng.gamma(2.0, size=persons_n)
    X = balance_persons(persons, children, person, marginals, schema)
    picked = resample(weights, n, np.random.default_rng(0), lambda: X)
    expected = weights / weights.sum() * n
    rows_of = np.bincount(picked, minlength=persons_n)  # each person's times in the sample
    for value in "pqr":
        per_person = np.bincount(person, weights=children["v"].eq(value).to_numpy(float), minlength=persons_n)
        assert abs(rows_of @ per_person - expected @ per_person) <= 3
    assert abs(rows_of @ k - expected @ k) <= 3
