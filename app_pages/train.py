"""Step 4: training runs in a background process; this page follows its event log live."""
from __future__ import annotations

import pandas as pd
import streamlit as st

from synth_core.runs.jobs import cancel_job, cancel_requested, job_state, ledger_of, list_runs, progress, run_summary
from synth_core.runs import LIVE_STATES, RunDir, RunError
from workbench import state
from synth_core.format import duration, epsilon
from workbench.charts import epsilon_chart, loss_chart
from workbench.display import drawing_text, readable

st.title("4 · Train")

runs = state.visible_runs(list_runs(state.runs_root()))
if not runs:
    st.info("No runs yet. Choose a model and ε on step 3 and start training.")
    st.page_link("app_pages/model.py", label="Go to step 3", icon=":material/arrow_back:")
    st.stop()

by_id = {r["id"]: r for r in runs}
current = state.current_run()
ids = list(by_id)
index = ids.index(current.path.name) if current is not None and current.path.name in by_id else 0


def label(run_id: str) -> str:
    r = by_id[run_id]
    # its state is on the page below, kept current (a label would go stale)
    return r.get("name") or run_id


chosen = st.selectbox("Run", ids, index=index, format_func=label, key="train_run_choice")
if current is None or current.path.name != chosen:
    state.set_current_run(by_id[chosen]["path"])
run = RunDir(by_id[chosen]["path"])


def _count(rows) -> str:
    """A run's training rows as the page says them: not known until a table read a batch at a
    time (runs.file_runs) has been read."""
    if rows is None:
        return "not yet counted"
    return f"{rows:,}" if isinstance(rows, int) else str(rows)


def show_run(run: RunDir) -> None:
    try:
        status = job_state(run)
    except RunError as e:
        st.error(f"This run can no longer be read: {e}")
        return
    live = status.get("state") in LIVE_STATES
    try:
        config = run.config()
    except RunError:
        config = {}
    request = run.request()
    summary = run_summary(run)
    target = float(summary.get("epsilon") or 0)
    prog = progress(run)
    events = run.events()

    c = st.columns(4)
    c[0].metric("state", status.get("state"))
    c[1].metric(prog["unit"], f"{prog['steps_done']} / {prog['steps_planned'] or '…'}")
    c[2].metric("ε spent" + (", at most" if live else ""),
                f"{epsilon(summary.get('spent_epsilon') or 0.0)} of {epsilon(target)}",
                help="While the run trains, the figure is an upper bound between the accountant's "
                     "exact points (computing it exactly at every step would slow training); the "
                     "ledger settles the exact figure when the run ends, so a cancelled run may "
                     "show less."
                if live else None)
    c[3].metric("time left" if live else "training time",
                duration(prog["remaining_s"] if live else prog["elapsed_s"]))
    st.caption(f"Device: {config.get('device', 'starting…')} · model `{summary.get('model') or '?'}`, size "
               f"`{summary.get('size') or '?'}` · {_count(request.get('rows'))} training "
               f"{summary.get('unit', 'rows')}")
    if live:
        drawing = bool(prog["steps_planned"]) and prog["steps_done"] >= prog["steps_planned"]
        text = (drawing_text(prog) if drawing else
                f"{duration(prog['elapsed_s'])} elapsed, about {duration(prog['remaining_s'])} left")
        st.progress(min(1.0, prog["fraction"]),
                    text=text + (" · stopping after this step" if cancel_requested(run) else ""))
        if prog.get("may_rise") and not drawing:  # the estimate may grow: the page says why
            st.caption(f"An adaptive mechanism: {prog['may_rise']}.")
        if st.button("Cancel training", key=f"cancel_{run.path.name}", disabled=cancel_requested(run)):
            cancel_job(run)
            st.toast("Stopping after the current step; the model trained so far is kept.")
    elif status.get("state") == "completed":
        st.success(status.get("message") or "completed")
    elif status.get("state") == "cancelled":
        st.warning(status.get("message") or "cancelled")
    elif status.get("state") == "failed":
        st.error(f"Training failed: {status.get('message')}")

    if not events and live:
        st.info("Waiting for the first training step: the training process is starting (loading the model and "
                "asking the accountant takes a few seconds).")
    elif events:
        left, right = st.columns(2)
        with left:
            st.plotly_chart(loss_chart({run.path.name: events}, prog["unit"]), key=f"loss_{run.path.name}")
        with right:
            st.plotly_chart(epsilon_chart(events, target, prog["steps_planned"], unit=prog["unit"]),
                            key=f"eps_{run.path.name}")
    ledger = ledger_of(run)
    if ledger is not None and ledger.entries:
        with st.expander("Privacy ledger"):
            st.dataframe(readable(pd.DataFrame([{"mechanism": e.mechanism, "ε": e.epsilon, "δ": e.delta,
                                                 "accountant": (e.accountant or "").upper() or "by its own ε"}
                                                for e in ledger.entries])), hide_index=True)
    if not live and status.get("state") in ("completed", "cancelled") and run.has_model():
        st.page_link("app_pages/review.py", label="Next: review the synthetic table", icon=":material/arrow_forward:")


initial = by_id[chosen].get("state")  # as the picker lists it: a change since then redraws the page


def runs_table() -> None:
    st.subheader("All runs")
    # the runs the picker offers
    rows = [r for r in list_runs(state.runs_root()) if r["id"] in by_id]

    def row(r: dict) -> dict:
        done, planned = r.get("steps") or 0, r.get("steps_planned")
        return {"run": r.get("name") or r["id"], "table": r.get("table_name") or "", "model": r.get("model") or "",
                "size": r.get("size") or "",
                "ε target": "" if r.get("epsilon") is None else epsilon(r["epsilon"]),
                "ε spent": "" if r.get("spent_epsilon") is None else epsilon(r["spent_epsilon"]),
                "state": r.get("state") or "", "steps": f"{done} of {planned}" if planned else str(done),
                "loss": "" if r.get("loss") is None else f"{r['loss']:.3g}", "training rows": r.get("rows")}
    st.dataframe(readable(pd.DataFrame([row(r) for r in rows])), hide_index=True)


@st.fragment(run_every=1.0 if initial in LIVE_STATES else None)
def live_view() -> None:
    if not run.exists():
        st.error("The run's folder was deleted.")
        return
    show_run(run)
    st.divider()
    runs_table()
    now = job_state(run).get("state")
    if now != initial:
        # started or finished: redraw the whole page (sidebar too); polling stops once it is done
        st.rerun()


live_view()
compare = st.multiselect("Compare runs", ids, default=[], format_func=label, key="compare_runs")
if compare:
    events = {by_id[i].get("name") or i: RunDir(by_id[i]["path"]).events() for i in compare}
    st.plotly_chart(loss_chart(events), key="compare_loss")
