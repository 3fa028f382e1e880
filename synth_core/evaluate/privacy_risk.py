"""Privacy in practice: how close synthetic rows sit to the training rows, and attacks on them.

Distances use the public-schema encoding (`evaluate.features.PublicEncoder`): a numeric difference
counts its share of the public range (0..1), a differing category counts 1, so the squared distance
between two rows is (sum of squared range-scaled numeric differences) + (number of differing
categories).

The yardstick for every distance is a HELD-OUT set of real rows the model never saw: real unseen
rows are as close to the training rows as the population allows. Synthetic rows much closer to the
training rows than held-out rows are a sign of copying (Platzer & Reutterer 2021; Yale et al. 2020).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from sklearn.neighbors import NearestNeighbors

from ..schema import Schema
from .features import PublicEncoder
from .inputs import EvaluationError, canonical, sample_rows

# verdict thresholds of the distance to closest record (documented in `dcr_verdict`)
COPY_MARGIN = 0.01          # extra share of exact copies over the held-out baseline that is "poor"
CLOSER_SHARE_POOR = 0.60    # share of synthetic rows closer to train than to an equal-size holdout
CLOSER_SHARE_FAIR = 0.53


def _row_keys(df: pd.DataFrame) -> np.ndarray:
    """One 64-bit hash per canonical row (NaN/None hash alike), for exact-copy checks."""
    return pd.util.hash_pandas_object(df.astype(object).where(df.notna(), None), index=False).to_numpy()


def exact_copy_share(rows: pd.DataFrame, train: pd.DataFrame) -> float:
    """Share of `rows` identical, in every column, to at least one training row (canonical
    tables)."""
    return float(np.isin(_row_keys(rows), _row_keys(train)).mean())


@dataclass
class DCRResult:
    """Distances of synthetic and held-out rows to their closest training row.

    synthetic_to_train / holdout_to_train: one distance per sampled row (sizes in `sample_sizes`).
    nndr_synthetic / nndr_holdout: nearest / second-nearest training distance (0 = one training row
    is far closer than all others; 1 = two training rows are equally close).
    exact_copy_share: share of ALL synthetic rows identical to some training row;
    holdout_exact_copy_share: the same for held-out real rows (duplicates the population produces).
    summary: medians, 5th percentiles, share_closer_to_train, verdict (one plain-language line),
    level.
    """

    synthetic_to_train: np.ndarray
    holdout_to_train: np.ndarray
    exact_copy_share: float
    holdout_exact_copy_share: float
    nndr_synthetic: np.ndarray
    nndr_holdout: np.ndarray
    summary: dict
    sample_sizes: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {"exact_copy_share": self.exact_copy_share,
                "holdout_exact_copy_share": self.holdout_exact_copy_share,
                "summary": self.summary, "sample_sizes": self.sample_sizes}


def _nearest(reference: np.ndarray, queries: np.ndarray, k: int = 2) -> np.ndarray:
    k = min(k, len(reference))
    nn = NearestNeighbors(n_neighbors=k, algorithm="brute").fit(reference)
    _, idx = nn.kneighbors(queries)
    # recomputed directly: the fast search expands |a-b|² and leaves ~1e-8 where a row equals b
    dist = np.sqrt(((reference[idx] - queries[:, None, :]) ** 2).sum(axis=2))
    return np.sort(dist, axis=1)


def _nndr(dist: np.ndarray) -> np.ndarray:
    if dist.shape[1] < 2:
        return np.ones(len(dist))
    d1, d2 = dist[:, 0], dist[:, 1]
    return np.where(d2 > 0, d1 / np.where(d2 > 0, d2, 1.0), 1.0)


def dcr_verdict(copy_share: float, holdout_copy_share: float, closer_share: float) -> tuple[str, str]:
    """(level, one plain-language line). Thresholds:

    poor: exact copies exceed the held-out baseline by more than 1 point of share, or more than 60%
    of
          synthetic rows are closer to the training rows than to an equally large held-out set;
    fair: more than 53% closer to training (a mild pull towards the training rows);
    good: otherwise (about 50% is what rows unrelated to the training set give).
    """
    if copy_share > holdout_copy_share + COPY_MARGIN:
        return "poor", (f"{copy_share:.1%} of synthetic rows are exact copies of training rows, against "
                        f"{holdout_copy_share:.1%} for real rows the model never saw: the model copies rows.")
    if closer_share > CLOSER_SHARE_POOR:
        return "poor", (f"{closer_share:.0%} of synthetic rows are closer to the training rows than to unseen "
                        "real rows (50% is ideal): the synthetic data sits on the training rows.")
    if closer_share > CLOSER_SHARE_FAIR:
        return "fair", (f"{closer_share:.0%} of synthetic rows are closer to the training rows than to unseen "
                        "real rows (50% is ideal): a mild pull towards the training rows.")
    return "good", (f"Synthetic rows are no closer to the training rows than unseen real rows are "
                    f"({closer_share:.0%} closer to training, 50% is ideal; exact copies {copy_share:.1%} "
                    f"vs {holdout_copy_share:.1%} among unseen real rows).")


def distance_to_closest_record(train: pd.DataFrame, synthetic: pd.DataFrame, holdout: pd.DataFrame,
                               schema: Schema, max_rows: int = 5000, seed: int = 0,
                               max_train_rows: int | None = 50000) -> DCRResult:
    """Distance to closest record (DCR) of synthetic rows and of held-out real rows, to the training
    rows.

    Up to `max_rows` synthetic and as many held-out rows are compared with up to `max_train_rows`
    training rows (all of Adult). `share_closer_to_train`: synthetic rows closer to a training row
    than to any row of a held-out set of the same size as the training sample it is compared
    with."""
    train_c = canonical(train, schema, "training")
    synth_c = canonical(synthetic, schema, "synthetic")
    hold_c = canonical(holdout, schema, "held-out")
    if len(train_c) < 2:
        raise EvaluationError("the training table needs at least two rows for distances")
    enc = PublicEncoder(schema).fit(train_c)
    n = min(max_rows, len(synth_c), len(hold_c))
    syn_s = sample_rows(synth_c, n, seed)
    hold_s = sample_rows(hold_c, n, seed + 1)
    train_s = sample_rows(train_c, max_train_rows, seed + 2)
    X_train = enc.transform(train_s)
    d_syn = _nearest(X_train, enc.transform(syn_s))
    d_hold = _nearest(X_train, enc.transform(hold_s))

    # train vs holdout on equal footing: a training sample as large as the whole held-out set
    m = min(len(train_c), len(hold_c))
    X_tr_eq = enc.transform(sample_rows(train_c, m, seed + 3))
    X_ho_eq = enc.transform(sample_rows(hold_c, m, seed + 4))
    X_syn = enc.transform(syn_s)
    to_tr = _nearest(X_tr_eq, X_syn, 1)[:, 0]
    to_ho = _nearest(X_ho_eq, X_syn, 1)[:, 0]
    # ties (e.g. a row present in both sets) count half
    closer = float(np.mean((to_tr < to_ho) + 0.5 * (to_tr == to_ho)))

    copies = exact_copy_share(synth_c, train_c)
    hold_copies = exact_copy_share(hold_c, train_c)
    level, verdict = dcr_verdict(copies, hold_copies, closer)
    s_dcr, h_dcr = d_syn[:, 0], d_hold[:, 0]
    summary = {
        "synthetic_median": float(np.median(s_dcr)), "holdout_median": float(np.median(h_dcr)),
        "synthetic_p05": float(np.quantile(s_dcr, 0.05)), "holdout_p05": float(np.quantile(h_dcr, 0.05)),
        "nndr_synthetic_median": float(np.median(_nndr(d_syn))),
        "nndr_holdout_median": float(np.median(_nndr(d_hold))),
        "share_closer_to_train": closer,
        "exact_copy_share": copies, "holdout_exact_copy_share": hold_copies,
        "level": level, "verdict": verdict,
    }
    return DCRResult(synthetic_to_train=s_dcr, holdout_to_train=h_dcr, exact_copy_share=copies,
                     holdout_exact_copy_share=hold_copies, nndr_synthetic=_nndr(d_syn), nndr_holdout=_nndr(d_hold),
                     summary=summary,
                     sample_sizes={"synthetic": n, "holdout": n, "train": len(train_s),
                                   "closer_share_sets": m, "synthetic_total": len(synth_c)})


# --------------------------------------------------------------------------------------------------
# membership inference
# --------------------------------------------------------------------------------------------------
def membership_inference(train: pd.DataFrame, synthetic: pd.DataFrame, holdout: pd.DataFrame, schema: Schema,
                         max_rows: int = 2000, max_synthetic_rows: int = 50000, seed: int = 0) -> dict:
    """A distance-based membership-inference attack that holds only the synthetic table.

    The attacker scores a candidate row by minus its distance to the closest synthetic row (rows the
    model copied or memorised sit closer); members are training rows, non-members held-out real
    rows, equally many of each (`max_rows` at most). Returns the attack's ROC-AUC (0.5 = cannot tell
    members from non-members, the ideal; 1 = always can) and its advantage max(TPR − FPR)."""
    from sklearn.metrics import roc_auc_score, roc_curve

    train_c = canonical(train, schema, "training")
    synth_c = canonical(synthetic, schema, "synthetic")
    hold_c = canonical(holdout, schema, "held-out")
    n = min(max_rows, len(train_c), len(hold_c))
    members, others = sample_rows(train_c, n, seed), sample_rows(hold_c, n, seed + 1)
    enc = PublicEncoder(schema).fit(train_c)
    S = enc.transform(sample_rows(synth_c, max_synthetic_rows, seed + 2))
    d = _nearest(S, enc.transform(pd.concat([members, others], ignore_index=True)), 1)[:, 0]
    y = np.r_[np.ones(n), np.zeros(n)]
    auc = float(roc_auc_score(y, -d))
    fpr, tpr, _ = roc_curve(y, -d)
    return {"auc": auc, "advantage": float(np.max(tpr - fpr)),
            "member_median_distance": float(np.median(d[:n])), "nonmember_median_distance": float(np.median(d[n:])),
            "sample_sizes": {"members": n, "non_members": n, "synthetic": len(S)}}


# --------------------------------------------------------------------------------------------------
# attribute inference (Stadler, Oprisanu & Troncoso 2022, as used by DTGAN)
# --------------------------------------------------------------------------------------------------
def _risk(pred: np.ndarray, targets: pd.DataFrame, schema: Schema, sensitive: str) -> float:
    spec = schema[sensitive]
    if spec.is_numeric:
        truth = targets[sensitive].to_numpy(float)
        lo, hi = (spec.lower, spec.upper) if spec.has_bounds else (np.nanmin(truth), np.nanmax(truth))
        err = np.abs(pred.astype(float) - truth) / max(float(hi - lo), 1e-12)
        return float(1.0 - np.clip(err, 0, 1).mean())
    return float(np.mean(pred.astype(str) == targets[sensitive].astype(str).to_numpy()))


def _attack_risk(model_table: pd.DataFrame, targets: pd.DataFrame, schema: Schema, sensitive: str,
                 attacker: str, seed: int, max_nn_rows: int = 50000, max_model_rows: int = 10000) -> float:
    """Risk of one attacker trained on `model_table`, guessing `sensitive` for `targets`.

    "nearest row": the sensitive value of the published row closest on every other column (public
    encoding) -- it finds copied or memorised rows; "gradient boosting": a model of the column given
    the others -- population inference, what Stadler et al. call the attacker's model."""
    from sklearn.ensemble import HistGradientBoostingClassifier, HistGradientBoostingRegressor

    from .features import HGB_MAX_KEPT_CATEGORIES, FeatureEncoder, hgb_categorical

    rows = max_nn_rows if attacker == "nearest row" else max_model_rows
    train = sample_rows(model_table.dropna(subset=[sensitive]), rows, seed)
    features = [c for c in schema.names if c != sensitive]
    if attacker == "nearest row":
        sub = Schema(columns=[c for c in schema.columns if c.name != sensitive])
        enc = PublicEncoder(sub).fit(train)
        nn = NearestNeighbors(n_neighbors=1, algorithm="brute").fit(enc.transform(train[features]))
        idx = nn.kneighbors(enc.transform(targets[features]))[1][:, 0]
        return _risk(train[sensitive].to_numpy()[idx], targets, schema, sensitive)
    numeric = set(schema.numeric_columns) - {sensitive}
    enc = FeatureEncoder(features, numeric, HGB_MAX_KEPT_CATEGORIES).fit(train, "attack training")
    X, Xt = enc.transform_ordinal(train, "attack training"), enc.transform_ordinal(targets, "targets")
    if schema[sensitive].is_numeric:
        model = HistGradientBoostingRegressor(categorical_features=hgb_categorical(enc), random_state=seed,
                                              max_iter=50)
        model.fit(X, train[sensitive].to_numpy(float))
        return _risk(model.predict(Xt), targets, schema, sensitive)
    y = train[sensitive].astype(str).to_numpy()
    if len(np.unique(y)) < 2:
        return _risk(np.full(len(targets), y[0], dtype=object), targets, schema, sensitive)
    model = HistGradientBoostingClassifier(categorical_features=hgb_categorical(enc), random_state=seed, max_iter=50)
    model.fit(X, y)
    return _risk(model.predict(Xt), targets, schema, sensitive)


ATTACKERS = ("nearest row", "gradient boosting")


def attribute_inference(train: pd.DataFrame, synthetic: pd.DataFrame, holdout: pd.DataFrame, schema: Schema,
                        sensitive: str, max_targets: int = 2000, max_rows: int = 50000, max_model_rows: int = 10000,
                        seed: int = 0) -> dict:
    """The attribute-inference attack of Stadler et al. (2022): an attacker who knows every other
    column of a person guesses their `sensitive` value with a model trained on the published table.

    risk = accuracy of the guess (categorical) or 1 − mean |error| / public range (numeric), on
    target rows drawn from the training table, for the better of two attackers (`ATTACKERS`: the
    nearest published row on the other columns, and gradient boosting). `privacy_gain` = risk when
    the real training table is published − risk when the synthetic one is (Stadler's privacy gain;
    higher = the synthetic release protects more). Part of any risk is population inference (what a
    model learns about everyone, which useful synthetic data must keep); `member_advantage` isolates
    what concerns people IN the data: risk from the synthetic table for training rows − for held-out
    rows (0 = no extra risk for members)."""
    if sensitive not in schema:
        raise EvaluationError(f"the sensitive column {sensitive!r} is not a column of the schema")
    train_c = canonical(train, schema, "training").dropna(subset=[sensitive])
    synth_c = canonical(synthetic, schema, "synthetic")
    hold_c = canonical(holdout, schema, "held-out").dropna(subset=[sensitive])
    n = min(max_targets, len(train_c), len(hold_c))
    targets, others = sample_rows(train_c, n, seed + 1), sample_rows(hold_c, n, seed + 2)
    raw_table = train_c
    kw = {"max_nn_rows": max_rows, "max_model_rows": max_model_rows}
    # the published real table holds every target: the nearest-row attacker searches all of it
    kw_real = {"max_nn_rows": max(max_rows, len(raw_table)), "max_model_rows": max_model_rows}
    per_attacker = {}
    for attacker in ATTACKERS:
        per_attacker[attacker] = {
            "risk_real": _attack_risk(raw_table, targets, schema, sensitive, attacker, seed, **kw_real),
            "risk_synthetic": _attack_risk(synth_c, targets, schema, sensitive, attacker, seed, **kw),
            "risk_synthetic_holdout": _attack_risk(synth_c, others, schema, sensitive, attacker, seed, **kw),
        }
    # the attacker uses whichever attack works best
    best = {k: max(a[k] for a in per_attacker.values()) for k in ("risk_real", "risk_synthetic")}
    strongest = max(per_attacker, key=lambda a: per_attacker[a]["risk_synthetic"])
    risk_syn_hold = per_attacker[strongest]["risk_synthetic_holdout"]
    risk_syn = per_attacker[strongest]["risk_synthetic"]
    return {"sensitive": sensitive, "risk_real": best["risk_real"], "risk_synthetic": risk_syn,
            "risk_synthetic_holdout": risk_syn_hold, "privacy_gain": best["risk_real"] - risk_syn,
            "member_advantage": max(a["risk_synthetic"] - a["risk_synthetic_holdout"] for a in per_attacker.values()),
            "per_attacker": per_attacker, "strongest_attacker_on_synthetic": strongest,
            "sample_sizes": {"targets": n, "holdout_targets": n, "synthetic": min(len(synth_c), max_rows),
                             "model_training_rows": max_model_rows, "real": len(raw_table)}}
