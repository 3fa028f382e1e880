"""Fairness-controlled generation, for every model family (DP-LLMTGen §5.4, through conditional
sampling).

A share p of the rows is generated with value-specified conditions {sensitive: group, target:
value}; the rest is sampled unconditioned. The conditioned rows go where they close the gap:
positives for the group with the lowest rate of the positive target value, negatives for the group
with the highest, a few rows at a time, whichever narrows the spread of the group rates more, until
the rates meet; rows left after that keep them met (every group at the common rate, in proportion to
the groups' sizes). Sampling from a trained DP model costs no privacy, and the counts used to plan
the mix come from a pilot *synthetic* sample, never from the private table.

(Spreading the conditioned rows in proportion to the groups, each at the overall rate, only scales
the gap by (1 − p): on Adult with DP-TBART at ε=1, p = 0.1 took the gap from 0.241 to 0.214. Aimed
at the cells that close it, one row in ten can bring the groups' rates together.) Asking for a gap
instead of a share gives the smallest share whose planned mix reaches it.

A group with fewer than `min_group_rows` rows in the table asked for is too small to judge: its rate
moves by a whole row's share, so it would decide the gap by chance, and aiming conditioned rows at
it would fill it with them. Such groups are left out of the gap and of the plan, kept as sampled,
and named; a group of the sample that ends with no row in the output is named too
(`FairGeneration.groups`).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..evaluate.fairness import group_rates
from ..schema import Schema, SchemaError


@dataclass
class FairGeneration:
    table: pd.DataFrame
    share: float                       # share of rows generated with value-specified conditions
    gap_before: float                  # demographic-parity difference of an unconditioned sample
    gap_after: float                   # ... of the returned table
    rates_before: dict = field(default_factory=dict)
    rates_after: dict = field(default_factory=dict)
    conditioned_rows: dict = field(default_factory=dict)   # "group / value" -> rows asked for
    # group -> {"rows_before" (expected in n unconditioned rows), "rows_after", "rate_before",
    # "rate_after", "judged" (enough rows to count in the gap), "lost" (no row in the output)}
    groups: dict = field(default_factory=dict)
    min_group_rows: int = 0

    @property
    def too_small(self) -> list[str]:
        return [g for g, d in self.groups.items() if not d["judged"]]

    @property
    def lost(self) -> list[str]:
        return [g for g, d in self.groups.items() if d["lost"]]

    def summary(self) -> dict:
        return {"fairness_share": self.share, "demographic_parity_before": self.gap_before,
                "demographic_parity_after": self.gap_after, "conditioned_rows": self.conditioned_rows,
                "groups_too_small_to_judge": self.too_small, "groups_lost": self.lost,
                "min_group_rows": self.min_group_rows}


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


def _known(table: pd.DataFrame, sensitive: str, target: str) -> pd.DataFrame:
    """The rows the group rates are computed on (evaluate.fairness.group_rates): both values
    present."""
    return table.dropna(subset=[sensitive, target])


def plan_conditioned_rows(counts: dict[str, float], positives: dict[str, float], m: int,
                          shares: dict[str, float] | None = None, common_rate: float | None = None) -> tuple[dict, dict]:
    """How many positive and negative rows to ask for per group so that, added to unconditioned rows
    with `counts` rows and `positives` positive rows per group, m rows bring the group rates as
    close as they can.

    Greedy, in steps of about m/400 rows: positives to the lowest-rate group or negatives to the
    highest, whichever leaves the smaller spread; once the rates meet, the rest in proportion to the
    groups' sizes at the common rate. With fewer than two groups among the unconditioned rows (p =
    1), every group in `shares` gets the positive `common_rate`. Returns ({group: positive rows},
    {group: negative rows}), integers summing to m."""
    if m <= 0:
        return {}, {}
    groups = [g for g in counts if counts[g] > 0]
    if len(groups) < 2:
        if not shares or common_rate is None:
            return {}, {}
        pos = {g: m * w * common_rate for g, w in shares.items()}
        neg = {g: m * w * (1 - common_rate) for g, w in shares.items()}
        return _round_cells(pos, neg, m)
    pos = {g: 0.0 for g in groups}
    neg = {g: 0.0 for g in groups}

    def rate(g, dp=0.0, dn=0.0):
        return (positives[g] + pos[g] + dp) / (counts[g] + pos[g] + neg[g] + dp + dn)

    def spread(changed, dp=0.0, dn=0.0):
        rates = [rate(g, dp, dn) if g == changed else rate(g) for g in groups]
        return max(rates) - min(rates)

    left, step = float(m), max(1.0, m / 400)
    while left > 0:
        rates = {g: rate(g) for g in groups}
        lo, hi = min(rates, key=rates.get), max(rates, key=rates.get)
        if rates[hi] - rates[lo] < 1e-4:
            break
        k = min(step, left)
        if spread(lo, dp=k) <= spread(hi, dn=k):
            pos[lo] += k
        else:
            neg[hi] += k
        left -= k
    if left > 0:  # the rates have met: keep them met
        total = sum(counts[g] + pos[g] + neg[g] for g in groups)
        common = sum(positives[g] + pos[g] for g in groups) / total
        for g in groups:
            share = (counts[g] + pos[g] + neg[g]) / total
            pos[g] += left * share * common
            neg[g] += left * share * (1 - common)
    return _round_cells(pos, neg, m)


def _round_cells(pos: dict, neg: dict, m: int) -> tuple[dict, dict]:
    """Largest-remainder rounding: integer rows per cell summing to exactly m."""
    groups = list(pos)
    cells = {**{(g, True): v for g, v in pos.items()}, **{(g, False): v for g, v in neg.items()}}
    whole = {k: int(np.floor(v)) for k, v in cells.items()}
    for k in sorted(cells, key=lambda k: cells[k] - whole[k], reverse=True)[: m - sum(whole.values())]:
        whole[k] += 1
    return ({g: whole[(g, True)] for g in groups}, {g: whole[(g, False)] for g in groups})


def planned_gap(counts: dict[str, float], positives: dict[str, float], m: int) -> float:
    """The spread of the group rates after adding the rows `plan_conditioned_rows` asks for."""
    add_pos, add_neg = plan_conditioned_rows(counts, positives, m)
    rates = [(positives[g] + add_pos.get(g, 0)) / (counts[g] + add_pos.get(g, 0) + add_neg.get(g, 0))
             for g in counts if counts[g] + add_pos.get(g, 0) + add_neg.get(g, 0) > 0]
    return max(rates) - min(rates) if len(rates) > 1 else 0.0


def share_for_gap(pilot: pd.DataFrame, n: int, sensitive: str, target: str, positive: str, target_gap: float) -> float:
    """The smallest share of n rows whose planned conditioned rows bring the gap of the pilot's
    group rates down to target_gap (1 if none does)."""
    if target_gap < 0:
        raise ValueError("the target gap must be ≥ 0")
    shares = _known(pilot, sensitive, target)[sensitive].astype(str).value_counts(normalize=True).to_dict()
    rates = group_rates(pilot, sensitive, target, positive, numeric_groups=False)

    def gap_with(m: int) -> float:
        counts = {g: shares[g] * (n - m) for g in shares}
        return planned_gap(counts, {g: rates[g] * counts[g] for g in shares}, m)

    if gap_with(0) <= target_gap:
        return 0.0
    lo, hi = 0, n  # gap_with(lo) > target, search the smallest m with gap_with(m) <= target
    if gap_with(hi) > target_gap:
        return 1.0
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if gap_with(mid) <= target_gap else (mid, hi)
    return hi / n


# a group with fewer rows than this in the table asked for is too small to judge (see the module's
# docstring)
MIN_GROUP_ROWS = 30


def _gap(rates: dict) -> float:
    return max(rates.values()) - min(rates.values()) if len(rates) > 1 else 0.0


def fair_sample(model, n: int, sensitive: str, target: str, positive: str, target_gap: float | None = None,
                share: float | None = None, seed: int | None = None, pilot_rows: int = 5000,
                min_group_rows: int = MIN_GROUP_ROWS) -> FairGeneration:
    """n rows where `share` of them (or the share that reaches `target_gap`) are value-specified.

    `model` is any fitted SynthModel (its `sample(n, conditions=...)` does the conditioning). Groups
    expected to have fewer than `min_group_rows` of the n rows are kept as sampled, out of the gap
    and the plan."""
    if (target_gap is None) == (share is None):
        raise ValueError("give either a target demographic-parity gap or a share of conditioned rows")
    if share is not None and not 0 <= share <= 1:
        raise ValueError(f"the share of conditioned rows must be in [0, 1], not {share}")
    if isinstance(min_group_rows, bool) or not isinstance(min_group_rows, int) or min_group_rows < 1:
        raise ValueError(f"the smallest group to judge must be a whole number of rows ≥ 1, not {min_group_rows!r}")
    check_fairness_columns(model.schema, sensitive, target, positive)
    rng = np.random.default_rng(seed)
    pilot = model.sample(max(pilot_rows, n), seed=None if seed is None else seed)
    expected = (_known(pilot, sensitive, target)[sensitive].astype(str).value_counts() * n / len(pilot)).to_dict()
    judged = {g for g, k in expected.items() if k >= min_group_rows}
    rates0 = group_rates(pilot, sensitive, target, positive, numeric_groups=False)
    gap0 = _gap({g: r for g, r in rates0.items() if g in judged})
    in_judged = pilot[sensitive].astype(str).isin(judged)
    p = share_for_gap(pilot[in_judged], n, sensitive, target, positive, target_gap) if share is None \
        else float(share)

    m = int(round(p * n))
    base = pilot.iloc[rng.permutation(len(pilot))[: n - m]]
    parts, asked = [base], {}
    if m:
        counts = {g: k for g, k in _known(base, sensitive, target)[sensitive].astype(str).value_counts().items()
                  if g in judged}
        positives = {g: r * counts[g] for g, r in group_rates(base, sensitive, target, positive, False).items()
                     if g in counts}
        known = _known(pilot[in_judged], sensitive, target)
        overall = float((known[target].astype(str) == str(positive)).mean())
        add_pos, add_neg = plan_conditioned_rows(
            counts, positives, m, shares=known[sensitive].astype(str).value_counts(normalize=True).to_dict(),
            common_rate=overall)
        negatives = [c for c in model.schema[target].vocabulary() if c != str(positive)]
        neg_share = pilot[target].astype("string").value_counts(normalize=True).reindex(negatives).fillna(0)
        neg_share = neg_share / neg_share.sum() if neg_share.sum() > 0 else pd.Series(1 / len(negatives), negatives)
        cells = {}
        for g, k in add_pos.items():
            cells[(g, str(positive))] = k
        for g, k in add_neg.items():
            # a group's negative rows split over the negative values as in the pilot, exactly k in
            # all
            split = (neg_share * k).to_numpy()
            whole = np.floor(split).astype(int)
            whole[np.argsort(split - whole)[::-1][: k - whole.sum()]] += 1
            for v, c in zip(neg_share.index, whole):
                cells[(g, v)] = cells.get((g, v), 0) + int(c)
        for (g, v), k in cells.items():
            if k:
                parts.append(model.sample(k, conditions={sensitive: g, target: v},
                                          seed=None if seed is None else int(rng.integers(2**31 - 1))))
                asked[f"{g} / {v}"] = k
    table = pd.concat(parts, ignore_index=True)
    table = table.iloc[rng.permutation(len(table))].reset_index(drop=True)
    rates1 = group_rates(table, sensitive, target, positive, False)
    after = _known(table, sensitive, target)[sensitive].astype(str).value_counts().to_dict()
    groups = {g: {"rows_before": int(round(expected[g])), "rows_after": int(after.get(g, 0)),
                  "rate_before": rates0.get(g), "rate_after": rates1.get(g), "judged": g in judged,
                  "lost": after.get(g, 0) == 0}
              for g in sorted(set(expected) | set(after), key=lambda g: -expected.get(g, 0))}
    return FairGeneration(table=table, share=p, gap_before=gap0,
                          gap_after=_gap({g: r for g, r in rates1.items() if g in judged}),
                          rates_before=rates0, rates_after=rates1, conditioned_rows=asked, groups=groups,
                          min_group_rows=min_group_rows)
