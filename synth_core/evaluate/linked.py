"""The review of linked tables (schema.linked): how close synthetic persons and their child rows are to the real
ones, level by level and across the link.

    parents, children          each level's 1- and 2-way TVD (numbers at 20 quantile bins of the real rows)
    children_per_person_tvd    the TVD of the distribution of child rows per person (0 … max_children; a real
                               person with more counts as max_children)
    parent_child_2way          every parent column against every child column, over child rows (each joined to
                               its person's row): the mean 2-way TVD, what synthesizing the tables apart loses
"""
from __future__ import annotations

import itertools

import numpy as np

from ..schema.linked import LinkedSchema, LinkedTables, link_tables
from .fidelity import kway_tvd, kway_tvd_report


def canonical(tables: LinkedTables, schema: LinkedSchema) -> LinkedTables:
    """Real tables as the schema reads them (categories as text, numbers clipped to their bounds), linked (orphan
    child rows dropped, no person bounded), with keys 1 … persons as a synthetic sample has them."""
    rows, _ = link_tables(tables, schema)
    return LinkedTables(rows.parents.assign(**{schema.key: np.arange(1, len(rows) + 1)}),
                        rows.children.assign(**{schema.key: rows.person + 1}))


def children_per_person(tables: LinkedTables, schema: LinkedSchema) -> np.ndarray:
    """The share of persons with 0, 1, …, max_children child rows (more counted as max_children)."""
    key, k = schema.key, schema.max_children
    per = tables.children.groupby(key).size().reindex(tables.parents[key], fill_value=0).clip(upper=k)
    return np.bincount(per.to_numpy(), minlength=k + 1) / max(1, len(per))


def linked_fidelity(real: LinkedTables, synth: LinkedTables, schema: LinkedSchema) -> dict:
    """The figures of the module's docstring, of `synth` against `real` (both with keys; `real` as `canonical`
    gives it)."""
    key = schema.key
    out: dict = {}
    for level, part in (("parents", schema.parent), ("children", schema.child)):
        columns = part.modelled().names
        tvd = kway_tvd_report(getattr(real, level)[columns], getattr(synth, level)[columns],
                              part.modelled().numeric_columns, ks=(1, 2) if len(columns) > 1 else (1,))
        out[level] = {"1way": tvd[1], "2way": tvd.get(2)}
    shares = [children_per_person(t, schema) for t in (real, synth)]
    out["children_per_person_tvd"] = float(0.5 * np.abs(shares[0] - shares[1]).sum())
    joined = [t.children.merge(t.parents, on=key, how="inner") for t in (real, synth)]
    numeric = set(schema.parent.numeric_columns) | set(schema.child.numeric_columns)
    pairs = [kway_tvd(joined[0][[a, b]], joined[1][[a, b]], 2, [c for c in (a, b) if c in numeric])
             for a, b in itertools.product(schema.parent.modelled().names, schema.child.modelled().names)]
    out["parent_child_2way"] = float(np.mean(pairs))
    out["persons"], out["child_rows"] = len(synth.parents), len(synth.children)
    return out
