"""Step 5: the synthetic table against the real one, column by column and as a whole; two runs side
by side."""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pandas as pd
import streamlit as st

from synth_core.evaluate.figures import column_figures, overall_verdict, quick_figures
from synth_core.forecast import against, extrapolation_note, forecast_column
from synth_core.evaluate.inputs import EvaluationError, canonical
from synth_core.evaluate.privacy_risk import distance_to_closest_record
from synth_core.evaluate.projections import pca_projection, umap_projection
from synth_core.request import review_rows_for
from synth_core.runs.jobs import read_private
from synth_core.runs import RunDir, RunError
from synth_core.schema import SchemaError
from synth_core.shape import shape_of
from workbench import linked_review, state
from workbench.display import readable
from synth_core.format import duration, markdown_text
from synth_core.evaluate.charts import dcr_chart, marginal_chart, projection_chart

st.title("5 · Review")
st.write("How faithful is the synthetic table, and does it stay away from the real rows? Everything here "
         "compares against your private table, so it is for your eyes: only the synthetic table and the privacy "
         "report leave this machine.")

by_id, ids, first = state.require_trained_runs()


def label(run_id: str) -> str:
    r = by_id[run_id]
    return r.get("name") or run_id


c1, c2 = st.columns(2)
primary = c1.selectbox("Run", ids, index=first, format_func=label, key="review_run")
others = [i for i in ids if i != primary]
second = c2.selectbox("Compare with (optional)", [""] + others,
                      format_func=lambda i: "—" if not i else label(i), key="review_compare")
chosen = [primary] + ([second] if second else [])
state.set_current_run(by_id[primary]["path"])


@st.cache_data(show_spinner="Reading the run…", max_entries=8)
def load_run(path: str, stamp: float):
    run = RunDir(path)
    schema = run.schema()
    train = read_private(run, "train")
    holdout = read_private(run, "holdout")
    synthetic = run.read_review_sample(schema)
    # an older or cancelled run without a review sample: make one now (sampling costs no privacy)
    if synthetic is None:
        from synth_core.api import load_model
        synthetic = load_model(path).sample(review_rows_for(len(train)) if train is not None else 5000, seed=0)
    return schema, train, holdout, synthetic


try:
    loaded = {i: load_run(by_id[i]["path"], RunDir(by_id[i]["path"]).samples_stamp()) for i in chosen}
except (RunError, SchemaError, OSError, ValueError) as e:
    st.error(f"This run cannot be reviewed: {e}")
    st.stop()
schema, real, holdout, _ = loaded[primary]
if real is None:
    st.error("The run's private rows are gone, so there is nothing to compare with.")
    st.stop()
# the synthetic tables' labels in every chart and table: short, so that legends fit beside the
# titles; the runs they stand for are named once, here
full_names = {i: by_id[i].get("name") or i for i in chosen}
models = [by_id[i].get("model") or "" for i in chosen]
names = ({primary: "synthetic"} if len(chosen) == 1 else
         {i: f"synthetic ({m})" for i, m in zip(chosen, models)} if len(set(models)) == len(models) and all(models)
         else {i: f"synthetic {k + 1}" for k, i in enumerate(chosen)})
st.caption(" · ".join(f"**{names[i]}**: rows drawn by the run {markdown_text(full_names[i])}" for i in chosen))
synthetic = {names[i]: loaded[i][3] for i in chosen}
if shape_of(schema).links:  # persons and their rows: the figures of both levels and of the link
    if any(loaded[i][0].to_dict() != schema.to_dict() for i in chosen):
        st.error(f"Runs on {shape_of(schema).name} are compared only with runs on the same "
                 "tables and schema.")
        st.stop()
    linked_review.render(schema, real, holdout, synthetic, {names[i]: by_id[i]["path"] for i in chosen},
                         key="|".join(by_id[i]["path"] for i in chosen))
    st.page_link("app_pages/generate.py", label="Next: generate and export", icon=":material/arrow_forward:")
    st.stop()
target = next((c.name for c in schema.columns if c.role == "target"), None)


@st.cache_data(show_spinner="Computing the fidelity figures…", max_entries=16)
def figures_for(key: str, _real, _synth, _schema, target):
    figs = quick_figures(_real, _synth, _schema, target=target)
    return pd.DataFrame([{"figure": f.label, "technical name": f.name, "value": f.value, "verdict": f.verdict,
                          "better": f"{f.better} is better", "meaning": f.meaning,
                          "compares": f.details.get("compares", "")} for f in figs]), \
        column_figures(_real, _synth, _schema)


st.subheader("Fidelity figures")
tables, col_tables = {}, {}
try:
    for i in chosen:
        tables[names[i]], col_tables[names[i]] = figures_for(f"{by_id[i]['path']}:{target}", real,
                                                               loaded[i][3], schema, target)
except EvaluationError as e:
    st.error(f"The synthetic table cannot be compared with the real one: {e}")
    st.stop()
base = tables[names[primary]][["figure"]].copy()
for label_, t in tables.items():
    base[f"{label_}"] = [f"{v:.3g} ({verdict})" if pd.notna(v) else "not computed"
                         for v, verdict in zip(t["value"], t["verdict"])]
base[["better", "technical name"]] = tables[names[primary]][["better", "technical name"]]
try:
    kept_forecast = RunDir(by_id[primary]["path"]).config().get("forecast")
except (RunError, OSError, ValueError):
    kept_forecast = None
expected = forecast_column(kept_forecast)
if any(expected.values()):  # what the run was expected to reach, from public facts before training
    base["forecast (80%)"] = [expected.get(name, "") for name in base["technical name"]]
    # the forecast beside the measured figures it is compared with, the reference columns after them
    base = base[["figure", *tables, "forecast (80%)", "better", "technical name"]]
beyond = extrapolation_note(kept_forecast)
st.dataframe(base, hide_index=True, column_config={"figure": st.column_config.TextColumn(width="large"),
                                                   **{label_: st.column_config.TextColumn(width="medium")
                                                      for label_ in [*tables, "forecast (80%)"]}})
compared = next((c for c in tables[names[primary]]["compares"] if c), None)
if compared:  # the forecast predicts this very comparison (synth_core/evaluate/protocol.py)
    st.caption(f"The mismatch figures compare {compared}"
               + (", as the forecast does." if any(expected.values()) else "."))
if beyond:
    st.caption(beyond)
with st.expander("What each figure means"):
    st.markdown("\n".join(f"- **{r['figure']}** ({r['technical name']}): {r['meaning']} "
                          f"{r['better'].capitalize()}." for r in tables[names[primary]].to_dict("records")))
measured = dict(zip(tables[names[primary]]["technical name"], tables[names[primary]]["value"]))
level, message = overall_verdict(list(tables[names[primary]]["verdict"]),
                                 by_id[primary].get("model"),
                                 against(kept_forecast, measured))
{"poor": st.warning, "fair": st.info, "good": st.success}[level](message)


def per_column(t: pd.DataFrame) -> pd.DataFrame:
    """The per-column figures with headers and cells a person reads (blank where a figure does not
    apply)."""
    p = t["chi_square_p"]
    return pd.DataFrame({
        "column": t["column"], "kind": t["kind"],
        "match (1 = same)": t["score"].round(3), "match measured by": t["metric"],
        "distance (0 = same)": t["distance"].round(3), "distance measured by": t["distance_metric"],
        "could the gap be chance? (categories)": ["" if pd.isna(v) else "no (p < 0.001)" if v < 0.001
                                                  else f"unlikely (p = {v:.3f})" if v < 0.05 else f"yes (p = {v:.2f})"
                                                  for v in p],
        "missing, real": t["missing_real"].map("{:.1%}".format),
        "missing, synthetic": t["missing_synthetic"].map("{:.1%}".format)})


with st.expander("Figures per column"):
    for label_, t in col_tables.items():
        st.caption(label_)
        st.dataframe(readable(per_column(t)), hide_index=True)

st.subheader("Column by column")
st.caption("Real (blue) and synthetic shares of rows; numbers are binned on the public scale, and a spike at zero "
           "(or at the lower bound) and the missing values get a panel of their own, with its own axis.")


@st.cache_data(show_spinner=False, max_entries=8)
def as_read(key: str, _real, _schema):
    """The real rows as the schema reads them (dates as their year, values on their declared sets),
    as the synthetic rows are written: the charts compare like with like."""
    return canonical(_real, _schema)


shown = as_read(by_id[primary]["path"], real, schema)
cols = st.columns(2)
for k, spec in enumerate(schema.columns):
    with cols[k % 2]:
        drawn = {n: s[spec.name] for n, s in synthetic.items()}
        st.plotly_chart(marginal_chart(spec, shown[spec.name], drawn),
                        key=f"marginal_{spec.name}")


@st.cache_data(show_spinner="Projecting rows…", max_entries=8)
def projection(key: str, method: str, _real, _synthetic, _schema):
    fn = pca_projection if method == "pca" else umap_projection
    return fn(_real, _synthetic, _schema, seed=0)


st.subheader("All columns at once")
key = "|".join(by_id[i]["path"] for i in chosen)
pca = projection(key, "pca", real, synthetic, schema)
ev = pca.explained_variance
st.plotly_chart(projection_chart(pca.points, "Where the rows lie, every column at once"), key="pca")
st.caption("Each row becomes a point on the two directions in which the real rows differ most (principal component "
           "analysis, PCA" + (f": they hold {ev[0]:.0%} and {ev[1]:.0%} of how the real rows vary" if ev else "")
           + "); brighter means more rows there. Similar heatmaps mean the synthetic rows fill the same regions as "
           f"the real ones. Rows shown: {', '.join(f'{k} {v:,}' for k, v in pca.sample_sizes.items())}.")
if st.checkbox("Show a UMAP view too (takes a little longer)", key="show_umap"):
    um = projection(key, "umap", real, synthetic, schema)
    st.plotly_chart(projection_chart(um.points, "Where the rows lie: neighbours kept together (UMAP)"), key="umap")

st.subheader("Distance to the closest real row")
if holdout is None or len(holdout) == 0:
    st.info("No rows were kept aside for this run, so there is no baseline to compare distances with. Keep some "
            "aside on step 3 next time.")
else:
    @st.cache_data(show_spinner="Measuring distances…", max_entries=8)
    def dcr(key: str, _train, _synth, _holdout, _schema):
        return distance_to_closest_record(_train, _synth, _holdout, _schema, seed=0)

    result = dcr(by_id[primary]["path"], real, synthetic[names[primary]], holdout, schema)
    st.plotly_chart(dcr_chart(result.synthetic_to_train, result.holdout_to_train), key="dcr")
    summary = result.summary
    st.write(summary.get("verdict", ""))
    st.caption(f"Synthetic rows identical to a training row: {result.exact_copy_share:.2%} (held-out real rows: "
               f"{result.holdout_exact_copy_share:.2%}).")

st.subheader("Full evaluation report")
st.write("Every figure of the evaluation module (joint structure, utility on the target, membership- and "
         "attribute-inference attacks, fairness) as one offline HTML page with its JSON. A bar shows what "
         "is left while it runs.")
if st.button("Build the full report", key="build_report"):
    from synth_core.evaluate.report import build_report
    from synth_core.runs.jobs import ledger_of
    out_dir = RunDir(by_id[primary]["path"]).report_dir("-".join(chosen) if second else "report")
    bar = st.progress(0.0, text="Evaluating…")
    started = time.time()

    def show(share: float, section: str) -> None:
        elapsed = time.time() - started
        left = elapsed * (1 - share) / share if share > 0 else None
        bar.progress(share, text=f"Evaluating: {section.replace('_', ' ')} done, {duration(elapsed)} so far"
                     + (f", about {duration(left)} left" if left is not None and share < 1 else ""))

    try:
        html_path, json_path = build_report(
            real, synthetic, schema, holdout=holdout, ledger={names[i]: ledger_of(RunDir(by_id[i]["path"]))
                                                               for i in chosen},
            out_dir=out_dir, title=f"Review of {', '.join(full_names[i] for i in chosen)}", include_umap=False,
            progress=show)
    except (EvaluationError, ValueError) as e:
        st.error(f"The report could not be built: {e}")
    else:
        st.session_state["full_report"] = {"key": key, "html": str(html_path), "json": str(json_path)}
    bar.empty()
full = st.session_state.get("full_report")
if full and full["key"] == key and os.path.exists(full["html"]):
    st.warning("This report holds statistics of your private table (its marginals, distances to its rows): it is "
               "for your own review, not for release. Release the synthetic table with its privacy report (step 6).",
               icon=":material/warning:")
    c1, c2 = st.columns(2)
    c1.download_button("Download the report (HTML)", Path(full["html"]).read_bytes(), file_name="review-report.html",
                       mime="text/html", key="download_full_html")
    c2.download_button("Download its figures (JSON)", Path(full["json"]).read_bytes(),
                       file_name="review-report.json", mime="application/json", key="download_full_json")
    for note in json.loads(Path(full["json"]).read_text()).get("notes", []):
        st.info(note)

st.page_link("app_pages/generate.py", label="Next: generate and export", icon=":material/arrow_forward:")
