"""Where the app keeps things: the steward's table and schema in the session (memory only), runs on disk."""
from __future__ import annotations

from pathlib import Path

import streamlit as st

from synth_core import home
from synth_core.privacy.budget import BudgetError, parse_epsilon
from synth_core.privacy.table_budget import BookError, TableBudgets, identity_key
from synth_core.request import FEW_ROWS, MIN_ROWS  # noqa: F401 - the core's rules, for the pages
from synth_core.runs import LIVE_STATES, RunDir, RunError


# the facts of the columns the steward left out, to bring them back as they were (schema_editor):
# {prefix + name: (ColumnSpec, position)}
LEFT_OUT_SPECS = "left_out_specs"


def runs_root() -> Path:
    return home.runs_root()


def budgets() -> TableBudgets:
    """The book of every table's privacy budget across its runs, in the workbench home."""
    return TableBudgets(home.budgets_path())


def book_problem() -> str | None:
    """Why the budget book cannot be trusted (a one-line repair), None while it can."""
    try:
        budgets().check()
    except BookError as e:
        return str(e)
    return None


def table_identity():
    """Which table the session's table is in the budget book (privacy.table_budget.TableIdentity: its
    account, or the known tables it resembles), computed once per table and schema's columns."""
    if table() is None:
        return None
    current = schema()
    stamp = (id(table()), identity_key(table(), current))
    if st.session_state.get("table_identity_of") != stamp:
        st.session_state["table_identity"] = budgets().identify(table(), current)
        st.session_state["table_identity_of"] = stamp
    return st.session_state["table_identity"]


def forget_table_identity() -> None:
    """The book changed what the session's table is (the steward said it is a known table): ask again."""
    st.session_state.pop("table_identity_of", None)


def table_id() -> str | None:
    """The id of the session table's budget: its account's, or its own fingerprint while it has none."""
    found = table_identity()
    return found.table_id if found is not None else None


def table_ids() -> set[str]:
    """Every id the session table's runs may carry (its account's and the files attached to it)."""
    mine = table_id()
    return budgets().ids(mine) if mine is not None else set()


def set_dataset(table, name: str, source: str, schema, about: str = "") -> None:
    """A new private table (and its schema) replaces the old one; choices that depended on it are reset."""
    st.session_state["table"] = table
    st.session_state["table_name"] = name
    st.session_state["table_source"] = source
    st.session_state["table_about"] = about
    st.session_state["schema"] = schema
    st.session_state["schema_version"] = st.session_state.get("schema_version", 0) + 1
    # the run in view was another table's: the pages and the sidebar now follow this table's newest
    # run; the facts of the columns the steward left out were the old table's
    for key in ("plan_request", "estimate", "run_path", "all_tables", LEFT_OUT_SPECS):
        st.session_state.pop(key, None)


def load_builtin_demo() -> None:
    """The built-in invented table (no file, no network), with its declared schema."""
    from synth_core.demo import DEMOS, load_demo
    name = next(iter(DEMOS))
    table, schema, about = load_demo(name)
    set_dataset(table, name, "demo", schema, about)


def table():
    return st.session_state.get("table")


def schema():
    return st.session_state.get("schema")


def linked() -> bool:
    """Whether the session holds two linked tables (a person's row and their child rows) and their linked schema."""
    from synth_core.schema.linked import LinkedSchema
    return isinstance(schema(), LinkedSchema)


def set_schema(new_schema, remount_editor: bool = True) -> None:
    """Replace the schema; the schema editor is rebuilt from it unless the change came from that editor."""
    st.session_state["schema"] = new_schema
    if remount_editor:
        st.session_state["schema_version"] = st.session_state.get("schema_version", 0) + 1
    st.session_state.pop("estimate", None)


def current_run() -> RunDir | None:
    """The run the steward is looking at: the one chosen in this session, else the newest run of the
    session's table (of any table if none is loaded), so the sidebar and every page name the same run."""
    path = st.session_state.get("run_path")
    if path and table() is not None and not st.session_state.get("all_tables") \
            and _table_of(path) not in (None, *table_ids()):
        path = None  # another table's run, chosen before this table was loaded: not the one in use
    if not path:
        from synth_core.runs.jobs import list_runs
        mine = table_ids()  # none loaded: every table's
        runs = [r for r in list_runs(runs_root()) if r.get("state") != "unreadable"
                and (not mine or r.get("table") in mine)]
        if not runs:
            return None
        path = runs[0]["path"]
        set_current_run(path)
    run = RunDir(path)
    if not run.exists():
        st.session_state.pop("run_path", None)
        st.warning(f"The run at {path} no longer exists (its folder was deleted or moved).")
        return None
    return run


def _table_of(path) -> str | None:
    """The table a run came from (its request's keyed fingerprint), None if it does not say."""
    try:
        return RunDir(path).request().get("table")
    except (OSError, ValueError, RunError):
        return None


def set_current_run(path) -> None:
    st.session_state["run_path"] = str(path)


# ε presets by how harmful disclosure would be (in the spirit of OpenDP's DP Creator)
HARM_PRESETS = {
    "Low harm (data close to public statistics): ε = 4": 4.0,
    "Moderate harm: ε = 1": 1.0,
    "High harm (health, finances, minors): ε = 0.25": 0.25,
    "Very high harm: ε = 0.05": 0.05,
    "Type my own ε": None,
}


# a table's total across its runs, asked before its first run: room for about three runs at the ε of the same
# harm level above
TOTAL_PRESETS = {
    "Low harm: ε = 12 in all (about three runs at ε = 4)": 12.0,
    "Moderate harm: ε = 3 in all (about three runs at ε = 1)": 3.0,
    "High harm: ε = 0.75 in all (about three runs at ε = 0.25)": 0.75,
    "Very high harm: ε = 0.15 in all (about three runs at ε = 0.05)": 0.15,
    "Type my own total": None,
}


def planned_epsilon() -> float | None:
    """The ε chosen on the model page (its widgets' state), before any run spends it."""
    harm = st.session_state.get("harm")
    if harm is None:
        return None
    value = HARM_PRESETS.get(harm)
    return value if value is not None else typed_epsilon("epsilon_custom")[0]


def typed_epsilon(key: str, what: str = "ε", zero_ok: bool = False) -> tuple[float | None, str | None]:
    """(the ε typed in the text box `key`, None) or (None, the one message that says what to type)."""
    try:
        return parse_epsilon(st.session_state.get(key) or "", what, zero_ok), None
    except BudgetError as e:
        return None, str(e)


def require_table():
    """(table, schema) of the session, or a pointer to step 1 and the end of this page's run."""
    if table() is None or schema() is None:
        st.info("Load a table on step 1 first.")
        st.page_link("app_pages/data.py", label="Go to step 1", icon=":material/arrow_back:")
        st.stop()
    return table(), schema()


def visible_runs(runs: list[dict]) -> list[dict]:
    """The runs of the session's table; a toggle shows those of every other table too (runs of three
    tables in one picker is how a steward exports the wrong one)."""
    mine = table_ids()
    if not mine:
        return runs
    others = sum(r.get("table") not in mine for r in runs)
    if others and st.toggle(f"Also show the runs of other tables ({others})", key="all_tables",
                            help=f"Only the runs trained on the table loaded now ({st.session_state.get('table_name')}) "
                                 "are listed, so that you review and export the right one."):
        return runs
    return [r for r in runs if r.get("table") in mine]


def require_trained_runs() -> tuple[dict, list, int]:
    """Runs with a trained model ({id: listing}, ids newest first, index of the current run), or a pointer to
    step 4 and the end of this page's run."""
    from synth_core.runs.jobs import list_runs
    runs = visible_runs(list_runs(runs_root()))
    ready = [r for r in runs if r.get("state") in ("completed", "cancelled") and RunDir(r["path"]).has_model()]
    if not ready:
        training = [r for r in runs if r.get("state") in LIVE_STATES]
        st.info(f"A run is training ({training[0].get('name') or training[0]['id']}): it can be reviewed here once "
                "it ends. Follow it on step 4." if training else "No trained run yet. Train one on step 4.")
        st.page_link("app_pages/train.py", label="Go to step 4", icon=":material/arrow_back:")
        st.stop()
    by_id = {r["id"]: r for r in ready}
    ids = list(by_id)
    run = current_run()
    return by_id, ids, ids.index(run.path.name) if run is not None and run.path.name in by_id else 0
