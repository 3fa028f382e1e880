"""Step 1: the sensitive table, uploaded or a built-in demo."""
from __future__ import annotations

import pandas as pd
import streamlit as st

from synth_core.demo import DEMOS, load_demo
from synth_core.privacy.budget import BudgetError
from synth_core.request import check_rows
from synth_core.schema import SchemaError, draft_schema, read_table_bytes
from synth_core.schema.linked import (DEFAULT_MAX_CHILDREN, MOST_CHILDREN, LinkedTables, draft_linked, key_candidates,
                                      link_tables)
from workbench import kept, state
from workbench.display import readable

st.title("1 · Your data")
st.write("Start from the sensitive table you want a synthetic version of, or from a demo table. "
         "The table stays on this machine: in memory while you work, the last one loaded also in "
         "the owner-only workbench home (so that a reload finds it), and inside the owner-only run "
         "folder once you train. The app never offers it for download.")



def loaded(message: str) -> None:
    """A new table is in: run the app again so the sidebar (drawn before this page) shows it, and
    say so then."""
    st.session_state["data_notice"] = (st.session_state["table_name"], message)
    st.rerun()


notice = st.session_state.get("data_notice")
if notice and notice[0] == st.session_state.get("table_name"):
    st.success(notice[1])
kept.render(forget=True)  # work kept for this table before, or the table restored by a reload

limit_mb = st.get_option("server.maxUploadSize")
upload_tab, demo_tab = st.tabs(["Upload a file", "Use a demo table"])

def read_upload(uploaded, markers: list[str]):
    """The uploaded file as a table with text column names, and how it was read (encoding,
    separator)."""
    table = read_table_bytes(uploaded.getvalue(), uploaded.name, missing_markers=markers)
    table.columns = [str(c) for c in table.columns]
    return table, table.attrs.get("read_as")


def one_table(markers: list[str]) -> None:
    uploaded = st.file_uploader(f"CSV or Parquet file (at most {limit_mb} MB)", type=["csv", "parquet", "pq"],
                                key="upload")
    if uploaded is None or st.session_state.get("loaded_upload_id") == uploaded.file_id:
        return
    try:
        table, read_as = read_upload(uploaded, markers)
        check_rows(len(table), uploaded.name)
        draft = draft_schema(table, missing_markers=markers)
    except (SchemaError, BudgetError) as e:
        st.error(f"This file cannot be used: {e}")
        return
    state.set_dataset(table, uploaded.name, "upload", draft,
                      files=[(uploaded.name, uploaded.getvalue())], markers=markers)
    st.session_state["loaded_upload_id"] = uploaded.file_id
    loaded(f"Loaded {uploaded.name}: {len(table):,} rows, {len(table.columns)} columns"
           + (f" (read as {read_as})" if read_as else "") + ". "
           "A schema was drafted from the data: review and confirm it on step 2.")


def two_tables(markers: list[str]) -> None:
    """A table of one row per person and a table of their rows, linked by a key column both have."""
    c1, c2 = st.columns(2)
    parents_file = c1.file_uploader("Persons: one row each (patients, customers)", type=["csv", "parquet", "pq"],
                                    key="upload_parents")
    children_file = c2.file_uploader("Their rows: any number each (visits, transactions)",
                                     type=["csv", "parquet", "pq"], key="upload_children")
    if parents_file is None or children_file is None:
        st.caption("Both files are needed; each person's rows are linked to them by a column both files have.")
        return
    ids = (parents_file.file_id, children_file.file_id, tuple(markers))
    read = st.session_state.get("linked_read")
    if read is None or read[0] != ids:
        try:
            (parents, _), (children, _) = read_upload(parents_file, markers), read_upload(children_file, markers)
        except SchemaError as e:
            st.error(f"These files cannot be used: {e}")
            return
        st.session_state["linked_read"] = read = (ids, LinkedTables(parents, children))
    tables = read[1]
    keys = key_candidates(tables)
    if not keys:
        st.error("The two files have no column in common: the persons' file and their rows' file must share the "
                 "key column that links them (a patient number, a customer id).")
        return
    c1, c2, c3 = st.columns(3)
    key = c1.selectbox("Key column (links each row to its person)", keys, key="link_key",
                       help="An identifier: it is never modelled and never exported; synthetic persons get new "
                            "keys 1, 2, 3, …")
    max_children = int(c2.number_input("Most rows one person may contribute", min_value=1, max_value=MOST_CHILDREN,
                                       value=DEFAULT_MAX_CHILDREN, step=1, key="link_max_children",
                                       help="Your public choice, never read from the data: a person with more "
                                            "rows keeps a random selection of this many. Larger keeps more rows "
                                            "but needs more noise, since all of a person's rows are protected "
                                            "together."))
    orders = ["(the file's order)"] + [c for c in tables.children.columns if c != key]
    order = c3.selectbox("Order of a person's rows", orders, key="link_order",
                         help="A numeric column (a day, a year) a person's rows follow; or keep the file's order.")
    if st.button("Use these two tables", type="primary", key="use_linked"):
        try:
            check_rows(len(tables.parents), parents_file.name)
            draft = draft_linked(tables, key, max_children=max_children, missing_markers=markers,
                                 order=None if order == orders[0] else order)
            # a swapped pair, repeated or mismatched keys: said now, in one line
            link_tables(tables, draft)
        except (SchemaError, BudgetError) as e:
            st.error(f"These tables cannot be used: {e}")
            return
        state.set_dataset(tables, f"{parents_file.name} + {children_file.name}", "upload", draft,
                          files=[(f.name, f.getvalue()) for f in (parents_file, children_file)],
                          markers=markers)
        loaded(f"Loaded {len(tables.parents):,} persons ({parents_file.name}) and their {len(tables.children):,} "
               f"rows ({children_file.name}), linked by {key}. A schema of both was drafted from the data: review "
               "and confirm it on step 2.")


with upload_tab:
    markers_text = st.text_input("Values that mean 'missing' (comma-separated)", value="?, NA",
                                 help="Cells holding exactly one of these are read as missing values.")
    markers = [m.strip() for m in markers_text.split(",") if m.strip()]
    shape = st.radio("Your data", ["One table", "Two linked tables: a row per person, and their rows"],
                     horizontal=True, key="upload_shape",
                     help="Two linked tables (patients and their visits, customers and their transactions) are "
                          "synthesized together, and privacy then protects a whole person with all their rows.")
    (one_table if shape == "One table" else two_tables)(markers)

with demo_tab:
    choice = st.selectbox("Demo table", list(DEMOS), key="demo_choice")
    st.caption(DEMOS[choice][2])
    if st.button("Use this demo table", key="use_demo"):
        try:
            table, schema, about = load_demo(choice)
        except (RuntimeError, ValueError, OSError) as e:
            st.error(f"The demo table could not be loaded: {e}")
        else:
            state.set_dataset(table, choice, "demo", schema, about)
            loaded(f"Loaded {choice}, with a schema declared from its public documentation.")

table = state.table()
if table is None:
    st.info("No table loaded yet.")
    st.stop()

st.subheader(st.session_state["table_name"])
what = state.shape().unit
if len(table) < state.FEW_ROWS:
    st.warning(f"The table has {len(table):,} {what}. Differential privacy hides each {what[:-1]} behind noise, so "
               "small tables give rough synthetic data; expect coarse marginals and weak correlations.")

def column_summary(frame: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for name in frame.columns:
        col = frame[name]
        numeric = pd.to_numeric(col, errors="coerce")
        is_num = numeric.notna().sum() == col.notna().sum() and col.notna().any()
        rows.append({
            "column": name, "type": "number" if is_num else "text",
            "missing": int(col.isna().sum()), "distinct": int(col.nunique()),
            "min": float(numeric.min()) if is_num else None, "max": float(numeric.max()) if is_num else None,
            "most common": ", ".join(map(str, col.value_counts().index[:3])) if not is_num else "",
        })
    return pd.DataFrame(rows)




def show(frame: pd.DataFrame) -> None:
    left, right = st.columns([3, 2])
    with left:
        st.caption("First rows (only you see this)")
        st.dataframe(readable(frame.head(20)), hide_index=True)
    with right:
        st.caption("Column summaries (computed from the private table, for your eyes only)")
        st.dataframe(readable(column_summary(frame)), hide_index=True)


shape = state.shape()
if shape.links:  # how the two tables are linked, said once
    link = state.schema()
    st.write(f"Two linked tables: **{len(table.parents):,} persons** and **{len(table.children):,} rows** of theirs, "
             f"linked by **{link.key}**. A person contributes at most {link.max_children} rows"
             + (f", in the order of {link.order}" if link.order else "") + "; privacy protects each person with "
             "all their rows.")
frames = shape.frames(table)
places = st.tabs(list(frames)) if len(frames) > 1 else [st.container()]
for place, frame in zip(places, frames.values()):
    with place:
        show(frame)
st.page_link("app_pages/schema.py", label="Next: declare what is public about this table", icon=":material/arrow_forward:")
