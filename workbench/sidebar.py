"""The sidebar every page shows: the data in use and the current run's privacy budget."""
from __future__ import annotations

import streamlit as st

from synth_core.runs import LIVE_STATES
from synth_core.runs.jobs import ledger_of, run_summary

from . import state
from synth_core.format import epsilon, runs


def render_sidebar() -> None:
    with st.sidebar:
        st.subheader("Privacy budget")
        run = state.current_run()
        if run is not None:
            _run_budget(run)
        else:
            planned = state.planned_epsilon()
            if planned is not None:
                st.metric("ε planned", f"{planned:g}")
                st.caption("Nothing spent yet: the budget is spent only while training.")
            elif st.session_state.get("table_name") or not state.any_runs():
                st.caption("No run yet. Choose a model and ε on step 3.")
            else:  # a fresh tab: another tab's run is not this one's
                st.caption("No run chosen in this tab: load a table on step 1, or open a run on "
                           "step 4, 5 or 6.")
        st.divider()
        name = st.session_state.get("table_name")
        st.caption(f"Data: **{name}**" if name else "No data loaded.")
        account = state.budgets().account(state.table_id()) if name else None
        if account is not None:
            st.metric("This table's budget", f"{epsilon(account.spent_epsilon)} of ε {epsilon(account.total_epsilon)}",
                      help="What all runs on this table spent together; a run beyond the total is refused.")
            st.caption(f"{epsilon(account.remaining_epsilon)} remains, after {runs(len(account.charges))}.")
        schema = state.schema()
        if schema is not None and schema.provenance["warning"]:
            st.caption(":material/warning: The schema on step 2 is a draft read from the data, not yet confirmed.")


def _run_budget(run) -> None:
    """The current run's ε, from the same summary the pages show; redrawn every second while it
    trains."""
    first = run_summary(run)

    @st.fragment(run_every=1.0 if first.get("state") in LIVE_STATES else None)
    def live() -> None:
        summary = run_summary(run) if run.exists() else {"state": "deleted"}
        st.caption(f"Run **{summary.get('name', run.path.name)}** · {summary.get('state')}")
        target = summary.get("epsilon")
        if target:
            spent = float(summary.get("spent_epsilon") or 0.0)
            st.metric("ε spent", f"{epsilon(spent)} of {epsilon(target)}")
            st.progress(min(1.0, spent / target))
        ledger = ledger_of(run)
        if ledger is not None:
            st.caption(f"δ = {ledger.target_delta:.1e} · {len(ledger.entries)} ledger entr"
                       f"{'y' if len(ledger.entries) == 1 else 'ies'}"
                       + (" · its schema public (confirmed)" if not ledger.schema_provenance.get("warning")
                          else ""))
            for warning in ledger.warnings():
                st.warning(warning, icon=":material/warning:")
        if summary.get("state") != first.get("state"):
            st.rerun()  # started or finished: the whole page follows
    live()
