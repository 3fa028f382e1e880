"""Issue 62: a background job on a table too large to hold names its file (`TableFile`) and the
worker reads it a batch at a time into the counting engine: rows kept aside for the review never
train, the run's private files stay owner-only and small, the table's budget is the file's (the
same account as the table read whole), and a failure before training gives the reservation
back."""
from __future__ import annotations

import os

import pandas as pd
import pytest

from conftest import PATIENCE_S, wait_until
from synth_core import api
from synth_core.demo import demo_schema, demo_table
from synth_core.home import budgets_path
from synth_core.privacy.table_budget import TableBudgets
from synth_core.runs import RunDir, jobs
from synth_core.schema import SchemaError, read_table
from synth_core.schema.batches import TableFile

REQUEST = {"model": "aim", "preset": "tiny", "epsilon": 1.0, "table_epsilon": 3.0, "seed": 0}


def _ended(run: RunDir, timeout_s: float = PATIENCE_S) -> dict:
    """The run's final state, once its worker has exited: the table's budget is settled after
    the run's status says how it ended."""
    pid = run.worker_pid()

    def done():
        return jobs.job_state(run)["state"] not in ("created", "running") and _exited(pid)
    try:
        wait_until(done, "the worker", timeout_s)
    except AssertionError:
        raise AssertionError(f"timed out; status {run.status()}; log "
                             f"{run.worker_log.read_text()[-800:]}") from None
    return jobs.job_state(run)


def _exited(pid: int | None) -> bool:
    try:
        os.kill(pid, 0)
        return open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] == "Z"
    except (ProcessLookupError, FileNotFoundError, TypeError):
        return True


# DP-TBART through the engine is in the fast suite (test_engine.py); its job on a file is slow
@pytest.mark.parametrize("model", ["aim", pytest.param("dp-tbart", marks=pytest.mark.slow)])
def test_a_job_on_a_file_reads_it_in_batches_and_keeps_rows_aside(worker_root, model):
    csv = worker_root / "census.csv"
    table = demo_table(1_500)
    table["note"] = "free text the schema leaves out"
    table.to_csv(csv, index=False)
    schema = demo_schema()
    schema.rows = 1_500  # public: the training rows' count follows from it and the coins
    run = jobs.start_fit_job(worker_root / "runs", TableFile(csv, batch_rows=400), schema,
                             {**REQUEST, "model": model, "holdout_share": 0.2,
                              "table_epsilon": None,
                              "options": {"epochs": 0.5} if model == "dp-tbart" else {}})
    assert not run.private_path("train").exists()  # the run names the file; no copy
    request = run.request()
    assert request["source"]["path"] == str(csv.resolve()) and request["left_out"] == ["note"]
    # where the private table lives is the steward's own: not beside the shareable files
    assert "source" not in (run.path / "request.json").read_text()
    state = _ended(run)
    assert state["state"] == "completed", state
    assert "a batch at a time" in run.worker_log.read_text()
    request = run.request()
    train, hold = jobs.read_private(run, "train"), jobs.read_private(run, "holdout")
    # a coin per row: about a fifth aside, none of them trained on
    assert 200 < request["holdout_rows"] == len(hold) < 400
    assert request["rows"] == len(train) == 1_500 - len(hold)
    assert run.ledger().n_rows == request["rows"] and run.ledger().rows_public
    assert list(hold.columns) == schema.names and "note" not in train.columns
    for name in ("train", "holdout"):
        assert oct(os.stat(run.private_path(name)).st_mode & 0o777) == "0o600"
    # the engine's folder goes with the worker, which ends just after the status is written
    wait_until(lambda: not [p for p in run.private_dir.iterdir() if p.is_dir()],
               "the engine's folder to go", PATIENCE_S)
    drawn, _ = api.sample(run.path, 100, seed=1)
    assert len(drawn) == 100


def test_a_job_on_a_file_draws_on_the_same_budget_as_the_table_read_whole(worker_root):
    csv = worker_root / "census.csv"
    demo_table(900).to_csv(csv, index=False)
    schema = demo_schema()
    quick = {**REQUEST, "model": "dp-tbart", "options": {"epochs": 0.3}}  # the family is by the way
    run = jobs.start_fit_job(worker_root / "runs", TableFile(csv, batch_rows=200), schema, quick)
    assert _ended(run)["state"] == "completed"
    book = TableBudgets(budgets_path())
    account = book.identify(read_table(csv, schema), schema).account
    spent = book.account(account).spent_epsilon
    assert 0 < spent <= 1.0 + 1e-9
    whole = jobs.start_fit_job(worker_root / "runs", read_table(csv, schema), schema,
                               {**quick, "epsilon": 0.5, "table_epsilon": None})
    assert _ended(whole)["state"] == "completed"
    assert book.account(account).spent_epsilon == \
        pytest.approx(spent + whole.ledger().spent_epsilon)


def test_a_job_on_a_file_refuses_what_the_engine_cannot_fit_before_anything_is_written(
        worker_root):
    csv = worker_root / "census.csv"
    demo_table(300).to_csv(csv, index=False)
    with pytest.raises(SchemaError, match="reads the rows themselves"):
        jobs.start_fit_job(worker_root / "runs", TableFile(csv), demo_schema(),
                           {**REQUEST, "model": "dp-llmtgen"})
    with pytest.raises(SchemaError, match="one process"):
        jobs.start_fit_job(worker_root / "runs", TableFile(csv), demo_schema(),
                           {**REQUEST, "model": "dp-tbart", "processes": 2})
    assert not (worker_root / "runs").exists() or not any((worker_root / "runs").iterdir())


def test_a_file_job_that_fails_before_training_gives_its_reservation_back(worker_root):
    csv = worker_root / "census.csv"
    demo_table(600).to_csv(csv, index=False)
    schema = demo_schema()
    schema.rows = 599  # not the file's count: refused when the worker has read it
    run = jobs.start_fit_job(worker_root / "runs", TableFile(csv, batch_rows=250), schema, REQUEST)
    state = _ended(run)
    assert state["state"] == "failed" and "declares 599 rows" in state["message"]
    book = TableBudgets(budgets_path())
    account = book.identify(pd.read_csv(csv), schema).account
    assert book.account(account).spent_epsilon == 0
    assert not run.private_path("holdout").exists()


def test_a_file_is_read_once_to_know_which_table_it_is_while_it_is_unchanged(
        tmp_path, monkeypatch):
    """The budget book's identity of a file read a batch at a time (two passes over ten million
    rows: two minutes) is kept while the file is unchanged: the app's pages and the job they start
    do not read it again; a changed file is read again."""
    import synth_core.privacy.table_identity as table_identity
    csv = tmp_path / "census.csv"
    demo_table(500).to_csv(csv, index=False)
    schema, passes = demo_schema(), []
    original = table_identity.read_batches
    monkeypatch.setattr(table_identity, "read_batches",
                        lambda *a, **k: passes.append(1) or original(*a, **k))
    book = TableBudgets(tmp_path / "budgets.json")
    first = book.identify(TableFile(csv, batch_rows=100), schema)
    again = book.identify(TableFile(csv, batch_rows=100), schema)
    assert len(passes) == 2 and first.fingerprint == again.fingerprint
    demo_table(501).to_csv(csv, index=False)
    changed = book.identify(TableFile(csv, batch_rows=100), schema)
    assert len(passes) == 4 and changed.fingerprint != first.fingerprint
