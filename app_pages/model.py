"""Step 3: model family, privacy budget (ε, δ), size; what the accountant computed; start
training."""
from __future__ import annotations

import json

import pandas as pd
import streamlit as st

from synth_core.privacy.table_budget import check_within, remaining, spends_the_rest
from synth_core.cli_args import parse_options
from synth_core.encoding.engine import TableStore
from synth_core.request import FitRequest, check_rows, review_rows_for
from synth_core.runs.jobs import start_fit_job
from synth_core.models import families_for, get_model_class, model_class_for
from synth_core.models.recommend import AUTO, CANDIDATES, recommend
from synth_core.benchmark_model import compares, floor
from synth_core.forecast import curve, forecast_for, pairs_text
from synth_core.plan import plan_run
from synth_core.privacy import BudgetError, delta_warning
from synth_core.privacy.split import default_bounds_epsilon, planned_delta
from synth_core.privacy.value_sets import searchable
from synth_core.privacy.budget import DEFAULT_CALIBRATION_SHARE, MAX_CALIBRATION_SHARE, MAX_QUANTILE_SHARE
from synth_core.schema import Schema, SchemaError
from synth_core.schema.linked import schema_from_json
from synth_core.shape import shape_of
from synth_core.training.device import AUTOMATIC, available_devices, device_label
from synth_core.training.distributed import offered_processes
from synth_core.runs.timing import estimate_plan, stored_costs
from workbench import release_planner, state
from workbench.charts import forecast_chart
from synth_core.format import duration, epsilon as epsilon_text, runs

st.title("3 · Model and privacy budget")

table, schema = state.require_table()
# what the table's shape allows: its unit, its parts, DP bounds, the forecast
shape = shape_of(schema)


def family_class(f: str):
    return model_class_for(f, schema)


# --- model ------------------------------------------------------------------------------------------
st.subheader("Model")
MORE = "more"  # the families auto never picks, behind one choice
# the families that train tables of this shape (of a file too large to read whole: from the engine)
offered = families_for(schema, TableStore.answers if state.table_file() is not None else None)
others = [f for f in offered if f not in CANDIDATES]
families = [AUTO, *(f for f in CANDIDATES if f in offered), *([MORE] if others else [])]
family = st.radio("Model family", families, index=0, key="family",
                  format_func=lambda f: ("Recommended for this table · auto" if f == AUTO else
                                         "More models…" if f == MORE else f"{family_class(f).label} · {f}"),
                  captions=[("Picked from the table's public facts, its size and ε" if others else
                             f"The family that models {shape.name}") if f == AUTO else
                            "Diffusion, GAN and language-model families, for comparison and special needs"
                            if f == MORE else family_class(f).summary() for f in families],
                  help="The plain name first, the technical one after the dot. Each model's line says what it "
                       "does; 'auto' picks between the first two for a table like yours, by how they did on our "
                       "benchmark tables.")
if left_out := [f"{family_class(f).label} · {f}" for f in families_for(schema)
                if f not in offered]:
    st.caption(f"Not offered for a file too large to read whole: {', '.join(left_out)} "
               "(it reads the table whole).")
if family == MORE:
    family = st.selectbox("More models", others, key="more_family",
                          format_func=lambda f: f"{get_model_class(f).label} · {f}",
                          help="Families auto does not pick: each one's line below says when it helps.")
auto = family == AUTO
auto_note = st.empty()  # auto's choice and why, once ε is chosen below
klass = family_class(recommend(schema, state.table_rows(), 1.0).family if auto else family)
st.caption(f"**What it is.** {klass.description}")
if klass.when_to_pick:
    st.caption(f"**Pick it for.** {klass.when_to_pick}")
if shape.links:  # a unit of several rows
    st.info(f"**A person is the unit.** One training example is a person: their row with all their rows (at most "
            f"{schema.max_children}), so the noise and ε protect a whole person, however many rows they have.",
            icon=":material/person:")

# options whose values are found on this machine (a pretrained model): offered as the family
# describes them
options: dict = {}
local_problem = None
for local in klass.local_choices():
    st.markdown(f"**{local.title}**")
    st.info(local.explanation, icon=":material/info:")
    picked = st.selectbox(local.label, [local.default_label, *local.offered, local.path_label], key=f"{local.option}_choice",
                          help=local.help or None)
    if not local.offered and local.nothing_offered:
        st.caption(local.nothing_offered)
    value = None
    if picked == local.path_label:
        value = st.text_input(local.path_prompt, key=f"{local.option}_path",
                              placeholder=local.path_placeholder).strip() or None
        if value is None:
            local_problem = local.missing_path
    elif picked in local.offered:
        value = local.offered[picked]
    if value is not None:
        try:
            value = local.check(value)
        except ValueError as e:
            local_problem = f"{local.label}: {e}"
    if local_problem:
        st.error(local_problem)
    options[local.option] = value

# --- ε ----------------------------------------------------------------------------------------------
st.subheader("Privacy budget")
st.write("ε bounds how much the synthetic table can reveal about any one person: the smaller ε, the stronger "
         "the protection and the noisier the result. Choose by how harmful disclosure would be.")
HARM = state.HARM_PRESETS
harm = st.radio("How harmful would disclosure of a person's row be?", list(HARM), index=1, key="harm")
epsilon, epsilon_problem = HARM[harm], None
if epsilon is None:
    st.text_input("ε", value="1", key="epsilon_custom", help="A number above 0, such as 0.5 or 2.")
    epsilon, epsilon_problem = state.typed_epsilon("epsilon_custom")

# the table's budget across all its runs: every run draws from it; the first run asks for it
book, found = state.budgets(), state.table_identity()
# a file that resembles a known table: the steward says which it is before a budget opens
same_table = None
if found.account is None and found.resembles:
    known = found.resembles[0]
    known_account = book.account(known.table_id)
    SAME, OTHER = (f"Yes: it is {known.name} (another export of it); its runs count on that table's budget",
                   "No: it is another table, with a budget of its own")
    same_table = st.radio(f"This table shares about {known.share:.0%} of its rows with **{known.name}**, whose "
                          f"runs have spent ε = {epsilon_text(known.spent)} of {epsilon_text(known.total)}. "
                          "Is it the same table?", [SAME, OTHER], index=None, key="same_table")
    if same_table == SAME:
        book.attach(found, known.table_id)
        state.forget_table_identity()
        st.rerun()
# a new file the steward knows is a table trained on before
elif found.account is None and book.accounts():
    with st.expander("Is this file a new version of a table you trained on before?"):
        known_tables = {tid: f"{a.label or tid[:8]}: ε {epsilon_text(a.spent_epsilon)} of "
                             f"{epsilon_text(a.total_epsilon)} spent" for tid, a in book.accounts().items()}
        pick = st.selectbox("Count its runs on the budget of", list(known_tables), index=None,
                            format_func=known_tables.get, key="attach_table",
                            placeholder="a table in the budget book")
        if st.button("This file is that table", disabled=pick is None, key="attach_file"):
            book.attach(found, pick)
            state.forget_table_identity()
            st.rerun()
table_key = found.table_id
account = book.account(table_key)
spent_before = account.spent_epsilon if account else 0.0
st.markdown("**This table's total.** Every run on this table spends from one total: the most ε that all its runs "
            "together may reveal about any one person (ε adds up across runs on the same rows). A run beyond it "
            "is refused, and what a run spent is never given back.")
total_problem, asking = None, bool(found.resembles and account is None and same_table is None)
if asking:  # which table it is comes first: its total may be a known table's
    table_total = None
elif account is None:
    TOTALS = state.TOTAL_PRESETS
    total_choice = st.radio("This is the first run on this table. How much may all its runs reveal together?",
                            list(TOTALS), index=None, key="table_total_choice")
    table_total = TOTALS.get(total_choice) if total_choice else None
    if total_choice is not None and table_total is None:
        st.text_input("Total ε for this table", value="", key="table_total", placeholder="type the total")
        table_total, total_problem = state.typed_epsilon("table_total", "the total")
        # nothing typed yet: asked below
        if total_problem and st.session_state.get("table_total", "").strip():
            st.error(total_problem)
        else:
            total_problem = None
else:
    st.text_input("Total ε for this table, across all its runs", key="table_total",
                  value=f"{account.total_epsilon:g}",
                  help="Raise it only if you accept that all runs together reveal more; lower it (0 at least) to "
                       "stop further runs.")
    table_total, total_problem = state.typed_epsilon("table_total", "the total", zero_ok=True)
    if total_problem:
        st.error(total_problem)
if table_total is not None:
    left = remaining(table_total, spent_before)
    before = (f"Its runs have spent ε = {epsilon_text(spent_before)} in {runs(len(account.charges))}; "
              if account and account.charges else "Nothing is spent yet; ")
    st.caption(f"{before}{epsilon_text(left)} of {epsilon_text(table_total)} remains.")
    if epsilon and spends_the_rest(epsilon, table_total, spent_before):
        st.warning(f"This run would spend all that is left of this table's budget (ε = {epsilon_text(left)}): no "
                   "other run on this table will be possible unless you raise the total, accepting the larger "
                   "risk.", icon=":material/warning:")

unit = shape.unit  # what one protected example is
holdout_share = st.slider(f"{unit.capitalize()} kept aside for the review (never trained on)", 0.0, 0.3, 0.1, 0.05,
                          key="holdout_share",
                          help="They let the review compare how close synthetic rows come to training rows "
                               "with how close unseen real rows come. 0 keeps every row for training.")
n_train = state.table_rows() - int(round(state.table_rows() * holdout_share))
chosen_delta = st.number_input(
    "δ (chance the ε guarantee fails)", value=None, min_value=0.0, max_value=1.0, format="%.1e", key="delta",
    placeholder=f"automatic: a power of ten below 1 / (number of {unit})",
    help=f"Leave it empty: the run chooses δ below 1 / (number of {unit}) from the count it releases (declared "
         f"public, or a noisy count), never from the exact count. Or type your own, well below 1 / (number of {unit}).")
# what the run will choose (privacy.run_delta), for the plan shown here: the run asks the same of
# the count it releases, so only a noisy count that crosses a power of ten makes it differ, and then
# the page says so
delta, other_delta = planned_delta(None if chosen_delta is None else float(chosen_delta), epsilon,
                                   schema.rows or n_train, schema.rows is not None)
if chosen_delta is None:
    st.caption(f"δ = {delta:g}, as the run will choose it from the count of {unit} it releases"
               + (f" (a noisy count may make it {other_delta:g}; the run records the one it uses)."
                  if other_delta is not None else "."))
warning = delta_warning(delta, n_train) if delta > 0 else None
if warning:
    st.warning(warning, icon=":material/warning:")

# auto's choice, for a usable ε only (at ε = 0 it would explain a choice no run can make, beside the
# refusal)
choice = recommend(schema, n_train, epsilon) if auto and epsilon and epsilon > 0 else None
if choice is not None:
    klass = family_class(choice.family)
    auto_note.info(f"**Auto's choice.** {choice.reason} The run makes the same choice from the row count it "
                   "releases, and records it.", icon=":material/auto_awesome:")

parts = shape.parts(schema)
missing_bounds = [c.name for part in parts for c in part.columns if c.is_numeric and not c.has_bounds]
bounds_epsilon = 0.0
if missing_bounds and shape.dp_bounds:  # else the request's check asks for every bound
    st.write(f"Numeric columns without public bounds: **{', '.join(missing_bounds)}**. Part of ε estimates them "
             "privately before training.")
    st.text_input("ε for estimating the missing bounds", value=f"{default_bounds_epsilon(epsilon or 1.0):.3g}", key="bounds_epsilon")
    bounds_epsilon, bounds_problem = state.typed_epsilon("bounds_epsilon", "the ε for the bounds", zero_ok=True)
    if bounds_problem:
        epsilon_problem, bounds_epsilon = epsilon_problem or bounds_problem, 0.0
without_values = [c.name for c in searchable(schema)] if shape.dp_value_sets else []
values_epsilon = 0.0
# numbers written as codes, brackets or steps of a scale: their values found with DP
if without_values:
    with st.expander("Find the values of number columns with DP (codes, brackets, the 0 of amounts)"):
        st.write(f"Number columns without declared values: **{', '.join(without_values)}**. Part of ε can count, "
                 "with noise, the rows at each value a column can take (its whole numbers, or its declared "
                 "decimals): the values most rows hold become its only values, or values drawn exactly, and every "
                 "synthetic row is written at them. Values a few rows hold are left out. Declaring them on "
                 "step 2 costs nothing.")
        st.text_input("ε for finding their values (0: none)", value="0", key="values_epsilon")
        values_epsilon, values_problem = state.typed_epsilon("values_epsilon", "the ε for finding values",
                                                             zero_ok=True)
        if values_problem:
            epsilon_problem, values_epsilon = epsilon_problem or values_problem, 0.0

# its training is measuring the statistics: measuring them again would repeat it
if klass.measures_marginals:
    calibrate = False
    st.caption("This model is built from the table's overall statistics, measured with noise as it trains: "
               "no separate measurement is needed.")
else:
    calibrate = st.toggle(
        "Also measure the table's overall statistics, and match the synthetic rows to them", value=True,
        key="calibrate",
        help="Part of ε measures, with noise, how often each value (and each value together with the target and "
             "sensitive columns) occurs. The synthetic rows are then drawn so that these counts match, as far as "
             "the noise allows. The accountant combines this measurement with training, so it costs far less than "
             "its share: on the benchmark tables it made the synthetic tables markedly more faithful.")

# --- size -------------------------------------------------------------------------------------------
st.subheader("Size")
sizes = dict(klass.size_presets) or {p: p for p in klass.presets}
SIZE_HELP = {"quick": "a first look", "standard": "the default", "best": "the largest model, for a GPU"}


def _size_clicked() -> None:
    """The size clicked is the size trained: the Advanced preset follows it (and may then be changed
    there)."""
    st.session_state["preset"] = sizes[st.session_state["size"]]


size = st.radio("Model size", list(sizes), index=min(1, len(sizes) - 1), horizontal=True, key="size",
                format_func=lambda s: f"{s} ({SIZE_HELP.get(s, sizes[s])})", on_change=_size_clicked)
if st.session_state.get("preset") not in klass.presets:  # another family was picked: its own size
    st.session_state["preset"] = sizes[size]
with st.expander("Advanced"):
    # its value is in session state already (set above, from the size): no default here
    preset = st.selectbox("Preset", list(klass.presets), key="preset",
                          help="'tiny' trains in seconds: for trying the app, not for release.")
    accountant = st.selectbox("Accountant", ["prv", "rdp"], key="accountant",
                              help="PRV gives the tighter ε for the same noise; RDP is the classic bound.")
    seed = int(st.number_input("Seed", value=0, min_value=0, step=1, key="seed",
                               help="Sets the starting weights only. The privacy noise is always drawn in "
                                    "secret, so two runs with the same seed differ."))
    name = st.text_input("Run name", value="", key="run_name", placeholder=family)
    options_problem = None
    processes = 1
    offered = offered_processes()
    if len(offered) > 1 and klass.trains_distributed:
        processes = st.selectbox("GPUs to train on", offered, index=len(offered) - 1, key="processes",
                                 help="One training process per GPU (started with torchrun): each takes its "
                                      "share of every step's rows, and the noise is added once, so the privacy "
                                      "cost is the same as on one GPU.")
    calibration_share = 0.0
    if calibrate:
        calibration_share = st.slider("Share of ε for measuring the statistics", 0.05, MAX_CALIBRATION_SHARE,
                                      choice.calibration_share if choice else DEFAULT_CALIBRATION_SHARE, 0.05,
                                      key=f"calibration_share_{choice.calibration_share if choice else 'named'}",
                                      help="Measured alone it would cost this share of ε; composed with training "
                                           "by the accountant, the training's noise grows only a little.")
    quantile_share = 0.0
    if shape.quantiles and any(c.is_numeric for c in schema.modelled().columns):
        quantile_share = st.slider("Share of ε for the numeric columns' quantiles", 0.0, MAX_QUANTILE_SHARE,
                                   float(choice.quantile_share) if choice else 0.0, 0.05,
                                   key=f"quantile_share_{choice.quantile_share if choice else 'named'}",
                                   help="Measures where each number column's values lie, with noise, so that the "
                                        "model's bins follow them instead of cutting the public range evenly; it "
                                        "helps skewed columns (incomes, prices). 0: even bins.")
    family_options = {}
    if not auto:
        typed = st.text_area("Model options (KEY=VALUE, one per line)", key="family_options", height=80,
                             placeholder="epochs=5\nbatch_size=256",
                             help="The family's own settings, as the command line's --option takes them: epochs, "
                                  "batch_size, lr, max_grad_norm, n_bins, … An unknown name is refused below.")
        try:
            family_options = parse_options([line for line in typed.splitlines() if line.strip()])
        except ValueError as e:
            options_problem = f"Model options: {e}".replace("--option wants", "each line is")
    devices = available_devices()
    device_choice = st.selectbox("Train on", devices, key="device_choice",
                                 help="'automatic' takes the GPU when this machine has one, else the CPU.")

# the options the run will train with: auto's choice sets its own (a run of `auto` takes none from
# the page)
options = {**options, **family_options}
model_options = {**options, **choice.options_for(preset)} if choice is not None else options
request = FitRequest(model=family, preset=preset, options=options, epsilon=float(epsilon or 1.0),
                     delta=None if chosen_delta is None else float(chosen_delta), accountant=accountant,
                     bounds_epsilon=float(bounds_epsilon), values_epsilon=float(values_epsilon), seed=seed, holdout_share=float(holdout_share),
                     name=name.strip() or None, calibration_share=float(calibration_share),
                     quantile_share=float(quantile_share), table_name=st.session_state.get("table_name"),
                     device=None if device_choice == AUTOMATIC else device_choice,
                     processes=processes if processes > 1 else None)

# --- the accountant's plan --------------------------------------------------------------------------
problems = []
try:
    if epsilon_problem:  # text that is not an ε: said once, nothing planned
        raise BudgetError(epsilon_problem)
    if options_problem:
        raise BudgetError(options_problem)
    # the run's own checks (a draft is accepted below, before the start)
    problems += [str(e) for e in request.replace(accept_draft=True).problems(schema)]
    check_rows(n_train, "what is left for training, once rows are kept aside for the review,")
    if table_total is not None:
        check_within(epsilon, table_total, spent_before)
except (BudgetError, SchemaError) as e:
    problems.append(str(e))


@st.cache_data(show_spinner="Asking the accountant…", max_entries=64)
def noise_plan(request_json: str, schema_json: str, n: int):
    """The run's own plan (synth_core.plan, as `fit` makes it from the count it releases): its
    noise, in words, and the steps or rounds to expect (the number the estimate, the train page
    and the report start from)."""
    request = FitRequest.from_dict(json.loads(request_json))
    planned = plan_run(request, schema_from_json(schema_json), n)
    return planned.noise.to_dict(), planned.summary(), planned.steps


def plan_key(request: FitRequest) -> str:
    """The request as the plan reads it (not its name, seed or the table's name)."""
    return json.dumps(request.replace(name=None, table_name=None, seed=None).to_dict(),
                      sort_keys=True)


st.subheader("What the accountant computed")
plan = expected_steps = None
if problems:
    for p in problems:
        st.error(p)
elif local_problem:
    st.info("No plan until the choice above can be used.")
else:
    try:
        plan, summary, expected_steps = noise_plan(plan_key(request), schema.to_json(), n_train)
    except (BudgetError, SchemaError, ValueError) as e:
        st.error(f"No noise plan: {e}")
    else:
        for column, figure in zip(st.columns(len(summary.figures)), summary.figures):
            column.metric(figure.label, figure.value, help=figure.help or None)
        st.caption(summary.caption)
        for note in summary.notes:
            st.caption(note)
        for warning in summary.warnings:
            st.warning(warning)


@st.cache_data(show_spinner="Forecasting what ε buys…", max_entries=64)
def shares_by_level(request_json: str, schema_json: str, n: int) -> list[tuple]:
    """Each harm level's forecast (synth_core.forecast): (level, ε, a share's 90% half-width or
    None, what releases the counts, the family, the expected pairs mismatch with its 80% interval or
    "")."""
    request, schema = FitRequest.from_dict(json.loads(request_json)), Schema.from_json(schema_json)
    out = []
    for level, eps in HARM.items():
        if eps is None:
            continue
        made = forecast_for(request, schema, n, eps)
        out.append((level, eps, made.columns[0].half_width if made.columns else None, made.source,
                    get_model_class(made.model).label or made.model,
                    pairs_text(made) or "not forecast: no benchmark runs of this model yet",
                    made.extrapolation if made.figures else None))
    return out


@st.cache_data(show_spinner=False, max_entries=16)
def forecast_curve(model: str, schema_json: str, n: int):
    schema = Schema.from_json(schema_json)
    return curve(schema, n, model), floor(schema, n).get("tvd2")


if plan is not None and not shape.forecast:
    st.caption(f"What each level buys is not forecast here: {shape.no_forecast}.")
elif plan is not None:
    st.subheader("What each level buys on this table")
    try:
        # auto picks its family and shares at each level's ε, unless the statistics are switched off
        # above
        asked = request.replace(calibration_share=None if calibrate or klass.measures_marginals else 0.0,
                                quantile_share=None) if family == AUTO else request
        levels = shares_by_level(json.dumps(asked.to_dict(), sort_keys=True), schema.to_json(), n_train)
    except (BudgetError, SchemaError, ValueError) as e:
        st.caption(f"No forecast: {e}")
    else:
        st.dataframe(pd.DataFrame([{"harm level": level, "ε": eps, "model": label,
                                    "pairs of columns: mismatch expected (80%)": pairs,
                                    "each column's shares, 9 times in 10": "not measured (the model's own)"
                                    if width is None else f"within ±{100 * width:.2g} percentage points",
                                    "counts released by": source}
                                   for level, eps, width, source, label, pairs, _ in levels]),
                     hide_index=True)
        # the benchmark runs span a range of ε, rows and columns: said where a level leaves it
        beyond = next(((eps, note) for _, eps, *_, note in levels if note), None)
        if beyond is not None:
            st.caption(f"Where the table says extrapolated, as at ε {beyond[0]:g}, the forecast is "
                       f"{beyond[1]}.")
        st.caption("Before anything is spent, from public facts and this table's row count only (shown to you "
                   "alone): the mismatch of pairs of columns (2-way TVD, as the review will measure it: "
                   f"{compares(n_train)}) from a model of the project's benchmark results on public tables; "
                   "the shares from the noise of the counts each run would release.")
        points, bottom = forecast_curve(asked.model, schema.to_json(), n_train)
        if points:
            st.plotly_chart(forecast_chart(points, bottom, epsilon), key="forecast_curve")
            st.caption("Where the line meets the dotted floor, more ε stops buying fidelity: the table's own rows "
                       "are no closer to unseen ones.")
        release_planner.render(book, table_key, account, asked, schema, n_train)

device = device_label()
est_key = (family, preset, schema.to_json(), n_train, epsilon, delta, json.dumps(model_options, sort_keys=True),
           calibration_share, quantile_share)
estimate = st.session_state.get("estimate")
# a lookup: no button needed
known = plan is not None and stored_costs(klass.family, preset, schema, options=model_options) is not None
if (known and not (estimate and estimate.get("key") == est_key)) or st.button(
        f"Estimate training time on this machine ({device})", disabled=plan is None, key="estimate_button"):
    with st.spinner("Timing a few training steps on random rows from the public schema…"):
        try:
            result = estimate_plan(plan_run(request, schema, n_train),
                                   review_rows=review_rows_for(n_train), steps=expected_steps)
            st.session_state["estimate"] = estimate = {"key": est_key, **result}
        except (SchemaError, ValueError, RuntimeError) as e:
            st.error(f"Could not time the model: {e}")
if estimate and estimate.get("key") == est_key:
    phases = estimate["phases"]
    st.info(f"About **{duration(estimate['seconds'])}** on {estimate['device']}: "
            f"{estimate['steps']} training {'rounds' if estimate.get('steps_adapt') else 'steps'} of "
            f"{estimate['per_step_s']:.2f} s ({duration(phases['training'])}), "
            + (f"drawing the synthetic rows for the review ({duration(phases['sampling'])}), " if phases['sampling']
               else "") + f"starting and planning "
            f"({duration(phases['start'] + phases['setup'])}). Costs {estimate['measured']}; the training page refines "
            "the time left from the run's own steps.")

# --- start ------------------------------------------------------------------------------------------
accepted = True
if schema.provenance["warning"]:
    st.warning("The schema is still an unconfirmed draft read from your data: its bounds and categories may "
               "disclose facts the privacy budget does not cover. Confirm it on step 2, or accept it here; the "
               "run and every report will then say so first.", icon=":material/warning:")
    accepted = st.checkbox("I accept training on a schema read from my data, unconfirmed", key="accept_draft")
    request = request.replace(accept_draft=accepted)
if table_total is None and not total_problem and not asking:
    st.info("Choose this table's total above before its first run.")
if found.resembles and found.account is None and same_table is None:
    st.info("Say above whether this is a table you trained on before.")
if st.button("Start training", type="primary", key="start_training",
             disabled=plan is None or not accepted or table_total is None
             or bool(found.resembles and found.account is None and same_table is None)):
    try:
        shape.admit(table, schema)
        book.set_total(table_key, table_total)
        # a file too large to read whole: the run names it, and its worker reads it
        run = start_fit_job(state.runs_root(), state.table_file() or table, schema,
                            request.replace(new_table=same_table is not None))
        state.forget_table_identity()
    except (SchemaError, ValueError, OSError) as e:
        st.error(f"Training could not start: {e}")
    else:
        state.set_current_run(run.path)
        st.switch_page("app_pages/train.py")
