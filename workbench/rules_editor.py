"""The schema step's rules editor: the declared rules (synth_core/schema/rules.py) listed in words
with how many of the steward's rows break each (on their screen only), added from a text, a
suggestion or a form, edited, deleted. The core checks every rule; this module renders."""
from __future__ import annotations

import dataclasses

import pandas as pd
import streamlit as st

from synth_core.format import markdown_text
from synth_core.schema import Schema, SchemaError, validate_table
from synth_core.schema.rules import forms, preview, templates
from workbench import state

HOW_TO = """A rule is a condition every row meets, written like a pandas query:

- names with spaces or signs in backticks: `` `marital-status` ``; texts in quotes: `'Husband'`
- `==`, `!=`, `<`, `<=`, `>`, `>=`, `in ['a', 'b']`, `not in [...]`; `and`, `or`, `not`; `+ - * /`
- **if A then B** is written `not (A) or B`
- a comparison with a missing value is false; to allow one, say so: `isna(x) or x > 0`

Rules are public facts, like bounds: declaring them costs no privacy. Rows of your table that break one are left out
of training; every synthetic row obeys all of them."""


@st.cache_data(show_spinner=False, max_entries=4)
def _canonical(_table: pd.DataFrame, key: str, schema_json: str) -> pd.DataFrame:
    """The table in canonical form with every row kept, for counting the rows a rule breaks."""
    return validate_table(_table, Schema.from_json(schema_json), hold_rules=False)[0]


def _with_rules(schema: Schema, rules: list[str]) -> Schema:
    # checks every rule again: SchemaError names a bad one
    return dataclasses.replace(schema, rules=rules)


def _save(schema: Schema, rules: list[str]) -> bool:
    try:
        # fresh inputs: a deleted rule's edit box goes with it
        state.set_schema(_with_rules(schema, rules))
    except SchemaError as e:
        st.error(f"This rule cannot be added: {e}")
        return False
    return True


def render(table: pd.DataFrame, schema: Schema) -> None:
    st.subheader("Rules every row obeys")
    st.caption("Optional. A fact about how columns go together (a husband is married, a house is renovated after "
               "it is built): every synthetic row will obey it.")
    with st.expander("How to write a rule"):
        st.markdown(HOW_TO)
        examples = forms(schema)
        if examples:
            st.markdown("Forms with your columns, to adapt:\n\n" + "\n".join(f"- `` {f} ``" for f in examples))
    try:
        rows = _canonical(table, state.table_id() or "", dataclasses.replace(schema, rules=[]).to_json())
    except SchemaError:
        # the columns' facts do not fit the table yet: said below, under "Does the table fit"
        rows = None
    version = st.session_state.get("schema_version", 0)
    for i, text in enumerate(schema.rules):
        _one_rule(schema, rows, i, text, version)
    _new_rule(schema, rows, version)


def _one_rule(schema: Schema, rows: pd.DataFrame | None, i: int, text: str, version: int) -> None:
    shown = preview(text, schema, rows)
    c1, c2, c3 = st.columns([7, 3, 1], vertical_alignment="center")
    c1.markdown(f"`` {text} ``  \n{markdown_text(shown.words)}")
    if rows is not None:
        c2.markdown(f"**{shown.breaking:,}** of your {shown.rows:,} rows break it" if shown.breaking else
                    "none of your rows break it")
    if c3.button("Delete", key=f"rule_delete_{version}_{i}", help="Take this rule out"):
        if _save(schema, [r for j, r in enumerate(schema.rules) if j != i]):
            st.rerun()
    with st.expander("Edit", expanded=False):
        edited = st.text_input("Rule", value=text, key=f"rule_edit_{version}_{i}", label_visibility="collapsed")
        if st.button("Save the rule", key=f"rule_save_{version}_{i}") and edited.strip() != text:
            if _save(schema, [edited.strip() if j == i else r for j, r in enumerate(schema.rules)]):
                st.rerun()


def _new_rule(schema: Schema, rows: pd.DataFrame | None, version: int) -> None:
    suggested = [t for t in templates(schema) if t not in schema.rules]
    if suggested:
        pick = st.selectbox("Suggested from your column names (check it before adding)", ["—"] + suggested,
                            key=f"rule_template_{version}")
    else:
        pick = "—"
    key = f"rule_new_{version}_{pick}"
    text = st.text_input("Add a rule", value="" if pick == "—" else pick, key=key,
                         placeholder="e.g. not (relationship == 'Husband') or `marital-status` == 'Married-civ-spouse'")
    if not text.strip():
        return
    try:
        shown = preview(text.strip(), schema, rows)
    except SchemaError as e:
        st.error(f"Not a rule yet: {e}")
        return
    said = f"Reads as: {shown.words}."
    if rows is not None:
        said += (f" {shown.breaking:,} of your {shown.rows:,} rows break it (they would be left out of training)."
                 if shown.breaking else " None of your rows break it.")
    st.caption(said)
    if st.button("Add the rule", key=f"rule_add_{version}", type="primary"):
        if _save(schema, [*schema.rules, text.strip()]):  # a new version: a fresh, empty input
            st.rerun()
