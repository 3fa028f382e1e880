"""Fairness-controlled generation, for every model family (DP-LLMTGen §5.4, through conditional sampling).

A share p of the rows is generated with value-specified conditions {sensitive: group, target: value}
that give every group the same rate of the positive target value, the rest is sampled unconditioned.
Sampling from a trained DP model costs no privacy, and the counts used to plan the mix come from a pilot
*synthetic* sample, never from the private table.

With group shares π_g and positive rates r_g in the unconditioned rows, and conditioned rows made with
the same group shares and the overall rate r̄ in every group, group g's rate becomes (1−p)·r_g + p·r̄,
so the demographic-parity difference (largest minus smallest group rate) scales by (1 − p). Asking for
a gap therefore fixes p = 1 − gap / gap₀.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .schema import Schema, SchemaError


@dataclass
class FairGeneration:
    table: pd.DataFrame
    share: float                       # share of rows generated with value-specified conditions
    gap_before: float                  # demographic-parity difference of an unconditioned sample
    gap_after: float                   # ... of the returned table
    rates_before: dict = field(default_factory=dict)
    rates_after: dict = field(default_factory=dict)
    conditioned_rows: dict = field(default_factory=dict)   # "group / value" -> rows asked for

    def summary(self) -> dict:
        return {"fairness_share": self.share, "demographic_parity_before": self.gap_before,
                "demographic_parity_after": self.gap_after, "conditioned_rows": self.conditioned_rows}


def check_fairness_columns(schema: Schema, sensitive: str, target: str, positive: str) -> None:
    for role, name in (("sensitive attribute", sensitive), ("target", target)):
        if name not in schema:
            raise SchemaError(f"the {role} {name!r} is not a column of the schema")
        if schema[name].kind != "categorical":
            raise SchemaError(f"the {role} {name!r} must be categorical for demographic parity")
    if sensitive == target:
        raise SchemaError("the sensitive attribute and the target must be different columns")
    if str(positive) not in schema[target].vocabulary():
        raise SchemaError(f"{positive!r} is not a category of {target!r}")


def group_rates(table: pd.DataFrame, sensitive: str, target: str, positive: str) -> dict[str, float]:
    """Share of rows with target == positive, per group of the sensitive attribute (missing groups skipped)."""
    rows = table[[sensitive, target]].dropna(subset=[sensitive])
    hit = rows[target].astype("string").eq(str(positive)).fillna(False)
    return {str(g): float(v) for g, v in hit.groupby(rows[sensitive].astype(str)).mean().items()}


def demographic_parity_gap(table: pd.DataFrame, sensitive: str, target: str, positive: str) -> float:
    """Demographic-parity difference of the data itself: largest minus smallest group rate of the positive
    target value (fairlearn's definition, with the target column taken as the prediction)."""
    from fairlearn.metrics import demographic_parity_difference
    rows = table[[sensitive, target]].dropna(subset=[sensitive])
    if rows[sensitive].nunique() < 2:
        return 0.0
    hit = rows[target].astype("string").eq(str(positive)).fillna(False).astype(int).to_numpy()
    return float(demographic_parity_difference(hit, hit, sensitive_features=rows[sensitive].astype(str).to_numpy()))


def share_for_gap(gap_before: float, target_gap: float) -> float:
    if target_gap < 0:
        raise ValueError("the target gap must be ≥ 0")
    if gap_before <= target_gap or gap_before <= 0:
        return 0.0
    return float(min(1.0, 1.0 - target_gap / gap_before))


def fair_sample(model, n: int, sensitive: str, target: str, positive: str, target_gap: float | None = None,
                share: float | None = None, seed: int | None = None, pilot_rows: int = 5000) -> FairGeneration:
    """n rows where `share` of them (or the share that reaches `target_gap`) are value-specified.

    `model` is any fitted SynthModel (its `sample(n, conditions=...)` does the conditioning)."""
    if (target_gap is None) == (share is None):
        raise ValueError("give either a target demographic-parity gap or a share of conditioned rows")
    if share is not None and not 0 <= share <= 1:
        raise ValueError(f"the share of conditioned rows must be in [0, 1], not {share}")
    check_fairness_columns(model.schema, sensitive, target, positive)
    rng = np.random.default_rng(seed)
    pilot = model.sample(max(pilot_rows, n), seed=None if seed is None else seed)
    gap0, rates0 = demographic_parity_gap(pilot, sensitive, target, positive), group_rates(pilot, sensitive, target, positive)
    p = share_for_gap(gap0, target_gap) if share is None else float(share)

    m = int(round(p * n))
    base = pilot.iloc[rng.permutation(len(pilot))[: n - m]]
    parts, asked = [base], {}
    if m:
        groups = pilot[sensitive].dropna().astype(str)
        shares = groups.value_counts(normalize=True)
        overall = float(pilot[target].astype("string").eq(str(positive)).fillna(False).mean())
        negatives = [c for c in model.schema[target].vocabulary() if c != str(positive)]
        neg_share = pilot[target].astype("string").value_counts(normalize=True).reindex(negatives).fillna(0)
        neg_share = neg_share / neg_share.sum() if neg_share.sum() > 0 else pd.Series(1 / len(negatives), negatives)
        # largest-remainder rounding keeps the conditioned rows summing to exactly m
        cells = {}
        for g, pi in shares.items():
            cells[(g, str(positive))] = m * pi * overall
            for v, s in neg_share.items():
                cells[(g, v)] = m * pi * (1 - overall) * s
        counts = {k: int(np.floor(v)) for k, v in cells.items()}
        for k in sorted(cells, key=lambda k: cells[k] - counts[k], reverse=True)[: m - sum(counts.values())]:
            counts[k] += 1
        for (g, v), k in counts.items():
            if k:
                parts.append(model.sample(k, conditions={sensitive: g, target: v},
                                          seed=None if seed is None else int(rng.integers(2**31 - 1))))
                asked[f"{g} / {v}"] = k
    table = pd.concat(parts, ignore_index=True)
    table = table.iloc[rng.permutation(len(table))].reset_index(drop=True)
    return FairGeneration(table=table, share=p, gap_before=gap0,
                          gap_after=demographic_parity_gap(table, sensitive, target, positive),
                          rates_before=rates0, rates_after=group_rates(table, sensitive, target, positive),
                          conditioned_rows=asked)
