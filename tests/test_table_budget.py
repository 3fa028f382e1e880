"""A privacy budget per table across runs: every run on a table draws from the total the steward set; a run
that would exceed it is refused; what a run spent is settled however it ends, its folder deleted or not."""
from __future__ import annotations

import contextlib
import io
import json
import shutil
import time
from pathlib import Path

import pytest

from conftest import wait_until
from synth_core.cli import main
from synth_core.demo import demo_schema, demo_table
from synth_core.format import epsilon
from synth_core.home import budgets_path
from synth_core.privacy import BudgetError, PrivacyLedger
from synth_core.privacy.table_budget import TableBudgets, TableCharge, fingerprint
from synth_core.release.privacy_report import privacy_report, report_markdown
from synth_core.runs import RunDir, jobs


def test_a_table_is_recognised_whatever_the_order_of_its_rows_and_columns():
    table = demo_table(300, seed=3)
    same = table.sample(frac=1, random_state=1)[list(reversed(table.columns))]
    assert fingerprint(same) == fingerprint(table)
    changed = table.copy()
    changed.loc[0, "age"] += 1
    assert fingerprint(changed) != fingerprint(table)


def test_runs_draw_from_the_total_and_settle_what_they_spent(tmp_path):
    book = TableBudgets(tmp_path / "budgets.json")
    with pytest.raises(BudgetError, match="no total"):
        book.reserve("t", "run-1", 1.0)
    book.set_total("t", 2.0)
    book.reserve("t", "run-1", 1.5)
    with pytest.raises(BudgetError, match="would exceed the table's budget"):
        book.reserve("t", "run-2", 1.0)  # 1.5 reserved of 2.0
    ledger = PrivacyLedger(1.5, 1e-5, 100)
    ledger.record("x", 0.4, 1e-6)
    TableCharge(book, "t", "run-1").settle(ledger)  # it stopped early: 0.4 spent
    book.reserve("t", "run-2", 1.0)
    account = book.account("t")
    assert account.spent_epsilon == pytest.approx(1.4) and account.remaining_epsilon == pytest.approx(0.6)
    assert book.table_of("run-2") == "t" and book.table_of("run-9") is None
    book.set_total("t", 5.0)  # the steward raises it
    assert book.account("t").remaining_epsilon == pytest.approx(3.6)
    assert oct(book.path.stat().st_mode & 0o777) == "0o600"


def test_the_cli_refuses_a_run_beyond_the_table_budget_until_the_total_is_raised(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    demo_table(300, seed=4).to_csv("t.csv", index=False)
    demo_schema().save("s.json")
    common = ["fit", "--data", "t.csv", "--schema", "s.json", "--preset", "tiny", "--accountant", "rdp"]
    assert main([*common, "--epsilon", "1", "--out", "r1"]) == 0  # a new table: its total is this run's ε
    assert main([*common, "--epsilon", "0.5", "--out", "r2"]) == 2
    assert not (tmp_path / "r2").exists()
    assert main([*common, "--epsilon", "0.5", "--out", "r2", "--table-epsilon", "2"]) == 0
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(["runs", "r2", "--json"]) == 0
    table = json.loads(buf.getvalue())["table"]
    words = io.StringIO()
    with contextlib.redirect_stdout(words):  # for a person: the state, what was spent, each mechanism, the table
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
    book = TableBudgets(worker_root / "budgets.json")
    book.set_total(fingerprint(table), 1.5)
    slow = {"model": "dp-tbart", "preset": "tiny", "epsilon": 1.0, "accountant": "rdp",
            "options": {"epochs": 400, "batch_size": 16}, "seed": 0}
    run = jobs.start_fit_job(worker_root / "runs", table, schema, slow, budgets=book)
    with pytest.raises(BudgetError, match="would exceed"):  # 1.0 of 1.5 is reserved by the first run
        jobs.start_fit_job(worker_root / "runs", table, schema, slow, budgets=book)
    assert len(list((worker_root / "runs").iterdir())) == 1  # the refused run left nothing behind
    wait_until(lambda: len(run.events()) >= 5, "five steps")
    key = str(run.path.resolve())
    for _ in range(5):
        try:
            shutil.rmtree(run.path)
            break
        except OSError:
            time.sleep(0.1)
    wait_until(lambda: book.account(fingerprint(table)).charges[key]["settled"], "the run's charge to settle")
    charge = book.account(fingerprint(table)).charges[key]
    assert 0 < charge["epsilon"] < 1.0 and not run.path.exists()  # the steps it took, counted in memory


def test_the_app_refuses_a_run_beyond_the_table_budget(tmp_path, monkeypatch):
    from streamlit.testing.v1 import AppTest
    monkeypatch.setenv("SYNTH_WORKBENCH_HOME", str(tmp_path / "home"))
    at = AppTest.from_file(str(Path(__file__).resolve().parent.parent / "app.py"), default_timeout=600).run()
    at.switch_page("app_pages/data.py").run()
    at.button(key="use_demo").click().run()
    at.switch_page("app_pages/model.py").run()
    at.number_input(key="table_total").set_value(0.5).run()  # the moderate preset asks ε = 1
    assert not at.exception
    assert "would exceed the table's budget" in " | ".join(str(e.value) for e in at.error)
    assert at.button(key="start_training").disabled
    at.number_input(key="table_total").set_value(3.0).run()
    assert not any("would exceed" in str(e.value) for e in at.error)
