"""Issue 61 item 2: the steward's schema work is kept in the workbench home
(synth_core.schema_work). A reload or a new tab (a fresh AppTest on the same home) restores the last
table and its work; the same table uploaded again, even re-exported, is offered its work back in one
line; starting over gives a fresh draft; a kept file edited by hand is said in one line and ignored.
"""
from __future__ import annotations

import json
import stat

import pytest
from streamlit.testing.v1 import AppTest

from synth_core import schema_work
from synth_core.demo import demo_table
from test_app import APP, RUN_S, new_app, no_exceptions, texts, upload

TABLE = demo_table(300, seed=3)


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("SYNTH_WORKBENCH_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def re_exported() -> bytes:
    """The same table as another export writes it: rows shuffled, columns in another order."""
    shuffled = TABLE.sample(frac=1.0, random_state=7)[list(reversed(TABLE.columns))]
    return shuffled.to_csv(index=False).encode()


def edit_schema(at) -> None:
    """Step 2 as a steward works it: income's role (the draft's target) taken off, hours-per-week
    left out, a rule added, confirmed."""
    at.switch_page("app_pages/schema.py").run()
    at.selectbox(key="detail_column").set_value("income").run()
    form = at.get("form")[0]
    form.selectbox[1].set_value("—")  # the role: none
    form.button[0].click()
    at.run()
    at.selectbox(key="leave_out_column").set_value("hours-per-week").run()
    at.button(key="leave_out").click().run()
    version = at.session_state["schema_version"]
    at.text_input(key=f"rule_new_{version}_—").set_value("age >= 17").run()
    at.button(key=f"rule_add_{version}").click().run()
    at.button(key="confirm_schema").click().run()
    no_exceptions(at)
    assert not at.error, texts(at.error)


def assert_edited(schema) -> None:
    assert schema["income"].role is None and schema.rules == ["age >= 17"]
    assert "hours-per-week" not in schema and schema.excluded["hours-per-week"] == "left out by you"
    assert schema.confirmed and not schema.provenance["warning"]


def kept_files(home) -> list:
    return sorted((home / "schema-work").glob("*.json"))


def test_a_reload_on_step_2_restores_the_table_and_its_schema_work(home):
    at = new_app()
    upload(at, "people.csv", TABLE.to_csv(index=False).encode())
    edit_schema(at)
    [saved] = kept_files(home)
    data = json.loads(saved.read_text())
    # the schema and the table's fingerprint only, owner-only; the upload itself in the home only
    assert set(data) == {"version", "table", "saved", "confirmed_on", "schema", "left_out"}
    assert data["schema"] == at.session_state["schema"].to_dict()
    assert saved.name == f"{data['table']}.json" and stat.S_IMODE(saved.stat().st_mode) == 0o600
    assert all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in (home / "last-table").iterdir())

    reloaded = AppTest.from_file(APP, default_timeout=RUN_S)
    reloaded.switch_page("app_pages/schema.py").run()  # the reload lands on step 2
    no_exceptions(reloaded)
    assert "No data loaded" not in texts(reloaded.sidebar.caption)
    assert "Data: **people.csv**" in texts(reloaded.sidebar.caption)
    assert "Restored people.csv" in texts(reloaded.info)
    assert "the schema you confirmed on" in texts(reloaded.info)
    assert_edited(reloaded.session_state["schema"])
    assert "drafted by reading your private table" not in texts(reloaded.warning)
    # the model page does not warn of an unconfirmed schema
    reloaded.switch_page("app_pages/model.py").run()
    no_exceptions(reloaded)
    assert "not yet confirmed" not in texts(reloaded.sidebar.caption)
    # the column left out comes back as it was, in the restored session too
    reloaded.switch_page("app_pages/schema.py").run()
    reloaded.selectbox(key="bring_back_column").set_value("hours-per-week").run()
    reloaded.button(key="bring_back").click().run()
    no_exceptions(reloaded)
    left_out = at.session_state["left_out_specs"]["hours-per-week"][0]
    assert reloaded.session_state["schema"]["hours-per-week"] == left_out


def test_the_same_table_re_exported_is_offered_its_work_back_or_a_fresh_start(home):
    at = new_app()
    upload(at, "people.csv", TABLE.to_csv(index=False).encode())
    edit_schema(at)

    tab = new_app()  # a new tab; the steward uploads another export of the same table
    upload(tab, "people (2).csv", re_exported())
    no_exceptions(tab)
    draft = tab.session_state["schema"]
    assert draft.provenance["warning"] and draft["income"].role == "target"  # a fresh draft
    [offer] = [b for b in tab.button if b.key == "work_continue"]
    assert offer.label.startswith("Continue with the schema you confirmed on ")
    # step 2 shows the offer too, and looking at it changes nothing
    tab.switch_page("app_pages/schema.py").run()
    no_exceptions(tab)
    assert tab.button(key="work_continue") and tab.session_state["schema"].to_dict() == draft.to_dict()
    tab.button(key="work_continue").click().run()
    no_exceptions(tab)
    restored = tab.session_state["schema"]
    assert_edited(restored)
    # this file's order
    assert restored.names == [c for c in reversed(TABLE.columns) if c in restored]
    assert not [b for b in tab.button if b.key == "work_continue"]

    again = new_app()  # another tab: this time the steward starts over
    upload(again, "people.csv", TABLE.to_csv(index=False).encode())
    again.button(key="work_start_over").click().run()
    no_exceptions(again)
    fresh = again.session_state["schema"]
    assert fresh.provenance["warning"] and fresh["income"].role == "target" and not fresh.rules
    assert "hours-per-week" in fresh and not again.session_state.get("left_out_specs")
    [saved] = kept_files(home)
    # the fresh draft replaced the work
    assert json.loads(saved.read_text())["confirmed_on"] is None

    last = new_app()  # nothing left to offer: the work kept is the draft
    upload(last, "people.csv", TABLE.to_csv(index=False).encode())
    no_exceptions(last)
    assert not [b for b in last.button if b.key in ("work_continue", "work_start_over")]


@pytest.mark.parametrize("edit", [
    lambda text: text[: len(text) // 2],                                       # cut short
    lambda text: text.replace('"role": "sensitive"', '"role": "boss"'),        # a fact it refuses
    lambda text: text.replace('"saved":', '"saved": "yesterday", "x":'),       # fields it lacks
])
@pytest.mark.parametrize("found_by", ["a reload", "an upload"])
def test_a_hand_edited_work_file_is_said_in_one_line_and_ignored(home, edit, found_by):
    at = new_app()
    upload(at, "people.csv", TABLE.to_csv(index=False).encode())
    edit_schema(at)
    [saved] = kept_files(home)
    saved.write_text(edit(saved.read_text()))

    if found_by == "an upload":
        schema_work.forget_table()  # no table kept for a reload: the steward uploads it again
    tab = new_app()
    if found_by == "an upload":
        upload(tab, "people.csv", TABLE.to_csv(index=False).encode())
    no_exceptions(tab)
    [warning] = [w for w in tab.warning if "schema work kept for this table" in str(w.value)]
    assert "cannot be read" in str(warning.value) and "\n" not in str(warning.value)
    assert tab.session_state["schema"].provenance["warning"]  # the fresh draft
    assert not [b for b in tab.button if b.key == "work_continue"]
    schema_work.read_work(json.loads(saved.read_text())["table"])  # replaced by readable work


def test_a_damaged_kept_table_is_said_in_one_line_and_the_app_starts_empty(home):
    at = new_app()
    upload(at, "people.csv", TABLE.to_csv(index=False).encode())
    (home / "last-table" / "table.json").write_text('{"version": 1, "source": "upload", "na')
    tab = new_app()
    no_exceptions(tab)
    assert "No data loaded" in texts(tab.sidebar.caption)
    tab.switch_page("app_pages/data.py").run()
    no_exceptions(tab)
    assert "cannot be read again" in texts(tab.warning) and "No table loaded yet." in texts(tab.info)


def test_the_work_is_found_by_the_table_s_rows_whatever_their_order(home):
    """The core alone: the fingerprint ignores row and column order; work saved is read back; a
    file naming another table is refused."""
    from synth_core.schema import draft_schema
    table = TABLE.copy()
    key = schema_work.fingerprint(table)
    assert schema_work.fingerprint(table.sample(frac=1.0, random_state=1)[sorted(table.columns)]) == key
    assert schema_work.fingerprint(table.iloc[1:]) != key
    schema = draft_schema(table)
    assert schema_work.read_work(key) is None
    schema_work.save_work(key, schema, {"x": (schema["age"], 0)})
    work = schema_work.read_work(key)
    assert work.schema.to_dict() == schema.to_dict() and work.left_out["x"] == (schema["age"], 0)
    assert work.offer().startswith("Continue with the schema you were editing on ")
    schema_work.work_path(key).rename(schema_work.work_path("0" * 32))
    with pytest.raises(schema_work.WorkError, match="another table"):
        schema_work.read_work("0" * 32)


def test_linked_tables_come_back_with_their_link_after_a_reload(home):
    from test_linked import patients
    from test_linked_app import csv_bytes, upload_linked
    tables = patients(40, seed=5)
    at = upload_linked(new_app(), csv_bytes(tables.parents), csv_bytes(tables.children),
                       max_children=5)
    at.switch_page("app_pages/schema.py").run()
    at.button(key="confirm_schema").click().run()
    no_exceptions(at)
    schema = at.session_state["schema"]

    reloaded = AppTest.from_file(APP, default_timeout=RUN_S)
    reloaded.switch_page("app_pages/schema.py").run()
    no_exceptions(reloaded)
    assert reloaded.session_state["schema"].to_dict() == schema.to_dict()
    assert len(reloaded.session_state["table"].parents) == 40
    reloaded.button(key="work_start_over").click().run()  # the link as chosen, its facts drafted
    no_exceptions(reloaded)
    fresh = reloaded.session_state["schema"]
    assert (fresh.key, fresh.max_children, fresh.order) == (schema.key, 5, schema.order)
    assert fresh.provenance["warning"]
