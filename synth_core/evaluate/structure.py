"""Joint structure: association matrices, pMSE, α-precision / β-recall / authenticity.

- Association matrix (DTGAN): for every pair of columns, Pearson correlation (numeric–numeric, in
  [−1, 1]), Cramér's V (categorical–categorical, bias-uncorrected, in [0, 1]) or the correlation ratio η
  (categorical–numeric, in [0, 1]); missing values are a category of their own and are dropped from
  numeric pairs. The figure is the mean absolute difference between the real and the synthetic matrix
  over all pairs (0 = every link kept; Pearson differences are halved so each pair counts in [0, 1]).
- pMSE ratio (Snoke et al. 2018, TableDiffusion): a logistic regression on the public-schema encoding
  predicts "synthetic" for the stacked tables; pMSE = mean (p̂ − c)², c the synthetic share. Its
  expectation when both tables come from one distribution is (k − 1)(1 − c)² c / N for k parameters;
  the ratio pMSE / that expectation is 1 for indistinguishable tables and grows with detectability.
- α-precision, β-recall, authenticity (Alaa et al. 2022, the "naive" variant without a learned
  embedding, as in synthcity and TableDiffusion), on the public-schema encoding: α-precision integrates
  over α the share of synthetic rows inside the real data's α-ball around the real mean against α
  (1 = synthetic rows are as typical as real ones); β-recall integrates the share of real rows whose
  nearest synthetic row is closer than their nearest real neighbour and lies inside the synthetic
  β-ball (1 = the synthetic rows cover all the real variety); authenticity is the share of synthetic rows
  farther from their nearest real row than that real row is from its own nearest real neighbour
  (0 = every synthetic row sits on a real row).
- Rule adherence: the rows that break each declared rule of the schema (schema/rules.py; 0 expected of a
  run's own rows, which sampling holds to them), and the share that break any.
"""
from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
from scipy.stats.contingency import association
from sklearn.linear_model import LogisticRegression
from sklearn.neighbors import NearestNeighbors

from ..schema import Schema
from ..schema.rules import breaking
from .features import PublicEncoder
from .inputs import canonical, sample_rows


# --------------------------------------------------------------------------------------------------
# associations
# --------------------------------------------------------------------------------------------------
def _codes(series: pd.Series) -> np.ndarray:
    return pd.factorize(series.astype(object).where(series.notna(), "<missing>"))[0]


def cramers_v(a: pd.Series, b: pd.Series) -> float:
    table = pd.crosstab(_codes(a), _codes(b)).to_numpy()
    if min(table.shape) < 2:
        return 0.0
    return float(association(table, method="cramer"))


def correlation_ratio(categories: pd.Series, values: pd.Series) -> float:
    """η: the share of the numeric column's spread explained by the category (square root of it)."""
    v = pd.to_numeric(values, errors="coerce")
    ok = v.notna().to_numpy()
    x = v.to_numpy(float)[ok]
    if len(x) < 2 or np.var(x) == 0:
        return 0.0
    g = _codes(categories)[ok]
    counts = np.bincount(g)
    means = np.bincount(g, weights=x) / np.maximum(counts, 1)
    between = float(np.sum(counts * (means - x.mean()) ** 2))
    return float(np.sqrt(between / (np.var(x) * len(x))))


def pearson(a: pd.Series, b: pd.Series) -> float:
    x, y = pd.to_numeric(a, errors="coerce"), pd.to_numeric(b, errors="coerce")
    ok = (x.notna() & y.notna()).to_numpy()
    x, y = x.to_numpy(float)[ok], y.to_numpy(float)[ok]
    if len(x) < 2 or x.std() == 0 or y.std() == 0:
        return 0.0
    return float(np.corrcoef(x, y)[0, 1])


def association_matrix(table: pd.DataFrame, schema: Schema) -> pd.DataFrame:
    """Pairwise associations (see the module docstring) of a canonical table; diagonal 1."""
    names = schema.names
    m = pd.DataFrame(np.eye(len(names)), index=names, columns=names)
    for a, b in itertools.combinations(names, 2):
        na, nb = schema[a].is_numeric, schema[b].is_numeric
        if na and nb:
            v = pearson(table[a], table[b])
        elif not na and not nb:
            v = cramers_v(table[a], table[b])
        else:
            cat, num = (b, a) if na else (a, b)
            v = correlation_ratio(table[cat], table[num])
        m.loc[a, b] = m.loc[b, a] = v
    return m


def association_difference(real: pd.DataFrame, synthetic: pd.DataFrame, schema: Schema,
                           max_rows: int = 50000, seed: int = 0) -> dict:
    """{"value": mean |Δ| over pairs (Pearson Δ halved), "real", "synthetic", "difference"
    matrices}."""
    real_c = sample_rows(canonical(real, schema, "real"), max_rows, seed)
    syn_c = sample_rows(canonical(synthetic, schema, "synthetic"), max_rows, seed + 1)
    r, s = association_matrix(real_c, schema), association_matrix(syn_c, schema)
    diff = (r - s).abs()
    numeric = set(schema.numeric_columns)
    for a in diff.index:
        for b in diff.columns:
            if a in numeric and b in numeric:
                diff.loc[a, b] /= 2.0
    iu = np.triu_indices(len(schema.names), 1)
    value = float(diff.to_numpy()[iu].mean()) if len(iu[0]) else 0.0
    return {"value": value, "real": r, "synthetic": s, "difference": diff,
            "sample_sizes": {"real": len(real_c), "synthetic": len(syn_c)}}


# --------------------------------------------------------------------------------------------------
# pMSE
# --------------------------------------------------------------------------------------------------
def pmse_ratio(real: pd.DataFrame, synthetic: pd.DataFrame, schema: Schema, max_rows: int = 10000,
               seed: int = 0) -> dict:
    """{"pmse", "expected_null", "ratio", "sample_sizes"} with a logistic-regression discriminator
    on the public-schema encoding (main effects). Ratio 1 = indistinguishable."""
    real_c = sample_rows(canonical(real, schema, "real"), max_rows, seed)
    syn_c = sample_rows(canonical(synthetic, schema, "synthetic"), max_rows, seed + 1)
    enc = PublicEncoder(schema).fit(real_c)
    X = np.vstack([enc.transform(real_c), enc.transform(syn_c)])
    y = np.r_[np.zeros(len(real_c)), np.ones(len(syn_c))]
    keep = X.std(axis=0) > 0
    X = X[:, keep]
    clf = LogisticRegression(C=1.0, max_iter=1000).fit(X, y)
    p = clf.predict_proba(X)[:, 1]
    c = len(syn_c) / len(y)
    pmse = float(np.mean((p - c) ** 2))
    k = X.shape[1] + 1
    expected = (k - 1) * (1 - c) ** 2 * c / len(y)
    return {"pmse": pmse, "expected_null": expected, "ratio": pmse / expected if expected > 0 else float("nan"),
            "parameters": k, "sample_sizes": {"real": len(real_c), "synthetic": len(syn_c)}}


# --------------------------------------------------------------------------------------------------
# α-precision, β-recall, authenticity
# --------------------------------------------------------------------------------------------------
def alpha_beta_authenticity(real: pd.DataFrame, synthetic: pd.DataFrame, schema: Schema,
                            max_rows: int = 5000, seed: int = 0, n_steps: int = 30,
                            max_reference_rows: int = 50000) -> dict:
    """{"alpha_precision", "beta_recall", "authenticity", curves, sample_sizes} (see module
    docstring).

    Precision and recall compare samples of `max_rows` rows of each table; authenticity looks for
    each sampled synthetic row's nearest row in the whole real table (up to `max_reference_rows`),
    so that a copied row is found even when it is not in the real sample."""
    real_all = canonical(real, schema, "real")
    real_c = sample_rows(real_all, max_rows, seed)
    syn_c = sample_rows(canonical(synthetic, schema, "synthetic"), max_rows, seed + 1)
    enc = PublicEncoder(schema).fit(real_c)
    X, Y = enc.transform(real_c), enc.transform(syn_c)
    center = X.mean(axis=0)
    alphas = np.linspace(0, 1, n_steps)
    real_to_center = np.linalg.norm(X - center, axis=1)
    synth_to_center = np.linalg.norm(Y - center, axis=1)
    radii = np.quantile(real_to_center, alphas)
    real_to_real = NearestNeighbors(n_neighbors=2, algorithm="brute").fit(X).kneighbors(X)[0][:, 1]
    rs_dist, rs_idx = NearestNeighbors(n_neighbors=1, algorithm="brute").fit(Y).kneighbors(X)
    real_to_synth, rs_idx = rs_dist[:, 0], rs_idx[:, 0]
    synth_center = Y.mean(axis=0)
    closest_synth_d = np.linalg.norm(Y[rs_idx] - synth_center, axis=1)
    synth_radii = np.quantile(np.linalg.norm(Y - synth_center, axis=1), alphas)
    precision_curve = np.array([np.mean(synth_to_center <= r) for r in radii])
    recall_curve = np.array([np.mean((real_to_synth <= real_to_real) & (closest_synth_d <= r)) for r in synth_radii])
    alpha_precision = 1 - np.sum(np.abs(alphas - precision_curve)) / np.sum(alphas)
    beta_recall = 1 - np.sum(np.abs(alphas - recall_curve)) / np.sum(alphas)
    # authenticity, per synthetic row: farther from its nearest real row than that row from its own
    # neighbour
    R = enc.transform(sample_rows(real_all, max_reference_rows, seed + 2))
    nn_ref = NearestNeighbors(n_neighbors=2, algorithm="brute").fit(R)
    sr_dist, sr_idx = nn_ref.kneighbors(Y, n_neighbors=1)
    matched = R[sr_idx[:, 0]]
    # the matched row's nearest other real row
    own = nn_ref.kneighbors(matched, n_neighbors=2)[0][:, 1]
    authentic = sr_dist[:, 0] > own + 1e-6  # 1e-6: float error of the fast search
    return {"alpha_precision": float(max(alpha_precision, 0.0)), "beta_recall": float(max(beta_recall, 0.0)),
            "authenticity": float(authentic.mean()),
            "alphas": alphas.tolist(), "precision_curve": precision_curve.tolist(),
            "recall_curve": recall_curve.tolist(),
            "sample_sizes": {"real": len(real_c), "synthetic": len(syn_c), "authenticity_reference": len(R)}}


def rule_adherence(synthetic: pd.DataFrame, schema: Schema) -> dict | None:
    """How many synthetic rows break each declared rule, and the share that break any (None: no
    rules)."""
    rules = schema.rule_checks
    if not rules:
        return None
    broken = breaking(rules, synthetic)
    rows = np.logical_or.reduce(list(broken.values()))
    return {"rows": len(synthetic), "breaking": {text: int(b.sum()) for text, b in broken.items()},
            "violations": int(rows.sum()), "share": float(rows.mean()) if len(synthetic) else 0.0}
