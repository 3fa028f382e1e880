"""The line on steps 1 and 2 about the steward's work kept in the workbench home (workbench.state,
synth_core.schema_work): schema work kept before for the table just loaded, offered back in one
click (or a fresh start); the table and its work restored by a reload; kept work that could not
be read."""
from __future__ import annotations

import streamlit as st

from workbench import state


def render(forget: bool = False) -> None:
    """The offer or the note, with its buttons; forget: also offer to delete the kept copy of a
    table a reload restored (step 1)."""
    state.table()  # in a new session, the last table loaded is looked for first
    offer = st.session_state.get(state.WORK_OFFER)
    kind, text = st.session_state.get(state.WORK_NOTE) or (None, "")
    restored = bool(kind) and kind.startswith("restored")
    if kind and kind.endswith("warning"):
        st.warning(text, icon=":material/warning:")
    elif kind:
        st.info(text, icon=":material/history:")
    if offer is None and not restored:
        return
    c1, c2, c3 = st.columns([3, 2, 2])
    if offer is not None and c1.button(
            offer.offer(), type="primary", key="work_continue",
            help="The schema as you left it: its edits, rules, roles, columns left out and "
                 "confirmation. Editing the draft on step 2 instead starts over."):
        state.restore_work()
        st.rerun()
    if c2.button("Start over from a fresh draft", key="work_start_over",
                 help="The schema this table gets when first loaded; the work kept is replaced."):
        state.start_over()
        st.rerun()
    if forget and restored and c3.button(
            "Forget the kept copy of this table", key="work_forget",
            help="Delete it from the workbench home: a reload will then not find the table."):
        state.forget_kept_table()
        st.rerun()
