"""The review of linked tables (schema.linked): how close synthetic persons and their child rows are
to the real ones, level by level and across the link.

    parents, children          each level's 1- and 2-way TVD (numbers at 20 quantile bins of the real rows)
    children_per_person_tvd    the TVD of the distribution of child rows per person (0 … max_children; a real
                               person with more counts as max_children)
    parent_child_2way          every parent column against every child column, over child rows (each joined to
                               its person's row): the mean 2-way TVD, what synthesizing the tables apart loses
    person_utility             train on synthetic persons, test on real ones, for a target of the parents'
                               (each person's child rows summarised: their count, means, most frequent values)
    sequences                  with a declared time index (schema.panel): the share of persons
                               whose rows obey it and the changes along it, real and synthetic
"""
from __future__ import annotations

import html
import itertools
import json
import os
from pathlib import Path

import numpy as np
import pandas as pd
from plotly.offline import get_plotlyjs

from ..files import write_atomic

from ..schema import ColumnSpec, Schema
from ..schema.linked import COUNT_COLUMN, LinkedSchema, LinkedTables, link_tables
from ..schema.panel import obeyed
from .charts import children_chart, level_columns_chart
from .fidelity import kway_tvd, kway_tvd_report
from .inputs import EvaluationError
from .utility import utility


def canonical(tables: LinkedTables, schema: LinkedSchema) -> LinkedTables:
    """Real tables as the schema reads them (categories as text, numbers clipped to their bounds),
    linked (orphan child rows dropped, no person bounded), with keys 1 … persons as a synthetic
    sample has them."""
    rows, _ = link_tables(tables, schema)
    return LinkedTables(rows.parents.assign(**{schema.key: np.arange(1, len(rows) + 1)}),
                        rows.children.assign(**{schema.key: rows.person + 1}))


def children_per_person(tables: LinkedTables, schema: LinkedSchema) -> np.ndarray:
    """The share of persons with 0, 1, …, max_children child rows (more counted as max_children)."""
    key, k = schema.key, schema.max_children
    per = tables.children.groupby(key).size().reindex(tables.parents[key], fill_value=0).clip(upper=k)
    return np.bincount(per.to_numpy(), minlength=k + 1) / max(1, len(per))


def linked_fidelity(real: LinkedTables, synth: LinkedTables, schema: LinkedSchema) -> dict:
    """The figures of the module's docstring, of `synth` against `real` (both with keys; `real` as
    `canonical` gives it)."""
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


def in_order(tables: LinkedTables, schema: LinkedSchema) -> float | None:
    """The share of persons with two or more child rows whose rows follow the declared order column
    (None without one): a synthetic table keeps a person's visits in the order they happened, or
    not."""
    if schema.order is None:
        return None
    kids = tables.children[[schema.key, schema.order]].dropna()
    groups = kids.groupby(schema.key)[schema.order]
    many = groups.size() >= 2
    if not many.any():
        return None
    ordered = groups.apply(lambda values: bool(values.is_monotonic_increasing))
    return float(ordered[many].mean())


def sequences(tables: LinkedTables, schema: LinkedSchema) -> dict | None:
    """Of the persons with two child rows or more, the share whose rows obey every declared fact of
    the panel (`valid`) and each fact's (`facts`: schema.panel.obeyed); None without a time index
    or such a person."""
    facts = obeyed(tables.children, tables.children[schema.key].to_numpy(), schema)
    if facts is None or facts.empty:
        return None
    return {"persons": len(facts), "valid": float(facts.all(axis=1).mean()),
            "facts": {name: float(share) for name, share in facts.mean().items()}}


def sequence_words(share: dict) -> str:
    """`sequences`' figures in words: "97% of 436 persons (year … 100%, …)"."""
    return (f"{share['valid']:.0%} of {share['persons']:,} persons ("
            + ", ".join(f"{name} {value:.0%}" for name, value in share["facts"].items()) + ")")


def linked_review(real: LinkedTables, synthetic: dict[str, LinkedTables], schema: LinkedSchema) -> dict:
    """The review of each synthetic pair of tables against the real ones (`real` as `canonical`
    gives it): the figures of `linked_fidelity`, each column's 1-way TVD at both levels, the
    children-per-person shares, the share of persons in order and of those whose rows obey the time
    index (`sequences`)."""
    out = {"persons": len(real.parents), "child_rows": len(real.children), "max_children": schema.max_children,
           "key": schema.key, "children_per_person": {"real": children_per_person(real, schema).tolist()},
           "in_order": {"real": in_order(real, schema)},
           "sequences": {"real": sequences(real, schema)}, "results": {}}
    for label, synth in synthetic.items():
        columns = {}
        for level, part in (("parents", schema.parent), ("children", schema.child)):
            for name in part.modelled().names:
                numeric = [name] if part[name].is_numeric else []
                columns[f"{level}: {name}"] = kway_tvd(getattr(real, level)[[name]], getattr(synth, level)[[name]], 1,
                                                       numeric)
        out["results"][label] = {**linked_fidelity(real, synth, schema), "columns": columns}
        out["children_per_person"][label] = children_per_person(synth, schema).tolist()
        out["in_order"][label] = in_order(synth, schema)
        out["sequences"][label] = sequences(synth, schema)
    return out


HELD_OUT = "real, held out"  # the held-out persons' label beside the training persons' ("real")


def review_linked(real: LinkedTables, synthetic: dict[str, LinkedTables], schema: LinkedSchema,
                  holdout: LinkedTables | None = None, target: str | None = None, seed: int = 0) -> dict:
    """`linked_review`, with train-on-synthetic persons for `target` (a parents' column; by default
    the one whose role is target) where held-out persons are given (`real` and `holdout` as
    `canonical` gives them)."""
    review = linked_review(real, synthetic, schema)
    if holdout is not None and len(holdout.parents):
        shares = review["sequences"]
        review["sequences"] = {"real": shares.pop("real"), HELD_OUT: sequences(holdout, schema),
                               **shares}
    target = target or next((c.name for c in schema.parent.columns if c.role == "target"), None)
    if holdout is not None and len(holdout.parents) and target:
        for label, tables in synthetic.items():
            review["results"][label]["person_utility"] = person_utility(real, tables, holdout, schema, target,
                                                                        seed=seed)
    return review


def write_linked_report(review: dict, out_dir, ledgers: dict | None = None,
                        title: str = "Synthetic linked tables: review") -> tuple[Path, Path]:
    """report.json and an offline report.html (plotly) of `linked_review`'s figures in `out_dir`
    (owner only)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    os.chmod(out, 0o700)  # statistics of the private tables
    report = {**review, "ledgers": ledgers or {}}
    json_path, html_path = out / "report.json", out / "report.html"
    write_atomic(json_path, json.dumps(report, indent=1), private=True)
    names = {"parents_1way": "persons' columns, 1-way TVD", "parents_2way": "persons' columns, 2-way TVD",
             "children_1way": "child rows' columns, 1-way TVD", "children_2way": "child rows' columns, 2-way TVD",
             "children_per_person_tvd": "child rows per person, TVD",
             "parent_child_2way": "a person's column × a child row's column, 2-way TVD"}
    rows = []
    for label, r in review["results"].items():
        flat = {"parents_1way": r["parents"]["1way"], "parents_2way": r["parents"]["2way"],
                "children_1way": r["children"]["1way"], "children_2way": r["children"]["2way"],
                "children_per_person_tvd": r["children_per_person_tvd"], "parent_child_2way": r["parent_child_2way"]}
        rows += [f"<tr><td>{html.escape(label)}</td><td>{html.escape(names[k])}</td><td>{v:.3f}</td></tr>"
                 for k, v in flat.items() if v is not None]
        used = r.get("person_utility")
        if used:
            rows += [f"<tr><td>{html.escape(label)}</td><td>train on synthetic persons, test on real ones: "
                     f"{html.escape(metric)} as a share of training on real persons ({html.escape(used['target'])})"
                     f"</td><td>{value:.2f}</td></tr>" for metric, value in used["ratio"].items()]
    counts = children_chart(review["children_per_person"])
    columns = level_columns_chart({label: r["columns"] for label, r in review["results"].items()})
    order = "".join(f"<li>{html.escape(label)}: {share:.0%}</li>" for label, share in review["in_order"].items()
                    if share is not None)
    spent = "".join(f"<li>{html.escape(label)}: ε = {ledger['spent_epsilon']:.3g} of {ledger['target_epsilon']:g}, "
                    f"δ = {ledger['target_delta']:.2g}, protecting a person (all their child rows)</li>"
                    for label, ledger in (ledgers or {}).items() if ledger)
    body = [f"<h1>{html.escape(title)}</h1>",
            f"<p>{review['persons']:,} real persons with {review['child_rows']:,} child rows, linked by "
            f"{html.escape(review['key'])}; at most {review['max_children']} child rows a person.</p>",
            f"<h2>Privacy spent</h2><ul>{spent}</ul>" if spent else "",
            "<h2>Figures</h2><p>Total variation distance (TVD): 0 when the shares are the same, 1 when they share "
            "nothing; numbers are cut at 20 quantile bins of the real rows.</p>",
            f"<table><tr><th>synthetic</th><th>figure</th><th>TVD</th></tr>{''.join(rows)}</table>",
            "<h2>Child rows per person</h2>", counts.to_html(full_html=False, include_plotlyjs=False),
            "<h2>Each column alone</h2>", columns.to_html(full_html=False, include_plotlyjs=False)]
    if order:
        body.append(f"<h2>Persons whose child rows follow the order column</h2><ul>{order}</ul>")
    valid = "".join(f"<li>{html.escape(label)}: {html.escape(sequence_words(share))}</li>"
                    for label, share in review.get("sequences", {}).items() if share)
    if valid:
        body.append("<h2>Persons whose rows run along the time index</h2><p>Of the persons with "
                    "two rows or more, those whose rows obey every declared fact of the panel, and "
                    f"each fact's share.</p><ul>{valid}</ul>")
    doc = (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
           "<style>body{font-family:sans-serif;max-width:1200px;margin:auto}table{border-collapse:collapse}"
           "td,th{border:1px solid #ccc;padding:4px 8px}</style>"
           f"<script type='text/javascript'>{get_plotlyjs()}</script></head><body>{''.join(body)}</body></html>")
    write_atomic(html_path, doc, private=True)
    return html_path, json_path


def person_table(tables: LinkedTables, schema: LinkedSchema) -> tuple[pd.DataFrame, Schema]:
    """One row a person, for a learner: their own columns, their count of child rows, and of each
    child column the mean over their rows (a number) or the value most of their rows hold (a
    category); and its schema."""
    key = schema.key
    persons = schema.persons()
    frame = tables.parents.drop(columns=[key]).reset_index(drop=True)
    groups = tables.children.groupby(key)
    owners = tables.parents[key].to_numpy()
    frame[COUNT_COLUMN] = groups.size().reindex(owners, fill_value=0).to_numpy()
    columns = list(persons.columns)
    for spec in schema.child.modelled().columns:
        if spec.is_numeric:
            name = f"{spec.name} (mean)"
            values = pd.to_numeric(tables.children[spec.name], errors="coerce").groupby(tables.children[key]).mean()
            columns.append(ColumnSpec(name, "continuous", lower=spec.lower, upper=spec.upper, nullable=True))
        else:
            name = f"{spec.name} (most often)"
            values = groups[spec.name].agg(lambda v: v.mode().iloc[0] if v.notna().any() else None)
            columns.append(ColumnSpec(name, "categorical", categories=list(spec.categories), nullable=True,
                                      unknown=spec.unknown))
        frame[name] = values.reindex(owners).to_numpy()
    return frame, Schema(columns=columns)


def person_utility(real: LinkedTables, synthetic: LinkedTables, holdout: LinkedTables, schema: LinkedSchema,
                   target: str, seed: int = 0) -> dict:
    """Train on synthetic persons, test on real held-out persons (evaluate.utility on
    `person_table`), against training on the real persons: a person-level target (one of the
    parents' columns)."""
    if target not in schema.parent:
        raise EvaluationError(f"the target {target!r} is not a column of the parents' table")
    (train, persons), (synth, _), (test, _) = (person_table(t, schema) for t in (real, synthetic, holdout))
    return utility(train, synth, test, persons, target, seed=seed)
