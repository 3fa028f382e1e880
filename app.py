"""The data steward's workbench: from a sensitive table to a reviewed, exportable DP synthetic table.

    streamlit run app.py

Each step is a page under app_pages/; the sidebar always shows the current run's privacy budget.
"""
from __future__ import annotations

import streamlit as st

st.set_page_config(page_title="DP synthetic tables", page_icon="🛡️", layout="wide")

from workbench.sidebar import render_sidebar  # noqa: E402  (after set_page_config)

PAGES = [
    st.Page("app_pages/data.py", title="1 · Data", icon="📄", default=True),
    st.Page("app_pages/schema.py", title="2 · Public schema", icon="📐"),
    st.Page("app_pages/model.py", title="3 · Model and budget", icon="⚖️"),
    st.Page("app_pages/train.py", title="4 · Train", icon="🏋️"),
    st.Page("app_pages/review.py", title="5 · Review", icon="🔍"),
    st.Page("app_pages/generate.py", title="6 · Generate and export", icon="📦"),
]

page = st.navigation(PAGES)
render_sidebar()
page.run()
