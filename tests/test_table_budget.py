"""A privacy budget per table across runs: every run on a table draws from the total the steward
set; a run that would exceed it is refused; what a run spent is settled however it ends, its folder
deleted or not."""
from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from conftest import wait_until
from synth_core import api
from synth_core.cli import main
from synth_core.demo import demo_schema, demo_table
from synth_core.format import epsilon
from synth_core.home import budgets_path
from synth_core.privacy import BudgetError, PrivacyLedger
from synth_core.privacy.table_budget import BookError, TableBudgets, TableCharge
from synth_core.privacy.table_identity import fingerprint_v1, legacy_fingerprint
from synth_core.release.privacy_report import privacy_report, report_markdown
from synth_core.runs import RunDir, jobs


def test_a_table_is_recognised_whatever_the_order_of_its_rows_and_columns_and_only_with_the_books_key(tmp_path):
    table = demo_table(300, seed=3)
    book = TableBudgets(tmp_path / "budgets.json")
    same = table.sample(frac=1, random_state=1)[list(reversed(table.columns))]
    assert book.table_id(same) == book.table_id(table)
    changed = table.copy()
    changed.loc[0, "age"] += 1
    assert book.table_id(changed) != book.table_id(table)
    # keyed (HMAC): without the book's secret, a stored fingerprint cannot test a guess of a row
    assert book.table_id(table) != fingerprint_v1(table, b"\0" * 32) != legacy_fingerprint(table)
    assert oct(book.key_path.stat().st_mode & 0o777) == "0o600"
    assert TableBudgets(tmp_path / "other" / "budgets.json").table_id(table) != book.table_id(table)
    # a book kept before fingerprints were keyed: the table's account is carried over, not started
    # afresh
    old = TableBudgets(tmp_path / "old" / "budgets.json")
    old.path.parent.mkdir()
    old.path.write_text(json.dumps({legacy_fingerprint(table): {"total_epsilon": 1.0, "charges": {
        "/runs/a": {"epsilon": 0.9, "delta": 1e-6, "settled": True, "time": 0}}}}))
    assert old.account(old.table_id(table)).spent_epsilon == pytest.approx(0.9)
    assert legacy_fingerprint(table) not in json.loads(old.path.read_text())["tables"]


def test_runs_draw_from_the_total_and_settle_what_they_spent(tmp_path):
    book = TableBudgets(tmp_path / "budgets.json")
    with pytest.raises(BudgetError, match="no total"):
        book.reserve("t", "run-1", 1.0)
    book.set_total("t", 2.0)
    first = TableCharge(book, "t")
    first.reserve(1.5)
    with pytest.raises(BudgetError, match="would exceed the table's budget"):
        TableCharge(book, "t").reserve(1.0)  # 1.5 reserved of 2.0
    with pytest.raises(BudgetError, match="never replaced"):
        book.reserve("t", first.key, 0.1)  # a charge's key cannot be reused to lower it
    ledger = PrivacyLedger(1.5, 1e-5, 100)
    ledger.record("x", 0.4, 1e-6)
    first.settle(ledger)  # it stopped early: 0.4 spent
    second = TableCharge(book, "t")
    second.reserve(1.0)
    account = book.account("t")
    assert account.spent_epsilon == pytest.approx(1.4) and account.remaining_epsilon == pytest.approx(0.6)
    assert book.table_of(second.key) == "t" and book.table_of("run-9") is None
    # refused before anything ran: its reservation goes
    second.settle(PrivacyLedger(1.0, 1e-5, 100))
    assert set(book.account("t").charges) == {first.key}
    book.set_total("t", 5.0)  # the steward raises it
    assert book.account("t").remaining_epsilon == pytest.approx(4.6)
    assert oct(book.path.stat().st_mode & 0o777) == "0o600"


BAD_BOOKS = {
    "a list": [],
    "a table without a total": {"t": {"charges": {}}},
    "a total of Infinity": '{"t": {"total_epsilon": Infinity, "charges": {}}}',
    "a total that is text": {"t": {"total_epsilon": "10", "charges": {}}},
    "a negative charge": {"t": {"total_epsilon": 1.0, "charges": {"r": {"epsilon": -5, "delta": 0}}}},
    "a charge without ε": {"t": {"total_epsilon": 1.0, "charges": {"r": {"delta": 0}}}},
    "a charge of NaN": '{"t": {"total_epsilon": 1.0, "charges": {"r": {"epsilon": NaN}}}}',
    "a δ above 1": {"t": {"total_epsilon": 1.0, "charges": {"r": {"epsilon": 0.1, "delta": 3}}}},
    "charges as a list": {"t": {"total_epsilon": 1.0, "charges": [0.5]}},
    "a charge that is a number": {"t": {"total_epsilon": 1.0, "charges": {"r": 0.5}}},
    "an unknown key in a charge": {"t": {"total_epsilon": 1.0, "charges": {"r": {"epsilon": 0.1, "refund": 1}}}},
    "an unknown key in a table": {"t": {"total_epsilon": 1.0, "credit": 5}},
    "settled as text": {"t": {"total_epsilon": 1.0, "charges": {"r": {"epsilon": 0.1, "settled": "yes"}}}},
    "half a file": '{"t": {"total_epsilon": 1.0, "char',
    "not UTF-8": b"\xff\xfe\x00garbage",
}


@pytest.mark.parametrize("what", list(BAD_BOOKS))
def test_a_book_that_is_not_what_the_workbench_writes_is_refused_in_one_line_and_left_as_it_is(tmp_path, what):
    book = TableBudgets(tmp_path / "budgets.json")
    content = BAD_BOOKS[what]
    if isinstance(content, bytes):
        book.path.write_bytes(content)
    else:
        book.path.write_text(content if isinstance(content, str) else json.dumps(content))
    before = book.path.read_bytes()
    for attempt in (lambda: book.account("t"), lambda: book.set_total("t", 1.0),
                    lambda: TableCharge(book, "t").reserve(0.1), lambda: book.table_of("r")):
        with pytest.raises(BookError) as err:
            attempt()
        message = str(err.value)
        assert str(book.path) in message and "repair" in message and "\n" not in message
    assert book.path.read_bytes() == before  # neither reset nor trusted


@pytest.mark.parametrize("what", list(BAD_BOOKS))
def test_every_bad_book_refuses_a_cli_fit_in_one_line_before_anything_is_made(tmp_path, monkeypatch, what):
    monkeypatch.chdir(tmp_path)
    demo_table(100, seed=4).to_csv("t.csv", index=False)
    demo_schema().save("s.json")
    content = BAD_BOOKS[what]
    path = budgets_path()
    path.write_bytes(content) if isinstance(content, bytes) else \
        path.write_text(content if isinstance(content, str) else json.dumps(content))
    before = path.read_bytes()
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        assert main(["fit", "--data", "t.csv", "--schema", "s.json", "--preset", "tiny", "--epsilon", "1",
                     "--out", "r"]) == 2
    assert err.getvalue().startswith("error: ") and "cannot be trusted" in err.getvalue()
    assert err.getvalue().count("\n") == 1 and "Traceback" not in err.getvalue()
    assert not (tmp_path / "r").exists() and path.read_bytes() == before


def test_a_corrupt_book_refuses_a_fit_before_anything_is_spent(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    demo_table(300, seed=4).to_csv("t.csv", index=False)
    demo_schema().save("s.json")
    budgets_path().write_text(json.dumps({"t": {"total_epsilon": float("inf")}}).replace("Infinity", "1e400"))
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        assert main(["fit", "--data", "t.csv", "--schema", "s.json", "--preset", "tiny", "--epsilon", "1",
                     "--out", "r"]) == 2
    assert "cannot be trusted" in err.getvalue() and err.getvalue().count("\n") == 1
    assert not (tmp_path / "r").exists()


def test_the_cli_refuses_a_run_beyond_the_table_budget_until_the_total_is_raised(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    demo_table(300, seed=4).to_csv("t.csv", index=False)
    demo_schema().save("s.json")
    common = ["fit", "--data", "t.csv", "--schema", "s.json", "--preset", "tiny", "--accountant", "rdp"]
    # a new table: its total is this run's ε
    assert main([*common, "--epsilon", "1", "--out", "r1"]) == 0
    assert main([*common, "--epsilon", "0.5", "--out", "r2"]) == 2
    assert not (tmp_path / "r2").exists()
    assert main([*common, "--epsilon", "0.5", "--out", "r2", "--table-epsilon", "2"]) == 0
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(["runs", "r2", "--json"]) == 0
    table = json.loads(buf.getvalue())["table"]
    words = io.StringIO()
    # for a person: the state, what was spent, each mechanism, the table
    with contextlib.redirect_stdout(words):
        assert main(["runs", "r2"]) == 0
    text = words.getvalue()
    assert "completed" in text and "privacy: ε" in text and "Noisy row count" in text
    assert f"this table: ε {epsilon(table['epsilon_spent'])} spent of 2 across 2 runs" in text
    assert table["epsilon_total"] == 2.0 and table["runs"] == 2 and 1.0 < table["epsilon_spent"] <= 1.5  # composed within each run: below the sum
    book = TableBudgets(budgets_path())
    report = privacy_report(RunDir("r2"), budgets=book)
    assert report["table"]["epsilon_spent"] == pytest.approx(table["epsilon_spent"])
    assert "All releases from the same private table together" in report_markdown(report)


def test_jobs_reserve_from_the_table_and_a_deleted_run_is_still_charged(worker_root):
    table, schema = demo_table(400, seed=5), demo_schema()
    book = TableBudgets(budgets_path())
    table_id = book.table_id(table, schema)
    book.set_total(table_id, 1.5)
    slow = {"model": "dp-tbart", "preset": "tiny", "epsilon": 1.0, "accountant": "rdp",
            "options": {"epochs": 400, "batch_size": 16}, "seed": 0}
    run = jobs.start_fit_job(worker_root / "runs", table, schema, slow)
    # 1.0 of 1.5 is reserved by the first run
    with pytest.raises(BudgetError, match="would exceed"):
        jobs.start_fit_job(worker_root / "runs", table, schema, {**slow, "name": "another"})
    # the refused run left nothing behind
    assert len([p for p in (worker_root / "runs").iterdir() if p.is_dir()]) == 1
    wait_until(lambda: len(run.events()) >= 5, "five steps")
    key = book.charge_of(run.path, run.charge()).key
    for _ in range(5):
        try:
            shutil.rmtree(run.path)
            break
        except OSError:
            time.sleep(0.1)
    wait_until(lambda: book.account(table_id).charges[key]["settled"], "the run's charge to settle")
    charge = book.account(table_id).charges[key]
    # the steps it took, counted in memory
    assert 0 < charge["epsilon"] < 1.0 and not run.path.exists()


def test_the_same_request_started_twice_starts_one_run_and_charges_once(worker_root):
    """A double click on "Start training", or the same request from two tabs at once: one run, one
    charge."""
    table, schema = demo_table(400, seed=6), demo_schema()
    book = TableBudgets(budgets_path())
    book.set_total(book.table_id(table, schema), 10.0)
    request = {"model": "dp-tbart", "preset": "tiny", "epsilon": 1.0, "accountant": "rdp",
               "options": {"epochs": 400, "batch_size": 16}, "seed": 0}
    started = []
    threads = [threading.Thread(target=lambda: started.append(
        jobs.start_fit_job(worker_root / "runs", table, schema, dict(request)))) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len({r.path for r in started}) == 1 and len([p for p in (worker_root / "runs").iterdir() if p.is_dir()]) == 1
    assert len(book.account(book.table_id(table, schema)).charges) == 1
    other = jobs.start_fit_job(worker_root / "runs", table, schema, {**request, "name": "second"})
    assert other.path != started[0].path and len(book.account(book.table_id(table, schema)).charges) == 2
    jobs.cancel_job(started[0])
    jobs.cancel_job(other)


def _spent(table) -> tuple[float, float]:
    """(what the book charges the table, what the ledgers of the models trained on it cost)."""
    book = TableBudgets(budgets_path())
    account = book.account(book.table_id(table, demo_schema()))
    return account.spent_epsilon, account.total_epsilon


def test_a_run_refused_into_an_occupied_folder_or_overwritten_never_lowers_the_book(tmp_path, monkeypatch):
    """The audit's sequence: fit into A; fit into A again (refused: A holds a run); fit into C;
    --overwrite C. Before, the refused retry reset A's charge to 0 and two more models trained on a
    budget of 1."""
    monkeypatch.chdir(tmp_path)
    table = demo_table(300, seed=4)
    table.to_csv("t.csv", index=False)
    demo_schema().save("s.json")
    common = ["fit", "--data", "t.csv", "--schema", "s.json", "--preset", "tiny", "--accountant", "rdp",
              "--epsilon", "1"]
    # a total of 1: the retries are refused by the folder or the budget, and none lowers A's charge
    assert main([*common, "--out", "A"]) == 0
    cost_a = RunDir("A").ledger().spent_epsilon
    assert _spent(table) == (pytest.approx(cost_a), 1.0)
    assert main([*common, "--out", "A"]) == 2
    assert main([*common, "--out", "C"]) == 2 and not Path("C").exists()
    assert main([*common, "--out", "A", "--overwrite"]) == 2
    assert RunDir("A").ledger().spent_epsilon == cost_a  # refused before A was touched
    assert _spent(table)[0] == pytest.approx(cost_a)
    # a total of 2: the retry into A passes the budget and is refused by the folder; C trains; C's
    # overwrite would need more than is left
    assert main([*common, "--out", "A", "--table-epsilon", "2"]) == 2
    # the refused retry left no charge and lowered none
    assert _spent(table) == (pytest.approx(cost_a), 2.0)
    assert main([*common, "--out", "C"]) == 0
    cost_c = RunDir("C").ledger().spent_epsilon
    assert _spent(table)[0] == pytest.approx(cost_a + cost_c)
    assert main([*common, "--out", "C", "--overwrite"]) == 2
    assert _spent(table)[0] == pytest.approx(cost_a + cost_c)
    # the steward raises the total: an overwrite is a new run, and the model it replaced stays
    # charged
    assert main([*common, "--out", "C", "--overwrite", "--table-epsilon", "3"]) == 0
    # what the three trained models cost, each charged once
    assert _spent(table)[0] == pytest.approx(cost_a + cost_c + RunDir("C").ledger().spent_epsilon)


CRASH = """
import os, sys
from synth_core.privacy import measurements
real = measurements.measure_marginals
def killed(*args, **kwargs):
    real(*args, **kwargs)
    os._exit(9)  # SIGKILL's effect: no finally, no settle
measurements.measure_marginals = killed
import synth_core.pipeline as pipeline
pipeline.measure_marginals = killed
from synth_core.cli import main
sys.exit(main(sys.argv[1:]))
"""


def test_a_fit_killed_mid_measurement_keeps_its_whole_reservation_through_refused_retries(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    table = demo_table(300, seed=7)
    table.to_csv("t.csv", index=False)
    demo_schema().save("s.json")
    common = ["fit", "--data", "t.csv", "--schema", "s.json", "--preset", "tiny", "--accountant", "rdp",
              "--epsilon", "1", "--model", "dp-tbart", "--calibration-share", "0.3"]
    killed = subprocess.run([sys.executable, "-c", CRASH, *common, "--out", "A"], capture_output=True, text=True,
                            env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])})
    assert killed.returncode == 9, killed.stderr
    # its whole ε stays reserved: the measurement ran, its ledger was never settled
    assert _spent(table) == (1.0, 1.0)
    assert main([*common, "--out", "A"]) == 2  # refused: A holds the killed run
    assert _spent(table)[0] == 1.0
    assert main([*common, "--out", "C"]) == 2 and not Path("C").exists()
    assert _spent(table)[0] == 1.0
    words = io.StringIO()
    # the first reader finds the process dead, its ledger then says so
    with contextlib.redirect_stdout(words):
        assert main(["runs", "A"]) == 0
    assert "run A: failed" in words.getvalue() and "Interrupted before training" in words.getvalue()
    assert "privacy: ε 1 spent of 1" in words.getvalue() and RunDir("A").ledger().spent_epsilon == 1.0
    assert _spent(table)[0] == 1.0


def test_every_entry_point_draws_from_the_tables_budget_unless_the_table_is_declared_public(tmp_path):
    table, schema = demo_table(300, seed=8), demo_schema()
    fitted = api.fit(table, schema, epsilon=1.0, preset="tiny", accountant="rdp", run_dir=tmp_path / "a")
    charged, total = _spent(table)
    assert total == 1.0 and charged == pytest.approx(fitted.ledger.spent_epsilon)
    assert fitted.table_charge.key in TableBudgets(budgets_path()).account(fitted.table_charge.table_id).charges
    # neither the book's path nor the key
    assert fitted.run.charge() == {"run_id": fitted.table_charge.run_id}
    with pytest.raises(BudgetError, match="would exceed"):
        api.fit(table, schema, epsilon=1.0, preset="tiny", accountant="rdp")
    public = api.fit(table, schema, epsilon=1.0, preset="tiny", accountant="rdp", public_table=True,
                     run_dir=tmp_path / "b")
    assert public.table_charge is None and public.run.charge() is None
    assert public.run.public_config()["table_budget"] is False
    assert _spent(table)[0] == pytest.approx(charged)


def test_the_app_refuses_a_run_beyond_the_table_budget(tmp_path, monkeypatch):
    from streamlit.testing.v1 import AppTest
    monkeypatch.setenv("SYNTH_WORKBENCH_HOME", str(tmp_path / "home"))
    at = AppTest.from_file(str(Path(__file__).resolve().parent.parent / "app.py"), default_timeout=600).run()
    at.switch_page("app_pages/data.py").run()
    at.button(key="use_demo").click().run()
    at.switch_page("app_pages/model.py").run()
    assert at.button(key="start_training").disabled  # a table's first run asks for its total first
    assert "Choose this table's total" in " | ".join(str(i.value) for i in at.info)
    at.radio(key="table_total_choice").set_value("Type my own total").run()
    at.text_input(key="table_total").set_value("0.5").run()  # the moderate preset asks ε = 1
    assert not at.exception
    assert "would exceed the table's budget" in " | ".join(str(e.value) for e in at.error)
    assert at.button(key="start_training").disabled
    at.text_input(key="table_total").set_value("3.0").run()
    assert not any("would exceed" in str(e.value) for e in at.error)
    assert not any("all that is left" in str(w.value) for w in at.warning)
    # a first look that would leave nothing: said first
    at.text_input(key="table_total").set_value("1.0").run()
    assert any("would spend all that is left of this table's budget" in str(w.value) for w in at.warning)
    assert not at.button(key="start_training").disabled


def test_a_plan_of_releases_sets_the_total_the_book_holds_runs_to(tmp_path):
    from synth_core.privacy.budget import BudgetError
    from synth_core.privacy.table_budget import Release, TableBudgets, left_after
    book = TableBudgets(tmp_path / "budgets.json")
    plan = [Release("a quick look", 0.1), Release("the release", 1.0), Release("a refresh", 0.5)]
    assert left_after(plan) == pytest.approx([1.5, 0.5, 0.0])
    # against the total the steward chose (issue 61: the planner counted from its own sum): over it,
    # said so
    assert left_after(plan, 1.0) == pytest.approx([0.9, -0.1, -0.6])
    account = book.set_plan("t1", plan)
    assert account.total_epsilon == pytest.approx(1.6) and [r.name for r in account.plan] == ["a quick look",
                                                                                              "the release", "a refresh"]
    book.reserve("t1", "k1", 0.1)
    book.reserve("t1", "k2", 1.0)
    with pytest.raises(BudgetError, match="would exceed the table's budget"):
        book.reserve("t1", "k3", 0.6)  # beyond the plan
    # setting the plan again (a double click) changes nothing; a plan below what the runs spent is
    # refused
    assert book.set_plan("t1", plan).total_epsilon == pytest.approx(1.6)
    with pytest.raises(BudgetError, match="spent ε = 1.1 already"):
        book.set_plan("t1", [Release("a refresh", 0.3)])
    assert book.account("t1").total_epsilon == pytest.approx(1.6)
    for bad, says in [([], "at least one release"), ([Release("", 1.0)], "needs a name"),
                      ([Release("a", 1.0), Release("a", 2.0)], "twice"), ([Release("a", 0.0)], "ε")]:
        with pytest.raises(BudgetError, match=says):
            book.set_plan("t1", bad)
    data = json.loads((tmp_path / "budgets.json").read_text())
    data["tables"]["t1"]["plan"] = [{"name": "x", "epsilon": -1}]  # a hand-edited book
    (tmp_path / "budgets.json").write_text(json.dumps(data))
    with pytest.raises(BudgetError):
        book.account("t1")
