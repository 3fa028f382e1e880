"""Utility: train on synthetic, test on real (TSTR), against train on real, test on real (TRTR).

For a chosen target, each learner is trained once on the real training table and once on the
synthetic table and both are scored on the same real held-out rows. Classification: accuracy, macro
F1 and ROC-AUC (binary: probability of the lexicographically larger label, as
`fidelity.ml_efficacy`; multi-class: macro one-vs-rest over classes present in the test rows).
Regression: R². Learners: logistic / linear regression on one-hot categories and bound-scaled
numbers, and histogram gradient boosting. The figure is the ratio TSTR / TRTR averaged over learners
(1 = the synthetic table is as useful as the real one).
"""
from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from sklearn.ensemble import HistGradientBoostingClassifier, HistGradientBoostingRegressor
from sklearn.linear_model import LinearRegression, LogisticRegression
from sklearn.metrics import accuracy_score, f1_score, r2_score, roc_auc_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from ..schema import Schema
from .features import (HGB_MAX_KEPT_CATEGORIES, ONEHOT_MAX_KEPT_CATEGORIES, FeatureEncoder, hgb_categorical,
                                 numeric_values)
from .inputs import EvaluationError, canonical, sample_rows


def _classification_scores(clf, X_test, y_test) -> dict[str, float]:
    proba = clf.predict_proba(X_test)
    classes = clf.classes_
    pred = classes[np.argmax(proba, axis=1)]
    out = {"accuracy": float(accuracy_score(y_test, pred)),
           "f1_macro": float(f1_score(y_test, pred, average="macro", labels=np.unique(y_test)))}
    if len(classes) == 2:
        out["roc_auc"] = float(roc_auc_score(y_test == classes[1], proba[:, 1])) if len(np.unique(y_test)) > 1 else float("nan")
    else:
        aucs = [roc_auc_score(y_test == c, proba[:, i]) for i, c in enumerate(classes)
                if 0 < (y_test == c).sum() < len(y_test)]
        out["roc_auc"] = float(np.mean(aucs)) if aucs else float("nan")
    return out


LEARNERS = ("linear", "gradient boosting")


def fit_and_score(train: pd.DataFrame, test: pd.DataFrame, target: str, numeric: set, regression: bool,
                  learner: str, seed: int) -> dict[str, float]:
    """Train one learner on `train` (every column but `target` a feature; `numeric` names the
    numeric ones) and score it on `test`: the one train-on-X/test-on-Y of the evaluation (utility,
    fidelity.ml_efficacy).

    learner: "linear" (logistic or least-squares regression on one-hot categories and standardised
    numbers) or "gradient boosting" (histogram gradient boosting on category codes). Classification:
    accuracy, macro F1 and ROC-AUC (binary: probability of the lexicographically larger label;
    multi-class: macro one-vs-rest over the classes present in `test`, NaN if none). Regression: R².
    Rows are taken as given (drop missing targets first)."""
    features = [c for c in train.columns if c != target]
    numeric = set(numeric) - {target}
    if learner == "gradient boosting":
        enc = FeatureEncoder(features, numeric, HGB_MAX_KEPT_CATEGORIES).fit(train, "train")
        Xtr, Xte = enc.transform_ordinal(train, "train"), enc.transform_ordinal(test, "test")
        klass = HistGradientBoostingRegressor if regression else HistGradientBoostingClassifier
        model = klass(categorical_features=hgb_categorical(enc), random_state=seed)
    elif learner == "linear":
        enc = FeatureEncoder(features, numeric, ONEHOT_MAX_KEPT_CATEGORIES).fit(train, "train")
        Xtr, Xte = enc.transform_onehot(train, "train"), enc.transform_onehot(test, "test")
        model = make_pipeline(StandardScaler(), LinearRegression() if regression else LogisticRegression(max_iter=500))
    else:
        raise ValueError(f"learner must be one of {', '.join(LEARNERS)}, not {learner!r}")
    if regression:
        model.fit(Xtr, numeric_values(train[target], target, "train"))
        return {"r2": float(r2_score(numeric_values(test[target], target, "test"), model.predict(Xte)))}
    ytr = train[target].astype(str).to_numpy()
    if len(np.unique(ytr)) < 2:
        raise EvaluationError(f"the target {target!r} has one class only in a training table")
    model.fit(Xtr, ytr)
    return _classification_scores(model, Xte, test[target].astype(str).to_numpy())


def utility(real_train: pd.DataFrame, synthetic: pd.DataFrame, real_test: pd.DataFrame, schema: Schema,
            target: str, max_rows: int = 20000, seed: int = 0) -> dict[str, Any]:
    """{"task", "learners": {learner: {"real": scores, "synthetic": scores, "ratio": {metric:
    ratio}}}, "ratio": {metric: mean ratio over learners}, "sample_sizes"}; training tables sampled
    to `max_rows`."""
    if target not in schema:
        raise EvaluationError(f"the target {target!r} is not a column of the schema")
    tr = sample_rows(canonical(real_train, schema, "real training").dropna(subset=[target]), max_rows, seed)
    sy = sample_rows(canonical(synthetic, schema, "synthetic").dropna(subset=[target]), max_rows, seed + 1)
    te = sample_rows(canonical(real_test, schema, "real test").dropna(subset=[target]), max_rows, seed + 2)
    if len(te) < 2:
        raise EvaluationError("the real test table needs at least two rows with a target")
    regression = schema[target].is_numeric
    if not regression and te[target].nunique() < 2:
        raise EvaluationError(f"the target {target!r} has one class only in the real test table")
    names = {"linear": "linear regression" if regression else "logistic regression",
             "gradient boosting": "gradient boosting"}
    out: dict[str, Any] = {"task": "regression" if regression else "classification", "target": target,
                           "learners": {},
                           "sample_sizes": {"real_train": len(tr), "synthetic": len(sy), "real_test": len(te)}}
    ratios: dict[str, list[float]] = {}
    numeric = set(schema.numeric_columns)
    for key, learner in names.items():
        real_scores = fit_and_score(tr, te, target, numeric, regression, key, seed)
        syn_scores = fit_and_score(sy, te, target, numeric, regression, key, seed)
        ratio = {k: (syn_scores[k] / real_scores[k] if real_scores[k] not in (0, float("nan")) else float("nan"))
                 for k in real_scores}
        out["learners"][learner] = {"real": real_scores, "synthetic": syn_scores, "ratio": ratio}
        for k, v in ratio.items():
            ratios.setdefault(k, []).append(v)
    out["ratio"] = {k: float(np.mean(v)) for k, v in ratios.items()}
    return out
