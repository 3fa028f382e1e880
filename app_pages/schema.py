"""Step 2: the public schema, what may be known about the table without spending privacy."""
from __future__ import annotations

import json

import streamlit as st

from synth_core.format import markdown_text
from synth_core.schema import KINDS, Schema, SchemaError, validate_table
from synth_core.schema.derived import describe
from workbench import rules_editor, state
from workbench.schema_table import (
    EDITOR_COLUMNS,
    ROLE_CHOICES,
    categories_to_text,
    clear_drafted_bounds,
    frame_to_schema,
    lines_to_categories,
    number_text,
    schema_to_frame,
    text_to_numbers,
    with_rule,
)

st.title("2 · What is public about the table")
st.write("The model may use only facts that are **public**: the range of each number and the list of possible "
         "values of each category, as you could find them in documentation or common knowledge (ages run from "
         "17 to 90, sex is Female or Male). Anything read from the private table itself would leak through the "
         "synthetic data, unless it is paid for from the privacy budget.")

table, schema = state.require_table()

if schema.drafted_from_data and not schema.confirmed:
    st.warning("**These bounds, category lists and decimals were drafted by reading your private table.** The draft "
               "already leaves out the 10 most extreme values of each number (they are clipped to its bounds) and "
               "rounds its bounds outward, leaves out categories seen in fewer than 10 rows and columns that "
               "identify people, but what remains still describes your data. Edit it into public facts (list every "
               "possible category, use bounds from documentation) and confirm below, or clear the numeric bounds and "
               "pay part of ε to estimate them privately.", icon=":material/warning:")
elif schema.drafted_from_data:
    st.success("Drafted from the data and confirmed by you as public facts.")
else:
    st.success("Declared schema (imported or from the demo table's documentation).")

st.subheader("Columns")
if schema.excluded:
    st.info("Left out of the model, as the draft proposed (the synthetic table will not have them):\n\n"
            + "\n".join(f"- **{name}**: {why}" for name, why in schema.excluded.items()), icon=":material/block:")
dated = [c.name for c in schema.columns if c.date]
if dated:
    st.caption(f"Read from dates and kept as the year only: {', '.join(dated)}.")
editor_key = f"schema_editor_{st.session_state.get('schema_version', 0)}"
# every column on screen at once (no inner scrolling up to ~40 columns), and every field of it in a 1280-pixel
# window beside the sidebar: where the facts come from is said above, once; a rule's column only when one exists
shown = [c for c in EDITOR_COLUMNS if c != "source" and (c != "derived" or any(x.derived for x in schema.columns))]
edited = st.data_editor(
    schema_to_frame(schema), key=editor_key, hide_index=True, num_rows="fixed", width="stretch",
    height=min(38 + 35 * len(schema.columns), 1450), column_order=shown,
    column_config={
        "column": st.column_config.TextColumn("column", disabled=True, width=120, pinned=True),
        "kind": st.column_config.SelectboxColumn("kind", options=list(KINDS), required=True, width=95),
        "lower": st.column_config.TextColumn("min", width=75, help="the public minimum; empty: estimate it with "
                                                                   "DP at training time"),
        "upper": st.column_config.TextColumn("max", width=75, help="the public maximum; empty: estimate it with "
                                                                   "DP at training time"),
        "categories": st.column_config.TextColumn("public categories", help="comma-separated; quote a value "
                                                  "that holds a comma", width=120),
        "nullable": st.column_config.CheckboxColumn("missing?", help="values may be missing", width=80),
        "role": st.column_config.SelectboxColumn("role", options=ROLE_CHOICES, width=80,
                                                 help="sensitive attribute and target, for fairness figures"),
        "binning": st.column_config.SelectboxColumn("binning", options=["uniform", "log"], width=75,
                                                    help="log: finer bins near the minimum, for skewed amounts"),
        "decimals": st.column_config.TextColumn("decimals", width=85,
                                                  help="the precision a number is written at: the synthetic "
                                                       "values are written at it too"),
        "derived": st.column_config.TextColumn("derived by a rule", disabled=True, width=110,
                                               help="computed from another column after sampling, never modelled; "
                                                    "declare it below (Edit one column in detail) or in the JSON"),
    },
)
try:
    updated = frame_to_schema(edited, schema)
except SchemaError as e:
    st.error(f"Not applied: {e}. The previous schema is kept.")
else:
    if updated.to_dict() != schema.to_dict():
        state.set_schema(updated, remount_editor=False)
        schema = updated

with st.expander("Edit one column in detail"):
    name = st.selectbox("Column", schema.names, key="detail_column")
    spec = schema[name]
    with st.form("column_form"):
        kind = st.selectbox("Kind", list(KINDS), index=list(KINDS).index(spec.kind))
        c1, c2 = st.columns(2)
        lower = c1.text_input("Public minimum", value=number_text(spec.lower))
        upper = c2.text_input("Public maximum", value=number_text(spec.upper))
        cats = st.text_area("Public categories, one per line, in their order",
                            value="\n".join(spec.categories or []))
        nullable = st.checkbox("Values may be missing", value=spec.nullable)
        role = st.selectbox("Role", ROLE_CHOICES, index=ROLE_CHOICES.index(spec.role or ROLE_CHOICES[0]))
        if st.form_submit_button("Apply to this column"):
            frame = schema_to_frame(schema).astype(object)
            i = schema.names.index(name)
            frame.loc[i, ["kind", "lower", "upper", "categories", "nullable", "role"]] = [
                kind, lower.strip() or None, upper.strip() or None,
                categories_to_text(lines_to_categories(cats)), nullable, role]
            try:
                state.set_schema(frame_to_schema(frame, schema))
            except SchemaError as e:
                st.error(f"Not applied: {e}")
            else:
                st.rerun()

    st.markdown("**Derived by a public rule**: a column computed from another (an age group from the age) is "
                "never modelled; every synthetic row gets it from the rule, so the two always agree.")
    if spec.derived:
        st.info(f"{name} is derived: {describe(spec.derived)}.", icon=":material/function:")
        if st.button("Model it again instead (remove the rule)", key="remove_rule"):
            state.set_schema(with_rule(schema, name, None))
            st.rerun()
    sources = [c.name for c in schema.columns if c.is_numeric and not c.derived and c.name != name]
    if sources:
        with st.form("derived_form"):
            rule = spec.derived if spec.derived and "bins" in spec.derived else {}
            source = st.selectbox("Cut into bins of", sources, index=sources.index(rule["from"])
                                  if rule.get("from") in sources else 0)
            edges = st.text_input("Edges (bin i runs from edge i up to, not including, edge i+1; the last bin "
                                  "includes its upper edge)", value=", ".join(f"{e:g}" for e in rule.get("bins", [])),
                                  placeholder="17, 25, 45, 65, 90")
            labels = st.text_area("Labels, one per line (one fewer than the edges): the column's categories",
                                  value="\n".join(rule.get("labels", [])), placeholder="17-24\n25-44\n45-64\n65+")
            if st.form_submit_button(f"Derive {name} from these bins"):
                try:
                    state.set_schema(with_rule(schema, name, {"from": source, "bins": text_to_numbers(edges),
                                                              "labels": lines_to_categories(labels)}))
                except SchemaError as e:
                    st.error(f"Not applied: {e}")
                else:
                    st.rerun()

schema = state.schema()
rules_editor.render(table, schema)
schema = state.schema()
st.subheader("Confirm")
missing_bounds = [c.name for c in schema.columns if c.is_numeric and not c.has_bounds]
c1, c2 = st.columns(2)
with c1:
    if schema.drafted_from_data and not schema.confirmed:
        if st.button("I confirm every fact above is public", type="primary", key="confirm_schema"):
            schema.confirm()
            state.set_schema(schema)
            st.rerun()
    else:
        st.caption("Confirmed." if schema.drafted_from_data else "Nothing to confirm: the schema was declared.")
with c2:
    numeric = [c.name for c in schema.columns if c.is_numeric]
    if numeric and st.button("Clear the numeric bounds and estimate them with DP", key="clear_bounds",
                             help="Part of ε is then spent at training time on a private estimate of each "
                                  "number's range (round bounds from a noisy histogram), recorded in the ledger."):
        state.set_schema(clear_drafted_bounds(schema))
        st.rerun()
if missing_bounds:
    st.info(f"No public bounds for {', '.join(missing_bounds)}: on step 3, set how much of ε to spend estimating "
            "them privately.")

st.subheader("Does the table fit the schema?")
try:
    _, report = validate_table(table, schema)
except SchemaError as e:
    st.error(f"The table does not fit this schema: {e}")
else:
    lines = report.summary()
    if lines:
        st.write("Training will use the table with these changes (counts seen only by you):")
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
            new = Schema.from_json(imported.getvalue().decode("utf-8"))
            missing = [n for n in table.columns if n not in new]
            extra = [c.name for c in new.columns if c.name not in table.columns and not c.derived]
            if missing or extra:
                raise SchemaError("the schema does not match the table: "
                                  + "; ".join(p for p in (
                                      f"columns of the table it lacks: {', '.join(map(str, missing))}" if missing else "",
                                      f"columns it names that the table lacks: {', '.join(extra)}" if extra else "")
                                      if p))
            # the table's column order, then derived columns the table lacks (computed from their rules)
            new.columns = [new[n] for n in table.columns] + [c for c in new.derived_columns if c.name not in table.columns]
            validate_table(table, new)
        except (SchemaError, UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError) as e:
            st.error(f"This schema cannot be used: {e}")
        else:
            state.set_schema(new)
            st.rerun()

st.page_link("app_pages/model.py", label="Next: choose a model and a privacy budget", icon=":material/arrow_forward:")
