"""The data steward's workbench: from a sensitive table to a reviewed, exportable DP synthetic
table.

    streamlit run app.py             # start with your own table
    streamlit run app.py -- --demo   # start with the built-in demo table already loaded

Each step is a page under app_pages/; the sidebar always shows the current run's privacy budget.
"""
from __future__ import annotations

import logging
import sys
from pathlib import Path

import streamlit as st

# a local icon: a :material/...: page icon is fetched from a font server on every load
st.set_page_config(page_title="DP synthetic tables", page_icon=str(Path(__file__).parent / "workbench" / "icon.png"),
                   layout="wide")

from workbench import state  # noqa: E402  (pages import after set_page_config)
from workbench.sidebar import render_sidebar  # noqa: E402

PAGES = [
    st.Page("app_pages/data.py", title="1 · Data", icon=":material/table:", default=True),
    st.Page("app_pages/schema.py", title="2 · Public schema", icon=":material/rule:"),
    st.Page("app_pages/model.py", title="3 · Model and budget", icon=":material/balance:"),
    st.Page("app_pages/train.py", title="4 · Train", icon=":material/model_training:"),
    st.Page("app_pages/review.py", title="5 · Review", icon=":material/compare:"),
    st.Page("app_pages/generate.py", title="6 · Generate and export", icon=":material/download:"),
]

if "--demo" in sys.argv[1:] and "demo_preloaded" not in st.session_state:
    # once per browser session: the steward may replace it
    st.session_state["demo_preloaded"] = True
    state.load_builtin_demo()

page = st.navigation(PAGES)
state.keep_widget_values()  # steps 3 and 6 keep their values when the steward visits another page
# which makes Streamlit log, with a stack, that a widget with a default got its value from session
# state: that is the point here, not a fault
logging.getLogger("streamlit.elements.lib.policies").setLevel(logging.ERROR)
book_problem = state.book_problem()
# said on every page; nothing that reads or spends the budget runs until it is repaired
if book_problem:
    st.error(f"The privacy budget book needs repair: {book_problem}", icon=":material/gpp_bad:")
    if page.title != PAGES[0].title:
        st.stop()
else:
    render_sidebar()
page.run()
