"""The background training process: `python -m synth_core.worker RUN_DIR` (started by
synth_core.runs.jobs).

It reads the run's request and private rows and trains through `api.fit`, which writes the event
log, the ledger, the model and a review sample, then the status. It never prints rows: its log holds
progress and error messages only.

SIGTERM stops training after the current step, as a cancel does: the model trained so far is kept
and the steps taken are charged (a second SIGTERM aborts at once). If the run folder is deleted, the
worker stops and never re-creates it.

A request for several processes starts the worker through torchrun (runs.jobs); every rank runs
this, rank 0 alone writes the run (training.distributed).

`python -m synth_core.worker --draw RUN_DIR DRAW_ID` draws synthetic rows from the run's model
instead (runs.draws, through release.generate.run_draw): SIGTERM stops it at once, and it writes
no rows then.
"""
from __future__ import annotations

import os
import signal
import sys
import time
import traceback
from contextlib import suppress

from .errors import SamplingError
from .request import REVIEW_RELEASED, FitRequest
from .runs import LIVE_STATES, RunDir, RunError, RunGone
from .runs.draws import DrawStopped, Stop, set_draw_status
from .runs.rundir import DrawDir
from .training import distributed
from .training.device import use_free_cores


def main(argv: list[str]) -> int:
    if argv[:1] == ["--draw"] and len(argv) == 3:
        return draw(argv[1], argv[2])
    if len(argv) != 1:
        print("usage: python -m synth_core.worker RUN_DIR | --draw RUN_DIR DRAW_ID",
              file=sys.stderr)
        return 2
    terminated = []

    def on_sigterm(signum, frame):
        if terminated:
            raise KeyboardInterrupt  # asked twice: abort now
        terminated.append(signum)
        with suppress(OSError):  # a log that takes nothing (a closed pipe, a full disk): a stop
            print(f"{time.strftime('%H:%M:%S')} asked to stop: stopping after this step, "
                  "keeping the model", flush=True)

    signal.signal(signal.SIGTERM, on_sigterm)
    run = RunDir(argv[0]).require()
    group, table = distributed.Group(), None
    try:
        group = distributed.init_from_env()
        if group.active and group.is_main:
            run.write_training_process(os.getpid())  # the job runs while this does (runs.jobs)
        from . import api
        from .runs.jobs import cancel_requested, run_charge
        from .privacy.budget import BudgetError
        request = FitRequest.from_dict(run.request(), extra_ok=True)  # and its job's own records
        schema = run.schema()
        charge = run_charge(run) if group.is_main else None  # reserved when the job was made
        if group.is_main and charge is None and not request.public_table:
            raise BudgetError(f"{run.path} lost its charge.json: it is not trained without its table's charge")
        table, schema = _rows(run, request, schema, charge)
        if group.is_main:
            processes = f" in {group.world_size} processes" if group.active else ""
            # one process: torch's threads on the cores free now (a busy neighbour made two
            # threads 15 times slower than one)
            threads = "" if group.active else f" on {use_free_cores()} CPU thread(s)"
            print(f"{time.strftime('%H:%M:%S')} training {request.model}{processes}{threads}",
                  flush=True)
        # a job made before requests said so draws as many review rows (persons) as the run releases
        # it trained on
        review = request.review_rows or REVIEW_RELEASED
        api.fit(table, schema, request.replace(review_rows=review,
                                               public_table=charge is None, table_epsilon=None),
                run_dir=run, table_charge=charge, should_stop=lambda: bool(terminated) or cancel_requested(run))
        if group.is_main:
            state = run.status()
            print(f"{time.strftime('%H:%M:%S')} {state['state']}: {state.get('message')}", flush=True)
        return 0
    except RunGone as e:
        print(f"{time.strftime('%H:%M:%S')} stopped: {e}", file=sys.stderr, flush=True)
        return 1
    except KeyboardInterrupt:
        if group.is_main:
            _mark_unfinished(run, "cancelled", "stopped before training finished")
        return 1
    except BaseException as e:  # api.fit marks failures during training; this catches the rest
        print(f"{type(e).__name__}: {e}", file=sys.stderr, flush=True)
        if group.is_main:
            _mark_unfinished(run, "failed", f"{type(e).__name__}: {e}", traceback=traceback.format_exc(limit=5))
        return 1
    finally:
        distributed.shutdown()
        if hasattr(table, "close"):  # the engine's copy of a table too large to hold
            table.close()


def _rows(run: RunDir, request: FitRequest, schema, charge):
    """The run's private rows and the schema it trains with: stored in the run, or, for a table
    too large to hold, read from its file into the engine (runs.file_runs: its charge given back
    where that fails, as reading spends nothing)."""
    from .runs.file_runs import source_of, store_of
    from .runs.jobs import read_private
    source = source_of(run.request())
    if source is None:
        table = read_private(run, "train")
        if table is None:
            raise FileNotFoundError("the run's private rows are missing")
        return table, schema
    print(f"{time.strftime('%H:%M:%S')} reading {source.path.name} a batch at a time", flush=True)
    try:
        return store_of(run, source, schema, float(request.holdout_share), request.seed)
    except BaseException:
        if charge is not None:
            charge.release()
        raise


def draw(run_path: str, draw_id: str) -> int:
    """One draw of synthetic rows (runs.draws): its state says how it ended, whatever ended it."""
    stop = Stop()
    signal.signal(signal.SIGTERM, stop.on_signal)
    job = DrawDir(RunDir(run_path).require(), draw_id)
    try:
        set_draw_status(job, "running", "loading the model")
        use_free_cores()
        from .api import load_model
        from .release.generate import run_draw
        run_draw(job, load_model(job.run.path), stop)
        return 0
    except DrawStopped:
        _end_draw(job, "cancelled", "Cancelled: no rows were written.")
    except BaseException as e:  # the model's refusals (SamplingError, ValueError) and the rest
        print(f"{type(e).__name__}: {e}", file=sys.stderr, flush=True)
        known = isinstance(e, (SamplingError, ValueError, RunError))  # SchemaError is a ValueError
        _end_draw(job, "failed", str(e) if known else f"{type(e).__name__}: {e}")
    return 1


def _end_draw(job: DrawDir, state: str, message: str) -> None:
    """Mark a draw that ended without rows, unless its folder is gone."""
    try:
        set_draw_status(job, state, message)
    except RunError:
        pass


def _mark_unfinished(run: RunDir, state: str, message: str, **extra) -> None:
    """Mark a run that ended before api.fit could say how, unless its folder is gone."""
    try:
        if run.status().get("state") in LIVE_STATES:
            run.set_status(state, message, **extra)
    except RunError:
        pass


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
