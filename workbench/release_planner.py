"""The model page's release planner: several releases on one table (a quick look, the release, a
later refresh), each with its forecast and what the table's total leaves after it, before any is
spent; the book then holds the table to the plan's total (synth_core.privacy.table_budget.set_plan).
The core decides; this module renders."""
from __future__ import annotations

import json

import pandas as pd
import streamlit as st

from synth_core.format import epsilon as epsilon_text
from synth_core.forecast import forecast_for, pairs_text
from synth_core.models import get_model_class
from synth_core.privacy import BudgetError
from synth_core.privacy.table_budget import Release, check_plan, left_after, plan_total
from synth_core.request import FitRequest
from synth_core.schema import Schema, SchemaError

FIRST_PLAN = [Release("a quick look", 0.1), Release("the release", 1.0), Release("a later refresh", 0.5)]


@st.cache_data(show_spinner="Forecasting each release…", max_entries=32)
def _forecasts(request_json: str, schema_json: str, n: int, plan_json: str) -> list[tuple]:
    """Each release's (pairs forecast, shares' width, the model auto picks at its ε, the width)."""
    request, schema = FitRequest.from_dict(json.loads(request_json)), Schema.from_json(schema_json)
    out = []
    for release in json.loads(plan_json):
        made = forecast_for(request, schema, n, release["epsilon"])
        width = made.columns[0].half_width if made.columns else None
        out.append((pairs_text(made) or "no benchmark runs of this model yet",
                    f"±{100 * width:.2g} points" if width is not None else "not measured",
                    get_model_class(made.model).label or made.model, width))
    return out


def render(book, table_key: str, account, request: FitRequest, schema: Schema, n: int) -> None:
    st.subheader("Plan this table's releases")
    st.caption("Several synthetic tables from the same rows add up: plan them together, the releases already made "
               "included. Each row is one release; its forecast and what the table's total leaves after it are "
               "shown, and setting the plan makes its sum the table's total, so no run can go beyond it.")
    saved = account.plan if account is not None and account.plan else FIRST_PLAN
    edited = st.data_editor(pd.DataFrame([{"release": r.name, "ε": r.epsilon} for r in saved]), num_rows="dynamic",
                            hide_index=True, key=f"release_plan_{table_key}",
                            column_config={"ε": st.column_config.NumberColumn("ε", min_value=0.0, format="%.3g")})
    rows = [{"name": "" if pd.isna(r["release"]) else str(r["release"]), "epsilon": r["ε"]}
            for r in edited.to_dict("records")]
    # a row added and left empty
    rows = [r for r in rows if r["name"].strip() or not pd.isna(r["epsilon"])]
    try:
        releases = check_plan(rows)
    except BudgetError as e:
        st.error(f"Not a plan yet: {e}")
        return
    spent = account.spent_epsilon if account is not None else 0.0
    try:
        shown = _forecasts(json.dumps(request.to_dict(), sort_keys=True), schema.to_json(), n,
                           json.dumps([{"name": r.name, "epsilon": r.epsilon} for r in releases]))
    except (BudgetError, SchemaError, ValueError) as e:
        st.caption(f"No forecast: {e}")
        shown = [("", "", "", None)] * len(releases)
    chosen = getattr(account, "total_epsilon", None) if account is not None else None
    lefts = left_after(releases, chosen)
    st.dataframe(pd.DataFrame([{"release": r.name, "ε": r.epsilon, "model": model,
                                "pairs of columns: mismatch expected (80%)": pairs,
                                "each column's shares, 9 times in 10": shares,
                                "left of the total after it": epsilon_text(left) if left >= 0
                                else f"over it by {epsilon_text(-left)}"}
                               for r, (pairs, shares, model, _), left
                               in zip(releases, shown, lefts)]),
                 hide_index=True)
    widths = sorted((r.epsilon, w) for r, (*_, w) in zip(releases, shown) if w is not None)
    if any(a[1] < b[1] for a, b in zip(widths, widths[1:]) if a[0] < b[0]):
        st.caption("A release with more ε can show wider shares where auto picks another model at "
                   "that ε (the model column): its counts are released by that model's own "
                   "measurement.")
    st.caption(f"Left of the table's total of ε = {epsilon_text(chosen)}, the one you chose; making this plan "
               f"the budget sets it to the plan's sum." if chosen is not None else
               "Left of the plan's own sum: this table has no total yet.")
    if spent:
        st.caption(f"This table's runs have spent ε = {epsilon_text(spent)} so far.")
    if st.button(f"Make this plan the table's budget (ε = {epsilon_text(plan_total(releases))} in all)",
                 key="set_release_plan"):
        try:
            book.set_plan(table_key, releases)
        except BudgetError as e:
            st.error(str(e))
        else:
            st.rerun()
