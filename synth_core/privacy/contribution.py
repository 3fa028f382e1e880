"""Contribution bounding for linked tables: a person contributes at most `max_children` child rows.

A person with more keeps a uniformly random subset of that size, drawn from secret randomness (never
a seed), in their rows' order. With every person's rows bounded, one DP-SGD sample is one person
whose sequence has at most max_children rows: per-sample clipping then protects the whole person,
and the sensitivity of a count over child rows is max_children. How many persons were truncated is a
count of the private table: the steward's alone.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from .randomness import secret_rng


def bound_children(rows, report, max_children: int, rng: np.random.Generator | None = None):
    """(rows with each person's child rows bounded, the report with the truncation counted). `rows`
    is schema.linked.LinkedRows; `rng`: tests only (the default is secret)."""
    person = rows.person
    counts = np.bincount(person, minlength=len(rows.parents))
    over = counts > max_children
    if not over.any():
        return rows, report
    rng = rng if rng is not None else secret_rng()
    keep = np.ones(len(person), dtype=bool)
    # the rows are grouped by person (schema.linked)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    for p in np.flatnonzero(over):
        chosen = rng.choice(counts[p], size=max_children, replace=False)
        mask = np.zeros(counts[p], dtype=bool)
        mask[chosen] = True
        keep[starts[p]:starts[p] + counts[p]] = mask
    bounded = dataclasses.replace(rows, children=rows.children.loc[keep].reset_index(drop=True), person=person[keep])
    return bounded, dataclasses.replace(report, truncated_persons=int(over.sum()), dropped_children=int((~keep).sum()))
