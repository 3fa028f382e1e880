"""Step 1: the sensitive table, uploaded or a built-in demo."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pandas as pd
import streamlit as st

from synth_core.demo import DEMOS, load_demo
from synth_core.privacy.budget import BudgetError
from synth_core.request import check_rows
from synth_core.schema import SchemaError, draft_schema, read_table_bytes
from synth_core.schema.batches import opened
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
upload_tab, path_tab, demo_tab = st.tabs(["Upload a file", "Open a file on this machine",
                                          "Use a demo table"])


@dataclass
class Picked:
    """A file the steward picked: uploaded, or named by its path on this machine."""
    name: str                 # the file's name, as the page says it
    id: object                # another for another file (or the same path changed)
    read: Callable            # markers -> (table with text column names, how it was read)
    kept: tuple               # what the home keeps for a reload: (name, bytes) or (name, path)


def uploaded_file(uploaded) -> Picked:
    def read(markers):
        table = read_table_bytes(uploaded.getvalue(), uploaded.name, missing_markers=markers)
        table.columns = [str(c) for c in table.columns]
        return table, table.attrs.get("read_as")
    return Picked(uploaded.name, uploaded.file_id, read, (uploaded.name, uploaded.getvalue()))


def file_at(typed: str) -> Picked | None:
    """The file at a typed path (~ for the home folder); None, said, where there is none."""
    path = Path(typed.strip().strip('"').strip("'")).expanduser()
    if not path.is_file():
        st.error(f"No file at {path}" + (": it is a folder." if path.is_dir() else "."))
        return None

    def read(markers):
        with st.spinner(f"Reading {path.name}…"):
            table = opened(path, markers)  # a random sample of a file too large to read whole
        table.columns = [str(c) for c in table.columns]
        return table, table.attrs.get("read_as")
    stat = path.stat()
    return Picked(path.name, (str(path.resolve()), stat.st_mtime, stat.st_size), read,
                  (path.name, str(path.resolve())))


def one_table(picked: Picked | None, source: str, markers: list[str]) -> None:
    if picked is None or st.session_state.get("loaded_upload_id") == (picked.id, tuple(markers)):
        return
    try:
        table, read_as = picked.read(markers)
        check_rows(len(table), picked.name)
        draft = draft_schema(table, missing_markers=markers)
    except (SchemaError, BudgetError) as e:
        st.error(f"This file cannot be used: {e}")
        return
    state.set_dataset(table, picked.name, source, draft, files=[picked.kept], markers=markers)
    st.session_state["loaded_upload_id"] = (picked.id, tuple(markers))
    rows = state.table_rows()
    loaded(f"Loaded {picked.name}: {rows:,} rows, {len(table.columns)} columns"
           + (f" (read as {read_as})" if read_as else "") + ". "
           + (f"It is too large to read whole here: the draft, the preview and step 2's checks "
              f"read a random {len(table):,} of its rows, and training reads the whole file a "
              "batch at a time. " if rows > len(table) else "")
           + "A schema was drafted from the data: review and confirm it on step 2.")


def two_tables(parents_file: Picked | None, children_file: Picked | None, source: str,
               markers: list[str]) -> None:
    """A table of one row per person and a table of their rows, linked by a key column both have."""
    if parents_file is None or children_file is None:
        st.caption("Both files are needed; each person's rows are linked to them by a column both files have.")
        return
    # the upload's widgets keep their names; the path tab's are its own (both tabs are drawn)
    k = "" if source == "upload" else f"{source}_"
    ids = (parents_file.id, children_file.id, tuple(markers))
    read = st.session_state.get(f"{k}linked_read")
    if read is None or read[0] != ids:
        try:
            (parents, _), (children, _) = parents_file.read(markers), children_file.read(markers)
        except SchemaError as e:
            st.error(f"These files cannot be used: {e}")
            return
        st.session_state[f"{k}linked_read"] = read = (ids, LinkedTables(parents, children))
    tables = read[1]
    keys = key_candidates(tables)
    if not keys:
        st.error("The two files have no column in common: the persons' file and their rows' file must share the "
                 "key column that links them (a patient number, a customer id).")
        return
    c1, c2, c3 = st.columns(3)
    key = c1.selectbox("Key column (links each row to its person)", keys, key=f"{k}link_key",
                       help="An identifier: it is never modelled and never exported; synthetic persons get new "
                            "keys 1, 2, 3, …")
    max_children = int(c2.number_input("Most rows one person may contribute", min_value=1, max_value=MOST_CHILDREN,
                                       value=DEFAULT_MAX_CHILDREN, step=1,
                                       key=f"{k}link_max_children",
                                       help="Your public choice, never read from the data: a person with more "
                                            "rows keeps a random selection of this many. Larger keeps more rows "
                                            "but needs more noise, since all of a person's rows are protected "
                                            "together."))
    orders = ["(the file's order)"] + [c for c in tables.children.columns if c != key]
    order = c3.selectbox("Order of a person's rows", orders, key=f"{k}link_order",
                         help="A numeric column (a day, a year) a person's rows follow; or keep the file's order.")
    if st.button("Use these two tables", type="primary", key=f"{k}use_linked"):
        try:
            check_rows(len(tables.parents), parents_file.name)
            draft = draft_linked(tables, key, max_children=max_children, missing_markers=markers,
                                 order=None if order == orders[0] else order)
            # a swapped pair, repeated or mismatched keys: said now, in one line
            link_tables(tables, draft)
        except (SchemaError, BudgetError) as e:
            st.error(f"These tables cannot be used: {e}")
            return
        state.set_dataset(tables, f"{parents_file.name} + {children_file.name}", source, draft,
                          files=[parents_file.kept, children_file.kept], markers=markers)
        loaded(f"Loaded {len(tables.parents):,} persons ({parents_file.name}) and their {len(tables.children):,} "
               f"rows ({children_file.name}), linked by {key}. A schema of both was drafted from the data: review "
               "and confirm it on step 2.")


ONE, TWO = "One table", "Two linked tables: a row per person, and their rows"


def how_read(tab: str) -> tuple[list[str], bool]:
    """(the missing markers, whether two files) as the steward sets them in a tab."""
    typed = st.text_input("Values that mean 'missing' (comma-separated)", value="?, NA",
                          key=f"markers_{tab}",
                          help="Cells holding exactly one of these are read as missing values.")
    shape = st.radio("Your data", [ONE, TWO], horizontal=True, key=f"{tab}_shape",
                     help="Two linked tables (patients and their visits, customers and their "
                          "transactions) are synthesized together, and privacy then protects a "
                          "whole person with all their rows.")
    return [m.strip() for m in typed.split(",") if m.strip()], shape == TWO


with upload_tab:
    markers, two_files = how_read("upload")
    types = ["csv", "parquet", "pq"]
    if not two_files:
        uploaded = st.file_uploader(f"CSV or Parquet file (at most {limit_mb} MB)", type=types,
                                    key="upload")
        one_table(uploaded_file(uploaded) if uploaded else None, "upload", markers)
    else:
        c1, c2 = st.columns(2)
        parents = c1.file_uploader("Persons: one row each (patients, customers)", type=types,
                                   key="upload_parents")
        children = c2.file_uploader("Their rows: any number each (visits, transactions)",
                                    type=types, key="upload_children")
        two_tables(parents and uploaded_file(parents), children and uploaded_file(children),
                   "upload", markers)

with path_tab:
    st.caption("For a file too large to upload, or one you would rather not copy: the app reads it "
               "where it is, and a reload reads it there again (the workbench home keeps its path, "
               "not a copy). CSV or Parquet.")
    markers, two_files = how_read("path")
    if not two_files:
        typed = st.text_input("Path of the file", key="open_path",
                              placeholder="/data/registry/extract.csv")
        if st.button("Open", key="open_path_button", disabled=not typed.strip()):
            one_table(file_at(typed), "path", markers)
    else:
        c1, c2 = st.columns(2)
        typed_parents = c1.text_input("Path of the persons' file (one row each)",
                                      key="open_path_parents")
        typed_children = c2.text_input("Path of their rows' file", key="open_path_children")
        if typed_parents.strip() and typed_children.strip():
            two_tables(file_at(typed_parents), file_at(typed_children), "path", markers)
        else:
            st.caption("Both files are needed.")

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
if state.table_file() is not None:
    st.caption(f"{state.table_rows():,} rows, too many to read whole here: what this page and "
               f"step 2 show is a random {len(table):,} of them; training reads the whole file a "
               "batch at a time.")
rows = state.table_rows()
if rows < state.FEW_ROWS:
    st.warning(f"The table has {rows:,} {what}. Differential privacy hides each {what[:-1]} "
               "behind noise, so small tables give rough synthetic data; expect coarse marginals "
               "and weak correlations.")

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
