"""Step 6: sample the synthetic table (optionally with fixed values or fairness control) and export
it."""
from __future__ import annotations

import time

import pandas as pd
import streamlit as st

from synth_core.api import load_model
from synth_core.evaluate.charts import group_rates_chart
from synth_core.privacy.measurements import rows_to_draw
from synth_core.release.export import to_csv
from synth_core.release.fair_sampling import MIN_GROUP_ROWS
from synth_core.release.generate import SamplingJob, draw_plan
from synth_core.release.privacy_report import privacy_report, report_json, report_markdown
from synth_core.runs import RunDir, RunError
from synth_core.runs.draws import DrawError
from synth_core.shape import shape_of
from workbench import state
from workbench.display import past_estimate, readable
from synth_core.format import duration

st.title("6 · Generate and export")
st.write("Sampling from the trained model costs no privacy: make as many rows as you need. The export is the "
         "synthetic table with its privacy report; the private table is never part of it.")

by_id, ids, first = state.require_trained_runs()
run_id = st.selectbox("Run", ids, index=first,
                      format_func=lambda i: by_id[i].get("name") or i, key="generate_run")
state.set_current_run(by_id[run_id]["path"])
run = RunDir(by_id[run_id]["path"])


@st.cache_resource(show_spinner="Loading the model…", max_entries=4)
def model_of(path: str, stamp: float):
    return load_model(path)


try:
    model = model_of(str(run.path), run.model_stamp())
except (RunError, OSError, FileNotFoundError) as e:
    st.error(f"The model of this run cannot be loaded: {e}")
    st.stop()
schema = model.schema
shape = shape_of(schema)  # rows, or persons each drawn with their child rows
facts = shape.fixable_schema(schema)  # the columns a value may be fixed in: a person's own

# as many rows as the run released: the public row count, or its noisy count made precise by its
# statistics
try:
    default_rows = rows_to_draw(int(run.ledger().n_rows), model.calibration)
except RunError:
    default_rows = 1000
rows = int(st.number_input(f"{shape.unit.capitalize()} to generate{shape.each}", min_value=1,
                           max_value=1_000_000, value=min(max(default_rows, 1), 1_000_000), step=100, key="rows",
                           help=f"The default is the {shape.one} count the run released "
                                "(declared public, or a noisy count paid from ε and narrowed by the statistics the "
                                "run measured), never the exact count of your table."))

st.subheader("Fix values of some columns (optional)")
fixed = st.multiselect(f"{shape.fixable.capitalize()} to fix", facts.names,
                       key="fixed_columns")
conditions = {}
for name in fixed:
    spec = facts[name]
    if spec.kind == "categorical":
        conditions[name] = st.selectbox(f"{name} =", spec.vocabulary(), key=f"cond_{name}")
    else:
        lo, hi = float(spec.lower), float(spec.upper)
        conditions[name] = st.number_input(f"{name} =", min_value=lo, max_value=hi, value=lo, key=f"cond_{name}")

st.subheader("Fairness control (optional)")
categorical = [c.name for c in facts.columns if c.kind == "categorical"]
if not shape.fairness:
    st.caption(shape.no_fairness)
use_fairness = shape.fairness and st.checkbox(
    "Reduce the demographic-parity gap of a target across groups", key="use_fairness",
    disabled=len(categorical) < 2,
    help="Some rows are generated with value-specified conditions aimed at the gap: the favourable "
         "value for the group that has it least often, the other values for the group that has it "
         "most, until the rates meet. The fewest such rows that reach the gap you accept are used.")
fair = None
if use_fairness:
    default_s = next((c.name for c in schema.columns if c.role == "sensitive" and c.kind == "categorical"),
                     categorical[0])
    default_t = next((c.name for c in schema.columns if c.role == "target" and c.kind == "categorical"),
                     categorical[-1])
    c1, c2, c3 = st.columns(3)
    sensitive = c1.selectbox("Sensitive attribute", categorical, index=categorical.index(default_s), key="sensitive")
    target = c2.selectbox("Target", categorical, index=categorical.index(default_t), key="target")
    values = schema[target].vocabulary()
    positive = c3.selectbox("Favourable target value", values, index=None, key="positive",
                            placeholder="choose the favourable value",
                            help="The value whose rate should be alike across groups (a loan granted, a good "
                                 "outcome). Nothing is assumed: for some targets the last value is the bad one.")
    c1, c2 = st.columns([2, 1])
    gap = c1.slider("Largest acceptable gap in that rate between groups", 0.0, 0.5, 0.05, 0.01, key="target_gap")
    min_rows = int(c2.number_input("Smallest group to judge (rows)", min_value=1, value=MIN_GROUP_ROWS, step=5,
                                   key="min_group_rows",
                                   help="A group with fewer rows in the table you ask for is too small to judge: "
                                        "one row moves its rate by a large step. It is kept as sampled and left "
                                        "out of the gap, and named below."))
    fair = dict(sensitive=sensitive, target=target, positive=positive, target_gap=gap, min_group_rows=min_rows)
    if positive is None:
        st.info("Choose the favourable target value to generate with fairness control.")
    if conditions:
        st.info("Fixed column values are not combined with fairness control; they are ignored while it is on.")
    st.caption(draw_plan(model, rows, fairness=True).describe())  # its bound, said before it starts

job: SamplingJob | None = st.session_state.get("sampling")  # this session's draw, until it ends
# a second click (a double click, an impatient one) while this session's rows are drawn would start
# a second draw beside the first; other tabs' draws never hold the button: each has its own process
busy = job is not None and not job.done
if st.button("Generate", type="primary", key="generate", disabled=busy or (bool(fair) and fair["positive"] is None),
             help="Rows are being drawn for the last request" if busy else None) and not busy:
    try:
        job = st.session_state["sampling"] = SamplingJob.start(
            run, model, rows, conditions=conditions, fairness=fair,
            seed=int(time.time()) % (2**31 - 1))
    except (ValueError, OSError, RunError) as e:
        st.error(f"Could not start drawing: {e}")
        st.stop()
    # the old table is replaced, not shown beside the new request
    st.session_state.pop("generated", None)
    # drawn again at once, so the button shows it waits (the progress fragment redraws only itself)
    st.rerun()


def draw_line(shown: SamplingJob, own: bool) -> None:
    """One draw's progress, as its process writes it into the run folder, and its cancel button."""
    p, unit = shown.progress(), shape.unit
    text = f"Sampling {shown.rows:,} {unit}: " + (
        past_estimate(p["elapsed_s"], p["expected_s"]) if p["overdue"] and p["expected_s"] else
        f"{duration(p['elapsed_s'])} so far"
        + (f", about {duration(p['remaining_s'])} left" if p["remaining_s"] is not None else ""))
    if p["drawn"]:
        text += f"; the model has drawn {p['drawn']:,} {unit}"
        text += "" if p["overdue"] else f" of about {p['expected_rows']:,}"
    if p["limit"]:
        text += f", at most {p['limit']:,}" + (f" (at most {duration(p['at_most_s'])} more)"
                                               if p["at_most_s"] is not None else "")
    text += (" · stopping" if p["cancelling"] else
             ". You may change the settings meanwhile; they apply to the next request." if own else
             " (started in another tab, or before this page was opened).")
    st.progress(p["fraction"], text=text)
    if st.button("Cancel this draw", key=f"cancel_draw_{shown.draw.id}", disabled=p["cancelling"]):
        shown.cancel()
        st.toast("Stopping the draw: none of its rows are written.")


# every draw of this run still to end, whichever tab started it, as the run folder says
live = SamplingJob.live(run)
if job is not None and not job.done and job.draw.id not in {j.draw.id for j in live}:
    live.insert(0, job)  # this session's draw, on another run
if live:
    # the rows are drawn in processes of their own: other clicks rerun this page, never cancel them
    @st.fragment(run_every=1.0)
    def draws_progress() -> None:
        if any(j.done for j in live):
            st.rerun()  # one has ended: the page is drawn again, with its rows
        for shown in live:
            draw_line(shown, job is not None and shown.draw.id == job.draw.id)
    draws_progress()
    if job is not None and not job.done:
        st.stop()


def generated_of(done: SamplingJob) -> dict:
    """What the page shows of an ended draw, read back from the run folder (DrawError: no rows)."""
    result = done.result()
    return {"run": done.key, "table": result.table, "info": result.info, "file": result.file,
            "fair_result": result.fairness, "note": result.note, "draw": done.draw.id}


def outcome_of(done: SamplingJob) -> dict:
    """This session's ended draw as the page shows it until the next request: its rows, or how it
    ended without them (`ended`: cancelled, failed, or rows that cannot be read back)."""
    try:
        return generated_of(done)
    except DrawError as e:
        ended, message = e.state, str(e)
    except (RunError, OSError, ValueError) as e:
        ended, message = "unreadable", str(e)
    return {"run": done.key, "draw": done.draw.id, "ended": ended, "message": message}


if job is not None and job.done:
    # kept before the draw is let go, so that a rerun interrupting this one, and every later one
    # until the next request, says how it ended (never the newest draw of another tab instead)
    st.session_state["generated"] = outcome_of(job)
    st.session_state.pop("sampling", None)
    job = None

generated = st.session_state.get("generated")
if not generated or generated["run"] != str(run.path):
    latest = SamplingJob.latest(run)  # a page opened anew (a reload, a tab) shows the last draw
    try:
        generated = generated_of(latest) if latest is not None else None
        st.session_state["generated"] = generated
    except DrawError as e:
        st.info(f"The last draw of this run drew no rows: {e}")
    except (RunError, OSError, ValueError) as e:
        st.warning(f"The last draw of this run cannot be read back: {e}")
if not generated or generated["run"] != str(run.path):
    st.stop()
if "ended" in generated:  # this session's last draw wrote no rows
    if generated["ended"] == "cancelled":
        st.warning(generated["message"])
    elif generated["ended"] == "failed":
        st.error(f"Could not generate: {generated['message']}")
    else:
        st.error(f"The rows drawn cannot be read back: {generated['message']}")
    st.stop()

table, info = generated["table"], generated["info"]
st.success(f"{shape.drawn(table)} ({info.get('method', 'unconditional')}).")
if info.get("acceptance_rate") is not None and info.get("method") == "rejection":
    st.caption(f"Conditions met by rejection sampling; {info['acceptance_rate']:.1%} of tried rows were kept.")
if info.get("calibration"):  # what calibration did, in the core's words
    st.caption(info["calibration"][0].upper() + info["calibration"][1:] + ".")
fair_result = generated["fair_result"]
if generated.get("note"):  # a gap not reached, groups whose shares moved: in the core's words
    st.warning(generated["note"], icon=":material/warning:")
if info.get("method") == "fairness control" and fair_result is not None and fair_result.share == 0:
    st.info(f"No change needed: the synthetic rows' demographic-parity gap is {fair_result.gap_after:.3f}, within "
            f"the {info['target_gap']:g} you accept, so no row was generated with conditions.",
            icon=":material/check_circle:")
elif info.get("method") == "fairness control" and fair_result is not None:
    c1, c2, c3 = st.columns(3)
    c1.metric("demographic-parity gap before", f"{fair_result.gap_before:.3f}")
    c2.metric("after", f"{fair_result.gap_after:.3f}", delta=f"{fair_result.gap_after - fair_result.gap_before:+.3f}",
              delta_color="inverse")
    c3.metric("rows with value-specified conditions", f"{fair_result.share:.0%}")
    st.plotly_chart(group_rates_chart({"unconditioned": fair_result.rates_before,
                                       "with fairness control": fair_result.rates_after},
                                      info["positive"], info["sensitive"]), key="fair_chart")
if info.get("method") == "fairness control" and fair_result is not None and fair_result.groups:
    st.dataframe(pd.DataFrame([
        {info["sensitive"]: g, "rows before": d["rows_before"], f"rate of {info['positive']} before":
         "" if d["rate_before"] is None else f"{d['rate_before']:.3f}", "rows after": d["rows_after"],
         f"rate of {info['positive']} after": "" if d["rate_after"] is None else f"{d['rate_after']:.3f}",
         "note": ("no row in the output" if d["lost"] else "") or ("" if d["judged"] else
                                                                   "too few rows to judge: kept as sampled")}
        for g, d in fair_result.groups.items()]), hide_index=True, key="fair_groups")
    st.caption(f"Rows before: how many of the {len(table):,} rows each group would have unconditioned. The gap is "
               f"over the groups with at least {fair_result.min_group_rows} rows.")
    if fair_result.lost:
        st.warning(f"No row of {', '.join(fair_result.lost)} is in the output: the model drew too few of "
                   "them. Ask for more rows, or lower the smallest group to judge.", icon=":material/warning:")
frames = shape.frames(table)  # a table, or the persons and their rows
places = st.tabs(list(frames)) if len(frames) > 1 else [st.container()]
for place, frame in zip(places, frames.values()):
    place.dataframe(readable(frame.head(50)), hide_index=True)

report = privacy_report(run, sampling=info, synthetic_rows=len(table), budgets=state.budgets())
stem = generated["file"].removesuffix(".csv")
files = shape.files(table, stem)
*c1, c2, c3 = st.columns(len(files) + 2)
for column, (key, what, name, frame) in zip(c1, files):
    column.download_button(f"Download {what} (CSV)", to_csv(frame), file_name=name, mime="text/csv",
                           key=f"download_{key}", type="primary")
c2.download_button("Privacy report (JSON)", report_json(report), file_name=f"{stem}-privacy-report.json",
                   mime="application/json", key="download_report_json")
c3.download_button("Privacy report (markdown)", report_markdown(report), file_name=f"{stem}-privacy-report.md",
                   mime="text/markdown", key="download_report_md")
if shape.files_note(schema):  # how the files link, where they do
    st.caption(shape.files_note(schema))
for warning in report["warnings"]:
    st.warning(warning, icon=":material/warning:")
with st.expander("Read the privacy report"):
    st.markdown(report_markdown(report))
