"""The schema step's column editor: one table's public facts as a grid the steward edits, a form
for one column in detail, a column derived by a public rule, and columns left out of the model (and
brought back). The changes go through `put(new_schema, remount)`; the facts' checks are the core's
(workbench.schema_table, synth_core.schema). Used once for one table, twice for linked tables."""
from __future__ import annotations

from typing import Callable

import streamlit as st

from synth_core.schema import KINDS, Schema, SchemaError
from synth_core.schema.derived import describe
from workbench.schema_table import (
    EDITOR_COLUMNS,
    LEFT_OUT_BY_YOU,
    ROLE_CHOICES,
    bring_back,
    categories_to_text,
    frame_to_schema,
    leave_out,
    lines_to_categories,
    number_text,
    numbers_to_text,
    schema_to_frame,
    text_to_numbers,
    with_rule,
)
from workbench.state import LEFT_OUT_SPECS, save_work


def render_columns(schema: Schema, put: Callable[[Schema, bool], None], prefix: str = "", rules: bool = True) -> Schema:
    """The editor of `schema`'s columns (widget keys start with `prefix`); the schema as edited.
    rules: offer columns derived by a rule (linked tables have none yet)."""
    if schema.excluded:
        st.info("Left out of the model (the synthetic table will not have them):\n\n"
                + "\n".join(f"- **{name}**: {why}" for name, why in schema.excluded.items()),
                icon=":material/block:")
    dated = [c.name for c in schema.columns if c.date]
    if dated:
        st.caption(f"Read from dates and kept as the year only: {', '.join(dated)}.")
    editor_key = f"schema_editor_{prefix}{st.session_state.get('schema_version', 0)}"
    # every column on screen at once (no inner scrolling up to ~40 columns), and every field of it
    # in a 1280-pixel window beside the sidebar: where the facts come from is said above, once; a
    # rule's column only when one exists
    shown = [c for c in EDITOR_COLUMNS if c != "source" and (c != "derived" or any(x.derived for x in schema.columns))]
    edited = st.data_editor(
        schema_to_frame(schema), key=editor_key, hide_index=True, num_rows="fixed", width="stretch",
        height=min(38 + 35 * len(schema.columns), 1450), column_order=shown,
        column_config=_grid_config(),
    )
    try:
        updated = frame_to_schema(edited, schema)
    except SchemaError as e:
        st.error(f"Not applied: {e}. The previous schema is kept.")
    else:
        if updated.to_dict() != schema.to_dict():
            put(updated, False)
            schema = updated

    _leave_out(schema, put, prefix)
    with st.expander("Edit one column in detail"):
        name = st.selectbox("Column", schema.names, key=f"{prefix}detail_column")
        spec = schema[name]
        with st.form(f"{prefix}column_form"):
            kind = st.selectbox("Kind", list(KINDS), index=list(KINDS).index(spec.kind))
            c1, c2 = st.columns(2)
            lower = c1.text_input("Public minimum", value=number_text(spec.lower))
            upper = c2.text_input("Public maximum", value=number_text(spec.upper))
            cats = st.text_area("Public categories, one per line, in their order",
                                value="\n".join(spec.categories or []))
            c3, c4 = st.columns(2)
            values = c3.text_input("A number column's only values, comma-separated",
                                   value=numbers_to_text(spec.values))
            points = c4.text_input("Values many rows hold exactly", value=numbers_to_text(spec.points))
            nullable = st.checkbox("Values may be missing", value=spec.nullable)
            role = st.selectbox("Role", ROLE_CHOICES, index=ROLE_CHOICES.index(spec.role or ROLE_CHOICES[0]))
            if st.form_submit_button("Apply to this column"):
                frame = schema_to_frame(schema).astype(object)
                i = schema.names.index(name)
                frame.loc[i, ["kind", "lower", "upper", "categories", "values", "points", "nullable", "role"]] = [
                    kind, lower.strip() or None, upper.strip() or None,
                    categories_to_text(lines_to_categories(cats)), values, points, nullable, role]
                try:
                    put(frame_to_schema(frame, schema), True)
                except SchemaError as e:
                    st.error(f"Not applied: {e}")
                else:
                    st.rerun()
        if rules:
            _derived_rule(schema, name, put, prefix)
    return schema


def _leave_out(schema: Schema, put: Callable[[Schema, bool], None], prefix: str) -> None:
    """Leave a column out of the model, as the draft leaves out identifiers and free text (it joins
    `excluded`, "left out by you"), or bring back one the steward left out, as it was: its facts are
    kept in the session (LEFT_OUT_SPECS, forgotten with the table) and with its schema work in the
    home (state.save_work), so a reload can bring it back too."""
    kept = st.session_state.setdefault(LEFT_OUT_SPECS, {})
    back = [n for n, why in schema.excluded.items()
            if why == LEFT_OUT_BY_YOU and prefix + n in kept]
    with st.expander("Leave a column out of the model" + (" or bring one back" if back else "")):
        st.caption("A column left out is not modelled, not validated, not in the synthetic table "
                   "and not among the exported schema's columns (free-text notes, a column nobody "
                   "needs).")
        c1, c2 = st.columns(2)
        name = c1.selectbox("Column to leave out", schema.names, key=f"{prefix}leave_out_column")
        if c1.button("Leave it out", key=f"{prefix}leave_out"):
            try:
                put(leave_out(schema, name), True)
            except SchemaError as e:
                st.error(f"Not applied: {e}")
            else:
                kept[prefix + name] = (schema[name], schema.names.index(name))
                save_work()
                st.rerun()
        if back:
            name = c2.selectbox("Column you left out", back, key=f"{prefix}bring_back_column")
            if c2.button("Bring it back", key=f"{prefix}bring_back"):
                spec, position = kept[prefix + name]
                try:
                    put(bring_back(schema, spec, position), True)
                except SchemaError as e:
                    st.error(f"Not applied: {e}")
                else:
                    del kept[prefix + name]
                    save_work()
                    st.rerun()


def _derived_rule(schema: Schema, name: str, put: Callable[[Schema, bool], None], prefix: str) -> None:
    spec = schema[name]
    st.markdown("**Derived by a public rule**: a column computed from another (an age group from the age) is "
                "never modelled; every synthetic row gets it from the rule, so the two always agree.")
    if spec.derived:
        st.info(f"{name} is derived: {describe(spec.derived)}.", icon=":material/function:")
        if st.button("Model it again instead (remove the rule)", key=f"{prefix}remove_rule"):
            put(with_rule(schema, name, None), True)
            st.rerun()
    sources = [c.name for c in schema.columns if c.is_numeric and not c.derived and c.name != name]
    if sources:
        with st.form(f"{prefix}derived_form"):
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
                    put(with_rule(schema, name, {"from": source, "bins": text_to_numbers(edges),
                                                "labels": lines_to_categories(labels)}), True)
                except SchemaError as e:
                    st.error(f"Not applied: {e}")
                else:
                    st.rerun()


def _grid_config() -> dict:
    """How the schema grid shows each field: its label, width and help."""
    return {
        "column": st.column_config.TextColumn("column", disabled=True, width=100, pinned=True),
        "kind": st.column_config.SelectboxColumn("kind", options=list(KINDS), required=True, width=85),
        "lower": st.column_config.TextColumn("min", width=60, help="the public minimum; empty: estimate it with "
                                                                   "DP at training time"),
        "upper": st.column_config.TextColumn("max", width=60, help="the public maximum; empty: estimate it with "
                                                                   "DP at training time"),
        "categories": st.column_config.TextColumn("public categories", help="comma-separated; quote a value "
                                                  "that holds a comma", width=100),
        "values": st.column_config.TextColumn("values", width=85,
                                              help="a number column's only values (codes, brackets, a 1-7 "
                                                   "scale), comma-separated: every synthetic value is one"),
        "points": st.column_config.TextColumn("exact values", width=60,
                                              help="values many rows hold exactly (the 0 of amounts): "
                                                   "synthetic rows hold them exactly too"),
        "nullable": st.column_config.CheckboxColumn("missing?", help="values may be missing", width=65),
        "role": st.column_config.SelectboxColumn("role", options=ROLE_CHOICES, width=70,
                                                 help="sensitive attribute and target, for fairness figures"),
        "binning": st.column_config.SelectboxColumn("binning", options=["uniform", "log"], width=65,
                                                    help="log: finer bins near the minimum, for skewed amounts"),
        "decimals": st.column_config.TextColumn("decimals", width=60,
                                                  help="the precision a number is written at: the synthetic "
                                                       "values are written at it too"),
        "derived": st.column_config.TextColumn("derived by a rule", disabled=True, width=110,
                                               help="computed from another column after sampling, never modelled; "
                                                    "declare it below (Edit one column in detail) or in the JSON"),
    
    }
