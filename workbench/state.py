"""Where the app keeps things: the steward's table and schema in the session (in memory), runs on
disk, and the schema work and the last table loaded in the workbench home (synth_core.schema_work),
so that a reload, a new tab or the same table uploaded again finds them."""
from __future__ import annotations

import contextlib
import copy
from pathlib import Path

import streamlit as st

from synth_core import home, schema_work
from synth_core.files import OutputError
from synth_core.privacy.budget import BudgetError, parse_epsilon
from synth_core.privacy.table_budget import BookError, TableBudgets, identity_key
from synth_core.schema import SchemaError
from synth_core.schema.batches import TableFile
from synth_core.shape import SINGLE, shape_of
from synth_core.request import FEW_ROWS, MIN_ROWS  # noqa: F401 - the core's rules, for the pages
from synth_core.runs import LIVE_STATES, RunDir, RunError
from workbench.schema_table import fitted_to


# the facts of the columns the steward left out, to bring them back as they were (schema_editor):
# {prefix + name: (ColumnSpec, position)}
LEFT_OUT_SPECS = "left_out_specs"
# the schema work kept in the home (synth_core.schema_work): the session table's fingerprint
# ((id(table), key)), the work kept before offered back, a one-line note on it ((kind, text)), the
# schema the table came with (to start over from), and whether the last table kept was looked for
# (once a session)
WORK_KEY, WORK_OFFER, WORK_NOTE = "work_key", "work_offer", "work_note"
FRESH_SCHEMA, KEPT_LOOKED = "fresh_schema", "kept_looked"


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
    """Which table the session's table is in the budget book (privacy.table_budget.TableIdentity:
    its account, or the known tables it resembles), computed once per table and schema's columns."""
    if table() is None:
        return None
    current = schema()
    stamp = (id(table()), identity_key(table(), current))
    if st.session_state.get("table_identity_of") != stamp:
        whole = table_file()  # a file too large to read whole: read once more (minutes)
        with (st.spinner(f"Reading {whole.path.name} once, a batch at a time, to know which table "
                         "it is in the budget book…") if whole else contextlib.nullcontext()):
            st.session_state["table_identity"] = budgets().identify(whole or table(), current)
        st.session_state["table_identity_of"] = stamp
    return st.session_state["table_identity"]


def table_file():
    """The file the session's table is a sample of, where it is too large to read whole
    (schema.batches.opened: a `TableFile`, what a fit reads a batch at a time); None otherwise."""
    return st.session_state.get("table_file") if table() is not None else None


def table_rows() -> int:
    """How many rows (persons) the session's table holds: the file's, where the table in memory is
    a sample of it (the steward's own count, never released)."""
    current = table()
    if current is None:
        return 0
    return st.session_state.get("table_rows") or len(current)


def forget_table_identity() -> None:
    """The book changed what the session's table is (the steward said it is a known table): ask
    again."""
    st.session_state.pop("table_identity_of", None)


def table_id() -> str | None:
    """The id of the session table's budget: its account's, or its own fingerprint while it has
    none."""
    found = table_identity()
    return found.table_id if found is not None else None


def table_ids() -> set[str]:
    """Every id the session table's runs may carry (its account's and the files attached to it)."""
    mine = table_id()
    return budgets().ids(mine) if mine is not None else set()


def set_dataset(table, name: str, source: str, schema, about: str = "", files=(),
                markers=()) -> None:
    """A new private table (and its schema) replaces the old one; choices that depended on it are
    reset. It is kept in the home for a reload (an upload's `files` [(name, bytes)], read with
    `markers`), and schema work kept for the same table before is offered back."""
    _use_table(table, name, source, schema, about)
    try:
        schema_work.keep_table(source, name, files, markers, shape_of(schema).link(schema))
    except (OSError, OutputError) as e:
        _note("warning", f"This table could not be kept in the workbench home for a reload: {e}")
    _offer_work()


def _use_table(table, name: str, source: str, schema, about: str) -> None:
    """Put a table and its schema in the session (loaded now, or restored from the home)."""
    st.session_state[KEPT_LOOKED] = True  # a table is in: the last one kept is not looked for now
    st.session_state[FRESH_SCHEMA] = copy.deepcopy(schema)
    for key in (WORK_KEY, WORK_OFFER, WORK_NOTE):
        st.session_state.pop(key, None)
    st.session_state["table"] = table
    # a sample of a file too large to read whole (schema.batches.opened): the file, and its count
    attrs = getattr(table, "attrs", {})
    whole = attrs.get("whole_file")
    st.session_state["table_file"] = TableFile(Path(whole)) if whole else None
    st.session_state["table_rows"] = attrs.get("rows")
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
    """The session's private table; in a new session (a reload, a new tab), the last table loaded,
    with its schema work, where the home keeps it."""
    if "table" not in st.session_state and not st.session_state.get(KEPT_LOOKED):
        _restore_kept()
    return st.session_state.get("table")


def schema():
    return st.session_state.get("schema")


def shape():
    """The shape of the session's data (synth_core.shape: one table, or persons and their rows);
    one table when none is loaded."""
    return SINGLE if schema() is None else shape_of(schema())


def set_schema(new_schema, remount_editor: bool = True) -> None:
    """Replace the schema; the schema editor is rebuilt from it unless the change came from that
    editor."""
    st.session_state["schema"] = new_schema
    if remount_editor:
        st.session_state["schema_version"] = st.session_state.get("schema_version", 0) + 1
    st.session_state.pop("estimate", None)
    save_work()


# --- the schema work kept in the home (synth_core.schema_work) -----------------------------------
def _note(kind: str, text: str) -> None:
    st.session_state[WORK_NOTE] = (kind, text)


def _work_key() -> str | None:
    """The session table's fingerprint (schema_work), computed once per table; None without a
    table or where the budget book's key cannot be had (said on every page)."""
    current = st.session_state.get("table")
    if current is None:
        return None
    known = st.session_state.get(WORK_KEY)
    if known is None or known[0] != id(current):
        try:
            known = (id(current), schema_work.fingerprint(table_file() or current))
        except BudgetError:
            return None
        st.session_state[WORK_KEY] = known
    return known[1]


def save_work() -> None:
    """Keep the session's schema work (its schema and the columns left out) as the steward edits.
    An edit made while earlier work is offered back starts over from this table's draft: the offer
    ends."""
    st.session_state.pop(WORK_OFFER, None)
    key = _work_key()
    if key is None or schema() is None:
        return
    try:
        schema_work.save_work(key, schema(), st.session_state.get(LEFT_OUT_SPECS, {}))
    except (OSError, OutputError) as e:
        _note("warning", f"Your schema work could not be kept in the workbench home: {e}")


def _kept_work():
    """The work kept for the session's table, None where there is none; an unreadable file is said
    in one line and ignored (the steward's work replaces it)."""
    key = _work_key()
    try:
        return schema_work.read_work(key) if key else None
    except schema_work.WorkError as e:
        _note("warning", f"The schema work kept for this table in {schema_work.work_path(key)} "
                         f"cannot be read ({e}): it is ignored, and your work on this table "
                         "replaces it.")
        return None


def _offer_work() -> None:
    """Schema work kept before for the table just loaded is offered back (if it differs from its
    draft); otherwise the draft is kept as its work."""
    work = _kept_work()
    try:  # the draft itself, its columns in another file's order, is nothing to offer
        same = work is not None and not work.left_out \
            and fitted_to(table(), copy.deepcopy(work.schema)).to_dict() == schema().to_dict()
    except SchemaError:
        same = False  # offered; said when the steward takes it
    if work is None or same:
        save_work()
    else:
        st.session_state[WORK_OFFER] = work


def _apply(work) -> bool:
    """Use kept work on the session's table (checked against it as an imported schema is)."""
    try:
        fitted = fitted_to(table(), copy.deepcopy(work.schema))
        shape_of(fitted).admit(table(), fitted)
    except SchemaError as e:
        _note("warning", f"The schema work kept for this table does not fit it ({e}): it is "
                         "ignored.")
        return False
    st.session_state[LEFT_OUT_SPECS] = copy.deepcopy(work.left_out)
    set_schema(fitted)
    return True


def restore_work() -> None:
    """The steward continues with the work offered back."""
    work = st.session_state.pop(WORK_OFFER, None)
    if work is not None:
        _apply(work)


def start_over() -> None:
    """The steward starts over from the table's fresh draft (or its declared schema): the work
    kept before is replaced by it."""
    st.session_state.pop(WORK_OFFER, None)
    st.session_state.pop(WORK_NOTE, None)
    st.session_state.pop(LEFT_OUT_SPECS, None)
    if st.session_state.get(FRESH_SCHEMA) is not None:
        set_schema(copy.deepcopy(st.session_state[FRESH_SCHEMA]))


def forget_kept_table() -> None:
    """Delete the copy of the last table loaded from the home: a reload will not find it again."""
    schema_work.forget_table()
    _note("info", "The copy of this table kept in the workbench home was deleted: a reload or a "
                  "new tab will not find it again (your schema work on it is kept).")


def _restore_kept() -> None:
    """A new session (a reload, a new tab): the last table loaded, as the home keeps it, with its
    work."""
    st.session_state[KEPT_LOOKED] = True
    try:
        kept = schema_work.read_table()
        if kept is None:
            return
        loaded_table, fresh, about = kept.load()
    except (schema_work.WorkError, SchemaError, ValueError, OSError) as e:
        schema_work.forget_table()
        _note("warning", f"The table kept from your last session cannot be read again ({e}): "
                         "load it on step 1.")
        return
    _use_table(loaded_table, kept.name, kept.source, fresh, about)
    work = _kept_work()
    restored = work is not None and _apply(work)
    if not restored:
        save_work()
    _, problem = st.session_state.get(WORK_NOTE) or (None, "")  # kept work that was ignored
    said = f"and {work.described()}" if restored else "with a fresh draft"
    _note("restored warning" if problem else "restored",
          f"Restored {kept.name}, loaded on {schema_work.day(kept.loaded)}, {said}. {problem}".strip())


def current_run() -> RunDir | None:
    """The run the steward is looking at: the one chosen in this session, else the newest run of the
    session's table, so the sidebar and every page name the same run. A session with no table and no
    run chosen has none (a fresh tab does not show whichever run another tab started last)."""
    path = st.session_state.get("run_path")
    if path and table() is not None and not st.session_state.get("all_tables") \
            and _table_of(path) not in (None, *table_ids()):
        path = None  # another table's run, chosen before this table was loaded: not the one in use
    if not path:
        from synth_core.runs.jobs import list_runs
        mine = table_ids()
        if not mine:
            return None
        runs = [r for r in list_runs(runs_root()) if r.get("state") != "unreadable"
                and r.get("table") in mine]
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


def any_runs() -> bool:
    """Whether the workbench home holds a run of any table."""
    root = runs_root()
    return root.is_dir() and any(RunDir(p).exists() for p in root.iterdir() if p.is_dir())


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


# a table's total across its runs, asked before its first run: room for about three runs at the ε of
# the same harm level above
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
    """(the ε typed in the text box `key`, None) or (None, the one message that says what to
    type)."""
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
    """Runs with a trained model ({id: listing}, ids newest first, index of the current run), or a
    pointer to step 4 and the end of this page's run."""
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


# the widgets of steps 3 (model) and 6 (generate) whose values outlive a visit to another page:
# Streamlit forgets a widget's value at the end of a run that does not draw it, unless the value is
# set again in every run (the entry point, app.py, is to call keep_widget_values before page.run).
# Not kept: run pickers (they follow the current run), the table's total (asked of each table),
# buttons and uploaders (Streamlit refuses it), a family's own choices ({option}_choice: named by
# the family).
KEPT_WIDGETS = ("family", "more_family", "harm", "epsilon_custom", "holdout_share", "delta",
                "bounds_epsilon", "values_epsilon", "calibrate", "size", "preset", "accountant",
                "seed", "run_name", "processes", "family_options", "device_choice", "rows",
                "fixed_columns", "use_fairness", "sensitive", "target", "positive", "target_gap",
                "min_group_rows")
KEPT_WIDGET_PREFIXES = ("cond_", "calibration_share_", "quantile_share_")


def keep_widget_values() -> None:
    """Set the kept widgets' values again, so that leaving their page does not reset them (a value
    a page no longer offers falls back to its default there)."""
    for key in list(st.session_state.keys()):
        if key in KEPT_WIDGETS or key.startswith(KEPT_WIDGET_PREFIXES):
            st.session_state[key] = st.session_state[key]
