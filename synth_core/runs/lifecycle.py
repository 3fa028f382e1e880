"""A fit's run folder from its creation to its last status, whoever trains it (the API, the CLI, a
background job's worker): created (or taken over from the job that made it), its ledger on disk from
the first entry on, its events appended as training goes, and its end said however the run ends. A
run folder deleted while the run trains is never re-created: training stops after the step."""
from __future__ import annotations

import os
import traceback
from pathlib import Path
from typing import Callable

from ..privacy.ledger import PrivacyLedger
from .jobs import job_state
from .rundir import RunDir, RunGone


def open_run(run_dir: str | Path | RunDir | None, overwrite: bool = False, charge=None,
             writes: bool = True) -> RunDir | None:
    """The run folder a fit writes: a RunDir a background job already made (with its schema and
    request), or a new one at `run_dir` (None: no folder), bound to its charge (a TableCharge) on
    the table's budget. writes=False (a torchrun rank other than 0): none."""
    if not writes or run_dir is None:
        return None
    if isinstance(run_dir, RunDir):
        return run_dir.require()
    if overwrite and RunDir(run_dir).exists():
        job_state(RunDir(run_dir))  # a run whose process died is marked so (and charged): it may go
    run = RunDir.create(run_dir, overwrite=overwrite)
    # a reader tells a run this process no longer trains (runs.process)
    run.write_worker(os.getpid())
    if charge is not None:
        run.write_charge(charge.to_dict())
        charge.bind(run.path)
    return run


def keep_ledger(run: RunDir | None, ledger: PrivacyLedger) -> None:
    """Every mechanism is on disk as soon as it is recorded."""
    if run is not None:
        run.write_ledger(ledger)
        ledger.on_record = run.write_ledger


class Events:
    """Where a run's events go (its event log, and the caller's `on_event`), and whether it should
    stop: the caller asks, or its folder was deleted (then nothing more is written, and
    `raise_if_gone` says so)."""

    def __init__(self, run: RunDir | None, on_event: Callable[[dict], None] | None = None,
                 should_stop: Callable[[], bool] | None = None):
        self.run, self.on_event, self.should_stop = run, on_event, should_stop
        self.gone: RunGone | None = None

    def emit(self, event: dict) -> None:
        if self.run is not None and self.gone is None:
            try:
                self.run.append_event(event)
            except RunGone as e:
                self.gone = e
        if self.on_event is not None:
            self.on_event(event)

    def stop(self) -> bool:
        return self.gone is not None or (self.should_stop is not None and bool(self.should_stop()))

    def raise_if_gone(self) -> None:
        if self.gone is not None:
            raise self.gone


def say_training(run: RunDir, config: dict, ledger: PrivacyLedger, schema=None) -> None:
    """What a run trains with, on disk before its first step: its schema (when given), its config,
    its ledger so far; then its status."""
    if schema is not None:
        run.write_schema(schema)
    run.write_config(config)
    run.write_ledger(ledger)
    run.set_status("running", "training")


def say_trained(run: RunDir | None, result, unit: str) -> None:
    """The status of a run whose training ended: completed, or cancelled with the model trained so
    far kept. It says no duration (how long the steps took grows with the private row count): the
    steward's pages show the time from private/ (the events, training.json)."""
    if run is None:
        return
    if result.cancelled:
        run.set_status("cancelled", f"cancelled after {result.steps_done} of {result.steps_planned} {unit}; the "
                       "model trained so far was kept")
    else:
        run.set_status("completed", f"{result.steps_done} {unit} on {result.device}")


def say_ended(run: RunDir | None, ledger: PrivacyLedger, error: BaseException) -> None:
    """A run that ended by an error (cancelled by Ctrl-C, failed otherwise): its ledger and its
    status, each written on its own, since a full disk that refuses one may take the other. What
    cannot be written now a reader finds out from the dead process (runs.jobs)."""
    if run is None or isinstance(error, RunGone):
        return
    state = "cancelled" if isinstance(error, KeyboardInterrupt) else "failed"
    for write in (lambda: run.write_ledger(ledger),
                  lambda: run.set_status(state, f"{type(error).__name__}: {error}",
                                         traceback=traceback.format_exc(limit=5))):
        try:
            write()
        except (RunGone, OSError):
            pass
