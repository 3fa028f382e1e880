"""Step 3: model family, privacy budget (ε, δ), size; what the accountant computed; start training."""
from __future__ import annotations

import dataclasses
import json

import streamlit as st

from synth_core.privacy.table_budget import check_within
from synth_core.runs.jobs import review_rows_for, start_fit_job
from synth_core.models import MODELS, get_model_class
from synth_core.models.recommend import AUTO, CANDIDATES, recommend
from synth_core.api import preview_plan
from synth_core.privacy import BudgetError, check_run_budget, default_delta, delta_warning
from synth_core.privacy.budget import DEFAULT_CALIBRATION_SHARE, MAX_CALIBRATION_SHARE
from synth_core.schema import Schema, SchemaError, validate_table
from synth_core.training.device import device_label
from synth_core.training.distributed import offered_processes
from synth_core.training.timing import estimate_fit_seconds, stored_costs
from workbench import state
from synth_core.format import duration, epsilon as epsilon_text, runs

st.title("3 · Model and privacy budget")

table, schema = state.require_table()

# --- model ------------------------------------------------------------------------------------------
st.subheader("Model")
MORE = "more"  # the families auto never picks, behind one choice
families = [AUTO, *CANDIDATES, MORE]
family = st.radio("Model family", families, index=0, key="family",
                  format_func=lambda f: ("Recommended for this table · auto" if f == AUTO else
                                         "More models…" if f == MORE else f"{get_model_class(f).label} · {f}"),
                  captions=["Picked from the table's public facts, its size and ε" if f == AUTO else
                            "Diffusion, GAN and language-model families, for comparison and special needs"
                            if f == MORE else get_model_class(f).summary() for f in families],
                  help="The plain name first, the technical one after the dot. Each model's line says what it "
                       "does; 'auto' picks between the first two for a table like yours, by how they did on our "
                       "benchmark tables.")
if family == MORE:
    others = [f for f in sorted(MODELS) if f not in CANDIDATES]
    family = st.selectbox("More models", others, key="more_family",
                          format_func=lambda f: f"{get_model_class(f).label} · {f}",
                          help="Families auto does not pick: each one's line below says when it helps.")
auto = family == AUTO
auto_note = st.empty()  # auto's choice and why, once ε is chosen below
klass = get_model_class(recommend(schema, len(table), 1.0).family if auto else family)
st.caption(f"**What it is.** {klass.description}")
if klass.when_to_pick:
    st.caption(f"**Pick it for.** {klass.when_to_pick}")

# a family built on a language model (its config has a `backbone`): which one, from this machine only
options: dict = {}
backbone_problem = None
if "backbone" in {f.name for f in dataclasses.fields(klass.config_class)}:
    from synth_core.models.llm import PACKAGED_INSTALL, list_local_causal_lms, packaged_backbones, resolve_backbone

    st.markdown("**Language model (backbone)**")
    st.info("The offline default is a small GPT-2 that starts with **no pretrained knowledge**: it learns the "
            "row format from random public-schema rows and then your data with DP; on a CPU budget it learns each "
            "column's values but little of how the columns depend on each other. A pretrained causal language model (GPT-2, Llama, Qwen, …) already knows what "
            "the column names and values mean and does better. To use one, give the directory it was saved to "
            "(the folder with its config.json and tokenizer), or pick a model already in this machine's Hugging "
            "Face cache (fetched beforehand on a machine with network access, e.g. `hf download gpt2`). Nothing is "
            "downloaded here.", icon=":material/info:")
    DEFAULT, DIRECTORY = "Offline default: small GPT-2, no pretrained knowledge", "A local model directory…"
    cached = {**{f"SmolLM2-135M, pretrained (installed package) · {name}": name for name in packaged_backbones()},
              **{f"{m['id']} (in the local Hugging Face cache)": m["id"] for m in list_local_causal_lms()}}
    choice = st.selectbox("Backbone", [DEFAULT, *cached, DIRECTORY], key="backbone_choice",
                          help="Installed packages and models in the local Hugging Face cache "
                               "($HF_HOME/hub or ~/.cache/huggingface/hub) are listed.")
    if not cached:
        st.caption("No pretrained model is installed and none is in the local Hugging Face cache. The small "
                   f"pretrained SmolLM2-135M installs offline with `{PACKAGED_INSTALL}`.")
    backbone = None
    if choice == DIRECTORY:
        backbone = st.text_input("Model directory", key="backbone_path",
                                 placeholder="/path/to/a/saved/causal-lm").strip() or None
        if backbone is None:
            backbone_problem = "Give the model directory, or choose the offline default."
    elif choice in cached:
        backbone = cached[choice]
    if backbone is not None:
        try:
            backbone = resolve_backbone(backbone)
        except ValueError as e:
            backbone_problem = f"Backbone: {e}"
    if backbone_problem:
        st.error(backbone_problem)
    options["backbone"] = backbone

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
book, table_key = state.budgets(), state.table_id()
account = book.account(table_key)
spent_before = account.spent_epsilon if account else 0.0
st.markdown("**This table's total.** Every run on this table spends from one total: the most ε that all its runs "
            "together may reveal about any one person (ε adds up across runs on the same rows). A run beyond it "
            "is refused, and what a run spent is never given back.")
total_problem = None
if account is None:
    TOTALS = state.TOTAL_PRESETS
    total_choice = st.radio("This is the first run on this table. How much may all its runs reveal together?",
                            list(TOTALS), index=None, key="table_total_choice")
    table_total = TOTALS.get(total_choice) if total_choice else None
    if total_choice is not None and table_total is None:
        st.text_input("Total ε for this table", value="", key="table_total", placeholder="type the total")
        table_total, total_problem = state.typed_epsilon("table_total", "the total")
        if total_problem and st.session_state.get("table_total", "").strip():  # nothing typed yet: asked below
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
    left = max(0.0, table_total - spent_before)
    before = (f"Its runs have spent ε = {epsilon_text(spent_before)} in {runs(len(account.charges))}; "
              if account and account.charges else "Nothing is spent yet; ")
    st.caption(f"{before}{epsilon_text(left)} of {epsilon_text(table_total)} remains.")
    if epsilon and 0 <= left * (1 + 1e-9) - epsilon < max(0.01, 0.01 * table_total):  # leaves nothing of use
        st.warning(f"This run would spend all that is left of this table's budget (ε = {epsilon_text(left)}): no "
                   "other run on this table will be possible unless you raise the total, accepting the larger "
                   "risk.", icon=":material/warning:")

holdout_share = st.slider("Rows kept aside for the review (never trained on)", 0.0, 0.3, 0.1, 0.05,
                          key="holdout_share",
                          help="They let the review compare how close synthetic rows come to training rows "
                               "with how close unseen real rows come. 0 keeps every row for training.")
n_train = len(table) - int(round(len(table) * holdout_share))
chosen_delta = st.number_input(
    "δ (chance the ε guarantee fails)", value=None, min_value=0.0, max_value=1.0, format="%.1e", key="delta",
    placeholder="automatic: a power of ten below 1 / (number of rows)",
    help="Leave it empty: the run chooses δ below 1 / (number of rows) from the row count it releases (declared "
         "public, or a noisy count), never from the exact count. Or type your own, well below 1 / (number of rows).")
# what the run will choose, for the plan shown here (the run itself uses the count it releases)
delta = float(chosen_delta) if chosen_delta is not None else default_delta(n_train)
warning = delta_warning(delta, n_train) if delta > 0 else None
if warning:
    st.warning(warning, icon=":material/warning:")

# auto's choice, for a usable ε only (at ε = 0 it would explain a choice no run can make, beside the refusal)
choice = recommend(schema, n_train, epsilon) if auto and epsilon and epsilon > 0 else None
if choice is not None:
    klass = get_model_class(choice.family)
    auto_note.info(f"**Auto's choice.** {choice.reason} The run makes the same choice from the row count it "
                   "releases, and records it.", icon=":material/auto_awesome:")

missing_bounds = [c.name for c in schema.columns if c.is_numeric and not c.has_bounds]
bounds_epsilon = 0.0
if missing_bounds:
    st.write(f"Numeric columns without public bounds: **{', '.join(missing_bounds)}**. Part of ε estimates them "
             "privately before training.")
    st.text_input("ε for estimating the missing bounds", value=f"{0.1 * (epsilon or 1.0):.3g}", key="bounds_epsilon")
    bounds_epsilon, bounds_problem = state.typed_epsilon("bounds_epsilon", "the ε for the bounds", zero_ok=True)
    if bounds_problem:
        epsilon_problem, bounds_epsilon = epsilon_problem or bounds_problem, 0.0

if klass.measures_marginals:  # its training is measuring the statistics: measuring them again would repeat it
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
    """The size clicked is the size trained: the Advanced preset follows it (and may then be changed there)."""
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

# the options the run will train with: auto's choice sets its own (a run of `auto` takes none from the page)
model_options = {**options, **choice.options_for(preset)} if choice is not None else options

# --- the accountant's plan --------------------------------------------------------------------------
problems = []
try:
    if epsilon_problem:  # text that is not an ε: said once, nothing planned
        raise BudgetError(epsilon_problem)
    check_run_budget(epsilon, delta, bounds_epsilon)
    if bounds_epsilon <= 0:
        schema.require_bounds()
    if n_train < state.MIN_ROWS:
        raise BudgetError(f"only {n_train} rows would be left for training; keep fewer aside")
    if table_total is not None:
        check_within(epsilon, table_total, spent_before)
except (BudgetError, SchemaError) as e:
    problems.append(str(e))


@st.cache_data(show_spinner="Asking the accountant…", max_entries=64)
def noise_plan(family: str, preset: str, schema_json: str, n: int, epsilon: float, delta: float, accountant: str,
               options_json: str, bounds_epsilon: float, calibration_share: float):
    schema = Schema.from_json(schema_json)
    model = get_model_class(family)(schema, preset=preset, device="cpu", seed=0, **json.loads(options_json))
    plan = preview_plan(model, n, epsilon, delta, accountant, bounds_epsilon, calibration_share,
                        rows_public=schema.rows is not None)
    opening = model.opening(plan.rho, plan.rounds) if hasattr(model, "opening") else None  # AIM: its first rounds
    # the steps or rounds to expect: the number the estimate, the train page and the report start from
    return plan.to_dict(), model.train_config.epochs, model.n_parameters, opening, model.expected_steps(plan)


st.subheader("What the accountant computed")
plan = expected_steps = None
if problems:
    for p in problems:
        st.error(p)
elif backbone_problem:
    st.info("No plan until the backbone above can be used.")
else:
    try:
        plan, epochs, n_params, opening, expected_steps = noise_plan(
            klass.family, preset, schema.to_json(), n_train, epsilon, delta, accountant,
            json.dumps(model_options, sort_keys=True), bounds_epsilon, calibration_share)
    except (BudgetError, SchemaError, ValueError) as e:
        st.error(f"No noise plan: {e}")
    else:
        if plan.get("kind") == "zcdp":  # an adaptive mechanism (AIM): rounds paid from a zCDP budget
            c = st.columns(4)
            c[0].metric("Rounds, about", f"{expected_steps:,}",
                        help="Each round picks the overall statistic the model gets most wrong and measures it with "
                             "noise. The rounds adapt: when a measurement hardly helps, the next ones get less noise "
                             "and there are fewer of them; the run ends when its budget is spent. This is how many "
                             "runs like this one took; the train page counts them as they happen.")
            c[1].metric("Noise on the columns (σ)", f"{opening['one_way_sigma']:.3g}",
                        help="The Gaussian noise added to each count of the first round, which measures every "
                             "column alone, in rows. A later round measures a pair of columns with noise of about "
                             f"{opening['round_sigma']:.3g} at the start; the rounds adapt from there.")
            c[2].metric("Budget (ρ, zero-concentrated)", f"{plan['rho']:.3g}",
                        help="What the rounds may spend together, in the unit their noise is planned in; the rounds "
                             "stop when it is spent.")
            c[3].metric("Its ε alone", f"{plan['planned_epsilon']:.3g}",
                        help="What the rounds would cost if they were the only use of the data; with the row count, "
                             "the whole run stays within your ε.")
            st.caption(f"Every column's counts first, then about {expected_steps:,} rounds over {n_train:,} rows: "
                       f"each selects a pair of columns (ε = {opening['selection_epsilon']:.3g} per choice) and "
                       "measures it. The "
                       f"accountant composes them by zero-concentrated DP; the run's whole ε, with the row count"
                       + (", the bounds" if bounds_epsilon else "") + f", stays within {epsilon:g}. σ is the "
                       "spread of the noise added to each count, in rows; ρ is the same budget in the unit in "
                       "which zero-concentrated DP adds rounds up.")
        else:
            c = st.columns(5)
            c[0].metric("Noise added (σ)", f"{plan['noise_multiplier']:.3g}",
                        help="The noise multiplier: the random noise added at each step, in units of the most one "
                             "row may move the model. Larger means more private and less faithful.")
            c[1].metric("Rows per step (batch)", f"{plan['expected_batch_size']:,.0f}",
                        help="The expected batch size: each row joins a step at random, so the count varies a little.")
            c[2].metric("Training steps", f"{plan['steps']:,}",
                        help="How many times the model is updated. Each step spends a little of ε.")
            c[3].metric("Share of rows per step (q)", f"{plan['sample_rate']:.3g}",
                        help="The sampling rate: the chance that a given row joins a step (Poisson sampling).")
            c[4].metric("Training's ε alone", f"{plan['planned_epsilon']:.3g}",
                        help="What training would cost if it were the only use of the data; combined with the row "
                             "count and the statistics, the whole run stays within your ε.")
            st.caption(f"{epochs} epochs over {n_train:,} training rows with Poisson sampling; each row's gradient is "
                       f"clipped to norm {plan['max_grad_norm']:g} and Gaussian noise of σ × that norm is added. "
                       f"Model: {n_params:,} parameters. Accountant: {plan['accountant'].upper()}. The run's whole "
                       f"ε, with the row count" + (", the bounds" if bounds_epsilon else "")
                       + (" and the statistics" if calibration_share else "") + f" composed, stays within {epsilon:g}.")
            if plan["accountant"] != accountant:
                st.caption(f"The {plan['accountant'].upper()} accountant is used at this ε: "
                           f"{accountant.upper()} would take minutes to compute it.")
            if plan["noise_multiplier"] > 10:
                st.warning("The noise is very large for this table and ε: expect a poor synthetic table. A larger ε, "
                           "more rows or the quick size helps.")

device = device_label()
est_key = (family, preset, schema.to_json(), n_train, epsilon, delta, json.dumps(model_options, sort_keys=True),
           calibration_share)
estimate = st.session_state.get("estimate")
# a lookup: no button needed
known = plan is not None and stored_costs(klass.family, preset, schema, options=model_options) is not None
if (known and not (estimate and estimate.get("key") == est_key)) or st.button(
        f"Estimate training time on this machine ({device})", disabled=plan is None, key="estimate_button"):
    with st.spinner("Timing a few training steps on random rows from the public schema…"):
        try:
            result = estimate_fit_seconds(klass.family, schema, preset, n_train, max(epsilon - bounds_epsilon, 1e-3),
                                          delta, options=model_options, review_rows=review_rows_for(n_train),
                                          calibrated=calibration_share > 0, steps=expected_steps)
            st.session_state["estimate"] = estimate = {"key": est_key, **result}
        except (SchemaError, ValueError, RuntimeError) as e:
            st.error(f"Could not time the model: {e}")
if estimate and estimate.get("key") == est_key:
    phases = estimate["phases"]
    st.info(f"About **{duration(estimate['seconds'])}** on {estimate['device']}: "
            f"{estimate['steps']} training {'rounds' if estimate.get('steps_adapt') else 'steps'} of "
            f"{estimate['per_step_s']:.2f} s ({duration(phases['training'])}), "
            f"drawing the synthetic rows for the review ({duration(phases['sampling'])}), starting and planning "
            f"({duration(phases['start'] + phases['setup'])}). Costs {estimate['measured']}; the training page refines "
            "the time left from the run's own steps.")

# --- start ------------------------------------------------------------------------------------------
request = {"model": family, "preset": preset, "size": klass.size_of(preset), "options": options,
           "epsilon": None if epsilon is None else float(epsilon),
           "delta": None if chosen_delta is None else float(chosen_delta),
           "accountant": accountant, "bounds_epsilon": float(bounds_epsilon), "seed": seed,
           "holdout_share": float(holdout_share), "name": name.strip() or None,
           "calibration_share": float(calibration_share), "table_name": st.session_state.get("table_name"),
           **({"processes": processes} if processes > 1 else {})}
accepted = True
if schema.provenance["warning"]:
    st.warning("The schema is still an unconfirmed draft read from your data: its bounds and categories may "
               "disclose facts the privacy budget does not cover. Confirm it on step 2, or accept it here; the "
               "run and every report will then say so first.", icon=":material/warning:")
    accepted = st.checkbox("I accept training on a schema read from my data, unconfirmed", key="accept_draft")
    request["accept_draft"] = accepted
if table_total is None and not total_problem:
    st.info("Choose this table's total above before its first run.")
if st.button("Start training", type="primary", disabled=plan is None or not accepted or table_total is None,
             key="start_training"):
    try:
        validate_table(table, schema)
        book.set_total(table_key, table_total)
        run = start_fit_job(state.runs_root(), table, schema, request, budgets=book)
    except (SchemaError, ValueError, OSError) as e:
        st.error(f"Training could not start: {e}")
    else:
        state.set_current_run(run.path)
        st.switch_page("app_pages/train.py")
