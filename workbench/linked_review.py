"""The review page for runs on linked tables (schema.linked): each level's fidelity, the children
per person, a person's column against their rows' columns, the order of a person's rows, the share
of persons whose rows obey a declared time index, train-on-synthetic persons, and the offline
report. The figures are synth_core.evaluate.linked's; this module renders them."""
from __future__ import annotations

from pathlib import Path

import pandas as pd
import streamlit as st

from synth_core.evaluate.charts import children_chart, level_columns_chart, marginal_chart
from synth_core.evaluate.inputs import EvaluationError
from synth_core.evaluate.linked import canonical, review_linked, sequence_words, write_linked_report
from synth_core.runs import RunDir
from synth_core.schema import SchemaError
from synth_core.schema.linked import LinkedSchema, LinkedTables

FIGURES = [  # (the review's figure, what the steward reads)
    (("parents", "1way"), "persons' columns, each alone (1-way TVD)"),
    (("parents", "2way"), "persons' columns, in pairs (2-way TVD)"),
    (("children", "1way"), "their rows' columns, each alone (1-way TVD)"),
    (("children", "2way"), "their rows' columns, in pairs (2-way TVD)"),
    (("children_per_person_tvd",), "how many rows each person has (TVD)"),
    (("parent_child_2way",), "a person's column against a column of their rows (2-way TVD)"),
]


@st.cache_data(show_spinner="Comparing persons and their rows…", max_entries=8)
def _review(key: str, _real: LinkedTables, _synthetic: dict, _schema: LinkedSchema, _holdout) -> tuple:
    """(the review's figures, the real tables as the schema reads them)."""
    real = canonical(_real, _schema)
    holdout = canonical(_holdout, _schema) if _holdout is not None and len(_holdout.parents) else None
    return review_linked(real, _synthetic, _schema, holdout), real


def _figure(result: dict, path: tuple) -> float | None:
    value = result
    for part in path:
        value = value.get(part) if isinstance(value, dict) else None
    return value


def render(schema: LinkedSchema, real: LinkedTables, holdout: LinkedTables | None,
           synthetic: dict[str, LinkedTables], runs: dict[str, str], key: str) -> None:
    """The review of `synthetic` ({label: tables}) against the training persons `real`; `runs`
    {label: run path}."""
    try:
        review, real = _review(key, real, synthetic, schema, holdout)
    except (EvaluationError, SchemaError, ValueError) as e:
        st.error(f"The synthetic tables cannot be compared with the real ones: {e}")
        return
    st.write(f"**{review['persons']:,} real persons** with **{review['child_rows']:,} rows**, linked by "
             f"{schema.key}; at most {schema.max_children} rows a person. Total variation distance (TVD): 0 when "
             "the shares are the same, 1 when they share nothing.")
    results = review["results"]
    table = pd.DataFrame([{"figure": words, **{label: "" if _figure(r, path) is None else f"{_figure(r, path):.3f}"
                                              for label, r in results.items()}} for path, words in FIGURES])
    st.dataframe(table, hide_index=True)
    if schema.order and review["in_order"].get("real") is not None:
        st.caption(f"Persons whose rows follow {schema.order}: "
                   + ", ".join(f"{label} {share:.0%}" for label, share in review["in_order"].items()
                               if share is not None) + ".")
    valid = {label: share for label, share in review.get("sequences", {}).items() if share}
    if valid:
        st.caption(f"Persons whose rows run along {schema.order} as declared (of those with two "
                   "rows or more): " + "; ".join(f"{label} {sequence_words(share)}"
                                            for label, share in valid.items()) + ".")
    for label, r in results.items():
        used = r.get("person_utility")
        if used:
            st.caption(f"{label}: a model trained on synthetic persons and tested on the persons kept aside predicts "
                       f"{used['target']} with " + ", ".join(f"{metric} {value:.2f}" for metric, value in
                                                             used["ratio"].items())
                       + " of what one trained on the real persons does (1: as well).")
    c1, c2 = st.columns(2)
    c1.plotly_chart(children_chart(review["children_per_person"]), key="linked_children")
    c2.plotly_chart(level_columns_chart({label: r["columns"] for label, r in results.items()}), key="linked_columns")

    st.subheader("Column by column")
    for title, level, part in (("Persons", "parents", schema.parent), ("Their rows", "children", schema.child)):
        st.markdown(f"**{title}**")
        real_level = getattr(real, level)
        cols = st.columns(2)
        for k, spec in enumerate(part.modelled().columns):
            with cols[k % 2]:
                st.plotly_chart(marginal_chart(spec, real_level[spec.name],
                                               {n: getattr(s, level)[spec.name] for n, s in synthetic.items()}),
                                key=f"linked_marginal_{level}_{spec.name}")

    st.subheader("Full evaluation report")
    if st.button("Build the report (HTML and JSON)", key="build_linked_report"):
        first = next(iter(runs.values()))
        out = RunDir(first).report_dir("-".join(Path(p).name for p in runs.values()) if len(runs) > 1 else "report")
        ledgers = {label: RunDir(path).ledger_dict() for label, path in runs.items()}
        html_path, json_path = write_linked_report(review, out, ledgers)
        st.session_state["linked_report"] = {"key": key, "html": str(html_path), "json": str(json_path)}
    built = st.session_state.get("linked_report")
    if built and built["key"] == key and Path(built["html"]).exists():
        st.warning("This report holds statistics of your private tables: it is for your own review, not for "
                   "release. Release the synthetic tables with their privacy report (step 6).",
                   icon=":material/warning:")
        c1, c2 = st.columns(2)
        c1.download_button("Download the report (HTML)", Path(built["html"]).read_bytes(),
                           file_name="review-report.html", mime="text/html", key="download_linked_html")
        c2.download_button("Download its figures (JSON)", Path(built["json"]).read_bytes(),
                           file_name="review-report.json", mime="application/json", key="download_linked_json")
