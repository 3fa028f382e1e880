"""Step 2's link of two tables (synth_core.schema.linked): the key said, the most rows one person
contributes, the order of a person's rows, and a panel's time along it (synth_core.schema.panel: the
order column a time index, other columns' change per step). The checks are the core's
(LinkedSchema.check, one line each); this module renders the choices and puts them."""
from __future__ import annotations

import dataclasses

import pandas as pd
import streamlit as st

from synth_core.schema import SchemaError
from synth_core.schema.linked import MOST_CHILDREN, LinkedSchema
from workbench import state


def render(schema: LinkedSchema) -> LinkedSchema:
    """The link's facts as the steward edits them; the schema as it stands after their edit."""
    st.subheader("The link")
    st.write(f"Each row of the second table belongs to the person whose **{schema.key}** it names. "
             "The key is an identifier: it is never modelled and never exported (synthetic "
             "persons get new keys 1, 2, 3, …). Privacy protects a whole person: their row and all "
             "their rows in the second table.")
    version = st.session_state.get("schema_version", 0)
    c1, c2 = st.columns(2)
    most = int(c1.number_input("Most rows one person may contribute", min_value=1,
                               max_value=MOST_CHILDREN, value=schema.max_children, step=1,
                               key=f"link_max_{version}",
                               help="Your public choice, never read from the data: a person "
                                    "with more rows keeps a random selection of this many. More "
                                    "keeps more rows but needs more noise."))
    orders = [None] + [c.name for c in schema.child.columns if c.is_numeric]
    order = c2.selectbox("Order of a person's rows", orders, index=orders.index(schema.order)
                         if schema.order in orders else 0, key=f"link_order_{version}",
                         format_func=lambda o: "(the file's order)" if o is None else o,
                         help="A numeric column (a day, a year) a person's rows follow; or the "
                              "file's order.")
    time_index, changes = _panel(schema, order, version)
    wanted = dict(max_children=most, order=order, time_index=time_index, changes=changes)
    if any(getattr(schema, name) != value for name, value in wanted.items()):
        try:
            state.set_schema(dataclasses.replace(schema, **wanted), remount_editor=False)
        except SchemaError as e:
            st.error(f"Not applied: {e}")
    return state.schema()


def _panel(schema: LinkedSchema, order: str | None, version: int) -> tuple[dict | None, dict]:
    """The time index and the changes along it as the steward sets them: offered for an integer
    order column (a year, a wave), none otherwise."""
    integer = order is not None and schema.child[order].kind == "integer"
    c1, c2 = st.columns(2)
    timed = c1.checkbox("Each value at most once per person (a time index)", disabled=not integer,
                        value=integer and schema.time_index is not None, key=f"link_time_{version}",
                        help="A year, a wave: no person has two rows at one time. Synthetic "
                             "persons are built to hold it.")
    consecutive = c2.checkbox("…and without gaps (1980, 1981, 1982, …)", disabled=not timed,
                              value=timed and bool(schema.time_index and
                                                   schema.time_index["consecutive"]),
                              key=f"link_consecutive_{version}",
                              help="A person's times follow one by one, from their first.")
    if not timed:
        return None, {}
    columns = [c.name for c in schema.child.columns if c.is_numeric and c.name != order]
    if not columns:
        return {"unique": True, "consecutive": consecutive}, {}
    st.caption(f"Columns that change by exactly a step per 1 of {order} (years of experience: +1 a "
               "year; 0: the same in every row of a person). Synthetic persons follow it exactly.")
    frame = pd.DataFrame({"column": list(schema.changes),
                          "change per step": list(schema.changes.values())})
    edited = st.data_editor(
        frame.astype({"column": object, "change per step": float}), num_rows="dynamic",
        hide_index=True, key=f"link_changes_{version}",
        column_config={"column": st.column_config.SelectboxColumn("column", options=columns),
                       "change per step": st.column_config.NumberColumn("change per step")})
    rows = edited.dropna()
    return ({"unique": True, "consecutive": consecutive},
            dict(zip(rows["column"], rows["change per step"].astype(float))))
