"""Step 1: the sensitive table, uploaded or a built-in demo."""
from __future__ import annotations

import pandas as pd
import streamlit as st

from synth_core.demo import DEMOS, load_demo
from synth_core.privacy.budget import BudgetError
from synth_core.request import check_rows
from synth_core.schema import SchemaError, draft_schema, read_table_bytes
from workbench import state
from workbench.display import readable

st.title("1 · Your data")
st.write("Start from the sensitive table you want a synthetic version of, or from a demo table. "
         "The table stays on this machine: in memory while you work, and inside the owner-only run folder "
         "once you train. The app never offers it for download.")



def loaded(message: str) -> None:
    """A new table is in: run the app again so the sidebar (drawn before this page) shows it, and say so then."""
    st.session_state["data_notice"] = (st.session_state["table_name"], message)
    st.rerun()


notice = st.session_state.get("data_notice")
if notice and notice[0] == st.session_state.get("table_name"):
    st.success(notice[1])

limit_mb = st.get_option("server.maxUploadSize")
upload_tab, demo_tab = st.tabs(["Upload a file", "Use a demo table"])

with upload_tab:
    markers_text = st.text_input("Values that mean 'missing' (comma-separated)", value="?, NA",
                                 help="Cells holding exactly one of these are read as missing values.")
    uploaded = st.file_uploader(f"CSV or Parquet file (at most {limit_mb} MB)", type=["csv", "parquet", "pq"],
                                key="upload")
    if uploaded is not None and st.session_state.get("loaded_upload_id") != uploaded.file_id:
        markers = [m.strip() for m in markers_text.split(",") if m.strip()]
        try:
            table = read_table_bytes(uploaded.getvalue(), uploaded.name, missing_markers=markers)
            check_rows(len(table), uploaded.name)
            read_as = table.attrs.get("read_as")
            table.columns = [str(c) for c in table.columns]
            draft = draft_schema(table, missing_markers=markers)
        except (SchemaError, BudgetError) as e:
            st.error(f"This file cannot be used: {e}")
        else:
            state.set_dataset(table, uploaded.name, "upload", draft)
            st.session_state["loaded_upload_id"] = uploaded.file_id
            loaded(f"Loaded {uploaded.name}: {len(table):,} rows, {len(table.columns)} columns"
                   + (f" (read as {read_as})" if read_as else "") + ". "
                   "A schema was drafted from the data: review and confirm it on step 2.")

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
if len(table) < state.FEW_ROWS:
    st.warning(f"The table has {len(table):,} rows. Differential privacy hides each row behind noise, so small "
               "tables give rough synthetic data; expect coarse marginals and weak correlations.")


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


left, right = st.columns([3, 2])
with left:
    st.caption("First rows (only you see this)")
    st.dataframe(readable(table.head(20)), hide_index=True)
with right:
    st.caption("Column summaries (computed from the private table, for your eyes only)")
    st.dataframe(readable(column_summary(table)), hide_index=True)
st.page_link("app_pages/schema.py", label="Next: declare what is public about this table", icon=":material/arrow_forward:")
