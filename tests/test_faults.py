"""Honest records after any fault (issue 40 item 3): an exception, a full disk, Ctrl-C or SIGKILL in
any phase of a fit (the count, the bounds, the quantiles, the marginals, planning, training, saving,
the review sample) leaves a run whose status is failed or cancelled, whose ledger lists every
mechanism that ran, no temporary file, a table budget charged at least what the ledger says, and a
folder `--overwrite` can reuse."""
from __future__ import annotations

import errno
import os
import subprocess
import sys
from pathlib import Path

import pytest

from synth_core import api, pipeline
from synth_core.demo import demo_schema, demo_table
from synth_core.home import budgets_path
from synth_core.models import get_model_class
from synth_core.privacy.ledger import BOUNDS, COUNT, MARGINALS, QUANTILES, TRAINED, UNFINISHED
from synth_core.privacy.table_budget import TableBudgets
from synth_core.runs import RunDir, jobs

ROOT = Path(__file__).resolve().parents[1]
EPSILON = 3.0


def _table_and_schema():
    """300 demo rows; hours-per-week without public bounds, so that DP bounds run too."""
    schema = demo_schema()
    hours = schema["hours-per-week"]
    hours.lower = hours.upper = None
    return demo_table(300, seed=11), schema


# every phase, what ran by its end (the kinds a ledger must list), and how a fault is injected there
MECHANISMS_BEFORE = {"count": [COUNT], "bounds": [COUNT, BOUNDS], "quantiles": [COUNT, BOUNDS, QUANTILES],
                     "marginals": [COUNT, BOUNDS, QUANTILES, MARGINALS]}
PHASES = ["count", "bounds", "quantiles", "marginals", "planning", "training", "saving", "review sample"]


def _inject(monkeypatch, phase: str, fault):
    """Make `phase` end in `fault()` (raised after a mechanism has run, before anything else)."""
    def after(real):
        def wrapped(*args, **kwargs):
            real(*args, **kwargs)
            fault()
        return wrapped

    def instead(*args, **kwargs):
        fault()

    if phase in ("count", "bounds", "quantiles", "marginals"):
        name = {"count": "noisy_count", "bounds": "estimate_missing_bounds", "quantiles": "measure_quantiles",
                "marginals": "measure_marginals"}[phase]
        # the stage that pays before training
        monkeypatch.setattr(pipeline, name, after(getattr(pipeline, name)))
    elif phase == "planning":
        monkeypatch.setattr(get_model_class("dp-tbart"), "plan_privacy", instead)
    elif phase in ("saving", "disk full"):
        monkeypatch.setattr(RunDir, "save_model", instead)
    elif phase == "review sample":
        monkeypatch.setattr(RunDir, "write_sample", instead)
    return (lambda e: fault() if e["step"] == 3 else None) if phase == "training" else None


def _fit(run_dir, on_event=None, overwrite=False, **extra):
    table, schema = _table_and_schema()
    return api.fit(table, schema, model="dp-tbart", epsilon=EPSILON, preset="tiny", accountant="rdp",
                   run_dir=run_dir, bounds_epsilon=0.2, calibration_share=0.3, quantile_share=0.2, review_rows=20,
                   on_event=on_event, overwrite=overwrite, table_epsilon=100.0, **extra)


def _charged(run: RunDir) -> float:
    book = TableBudgets(budgets_path())
    charge = book.charge_of(run.path, run.charge())
    return book.account(charge.table_id).charges[charge.key]["epsilon"]


def _disk_full():
    raise OSError(errno.ENOSPC, "No space left on device")


def _boom():
    raise RuntimeError("boom")


def _interrupt():
    raise KeyboardInterrupt


FAULTS = {"exception": (_boom, RuntimeError, "failed"), "disk full": (_disk_full, OSError, "failed"),
          "ctrl-c": (_interrupt, KeyboardInterrupt, "cancelled")}


def _check_honest(run: RunDir, phase: str, states: tuple) -> None:
    status = run.status()
    assert status["state"] in states, status
    ledger = run.ledger()
    kinds = [e.kind for e in ledger.entries]
    for kind in MECHANISMS_BEFORE.get(phase, MECHANISMS_BEFORE["marginals"]):
        assert kind in kinds, (phase, kinds)
    if phase in ("training", "saving", "review sample"):
        assert ledger.has_training(), kinds
    assert ledger.spent_epsilon <= EPSILON * 1.0001
    # the book charges at least what the ledger says
    assert _charged(run) >= ledger.spent_epsilon - 1e-9
    assert not [p for p in run.path.rglob("*") if ".tmp" in p.name], list(run.path.rglob("*"))
    (count,) = [e for e in ledger.entries if e.kind == COUNT]
    assert ledger.n_rows == count.details["count"]  # the released count, never the exact one


# an exception and a full disk in every phase; Ctrl-C in one phase before training and one after. A
# full disk before training takes the path an exception takes (the same handler): those in the slow
# suite
MATRIX = [pytest.param(p, f, marks=pytest.mark.slow) if f == "disk full" and p not in ("training", "saving")
          else (p, f) for p in PHASES for f in ("exception", "disk full")] + [("marginals", "ctrl-c"),
                                                                               ("saving", "ctrl-c")]


@pytest.mark.parametrize("phase, fault", MATRIX)
def test_a_fault_in_any_phase_leaves_an_honest_run_that_can_be_overwritten(phase, fault, tmp_path, monkeypatch):
    raise_it, error, state = FAULTS[fault]
    with monkeypatch.context() as patch:
        on_event = _inject(patch, phase, raise_it)
        with pytest.raises(error):
            _fit(tmp_path / "run", on_event=on_event)
    run = RunDir(tmp_path / "run")
    _check_honest(run, phase, (state,))
    again = _fit(tmp_path / "run", overwrite=True)  # the folder is reusable at once
    assert again.run.status()["state"] == "completed" and again.run.has_model()


KILLED = """
import os, sys
sys.path.insert(0, {root!r})
from synth_core import api, pipeline
from synth_core.runs import RunDir
phase = sys.argv[1]
def die(*args, **kwargs):
    os._exit(9)  # as SIGKILL: no handler, no finally
if phase == "marginals":
    real = pipeline.measure_marginals
    pipeline.measure_marginals = lambda *a, **k: (real(*a, **k), die())
elif phase == "saving":
    RunDir.save_model = die
elif phase == "disk full":  # from saving on, no write succeeds: the process cannot record how it ended
    real_save = RunDir.save_model
    def full(*args):
        raise OSError(28, "No space left on device")
    def save(self, model):
        os.fsync = full
        real_save(self, model)
    RunDir.save_model = save
sys.path.insert(0, {tests!r})
from test_faults import _fit
_fit({run!r}, on_event=(lambda e: die() if e["step"] == 3 else None) if phase == "training" else None)
"""


@pytest.mark.parametrize("phase", [pytest.param("marginals", marks=pytest.mark.slow), "training",
                                   pytest.param("saving", marks=pytest.mark.slow), "disk full"])
def test_a_process_killed_in_any_phase_is_found_dead_charged_and_its_folder_reusable(phase, tmp_path):
    script = KILLED.format(root=str(ROOT), tests=str(ROOT / "tests"), run=str(tmp_path / "run"))
    done = subprocess.run([sys.executable, "-c", script, phase], capture_output=True, text=True, env=os.environ)
    assert done.returncode == (1 if phase == "disk full" else 9), done.stderr
    if phase == "disk full":
        assert "No space left on device" in done.stderr
    run = RunDir(tmp_path / "run")
    assert run.status()["state"] in ("created", "running")  # as the killed process left it
    assert jobs.job_state(run)["state"] == "failed"  # any reader finds the process gone
    _check_honest(run, "saving" if phase == "disk full" else phase, ("failed",))
    ledger = run.ledger()
    # what it was measuring when it died is unknown: the rest of its ε is charged
    if phase == "marginals":
        assert ledger.entries[-1].kind == UNFINISHED and ledger.spent_epsilon == pytest.approx(EPSILON, rel=1e-3)
    else:  # the steps it logged and the one it may have begun
        entry = ledger.training_entry()
        assert entry.kind in TRAINED
        if phase == "training":
            assert entry.details["steps"] == 4
    assert "charged in its ledger" in run.status()["message"]
    assert _charged(run) == pytest.approx(ledger.spent_epsilon)
    assert _fit(tmp_path / "run", overwrite=True).run.status()["state"] == "completed"


def test_a_write_that_fails_leaves_the_old_file_and_no_temporary_one(tmp_path, monkeypatch):
    from synth_core.files import atomic_output, write_atomic
    target = tmp_path / "ledger.json"
    write_atomic(target, "old")

    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(OSError, match="No space"):
        write_atomic(target, "new")
    with pytest.raises(OSError, match="No space"):
        with atomic_output(tmp_path / "model.pt", "wb", private=True) as f:
            f.write(b"weights")
    monkeypatch.undo()
    with pytest.raises(KeyboardInterrupt):
        with atomic_output(target) as f:
            f.write("half")
            raise KeyboardInterrupt
    assert target.read_text() == "old" and sorted(p.name for p in tmp_path.iterdir()) == ["ledger.json"]


def test_sigterm_stops_a_cli_fit_after_its_step_with_its_ledger_and_the_book_settled(tmp_path):
    from conftest import wait_until
    demo_table(600, seed=12).to_csv(tmp_path / "t.csv", index=False)
    demo_schema().save(tmp_path / "s.json")
    proc = subprocess.Popen([sys.executable, "-m", "synth_core", "fit", "--data", "t.csv", "--schema", "s.json",
                             "--preset", "tiny", "--epochs", "400", "--batch-size", "16", "--accountant", "rdp",
                             "--epsilon", "1", "--out", "run"], cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        run = RunDir(tmp_path / "run")
        wait_until(lambda: run.exists() and len(run.events()) >= 3, "three steps")
        proc.terminate()
        out, err = proc.communicate(timeout=600)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    assert run.status()["state"] == "cancelled" and "cancelled" in out
    ledger = run.ledger()
    entry = ledger.training_entry()
    assert entry.details["cancelled"] and entry.details["steps"] < entry.details["steps_planned"]
    assert _charged(run) == pytest.approx(ledger.spent_epsilon) and ledger.spent_epsilon < 1.0
