"""Issue 58 items 1-3: the budget book holds against copies, edits and re-exports. The total the
book holds is never less than what the trained models' ledgers sum to: a charge belongs to its run
folder (a copy, a move or an edited charge.json settles nothing), one table is one budget however
its file is written, and a book that lost its key or its content is refused in one line, never
reset."""
from __future__ import annotations

import contextlib
import io
import json
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest

from conftest import wait_until
from synth_core import api
from synth_core.cli import main
from synth_core.demo import demo_schema, demo_table
from synth_core.home import budgets_path, home
from synth_core.privacy import BudgetError
from synth_core.privacy.table_budget import BookError, NotThisRun, SameTable, TableBudgets
from synth_core.runs import RunDir, jobs

FIT = dict(preset="tiny", accountant="rdp", review_rows=0)


def _book() -> TableBudgets:
    return TableBudgets(budgets_path())


def _spent(table, schema=None) -> float:
    book = _book()
    return book.account(book.table_id(table, schema or demo_schema())).spent_epsilon


def _cli(*argv) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


def _ended() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def _as_if_its_process_died(run: RunDir) -> None:
    """The state a folder copied mid-training is in once the run it copies ends: 'running', and the
    process it names gone."""
    run.set_status("running", "training")
    run.write_worker(_ended())


# --- item 1: a charge belongs to its run ------------------------------------------------------------
def test_a_folder_copied_while_its_run_trains_never_lowers_the_book(worker_root):
    """The audit's sequence: a fit of ε 1 on a total of 1.5; the steward copies the run folder while
    it trains; the run ends; `runs COPY` finds the copy's process gone. Before, it settled the
    original's charge down to the copy's partial ledger (0.13), and the next fit of ε 1 was
    admitted."""
    table, schema = demo_table(400, seed=21), demo_schema()
    book = _book()
    table_id = book.account_for(book.identify(table, schema), 1.0, total=1.5)
    run_for_a_while = {"model": "dp-tbart", "preset": "tiny", "epsilon": 1.0, "accountant": "rdp",
                       "options": {"epochs": 6, "batch_size": 16}, "seed": 0, "review_rows": 0}
    run = jobs.start_fit_job(worker_root / "runs", table, schema, run_for_a_while)
    wait_until(lambda: len(run.events()) >= 3, "three steps")
    copy = RunDir(worker_root / "copy")
    shutil.copytree(run.path, copy.path, ignore=shutil.ignore_patterns("*.tmp*"))
    wait_until(lambda: jobs.job_state(run)["state"] not in ("created", "running"), "the run to end")
    wait_until(lambda: not jobs._worker_alive(run), "its process to exit")
    spent = run.ledger().spent_epsilon
    assert run.status()["state"] == "completed" and spent > 0.6  # composed with the count: below 1
    assert book.account(table_id).spent_epsilon == pytest.approx(spent)
    code, out, _ = _cli("runs", str(copy.path))
    assert code == 0 and "is a copy" in out and str(run.path.resolve()) in out
    # its partial ledger
    assert copy.status()["state"] == "failed" and copy.ledger().spent_epsilon < spent
    # the original's charge, untouched
    assert book.account(table_id).spent_epsilon == pytest.approx(spent)
    with pytest.raises(BudgetError, match="would exceed"):  # what is left, whatever the copy says
        api.fit(table, schema, epsilon=1.5 - spent + 0.05, **FIT)


def test_an_edited_charge_never_settles_another_runs_charge(tmp_path):
    """A charge.json edited to name another run's charge (5.24 ε on a total of 4 in the audit)."""
    table, schema = demo_table(300, seed=22), demo_schema()
    a = api.fit(table, schema, epsilon=1.0, table_epsilon=4.0, run_dir=tmp_path / "a", **FIT)
    b = api.fit(table, schema, epsilon=1.0, run_dir=tmp_path / "b", **FIT)
    before = _spent(table)
    # b now names a's charge
    (tmp_path / "b" / "charge.json").write_text(json.dumps(a.run.charge()))
    ledger = b.run.ledger()
    ledger.entries = ledger.entries[:1]  # and its ledger says it spent almost nothing
    b.run.write_ledger(ledger)
    _as_if_its_process_died(b.run)
    code, out, _ = _cli("runs", str(b.run.path))
    assert code == 0 and "is a copy (or a move)" in out
    assert _spent(table) == pytest.approx(before)
    # a run id no charge in the book has: nothing settles, nothing is created
    (tmp_path / "b" / "charge.json").write_text(json.dumps({"run_id": "0" * 16}))
    _as_if_its_process_died(b.run)
    assert _cli("runs", str(b.run.path))[0] == 0 and _spent(table) == pytest.approx(before)


def test_a_moved_run_folder_is_recognised_and_settles_nothing(tmp_path):
    table, schema = demo_table(300, seed=23), demo_schema()
    a = api.fit(table, schema, epsilon=1.0, run_dir=tmp_path / "a", **FIT)
    before = _spent(table)
    moved = tmp_path / "elsewhere"
    shutil.move(a.run.path, moved)
    with pytest.raises(NotThisRun, match="is a copy"):
        _book().charge_of(moved, RunDir(moved).charge())
    code, out, _ = _cli("runs", str(moved))  # a finished run: it says so too
    assert code == 0 and "note: the run folder" in out and "is a copy (or a move)" in out
    _as_if_its_process_died(RunDir(moved))
    assert _cli("runs", str(moved))[0] == 0 and _spent(table) == pytest.approx(before)
    # a folder put in the original's place (same path, another folder) is no more the run
    shutil.copytree(moved, tmp_path / "a")
    with pytest.raises(NotThisRun):
        _book().charge_of(tmp_path / "a", RunDir(tmp_path / "a").charge())


def test_a_run_folder_keeps_neither_the_books_path_nor_its_keys(tmp_path):
    table, schema = demo_table(300, seed=24), demo_schema()
    fitted = api.fit(table, schema, epsilon=1.0, run_dir=tmp_path / "a", **FIT)
    key = _book().key_path.read_text().strip()
    charge_key = fitted.table_charge.key
    for path in fitted.run.path.rglob("*"):
        if path.is_file():
            text = path.read_bytes().decode("utf-8", "replace")
            assert str(home()) not in text and key not in text and charge_key not in text, path
    assert fitted.run.charge() == {"run_id": fitted.table_charge.run_id}


def test_a_charge_file_of_an_older_run_never_makes_the_cli_write_where_it_points(tmp_path):
    """charge.json held the book's path in clear; a listing followed it and made folders and a lock
    there."""
    table, schema = demo_table(300, seed=25), demo_schema()
    fitted = api.fit(table, schema, epsilon=1.0, run_dir=tmp_path / "a", **FIT)
    elsewhere = tmp_path / "not-the-home" / "deep" / "budgets.json"
    (tmp_path / "a" / "charge.json").write_text(json.dumps(
        {"book": str(elsewhere), "table": fitted.table_charge.table_id, "key": fitted.table_charge.key}))
    _as_if_its_process_died(fitted.run)
    before = _spent(table)
    assert _cli("runs", str(fitted.run.path))[0] == 0
    assert not (tmp_path / "not-the-home").exists()
    assert _spent(table) == pytest.approx(before)  # a settled charge is never lowered again


def test_a_settled_charge_is_never_lowered_again(tmp_path):
    book = TableBudgets(tmp_path / "budgets.json")
    book.set_total("t", 2.0)
    book.reserve("t", "k", 1.0)
    book.settle("t", "k", 0.8, 1e-6)
    book.settle("t", "k", 0.1, 0.0)  # a replay with an edited ledger
    book.settle("t", "k", 0.0, 0.0)  # a release
    assert book.account("t").charges["k"]["epsilon"] == pytest.approx(0.8)


def test_the_book_reads_back_every_change_with_the_runs_that_made_them(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    table, schema = demo_table(300, seed=26), demo_schema()
    table.to_csv("t.csv", index=False)
    schema.save("s.json")
    common = ["fit", "--data", "t.csv", "--schema", "s.json", "--preset", "tiny", "--accountant", "rdp"]
    assert _cli(*common, "--epsilon", "0.5", "--table-epsilon", "2", "--out", "r1")[0] == 0
    assert _cli(*common, "--epsilon", "0.5", "--out", "r2")[0] == 0
    code, out, _ = _cli("runs", "--book")
    assert code == 0 and "t.csv: ε" in out and "of 2" in out and "2 runs" in out
    assert str((tmp_path / "r1").resolve()) in out and str((tmp_path / "r2").resolve()) in out
    shutil.rmtree("r2")
    assert "(the folder is gone)" in _cli("runs", "--book")[1]
    data = json.loads(_cli("runs", "--book", "--json")[1])
    (only,) = data["tables"]
    assert only["name"] == "t.csv" and len(only["charges"]) == 2 and all(c["settled"] for c in only["charges"])
    kinds = [line["change"] for line in _book().journal()]
    assert kinds.count("reserve") == 2 and kinds.count("settle") == 2 and kinds.count("bind") == 2
    assert "total" in kinds and "label" in kinds


# --- item 2: one table, however it is written --------------------------------------------------------
def _variants(table: pd.DataFrame) -> dict[str, pd.DataFrame]:
    extra = table.assign(comment="ignored by the schema")
    decimals = table.astype({"age": float})
    spaced = table.assign(sex=table["sex"].astype(str) + " ")
    text = table.astype(str)
    shuffled = table.sample(frac=1, random_state=3)[list(reversed(table.columns))]
    na = table.copy()
    return {"an extra column": extra, "40 written 40.0": decimals, "a trailing space": spaced,
            "every cell as text": text, "rows and columns reordered": shuffled, "the same": na}


@pytest.mark.parametrize("what", list(_variants(demo_table(10))))
def test_a_re_exported_table_is_the_same_table(what, tmp_path):
    table, schema = demo_table(300, seed=27), demo_schema()
    book = TableBudgets(tmp_path / "budgets.json")
    table_id = book.account_for(book.identify(table, schema), 1.0)
    again = book.identify(_variants(table)[what], schema)
    assert again.account == table_id and again.table_id == table_id


def test_missing_markers_are_one_missing_value(tmp_path):
    table = pd.DataFrame({"a": ["x", "N/A", "", None, "y"] * 4, "b": [1.0, None, 3.0, 4.0, 5.0] * 4})
    variants = [table.replace({"N/A": None}), table.replace({"": "NA"}), table.astype(object).fillna("?")]
    book = TableBudgets(tmp_path / "budgets.json")
    first = book.identify(table).fingerprint
    assert all(book.identify(v).fingerprint == first for v in variants)


def test_re_exports_through_the_api_share_one_budget(tmp_path):
    """Four exports of one table, each with its own total before: 4 × ~1 ε on a total of 1."""
    table, schema = demo_table(300, seed=28), demo_schema()
    api.fit(table, schema, epsilon=0.6, table_epsilon=1.0, **FIT)
    for what, variant in _variants(table).items():
        with pytest.raises(BudgetError, match="would exceed"):
            api.fit(variant, schema, epsilon=0.6, **FIT)
    assert len(_book().accounts()) == 1


def test_a_table_sharing_most_rows_with_a_known_one_is_asked_about(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    table, schema = demo_table(400, seed=29), demo_schema()
    table.to_csv("t.csv", index=False)
    schema.save("s.json")
    table.iloc[:380].to_csv("fewer.csv", index=False)  # a few rows removed
    table.drop(columns=["job"]).to_csv("no-job.csv", index=False)  # a column dropped
    pd.concat([table, demo_table(20, seed=30)]).to_csv("more.csv", index=False)
    common = ["--schema", "s.json", "--preset", "tiny", "--accountant", "rdp", "--epsilon", "0.5"]
    assert _cli("fit", "--data", "t.csv", *common, "--table-epsilon", "1.2", "--out", "r1")[0] == 0
    schema_without_job = schema.to_dict()
    schema_without_job["columns"] = [c for c in schema_without_job["columns"] if c["name"] != "job"]
    Path("s2.json").write_text(json.dumps(schema_without_job))
    for data, schema_file in [("fewer.csv", "s.json"), ("more.csv", "s.json"), ("no-job.csv", "s2.json")]:
        code, _, err = _cli("fit", "--data", data, *common[2:], "--schema", schema_file, "--out", "x")
        assert code == 2 and err.count("\n") == 1 and "shares about" in err and "--table t.csv" in err, err
        assert "--new-table" in err and not Path("x").exists()
    # the steward says it is that table: its runs count on that budget (0.5 + 0.5 of 1.2; a third is
    # refused)
    assert _cli("fit", "--data", "fewer.csv", *common, "--table", "t.csv", "--out", "r2")[0] == 0
    # now known: over the total
    assert _cli("fit", "--data", "fewer.csv", *common, "--out", "r3")[0] == 2
    assert len(_book().accounts()) == 1
    # or another table: a budget of its own
    assert _cli("fit", "--data", "more.csv", *common, "--new-table", "--out", "r4")[0] == 0
    assert len(_book().accounts()) == 2
    with pytest.raises(SameTable):
        book = _book()
        book.account_for(book.identify(table.iloc[:390], schema), 0.1)


def test_a_named_table_takes_a_new_file_and_names_are_checked(tmp_path):
    table, schema = demo_table(300, seed=31), demo_schema()
    book = TableBudgets(tmp_path / "budgets.json")
    first = book.account_for(book.identify(table, schema), 1.0, name="survey 2024")
    unrelated = demo_table(300, seed=99)
    assert book.account_for(book.identify(unrelated, schema), 1.0, name="survey 2024") == first
    assert book.identify(unrelated, schema).account == first  # attached: the next time it is known
    other = book.account_for(book.identify(demo_table(300, seed=98), schema), 1.0, new_table=True)
    with pytest.raises(BudgetError, match="another table in the budget book is named"):
        book.name(other, "survey 2024")
    for bad in ["", " ", "x" * 101, "two\nlines"]:
        with pytest.raises(BudgetError, match="1 to 100 characters"):
            book.name(other, bad)
    with pytest.raises(BudgetError, match="not 'survey 2024'"):
        book.account_for(book.identify(demo_table(300, seed=98), schema), 1.0, name="survey 2024")


def test_linked_tables_are_one_table_however_written(tmp_path):
    from synth_core.demo import pbcseq_schema, pbcseq_tables
    from synth_core.schema.linked import LinkedTables
    tables, schema = pbcseq_tables(), pbcseq_schema()
    book = TableBudgets(tmp_path / "budgets.json")
    table_id = book.account_for(book.identify(tables, schema), 1.0)
    again = LinkedTables(tables.parents.sample(frac=1, random_state=1).assign(note="x"),
                         tables.children.astype(str))
    assert book.identify(again, schema).account == table_id
    fewer = LinkedTables(tables.parents, tables.children.iloc[: int(len(tables.children) * 0.95)])
    assert book.identify(fewer, schema).resembles[0].table_id == table_id


# --- item 3: a damaged book is refused, never reset ---------------------------------------------------
def _one_run(tmp_path) -> tuple[pd.DataFrame, float]:
    table, schema = demo_table(300, seed=32), demo_schema()
    fitted = api.fit(table, schema, epsilon=1.0, table_epsilon=1.5, run_dir=tmp_path / "a", **FIT)
    return table, fitted.ledger.spent_epsilon


def _refused(table, words: str) -> str:
    with pytest.raises(BookError) as err:
        api.fit(table, demo_schema(), epsilon=0.1, **FIT)
    message = str(err.value)
    assert "\n" not in message and words in message and "cannot be trusted" in message, message
    return message


def test_a_deleted_key_is_a_damaged_book(tmp_path):
    table, _ = _one_run(tmp_path)
    key = _book().key_path
    saved = key.read_bytes()
    key.unlink()
    assert "restore" in _refused(table, "key .budgets.key is missing") and not key.exists()
    code, _, err = _cli("runs", "--book")
    assert code == 2 and "key .budgets.key is missing" in err
    key.write_bytes(saved)  # restored from a backup: everything as it was
    assert _spent(table) > 0


def test_a_replaced_key_is_a_damaged_book(tmp_path):
    table, spent = _one_run(tmp_path)
    _book().key_path.write_text("ab" * 32)  # well formed, but another
    _refused(table, "was replaced by another")


@pytest.mark.parametrize("how", ["deleted", "emptied", "an empty object", "no tables"])
def test_a_book_lost_while_runs_charged_it_is_refused_and_rebuilt_from_its_journal(tmp_path, how):
    table, spent = _one_run(tmp_path)
    path = budgets_path()
    content = {"deleted": None, "emptied": "", "an empty object": "{}",
               "no tables": '{"version": 2, "key_check": "", "tables": {}}'}[how]
    path.unlink() if content is None else path.write_text(content)
    message = _refused(table, "journal budgets.journal records")
    assert "--rebuild-book" in message
    code, out, _ = _cli("runs", "--rebuild-book")
    assert code == 0 and "rebuilt" in out and "1 table(s)" in out
    assert _spent(table) == pytest.approx(spent)
    with pytest.raises(BudgetError, match="would exceed"):
        api.fit(table, demo_schema(), epsilon=1.0, **FIT)


def test_a_book_and_journal_lost_while_run_folders_charged_them_is_refused(tmp_path):
    table, _ = _one_run(tmp_path)
    run = RunDir(home() / "runs" / "a")
    # a run in the home's runs/ folder, as the app makes them
    shutil.copytree(tmp_path / "a", run.path)
    budgets_path().unlink()
    _book().file.journal_path.unlink()
    _refused(table, "1 run folder(s)")


def test_a_journal_that_does_not_replay_is_refused(tmp_path):
    _one_run(tmp_path)
    _book().file.journal_path.write_text('{"change": "settle", "table": "nowhere", "charge": "k"}\nnot json\n')
    budgets_path().write_text("")
    code, _, err = _cli("runs", "--rebuild-book")
    assert code == 2 and err.count("\n") == 1 and "line 2" in err


def test_the_model_page_asks_whether_a_resembling_upload_is_a_known_table(tmp_path, monkeypatch):
    from streamlit.testing.v1 import AppTest
    monkeypatch.setenv("SYNTH_WORKBENCH_HOME", str(tmp_path / "home"))
    table, schema = demo_table(400, seed=33), demo_schema()
    book = _book()
    known = book.account_for(book.identify(table, schema), 0.5, total=3.0, name="survey 2024")
    upload = table.iloc[:385].to_csv(index=False).encode()  # a few rows removed
    at = AppTest.from_file(str(Path(__file__).resolve().parent.parent / "app.py"), default_timeout=600).run()
    at.switch_page("app_pages/data.py").run()
    at.file_uploader(key="upload").set_value(("survey-v2.csv", upload, "text/csv")).run()
    at.switch_page("app_pages/model.py").run()
    assert not at.exception, [e.value for e in at.exception]
    question = at.radio(key="same_table")
    assert "survey 2024" in question.label and at.button(key="start_training").disabled
    at.radio(key="same_table").set_value(question.options[0]).run()
    assert not at.exception, [e.value for e in at.exception]
    # answered: the page now shows its budget
    assert not [r for r in at.radio if r.key == "same_table"]
    assert book.identify(table.iloc[:385], at.session_state["schema"]).account == known
    assert any("of 3 remains" in str(c.value) for c in at.caption)


def test_every_page_says_a_damaged_book_needs_repair_in_one_line(tmp_path, monkeypatch):
    from streamlit.testing.v1 import AppTest
    monkeypatch.setenv("SYNTH_WORKBENCH_HOME", str(tmp_path / "home"))
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "budgets.json").write_text("{ not json")
    at = AppTest.from_file(str(Path(__file__).resolve().parent.parent / "app.py"), default_timeout=600).run()
    at.switch_page("app_pages/data.py").run()
    at.button(key="use_demo").click().run()  # step 1 still loads a table
    for page in ("schema", "model", "train", "review", "generate"):
        at.switch_page(f"app_pages/{page}.py").run()
        assert not at.exception, (page, [e.value for e in at.exception])
        (error,) = [str(e.value) for e in at.error]
        assert error.startswith("The privacy budget book needs repair") and "\n" not in error
    assert (tmp_path / "home" / "budgets.json").read_text() == "{ not json"


def test_the_model_page_attaches_a_new_file_to_a_table_the_steward_names(tmp_path, monkeypatch):
    """A re-export changed beyond recognition (every row differs): the steward says which table it
    is."""
    from streamlit.testing.v1 import AppTest
    monkeypatch.setenv("SYNTH_WORKBENCH_HOME", str(tmp_path / "home"))
    table, schema = demo_table(400, seed=34), demo_schema()
    book = _book()
    known = book.account_for(book.identify(table, schema), 0.5, total=2.0, name="clinic 2023")
    changed = table.assign(age=table["age"] + 1, **{"hours-per-week": table["hours-per-week"] + 1})
    at = AppTest.from_file(str(Path(__file__).resolve().parent.parent / "app.py"), default_timeout=600).run()
    at.switch_page("app_pages/data.py").run()
    at.file_uploader(key="upload").set_value(("clinic-2024.csv", changed.to_csv(index=False).encode(),
                                               "text/csv")).run()
    at.switch_page("app_pages/model.py").run()
    assert not at.exception and at.button(key="attach_file").disabled
    at.selectbox(key="attach_table").set_value(known).run()
    at.button(key="attach_file").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert book.identify(changed, at.session_state["schema"]).account == known
    assert any("of 2 remains" in str(c.value) for c in at.caption)
