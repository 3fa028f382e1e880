"""Step 2: the public schema, what may be known about the table without spending privacy."""
from __future__ import annotations

import streamlit as st

from synth_core.format import markdown_text
from synth_core.schema import SchemaError
from synth_core.schema.linked import schema_from_json
from synth_core.shape import shape_of
from workbench import kept, link_editor, rules_editor, state
from workbench.schema_editor import render_columns
from workbench.schema_table import clear_drafted_bounds, fitted_to

st.title("2 · What is public about the table")
st.write("The model may use only facts that are **public**: the range of each number and the list of possible "
         "values of each category, as you could find them in documentation or common knowledge (ages run from "
         "17 to 90, sex is Female or Male). Anything read from the private table itself would leak through the "
         "synthetic data, unless it is paid for from the privacy budget.")

table, schema = state.require_table()
kept.render()  # work kept for this table before, offered back; or restored by a reload
shape = shape_of(schema)  # one table, or persons and their rows
drafted = any(p.drafted_from_data for p in shape.parts(schema))

if schema.provenance["warning"]:
    st.warning("**These bounds, category lists, value sets and decimals were drafted by reading your private table.** The draft "
               "already leaves out the 10 most extreme values of each number (they are clipped to its bounds) and "
               "rounds its bounds outward, leaves out categories seen in fewer than 10 rows and columns that "
               "identify people or hold free text, but what remains still describes your data. "
               "Edit it into public facts (list every possible category, use bounds from "
               "documentation) and confirm below"
               + (", or clear the numeric bounds and pay part of ε to estimate them privately."
                  if shape.dp_bounds else "."),
               icon=":material/warning:")
    if shape.time_index(schema):
        st.caption("The link's time index and the changes along it were proposed only where every "
                   "person's rows show them: facts about all persons, to confirm like the rest.")
elif drafted:
    st.success("Drafted from the data and confirmed by you as public facts.")
else:
    st.success("Declared schema (imported or from the demo table's documentation).")


def put_part(i: int):
    """How the editor of the schema's i-th part puts its changed schema: a change the link refuses
    (a time index made a decimal column, its range cut below the rows a person may have) is said
    here from the grid, and raised to the form that asked (it says it)."""
    def put(new, remount: bool) -> None:
        try:
            state.set_schema(shape.with_part(state.schema(), i, new), remount_editor=remount)
        except SchemaError as e:
            if remount:
                raise
            st.error(f"Not applied: {e}")
    return put


if shape.links:  # the key, the most rows a person has, their order
    schema = link_editor.render(schema)

st.subheader("Columns")
several = len(shape.part_labels) > 1  # a tab each; one table's widgets keep their plain keys
places = st.tabs(list(shape.part_labels)) if several else [st.container()]
for i, (place, part) in enumerate(zip(places, shape.parts(schema))):
    with place:
        render_columns(part, put_part(i), prefix=f"{('parent', 'child')[i]}_" if several else "",
                       rules=shape.rules)

schema = state.schema()
if shape.rules:
    rules_editor.render(table, schema)
    schema = state.schema()
parts = shape.parts(schema)
st.subheader("Confirm")
missing_bounds = [c.name for p in parts for c in p.columns if c.is_numeric and not c.has_bounds]
c1, c2 = st.columns(2)
with c1:
    if schema.provenance["warning"]:
        if st.button("I confirm every fact above is public", type="primary", key="confirm_schema"):
            schema.confirm()
            state.set_schema(schema)
            st.rerun()
    else:
        st.caption("Confirmed." if drafted else "Nothing to confirm: the schema was declared.")
with c2:
    numeric = [c.name for c in schema.columns if c.is_numeric] if shape.dp_bounds else []
    if numeric and st.button("Clear the numeric bounds and estimate them with DP", key="clear_bounds",
                             help="Part of ε is then spent at training time on a private estimate of each "
                                  "number's range (round bounds from a noisy histogram), recorded in the ledger."):
        state.set_schema(clear_drafted_bounds(schema))
        st.rerun()
if missing_bounds and not shape.dp_bounds:
    st.error(f"No public bounds for {', '.join(missing_bounds)}: {shape.name} need every "
             "number's public minimum and maximum. Fill them in above.")
elif missing_bounds:
    st.info(f"No public bounds for {', '.join(missing_bounds)}: on step 3, set how much of ε to spend estimating "
            "them privately.")

st.subheader(f"{shape.does.capitalize()} {shape.the} fit the schema?")
try:
    report = shape.admit(table, schema)[1]
except SchemaError as e:
    st.error(f"{shape.the.capitalize()} {shape.does} not fit this schema: {e}")
else:
    lines = report.summary()
    if lines:
        st.write(f"Training will use {shape.the} with these changes (counts seen "
                 "only by you):")
        for line in lines:
            st.markdown(f"- {markdown_text(line)}")  # a rule's backticks and signs shown as typed
    else:
        st.write("Every value fits the public facts.")

st.subheader("Import or export")
c1, c2 = st.columns(2)
with c1:
    st.download_button("Download schema JSON", schema.to_json(), file_name="schema.json",
                       mime="application/json", key="download_schema")
with c2:
    imported = st.file_uploader("Import a schema JSON", type=["json"], key="schema_upload")
    if imported is not None and st.session_state.get("imported_schema_id") != imported.file_id:
        st.session_state["imported_schema_id"] = imported.file_id
        try:
            new = fitted_to(table, schema_from_json(imported.getvalue().decode("utf-8")))
            shape_of(new).admit(table, new)
        except (SchemaError, UnicodeDecodeError, KeyError, TypeError) as e:
            st.error(f"This schema cannot be used: {e}")
        else:
            state.set_schema(new)
            st.rerun()

st.page_link("app_pages/model.py", label="Next: choose a model and a privacy budget", icon=":material/arrow_forward:")
