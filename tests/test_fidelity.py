"""Tests for synth_core.evaluate.fidelity (small generated data only)."""

import math

import numpy as np
import pandas as pd
import pytest
from threadpoolctl import threadpool_limits

from synth_core.evaluate import (
    detection_auc,
    fidelity_report,
    kway_tvd,
    kway_tvd_report,
    ml_efficacy,
    ml_efficacy_regression,
)

NUMERIC = ["age", "income"]


@pytest.fixture(autouse=True)
def _single_openmp_thread():
    """HistGradientBoosting's OpenMP threads slow down badly on a busy machine;
    the data here is tiny, so one thread keeps the suite fast and steady."""
    with threadpool_limits(limits=1, user_api="openmp"):
        yield


def make_mixed(n, seed=0, shift=0.0):
    """Mixed table: two numeric columns (with NaN), three categoricals (with None)."""
    rng = np.random.default_rng(seed)
    age = rng.normal(40 + shift, 12, n).round()
    income = np.where(rng.random(n) < 0.7, 0.0, rng.lognormal(8, 1, n))
    income[rng.random(n) < 0.05] = np.nan
    colour = rng.choice(["red", "green", "blue"], n, p=[0.5, 0.3, 0.2]).astype(object)
    colour[rng.random(n) < 0.05] = None
    size = rng.choice(["S", "M", "L", "XL"], n)
    flag = rng.choice(["yes", "no"], n, p=[0.2, 0.8])
    return pd.DataFrame({"age": age, "income": income, "colour": colour, "size": size, "flag": flag})


# ---------------------------------------------------------------- k-way TVD
def test_identical_tables_have_zero_tvd():
    df = make_mixed(1000)
    report = kway_tvd_report(df, df.copy(), NUMERIC, ks=(1, 2, 3))
    assert set(report) == {1, 2, 3}
    for k, value in report.items():
        assert isinstance(value, float)
        assert value == pytest.approx(0.0, abs=1e-12), k


def test_column_order_in_synth_does_not_matter():
    df = make_mixed(500)
    shuffled = df[df.columns[::-1]]
    assert kway_tvd(df, shuffled, 2, NUMERIC) == pytest.approx(0.0, abs=1e-12)


def test_disjoint_categories_give_tvd_one():
    real = pd.DataFrame({"a": ["x", "y"] * 50, "b": ["p", "q", "r", "s"] * 25})
    synth = pd.DataFrame({"a": ["u", "v"] * 50, "b": ["t", "w", "z", "t"] * 25})
    assert kway_tvd(real, synth, 1, []) == pytest.approx(1.0)
    assert kway_tvd(real, synth, 2, []) == pytest.approx(1.0)


def test_hand_computed_two_way_case():
    real = pd.DataFrame({"a": ["x", "x", "y", "y"], "b": ["p", "q", "p", "p"]})
    synth = pd.DataFrame({"a": ["x", "y", "y", "y"], "b": ["p", "p", "q", "q"]})
    # Joint cells (a, b):   (x,p)  (x,q)  (y,p)  (y,q)
    #   real               0.25   0.25   0.50   0.00
    #   synth              0.25   0.00   0.25   0.50
    #   |diff|             0.00   0.25   0.25   0.50  -> sum 1.0 -> TVD 0.5
    assert kway_tvd(real, synth, 2, []) == pytest.approx(0.5)
    # 1-way: a: |.5-.25|+|.5-.75| = .5 -> .25 ; b: |.75-.5|+|.25-.5| = .5 -> .25
    assert kway_tvd(real, synth, 1, []) == pytest.approx(0.25)


def test_missing_values_are_their_own_category():
    real = pd.DataFrame({"c": ["a", None, "a", "a"]})
    synth = pd.DataFrame({"c": ["a", "a", "a", "a"]})
    assert kway_tvd(real, synth, 1, []) == pytest.approx(0.25)
    # The string "nan" is a value, not a missing marker.
    assert kway_tvd(pd.DataFrame({"c": ["nan"] * 3}), pd.DataFrame({"c": [np.nan] * 3}), 1, []) == pytest.approx(1.0)
    # Numeric NaN is its own bin: edges from [1, 2] with 2 bins -> inner edge 1.5.
    real_n = pd.DataFrame({"x": [1.0, 2.0, np.nan]})
    synth_n = pd.DataFrame({"x": [1.0, 2.0, 3.0]})  # 3 lands in the last bin with 2
    assert kway_tvd(real_n, synth_n, 1, ["x"], n_bins=2) == pytest.approx(1 / 3)


def test_categoricals_compared_as_strings():
    real = pd.DataFrame({"c": [1, 2, 2]})
    synth = pd.DataFrame({"c": ["1", "2", "2"]})
    assert kway_tvd(real, synth, 1, []) == pytest.approx(0.0)


def test_numeric_binning_uses_reference_edges_and_end_bins():
    # Reference: 93 zeros and 7 large values.  Quantile edges are
    # [0, ..., 0, q95, max] -> after dropping duplicates the only inner edge is q95.
    big = np.array([3000.0, 4000, 5000, 6000, 7000, 8000, 9000])
    real = pd.DataFrame({"x": np.r_[np.zeros(93), big]})
    q95 = np.quantile(real["x"], 0.95)
    # Synthetic: 500 (and -10, below the reference range) share the first bin with 0;
    # 1e6 (above the range) shares the last bin with the values >= q95.
    synth_x = np.r_[np.full(90, 500.0), np.full(3, -10.0), np.where(big >= q95, 1e6, 1.0)]
    synth = pd.DataFrame({"x": synth_x})
    assert kway_tvd(real, synth, 1, ["x"]) == pytest.approx(0.0, abs=1e-12)

    # With a different reference (uniform 0..1000) 0 and 500 fall in different bins.
    ref = pd.DataFrame({"x": np.linspace(0, 1000, 101)})
    assert kway_tvd(real, synth, 1, ["x"], bin_reference=ref) > 0.8


def test_max_combinations_subset_is_seeded():
    rng = np.random.default_rng(1)
    real = pd.DataFrame({f"c{i}": rng.choice(list("abc"), 300) for i in range(6)})
    synth = pd.DataFrame({f"c{i}": rng.choice(list("abc"), 300) for i in range(6)})
    full = kway_tvd(real, synth, 2, [])
    sub1 = kway_tvd(real, synth, 2, [], max_combinations=4, seed=3)
    sub2 = kway_tvd(real, synth, 2, [], max_combinations=4, seed=3)
    assert sub1 == sub2
    assert 0 < sub1 < 1 and 0 < full < 1
    assert kway_tvd(real, synth, 2, [], max_combinations=100) == pytest.approx(full)


def test_high_cardinality_three_way_does_not_blow_up():
    n = 3000
    real = pd.DataFrame({f"id{i}": np.arange(n).astype(str) for i in range(3)})
    assert kway_tvd(real, real.copy(), 3, []) == pytest.approx(0.0, abs=1e-12)
    synth = pd.DataFrame({f"id{i}": (np.arange(n) + n).astype(str) for i in range(3)})
    assert kway_tvd(real, synth, 3, []) == pytest.approx(1.0)


# ---------------------------------------------------------------- bad input
def test_tvd_missing_and_extra_columns_named():
    df = make_mixed(50)
    with pytest.raises(ValueError, match="colour"):
        kway_tvd(df, df.drop(columns="colour"), 1, NUMERIC)
    with pytest.raises(ValueError, match="bonus"):
        kway_tvd(df, df.assign(bonus=1), 1, NUMERIC)
    with pytest.raises(ValueError, match="colour"):
        kway_tvd(df.drop(columns="colour"), df, 1, NUMERIC)


def test_zero_rows_and_bad_arguments():
    df = make_mixed(50)
    with pytest.raises(ValueError, match="real has zero rows"):
        kway_tvd(df.iloc[:0], df, 1, NUMERIC)
    with pytest.raises(ValueError, match="synth has zero rows"):
        kway_tvd(df, df.iloc[:0], 1, NUMERIC)
    with pytest.raises(ValueError, match="salary"):
        kway_tvd(df, df, 1, ["age", "salary"])
    with pytest.raises(ValueError, match="k=6"):
        kway_tvd(df, df, 6, NUMERIC)
    with pytest.raises(ValueError, match="colour"):
        kway_tvd(df, df, 1, NUMERIC + ["colour"])  # non-numeric values in a numeric column
    with pytest.raises(ValueError, match="income"):
        kway_tvd(df, df, 1, NUMERIC, bin_reference=df.drop(columns="income"))
    with pytest.raises(ValueError, match="synth has zero rows"):
        detection_auc(df, df.iloc[:0], NUMERIC)
    with pytest.raises(ValueError, match="size"):
        detection_auc(df, df.drop(columns="size"), NUMERIC)


def test_ml_bad_inputs():
    df = make_mixed(200)
    with pytest.raises(ValueError, match="flag.*only one class"):
        ml_efficacy(df.assign(flag="no"), df, "flag", NUMERIC)
    with pytest.raises(ValueError, match="target"):
        ml_efficacy(df, df, "nope", NUMERIC)
    with pytest.raises(ValueError, match="size"):
        ml_efficacy(df, df.drop(columns="size"), "flag", NUMERIC)
    with pytest.raises(ValueError, match="test has zero rows"):
        ml_efficacy(df, df.iloc[:0], "flag", NUMERIC)
    with pytest.raises(ValueError, match="colour"):
        ml_efficacy_regression(df, df, "colour", NUMERIC)


# ---------------------------------------------------------------- detection
def test_detection_auc_identical_and_same_distribution_near_half():
    df = make_mixed(1500, seed=0)
    # Exact copies can push CV below 0.5 (anti-learning); anything <= 0.5 is "indistinguishable".
    assert detection_auc(df, df.copy(), NUMERIC) < 0.6
    other = make_mixed(1500, seed=1)
    auc = detection_auc(df, other, NUMERIC)
    assert isinstance(auc, float)
    assert 0.4 < auc < 0.6


def test_detection_auc_detects_shifted_data():
    real = make_mixed(1500, seed=0)
    synth = make_mixed(1500, seed=1, shift=25.0)
    assert detection_auc(real, synth, NUMERIC) > 0.9


def test_detection_auc_sees_categorical_frequency_shift():
    rng = np.random.default_rng(0)
    n = 1500

    def table(p_b):
        return pd.DataFrame(
            {"c": rng.choice(["a", "b"], n, p=[1 - p_b, p_b]), "d": rng.choice(["u", "v", "w"], n)}
        )

    # Best possible AUC from column c alone: 0.7*0.7 + 0.5*(2*0.3*0.7) = 0.70
    auc = detection_auc(table(0.3), table(0.7), [])
    assert 0.64 < auc < 0.76


# ---------------------------------------------------------------- ML efficacy
def make_classification(n, seed, signal=True):
    rng = np.random.default_rng(seed)
    x1 = rng.normal(size=n)
    x2 = rng.normal(size=n)
    cat = rng.choice(["a", "b", "c"], n)
    score = 2 * x1 - x2 + np.where(cat == "a", 1.5, 0.0)
    if signal:
        y = np.where(score + 0.3 * rng.normal(size=n) > 0, ">50K", "<=50K")
    else:
        y = rng.choice([">50K", "<=50K"], n)
    x1[rng.random(n) < 0.02] = np.nan
    return pd.DataFrame({"x1": x1, "x2": x2, "cat": cat, "y": y})


def test_ml_efficacy_learnable_problem():
    train = make_classification(2000, seed=0)
    test = make_classification(1000, seed=1)
    test.loc[:10, "cat"] = "never-seen"  # unseen category must not crash
    out = ml_efficacy(train, test, "y", ["x1", "x2"])
    assert set(out) == {"accuracy", "roc_auc"}
    assert all(isinstance(v, float) for v in out.values())
    assert out["roc_auc"] > 0.9
    assert out["accuracy"] > 0.8


def test_ml_efficacy_no_signal_is_chance():
    train = make_classification(2000, seed=0, signal=False)
    test = make_classification(2000, seed=1, signal=False)
    out = ml_efficacy(train, test, "y", ["x1", "x2"])
    assert 0.4 < out["roc_auc"] < 0.6


def test_ml_efficacy_multiclass():
    rng = np.random.default_rng(0)
    n = 1500
    x = rng.normal(size=n)
    y = np.select([x < -0.5, x < 0.5], ["lo", "mid"], "hi")
    df = pd.DataFrame({"x": x, "noise": rng.choice(["p", "q"], n), "y": y})
    out = ml_efficacy(df.iloc[:1000], df.iloc[1000:], "y", ["x"])
    assert out["roc_auc"] > 0.9


def test_ml_efficacy_regression():
    rng = np.random.default_rng(0)
    n = 1500
    x = rng.normal(size=n)
    cat = rng.choice(["a", "b"], n)
    y = 3 * x + np.where(cat == "a", 2.0, 0.0) + 0.1 * rng.normal(size=n)
    x[rng.random(n) < 0.02] = np.nan
    df = pd.DataFrame({"x": x, "cat": cat, "y": y})
    out = ml_efficacy_regression(df.iloc[:1000], df.iloc[1000:], "y", ["x", "y"])
    assert set(out) == {"r2", "r2_gbm"}
    assert out["r2"] > 0.9
    assert out["r2_gbm"] > 0.9


# ---------------------------------------------------------------- report
def test_fidelity_report_structure():
    real = make_mixed(400, seed=0)
    synth = make_mixed(400, seed=1)
    rep = fidelity_report(real, synth, NUMERIC, target="flag", ks=(1, 2))
    assert set(rep) == {"tvd", "detection_auc", "ml"}
    assert set(rep["tvd"]) == {1, 2}
    assert all(0 <= v <= 1 for v in rep["tvd"].values())
    assert 0 <= rep["detection_auc"] <= 1
    assert set(rep["ml"]) == {"accuracy", "roc_auc"}
    assert not math.isnan(rep["ml"]["roc_auc"])

    rep_reg = fidelity_report(real, synth, NUMERIC, target="age", ks=(1,))
    assert set(rep_reg["ml"]) == {"r2", "r2_gbm"}
    assert "ml" not in fidelity_report(real, synth, NUMERIC, ks=(1,))
