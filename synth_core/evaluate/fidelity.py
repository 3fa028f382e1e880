"""Fidelity metrics comparing a synthetic table with a real one.

All functions take pandas DataFrames and return plain Python floats / dicts.
Bad input (missing or extra columns, empty tables, a one-class target, ...)
raises ``ValueError`` with a message naming the offending table/column.

Metrics
-------
* :func:`kway_tvd` / :func:`kway_tvd_report` -- mean total variation distance
  of k-way marginals.  0 = identical marginals, 1 = disjoint supports.
* :func:`detection_auc` -- ROC-AUC of a classifier separating real from
  synthetic rows.  0.5 = indistinguishable (ideal), 1.0 = fully detectable.
* :func:`ml_efficacy` / :func:`ml_efficacy_regression` -- train on one table
  (e.g. synthetic), test on another (real hold-out).  Higher is better.
* :func:`fidelity_report` -- all of the above in one dict.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import pandas as pd
from sklearn.ensemble import HistGradientBoostingClassifier
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import StratifiedKFold

from .features import HGB_MAX_KEPT_CATEGORIES, FeatureEncoder, hgb_categorical, numeric_values, string_values
from .utility import fit_and_score

__all__ = [
    "kway_tvd",
    "kway_tvd_report",
    "detection_auc",
    "ml_efficacy",
    "ml_efficacy_regression",
    "fidelity_report",
]

# Enumerate all combinations only up to this many; beyond it, sample directly.
_MAX_ENUMERATED_COMBINATIONS = 1_000_000


# --------------------------------------------------------------------------
# Input validation helpers
# --------------------------------------------------------------------------
def _check_frame(df: Any, name: str) -> None:
    """Raise ValueError unless ``df`` is a non-empty DataFrame with unique columns."""
    if not isinstance(df, pd.DataFrame):
        raise ValueError(f"{name} must be a pandas DataFrame, got {type(df).__name__}")
    if df.shape[1] == 0:
        raise ValueError(f"{name} has no columns")
    if len(df) == 0:
        raise ValueError(f"{name} has zero rows")
    dup = df.columns[df.columns.duplicated()].tolist()
    if dup:
        raise ValueError(f"{name} has duplicate column names: {dup}")


def _check_same_columns(ref: pd.DataFrame, other: pd.DataFrame, ref_name: str, other_name: str) -> None:
    """Raise ValueError if ``other`` lacks columns of ``ref`` or has extra ones."""
    ref_cols, other_cols = set(ref.columns), set(other.columns)
    missing = [c for c in ref.columns if c not in other_cols]
    if missing:
        raise ValueError(f"{other_name} is missing column(s) present in {ref_name}: {missing}")
    extra = [c for c in other.columns if c not in ref_cols]
    if extra:
        raise ValueError(f"{other_name} has column(s) not present in {ref_name}: {extra}")


def _numeric_set(numeric_columns: Iterable[Any] | str | None, df: pd.DataFrame, name: str) -> set:
    """Validate ``numeric_columns`` against ``df``'s columns and return them as a set."""
    if numeric_columns is None:
        return set()
    if isinstance(numeric_columns, str):
        numeric_columns = [numeric_columns]
    numeric = list(numeric_columns)
    cols = set(df.columns)
    unknown = [c for c in numeric if c not in cols]
    if unknown:
        raise ValueError(f"numeric_columns names column(s) not in {name}: {unknown}")
    return set(numeric)


def _check_positive_int(value: Any, name: str, minimum: int = 1) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return int(value)


# --------------------------------------------------------------------------
# k-way total variation distance
# --------------------------------------------------------------------------
def _quantile_inner_edges(reference: np.ndarray, n_bins: int) -> np.ndarray:
    """Inner bin edges (duplicates dropped) from quantiles of finite reference values."""
    ref = reference[np.isfinite(reference)]
    if ref.size == 0:
        return np.empty(0)
    edges = np.unique(np.quantile(ref, np.linspace(0.0, 1.0, n_bins + 1)))
    return edges[1:-1]


def _encode_for_tvd(
    real: pd.DataFrame,
    synth: pd.DataFrame,
    numeric: set,
    bin_reference: pd.DataFrame,
    n_bins: int,
) -> tuple[np.ndarray, np.ndarray]:
    """Encode every column of real+synth (stacked) to small integer codes.

    Returns ``codes`` of shape (n_columns, len(real) + len(synth)) and the
    number of possible codes (``radices``) per column.  Missing values get
    their own code in every column.
    """
    columns = list(real.columns)
    n_total = len(real) + len(synth)
    codes = np.empty((len(columns), n_total), dtype=np.int64)
    radices = np.empty(len(columns), dtype=np.int64)
    for i, col in enumerate(columns):
        if col in numeric:
            values = np.concatenate(
                [numeric_values(real[col], col, "real"), numeric_values(synth[col], col, "synth")]
            )
            inner = _quantile_inner_edges(numeric_values(bin_reference[col], col, "bin_reference"), n_bins)
            c = np.digitize(values, inner)  # below range -> 0, above range -> len(inner)
            n_value_bins = len(inner) + 1
            c[np.isnan(values)] = n_value_bins
            radices[i] = n_value_bins + 1
        else:
            values = np.concatenate([string_values(real[col]), string_values(synth[col])])
            c, uniques = pd.factorize(values, use_na_sentinel=True)
            c = c.astype(np.int64)
            c[c < 0] = len(uniques)
            radices[i] = len(uniques) + 1
        codes[i] = c
    return codes, radices


def _joint_codes(codes: np.ndarray, radices: np.ndarray, combo: Sequence[int], max_dense: int) -> tuple[np.ndarray, int]:
    """Mixed-radix joint code of the columns in ``combo``; re-densify if too sparse."""
    joint = codes[combo[0]].copy()
    size = int(radices[combo[0]])
    for j in combo[1:]:
        r = int(radices[j])
        if size * r > max_dense:
            # Compress to observed cells only (<= n rows) to keep codes bounded.
            _, joint = np.unique(joint, return_inverse=True)
            size = int(joint.max()) + 1
        joint = joint * r + codes[j]
        size *= r
    if size > max_dense:
        _, joint = np.unique(joint, return_inverse=True)
        size = int(joint.max()) + 1
    return joint, size


def _select_combinations(n_cols: int, k: int, max_combinations: int | None, seed: int) -> list[tuple[int, ...]]:
    """All k-subsets of range(n_cols), or a seeded random subset of size max_combinations."""
    total = math.comb(n_cols, k)
    if max_combinations is None or total <= max_combinations:
        return list(itertools.combinations(range(n_cols), k))
    rng = np.random.default_rng(seed)
    if total <= _MAX_ENUMERATED_COMBINATIONS:
        allc = list(itertools.combinations(range(n_cols), k))
        idx = np.sort(rng.choice(total, size=max_combinations, replace=False))
        return [allc[i] for i in idx]
    chosen: set[tuple[int, ...]] = set()
    while len(chosen) < max_combinations:
        chosen.add(tuple(sorted(rng.choice(n_cols, size=k, replace=False).tolist())))
    return sorted(chosen)


def _mean_tvd(
    codes: np.ndarray,
    radices: np.ndarray,
    n_real: int,
    k: int,
    max_combinations: int | None,
    seed: int,
) -> float:
    n_cols, n_total = codes.shape
    n_synth = n_total - n_real
    max_dense = max(4 * n_total, 1 << 16)
    combos = _select_combinations(n_cols, k, max_combinations, seed)
    total = 0.0
    for combo in combos:
        joint, size = _joint_codes(codes, radices, combo, max_dense)
        p_real = np.bincount(joint[:n_real], minlength=size) / n_real
        p_synth = np.bincount(joint[n_real:], minlength=size) / n_synth
        total += 0.5 * float(np.abs(p_real - p_synth).sum())
    return total / len(combos)


def _prepare_tvd(
    real: pd.DataFrame,
    synth: pd.DataFrame,
    numeric_columns: Iterable[Any] | str | None,
    bin_reference: pd.DataFrame | None,
    n_bins: int,
) -> tuple[np.ndarray, np.ndarray]:
    """Validate inputs for the TVD functions and encode the stacked tables."""
    _check_frame(real, "real")
    _check_frame(synth, "synth")
    _check_same_columns(real, synth, "real", "synth")
    numeric = _numeric_set(numeric_columns, real, "real")
    n_bins = _check_positive_int(n_bins, "n_bins")
    if bin_reference is None:
        bin_reference = real
    else:
        _check_frame(bin_reference, "bin_reference")
        missing = [c for c in real.columns if c in numeric and c not in set(bin_reference.columns)]
        if missing:
            raise ValueError(f"bin_reference is missing numeric column(s): {missing}")
    synth = synth[list(real.columns)]
    return _encode_for_tvd(real, synth, numeric, bin_reference, n_bins)


def _check_k(k: Any, n_cols: int) -> int:
    k = _check_positive_int(k, "k")
    if k > n_cols:
        raise ValueError(f"k={k} exceeds the number of columns ({n_cols})")
    return k


def kway_tvd(
    real: pd.DataFrame,
    synth: pd.DataFrame,
    k: int,
    numeric_columns: Iterable[Any] | None,
    bin_reference: pd.DataFrame | None = None,
    n_bins: int = 20,
    max_combinations: int | None = None,
    seed: int = 0,
) -> float:
    """Mean total variation distance between k-way marginals of real and synth.

    For every combination of ``k`` columns, TVD = 0.5 * sum |p_real - p_synth|
    over the joint cells seen in either table; the result is the mean over
    combinations.  0 = identical marginals, 1 = no shared cells at all.

    Numeric columns are cut into ``n_bins`` quantile bins fitted on
    ``bin_reference`` (default ``real``); values outside the reference range
    fall in the first/last bin.  Categorical columns are compared as strings.
    Missing values are their own category in every column.  If
    ``max_combinations`` is set and exceeded, a seeded random subset of
    combinations is used.
    """
    codes, radices = _prepare_tvd(real, synth, numeric_columns, bin_reference, n_bins)
    k = _check_k(k, codes.shape[0])
    if max_combinations is not None:
        max_combinations = _check_positive_int(max_combinations, "max_combinations")
    return _mean_tvd(codes, radices, len(real), k, max_combinations, seed)


def kway_tvd_report(
    real: pd.DataFrame,
    synth: pd.DataFrame,
    numeric_columns: Iterable[Any] | None,
    ks: Iterable[int] = (1, 2, 3),
    **kw: Any,
) -> dict[int, float]:
    """``{k: kway_tvd(real, synth, k, ...)}`` for each k in ``ks`` (tables encoded once).

    Keyword arguments (``bin_reference``, ``n_bins``, ``max_combinations``,
    ``seed``) are passed on as for :func:`kway_tvd`.  0 = identical, 1 = disjoint.
    """
    allowed = {"bin_reference", "n_bins", "max_combinations", "seed"}
    unknown = sorted(set(kw) - allowed)
    if unknown:
        raise ValueError(f"unknown keyword argument(s) for kway_tvd_report: {unknown}")
    ks = list(ks)
    if not ks:
        raise ValueError("ks must contain at least one k")
    codes, radices = _prepare_tvd(real, synth, numeric_columns, kw.get("bin_reference"), kw.get("n_bins", 20))
    ks = [_check_k(k, codes.shape[0]) for k in ks]
    max_combinations = kw.get("max_combinations")
    if max_combinations is not None:
        max_combinations = _check_positive_int(max_combinations, "max_combinations")
    seed = kw.get("seed", 0)
    return {k: _mean_tvd(codes, radices, len(real), k, max_combinations, seed) for k in ks}


def detection_auc(
    real: pd.DataFrame,
    synth: pd.DataFrame,
    numeric_columns: Iterable[Any] | None,
    n_folds: int = 5,
    max_rows: int = 20000,
    seed: int = 0,
) -> float:
    """Cross-validated ROC-AUC of a classifier telling synthetic from real rows.

    Equal-size random subsamples (``min(len(real), len(synth), max_rows)``
    rows each) are labelled real=0 / synth=1 and scored with a
    HistGradientBoostingClassifier under stratified ``n_folds``-fold CV; the
    mean fold AUC is returned.  0.5 = indistinguishable (ideal),
    1.0 = perfectly detectable.  Values below 0.5 mean "indistinguishable"
    too: when synth contains exact copies of real rows (e.g. identical
    tables), each test row's twin sits in the training fold with the opposite
    label and cross-validation anti-learns, so the AUC can fall well below
    0.5.  This is a fidelity metric, not a privacy one: copying scores well.
    """
    _check_frame(real, "real")
    _check_frame(synth, "synth")
    _check_same_columns(real, synth, "real", "synth")
    numeric = _numeric_set(numeric_columns, real, "real")
    n_folds = _check_positive_int(n_folds, "n_folds", minimum=2)
    max_rows = _check_positive_int(max_rows, "max_rows")
    n = min(len(real), len(synth), max_rows)
    if n < n_folds:
        raise ValueError(
            f"need at least n_folds={n_folds} rows per table for detection_auc, "
            f"got {n} (real={len(real)}, synth={len(synth)}, max_rows={max_rows})"
        )
    rng = np.random.default_rng(seed)
    columns = list(real.columns)
    real_sub = real.iloc[np.sort(rng.choice(len(real), size=n, replace=False))]
    synth_sub = synth[columns].iloc[np.sort(rng.choice(len(synth), size=n, replace=False))]
    both = pd.concat([real_sub, synth_sub], ignore_index=True)
    encoder = FeatureEncoder(columns, numeric, HGB_MAX_KEPT_CATEGORIES).fit(both, "real/synth")
    X = encoder.transform_ordinal(both, "real/synth")
    y = np.r_[np.zeros(n, dtype=int), np.ones(n, dtype=int)]

    aucs = []
    folds = StratifiedKFold(n_splits=n_folds, shuffle=True, random_state=seed)
    for train_idx, test_idx in folds.split(X, y):
        clf = HistGradientBoostingClassifier(categorical_features=hgb_categorical(encoder), random_state=seed)
        clf.fit(X[train_idx], y[train_idx])
        aucs.append(roc_auc_score(y[test_idx], clf.predict_proba(X[test_idx])[:, 1]))
    return float(np.mean(aucs))


# --------------------------------------------------------------------------
# ML efficacy
# --------------------------------------------------------------------------
def _prepare_supervised(
    train: pd.DataFrame,
    test: pd.DataFrame,
    target: Any,
    numeric_columns: Iterable[Any] | None,
) -> tuple[list, set]:
    """Validate train/test/target; return feature columns and numeric feature set."""
    _check_frame(train, "train")
    _check_frame(test, "test")
    if target not in set(train.columns):
        raise ValueError(f"target column {target!r} not found in train")
    _check_same_columns(train, test, "train", "test")
    numeric = _numeric_set(numeric_columns, train, "train")
    features = [c for c in train.columns if c != target]
    if not features:
        raise ValueError(f"train has no feature columns besides target {target!r}")
    return features, numeric - {target}


def _drop_missing_target(df: pd.DataFrame, target: Any, name: str) -> pd.DataFrame:
    out = df[df[target].notna()]
    if len(out) == 0:
        raise ValueError(f"every value of target {target!r} in {name} is missing")
    return out


def ml_efficacy(
    train: pd.DataFrame,
    test: pd.DataFrame,
    target: Any,
    numeric_columns: Iterable[Any] | None,
    seed: int = 0,
) -> dict[str, float]:
    """Train a classifier on ``train`` (e.g. synthetic), score it on ``test`` (real hold-out).

    Returns ``{"accuracy": ..., "roc_auc": ...}`` for a HistGradientBoostingClassifier.
    Target labels are compared as strings; rows with a missing target are
    dropped.  Binary: ROC-AUC uses the probability of the positive class,
    defined as the lexicographically larger label of the train target (e.g.
    ``">50K"`` over ``"<=50K"``, ``"1"`` over ``"0"``).  Multi-class: macro
    one-vs-rest ROC-AUC over train classes present in ``test``.
    ROC-AUC 0.5 = no better than chance, 1.0 = perfect ranking; compare with
    a model trained on real data for the "real" ceiling.
    """
    _, numeric = _prepare_supervised(train, test, target, numeric_columns)
    train = _drop_missing_target(train, target, "train")
    test = _drop_missing_target(test, target, "test")
    classes = np.unique(string_values(train[target]).astype(str))
    if len(classes) < 2:
        raise ValueError(
            f"target {target!r} in train has only one class ({classes[0]!r}); need at least two to train a classifier"
        )
    if len(np.unique(string_values(test[target]).astype(str))) < 2:
        raise ValueError(f"target {target!r} in test has only one class; ROC-AUC is undefined")
    scores = fit_and_score(train, test, target, numeric, False, "gradient boosting", seed)
    if math.isnan(scores["roc_auc"]):
        raise ValueError(f"no class of target {target!r} seen in train occurs in test; ROC-AUC is undefined")
    return {"accuracy": scores["accuracy"], "roc_auc": scores["roc_auc"]}


def ml_efficacy_regression(
    train: pd.DataFrame,
    test: pd.DataFrame,
    target: Any,
    numeric_columns: Iterable[Any] | None,
    seed: int = 0,
) -> dict[str, float]:
    """Train regressors on ``train``, report R^2 on ``test``.

    Returns ``{"r2": ..., "r2_gbm": ...}``: ``r2`` from LinearRegression on
    numeric features (NaN -> train medians) plus one-hot categoricals, and
    ``r2_gbm`` from HistGradientBoostingRegressor.  Rows with a missing target
    are dropped.  R^2 1 = perfect, 0 = no better than predicting the test
    mean, negative = worse than that.
    """
    _, numeric = _prepare_supervised(train, test, target, numeric_columns)
    train = _drop_missing_target(train, target, "train")
    test = _drop_missing_target(test, target, "test")
    numeric_values(train[target], target, "train")  # a clear error for a non-numeric target
    numeric_values(test[target], target, "test")
    if len(test) < 2:
        raise ValueError(f"test needs at least two rows with a non-missing target {target!r} for R^2")
    return {"r2": fit_and_score(train, test, target, numeric, True, "linear", seed)["r2"],
            "r2_gbm": fit_and_score(train, test, target, numeric, True, "gradient boosting", seed)["r2"]}


# --------------------------------------------------------------------------
# Combined report
# --------------------------------------------------------------------------
def fidelity_report(
    real_test: pd.DataFrame,
    synth: pd.DataFrame,
    numeric_columns: Iterable[Any] | None,
    target: Any = None,
    bin_reference: pd.DataFrame | None = None,
    ks: Iterable[int] = (1, 2, 3),
    seed: int = 0,
) -> dict[str, Any]:
    """All fidelity figures for ``synth`` against real hold-out rows ``real_test``.

    Returns ``{"tvd": {k: mean k-way TVD}, "detection_auc": float}`` plus
    ``"ml"`` when ``target`` is given: train on ``synth``, test on
    ``real_test`` -- :func:`ml_efficacy` (accuracy, roc_auc) for a categorical
    target, :func:`ml_efficacy_regression` (r2, r2_gbm) if ``target`` is
    listed in ``numeric_columns``.  TVD 0 / detection 0.5 are ideal.
    """
    if target is not None:
        _check_frame(real_test, "real_test")
        if target not in set(real_test.columns):
            raise ValueError(f"target column {target!r} not found in real_test")
    report: dict[str, Any] = {
        "tvd": kway_tvd_report(real_test, synth, numeric_columns, ks=ks, bin_reference=bin_reference, seed=seed),
        "detection_auc": detection_auc(real_test, synth, numeric_columns, seed=seed),
    }
    if target is not None:
        numeric = _numeric_set(numeric_columns, real_test, "real_test")
        if target in numeric:
            report["ml"] = ml_efficacy_regression(synth, real_test, target, numeric_columns, seed=seed)
        else:
            report["ml"] = ml_efficacy(synth, real_test, target, numeric_columns, seed=seed)
    return report
