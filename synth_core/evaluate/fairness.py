"""Fairness figures (fairlearn) of a table and of a classifier trained on it.

- demographic-parity difference of the DATA: the largest gap between groups of the sensitive column in
  the share of rows with the positive outcome (0 = every group has the same share);
- of a CLASSIFIER trained on a table (e.g. the synthetic one) and tested on real held-out rows:
  demographic-parity difference of its predictions, and equalized-odds difference (the larger of the
  largest between-group gaps in true-positive rate and in false-positive rate; 0 = equal error rates).

A synthetic table should keep the data's gaps (neither hide nor widen them); the figures of the real
table are the yardstick. A numeric sensitive column is cut into four quartile groups of the table.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from fairlearn.metrics import (
    MetricFrame,
    demographic_parity_difference,
    equalized_odds_difference,
    selection_rate,
)
from sklearn.ensemble import HistGradientBoostingClassifier
from sklearn.metrics import accuracy_score
from sklearn.model_selection import train_test_split

from .features import HGB_MAX_KEPT_CATEGORIES, FeatureEncoder, hgb_categorical
from .inputs import EvaluationError


def _check(table: Any, sensitive: str, target: str, name: str) -> pd.DataFrame:
    if not isinstance(table, pd.DataFrame) or len(table) == 0:
        raise EvaluationError(f"the {name} table is empty or not a DataFrame")
    for col, role in ((sensitive, "sensitive"), (target, "target")):
        if col not in table.columns:
            raise EvaluationError(f"the {role} column {col!r} is not in the {name} table")
    if sensitive == target:
        raise EvaluationError("the sensitive column and the target must differ")
    out = table[table[target].notna() & table[sensitive].notna()]
    if len(out) == 0:
        raise EvaluationError(f"no row of the {name} table has both {sensitive!r} and {target!r}")
    return out


def _positive(table: pd.DataFrame, target: str, positive: Any) -> str:
    labels = sorted(table[target].astype(str).unique())
    if positive is None:
        if len(labels) < 2:
            raise EvaluationError(f"the target {target!r} has one class only ({labels[0]!r})")
        # the lexicographically larger label, as in ml_efficacy (">50K", "1", "yes")
        return labels[-1]
    return str(positive)


def _groups(series: pd.Series, reference: pd.Series | None = None) -> pd.Series:
    """Sensitive groups as strings; a numeric column with many values is cut into quartiles."""
    num = pd.to_numeric(series, errors="coerce")
    if num.notna().all() and series.nunique() > 10:
        ref = pd.to_numeric(reference if reference is not None else series, errors="coerce")
        edges = np.unique(np.quantile(ref.dropna(), [0, 0.25, 0.5, 0.75, 1.0]))
        edges[0], edges[-1] = -np.inf, np.inf
        return pd.cut(num, edges).astype(str)
    return series.astype(str)


def group_rates(table: pd.DataFrame, sensitive: str, target: str, positive: Any = None,
                numeric_groups: bool = True) -> dict[str, float]:
    """Share of rows whose `target` is `positive` (default: the lexicographically larger label), per
    group of `sensitive`; rows missing either value are left out. numeric_groups: a numeric
    sensitive column with many values is cut into quartiles (False: every value is its own group, as
    fairness control needs). A table with no such rows has no groups."""
    if isinstance(table, pd.DataFrame) and {sensitive, target} <= set(table.columns) \
            and table[[sensitive, target]].dropna().empty:
        return {}
    t = _check(table, sensitive, target, "given")
    pos = _positive(t, target, positive)
    groups = _groups(t[sensitive]) if numeric_groups else t[sensitive].astype(str)
    hit = (t[target].astype(str) == pos).astype(float)
    return {str(g): float(v) for g, v in hit.groupby(groups.to_numpy()).mean().items()}


def demographic_parity_gap(table: pd.DataFrame, sensitive: str, target: str, positive: Any = None,
                           numeric_groups: bool = True) -> float:
    """The data's demographic-parity difference: the largest gap between groups of `sensitive` in
    the share of rows whose `target` is `positive` (see group_rates; fairlearn's definition with the
    target as the prediction). 0 = every group has the same share."""
    rates = group_rates(table, sensitive, target, positive, numeric_groups)
    return max(rates.values()) - min(rates.values()) if len(rates) > 1 else 0.0


def _rates_by_group(y_true, y_pred, groups) -> dict[str, float]:
    mf = MetricFrame(metrics=selection_rate, y_true=y_true, y_pred=y_pred, sensitive_features=groups)
    return {str(k): float(v) for k, v in mf.by_group.items()}


def fairness_figures(table: pd.DataFrame, sensitive: str, target: str, positive: Any = None,
                     classifier_on: pd.DataFrame | None = None, test: pd.DataFrame | None = None,
                     seed: int = 0, max_rows: int = 20000) -> dict:
    """Fairness figures of `table` and of a classifier.

    data: demographic-parity difference and the positive share per group, of `table`.
    classifier: a gradient-boosting classifier trained on `classifier_on` (default: `table`) with
    every other column as a feature, tested on `test` (real held-out rows; default: a seeded 30% of
    the training table held out from it; training rows sampled to `max_rows`): demographic-parity
    and equalized-odds differences of its predictions on the test rows, accuracy, and the predicted
    positive share per group.
    """
    t = _check(table, sensitive, target, "given")
    pos = _positive(t, target, positive)
    out: dict[str, Any] = {
        "sensitive": sensitive, "target": target, "positive": pos,
        "data": {
            "demographic_parity_difference": demographic_parity_gap(t, sensitive, target, pos),
            "positive_rate_by_group": group_rates(t, sensitive, target, pos),
            "rows": int(len(t)),
        },
    }
    train = _check(classifier_on if classifier_on is not None else table, sensitive, target, "classifier training")
    if test is None:
        if len(train) < 10:
            raise EvaluationError("too few rows to hold out a test set for the classifier")
        train, test_t = train_test_split(train, test_size=0.3, random_state=seed)
        test_from = "30% of the training table, held out"
    else:
        test_t = _check(test, sensitive, target, "test")
        test_from = "the given test table"
    if len(train) > max_rows:
        train = train.sample(n=max_rows, random_state=seed)
    y_train = (train[target].astype(str) == pos).astype(int).to_numpy()
    if len(np.unique(y_train)) < 2:
        raise EvaluationError(f"the target {target!r} has one class only in the classifier's training rows")
    y_test = (test_t[target].astype(str) == pos).astype(int).to_numpy()
    features = [c for c in train.columns if c != target]
    numeric = {c for c in features if pd.api.types.is_numeric_dtype(train[c])}
    enc = FeatureEncoder(features, numeric, HGB_MAX_KEPT_CATEGORIES).fit(train, "classifier training")
    clf = HistGradientBoostingClassifier(categorical_features=hgb_categorical(enc), random_state=seed)
    clf.fit(enc.transform_ordinal(train, "classifier training"), y_train)
    pred = clf.predict(enc.transform_ordinal(test_t[features], "test"))
    g_test = _groups(test_t[sensitive], t[sensitive])
    out["classifier"] = {
        "demographic_parity_difference": float(demographic_parity_difference(y_test, pred, sensitive_features=g_test)),
        "equalized_odds_difference": float(equalized_odds_difference(y_test, pred, sensitive_features=g_test)),
        "accuracy": float(accuracy_score(y_test, pred)),
        "predicted_positive_rate_by_group": _rates_by_group(y_test, pred, g_test),
        "trained_on_rows": int(len(train)), "tested_on_rows": int(len(test_t)), "tested_on": test_from,
        "learner": "HistGradientBoostingClassifier",
    }
    return out
