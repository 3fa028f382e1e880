"""Training in a background process, for the app (and any caller that must not block).

A job is a run directory plus a worker process (`python -m synth_core.worker RUN`) that trains and
writes the run's event log. The caller only reads files, so closing the browser tab or reloading the
page neither stops nor loses the run; `job_state` finds it again from disk. The job's files (the
private rows, the request, the worker's record, the cancel flag) are laid out by runs.rundir.

The private table lives only inside the run directory, which is created owner-only (0700); the files
in private/ are 0600 as well. They stay so that the steward can review the run later; deleting the
run deletes them.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import secrets
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pandas as pd

from ..privacy import PrivacyLedger
from ..privacy.ledger import charge_interrupted, charge_unfinished
from ..privacy.planning import plan_class
from .. import home
from ..files import locked
from ..privacy.table_budget import BookError, NotThisRun, TableBudgets, TableCharge
from ..models.recommend import AUTO
from ..request import (DEFAULT_PRESET, MAX_HOLDOUT_SHARE, REVIEW_RELEASED, REVIEW_ROWS, FitRequest, check_rows,  # noqa: F401
                       review_rows_for)
from . import process
from .file_runs import source_fields
from .rundir import LIVE_STATES, RunDir, RunError
from ..schema import Schema, SchemaError, schema_columns
from ..schema.batches import TableFile
from ..shape import shape_of
from ..schema.linked import LinkedSchema, LinkedTables, linked_columns, split_persons

def new_run_path(root: str | os.PathLike, name: str | None = None) -> Path:
    """A fresh run directory name under `root` that sorts as the runs were started: the date, that
    day's count of runs, the name, a short random suffix. A date, not a time: the name travels with
    the run folder and its privacy report, and the times runs were started, one after another, tell
    how long each one trained."""
    day = time.strftime("%Y%m%d")
    slug = "".join(ch if ch.isalnum() or ch in "-_" else "-" for ch in (name or "run"))[:40].strip("-") or "run"
    # a run named before by its time of day (HHMMSS) counts as that number: a new one sorts after it
    taken = [p.name[len(day) + 1:].split("-")[0] for p in Path(root).glob(f"{day}-*")]
    count = max((int(c) for c in taken if c.isdigit()), default=0) + 1
    return Path(root) / f"{day}-{count:03d}-{slug}-{secrets.token_hex(2)}"


def _write_private(table: pd.DataFrame, path: Path) -> None:
    path.parent.mkdir(mode=0o700, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        table.to_parquet(f, index=False)


def _write_rows(table: pd.DataFrame | LinkedTables, run: RunDir, which: str) -> None:
    """A job's private rows (linked tables: the parents', and their child rows beside them)."""
    if isinstance(table, LinkedTables):
        _write_private(table.parents, run.private_path(which))
        _write_private(table.children, run.private_path(f"{which}_children"))
    else:
        _write_private(table, run.private_path(which))


def split_holdout(table: pd.DataFrame | LinkedTables, share: float, seed: int | None, key: str | None = None
                  ) -> tuple[pd.DataFrame | LinkedTables, pd.DataFrame | LinkedTables | None]:
    """Keep `share` of the rows aside for the review; they never reach training. Linked tables
    (`key`: their key): `share` of the persons, each with their child rows."""
    if not 0 <= share < MAX_HOLDOUT_SHARE:  # the request's rule (FitRequest.check says it first)
        raise ValueError(f"the share of rows kept aside for review must be in [0, {MAX_HOLDOUT_SHARE:g}), not {share}")
    n_hold = int(round(len(table) * share))
    if n_hold == 0:
        return (table if key else table.reset_index(drop=True)), None
    if len(table) - n_hold < 2:
        raise ValueError("too few rows to keep some aside for the review; set the hold-out share to 0")
    order = np.random.default_rng(seed).permutation(len(table))
    if key is not None:
        return split_persons(table, key, order[:n_hold])
    hold = table.iloc[np.sort(order[:n_hold])].reset_index(drop=True)
    train = table.iloc[np.sort(order[n_hold:])].reset_index(drop=True)
    return train, hold


def start_fit_job(root: str | os.PathLike, table: pd.DataFrame | LinkedTables | TableFile,
                  schema: Schema, request: FitRequest | dict, python: str | None = None) -> RunDir:
    """Create a run under `root`, store the private rows in it, and start the worker process. A
    table too large to hold is given as its file (`TableFile`): the run names it, and the worker
    reads it a batch at a time (runs.file_runs).

    request: the fit's options (a FitRequest, or a mapping of its fields); every problem with them
    is refused before a run is made or anything reserved. The worker draws a review sample as large
    as the training rows the run releases unless the request says otherwise.
    The run's whole ε is reserved from its table's budget in the workbench home's book under a
    charge of its own (refused if the table has less left; a table the book has never seen gets this
    run's ε as its total, one that resembles a known table is asked about: SameTable), and the
    worker settles what it spent. A request with public_table (the steward says the table is public
    or invented) draws from no budget.

    Starting is idempotent: while a run of the same request on the same table is being created or
    trains (a second click on "Start", a second tab), that run is returned and no other is started
    or charged."""
    if not isinstance(request, FitRequest):
        request = FitRequest.from_dict(request)
    linked = isinstance(schema, LinkedSchema)
    if request.review_rows is None:
        request = request.replace(review_rows=REVIEW_RELEASED)
    request.check(schema)
    on_file = isinstance(table, TableFile)
    if on_file:  # read by the worker a batch at a time: what the engine cannot fit is said now
        request.engine_families(schema)
        if (request.processes or 1) > 1:
            raise SchemaError("a table read a batch at a time trains in one process")
    elif schema.rows is not None and schema.rows != len(table):
        raise SchemaError(f"the schema declares {schema.rows} {'persons' if linked else 'rows'} as public, but the "
                          f"table has {len(table)}")
    book = TableBudgets(home.budgets_path())
    # which table the run came from (its listing), and its budget's account
    found = book.identify(table, schema)
    table_id = found.table_id
    if on_file:  # the worker reads it, keeps rows aside and counts (runs.file_runs)
        train = holdout = None
        dropped = [c for c in table.columns() if c not in schema.names]
    else:
        # the private copy holds only what the schema names
        table, dropped = linked_columns(table, schema) if linked else schema_columns(table, schema)
        train, holdout = split_holdout(table, float(request.holdout_share), request.seed,
                                       schema.key if linked else None)
        check_rows(len(train),
                   "what is left for training, once rows are kept aside for the review,")
    # the training rows' count follows from the public one and the public share
    if schema.rows is not None and not on_file:
        schema = (dataclasses.replace(schema, parent=dataclasses.replace(schema.parent, rows=len(train))) if linked
                  else dataclasses.replace(schema, rows=len(train)))
    stored = {**request.to_dict(), **(source_fields(table) if on_file else {})}
    start_key = hashlib.sha256(json.dumps([table_id, stored], sort_keys=True, default=str).encode()).hexdigest()
    Path(root).mkdir(parents=True, exist_ok=True)
    os.chmod(root, 0o700)
    # one start at a time, across sessions and processes
    with locked(Path(root) / ".starting.lock"):
        live = _live_run_of(Path(root), start_key)
        if live is not None:
            # the same request, started a moment ago: nothing more is started or charged
            return live
        if not request.public_table:
            table_id = book.account_for(found, request.epsilon, request.table_epsilon, request.book_table,
                                        request.new_table, label=request.table_name)
        run = _create_run(root, train, holdout, schema, {**stored, "left_out": dropped, "size": _size(request)},
                          book, table_id, start_key)
        return _start_worker(run, python, request.processes or 1)


def _size(request: FitRequest) -> str | None:
    """The size a listing shows before the run has resolved its request (auto's is said by its
    config)."""
    if request.model == AUTO:
        return None
    from ..models import get_model_class
    return get_model_class(request.model).size_of(request.preset or DEFAULT_PRESET)


def _live_run_of(root: Path, start_key: str) -> RunDir | None:
    """A run under `root` started from the same request that is still being created or trains."""
    for path in root.iterdir():
        run = RunDir(path)
        try:
            if path.is_dir() and run.exists() and run.request().get("start_key") == start_key \
                    and job_state(run).get("state") in LIVE_STATES:
                return run
        except (RunError, OSError):
            continue
    return None


def _create_run(root, train: pd.DataFrame | None, holdout: pd.DataFrame | None, schema: Schema,
                request: dict, book: TableBudgets, table_id: str, start_key: str) -> RunDir:
    """The run folder with its charge reserved, its private rows, schema and request; nothing is
    left of it when the charge is refused or a file cannot be written."""
    run = RunDir.create(new_run_path(root, request.get("name") or request["model"]))
    charge = None
    try:
        if not request.get("public_table"):
            charge = TableCharge(book, table_id)
            charge.reserve(request["epsilon"], request.get("delta") or 0.0, run=str(run.path.resolve()))
            # the worker settles it; so does job_state if the worker dies
            run.write_charge(charge.to_dict())
            charge.bind(run.path)
        if train is not None:  # else the worker reads the file the request names
            _write_rows(train, run, "train")
        if holdout is not None:
            _write_rows(holdout, run, "holdout")
        run.write_schema(schema)
        run.write_request({**request, "table": table_id, "start_key": start_key,
                           "rows": None if train is None else len(train),
                           "unit": shape_of(schema).unit,  # what `rows` counts
                           "created": time.time(), "holdout_rows": 0 if holdout is None else len(holdout)})
        run.set_status("created", "waiting for the training process to start")
    except BaseException:
        if charge is not None:  # nothing ran: the reservation goes with the run
            charge.release()
        shutil.rmtree(run.path, ignore_errors=True)
        raise
    return run


def run_charge(run: RunDir) -> TableCharge | None:
    """The charge a run draws on its table's budget in the workbench home's book (reserved when the
    run was made), None if it draws none; NotThisRun for a folder the charge was not made for (a
    copy, a move, an edited charge.json): a copy settles nothing."""
    try:
        record = run.charge()
    except RunError:
        return None
    if record is None:
        return None
    return TableBudgets(home.budgets_path()).charge_of(run.path, record)


def _start_worker(run: RunDir, python: str | None, processes: int) -> RunDir:
    """Start the run's worker process; if it cannot start, the run is marked failed and its charge
    released (nothing ran)."""
    try:
        fd = os.open(run.worker_log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        with os.fdopen(fd, "ab") as log:
            # a new session: the worker outlives the page that started it (reloads, closed tabs,
            # reruns)
            proc = subprocess.Popen(worker_command(python or sys.executable, run.path, processes), stdout=log,
                                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
                                    cwd=str(Path(__file__).resolve().parents[2]))
    except OSError as e:
        charge = run_charge(run)
        if charge is not None:
            charge.release()
        run.set_status("failed", f"the training process could not start: {e}")
        raise
    # reap the worker when it ends, so a finished job leaves no zombie behind in a long-lived app
    threading.Thread(target=proc.wait, daemon=True).start()
    run.write_worker(proc.pid)
    return run


def worker_command(python: str, run_path: Path, processes: int = 1) -> list[str]:
    """The worker's command line: itself, or torchrun starting `processes` of it on this machine
    (DP-SGD across them, training.distributed); every rank sees the cancel request and stops after
    the same step."""
    worker = ["-m", "synth_core.worker", str(run_path)]
    if processes > 1:
        return [python, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={processes}", *worker]
    return [python, *worker]


def cancel_job(run: RunDir) -> None:
    """Ask the worker to stop after its current step; the model trained so far is kept."""
    run.require().request_cancel()


def cancel_requested(run: RunDir) -> bool:
    return run.cancel_requested()


def _worker_alive(run: RunDir) -> bool:
    """Whether the run's process still trains it: its own, or under torchrun rank 0's (which goes on
    training if torchrun alone is killed, and whose death ends torchrun)."""
    return any(process.alive(r, legacy_command=b"synth_core.worker") for r in run.worker_records())


def job_state(run: RunDir) -> dict:
    """The run's status, with a run whose process died unnoticed (killed, stopped by a full disk,
    the machine restarted) marked failed, whoever started it (a background job, the CLI, the API),
    and what it may have spent charged to its ledger and its table's budget (`settle_dead`)."""
    status = run.require().status()
    if status.get("state") in LIVE_STATES and run.worker_records() and not _worker_alive(run):
        time.sleep(0.2)  # the worker may have written its last status just now
        status = run.status()
        if status.get("state") in LIVE_STATES:
            _mark_dead(run)
            status = run.status()
    return status


def _mark_dead(run: RunDir) -> None:
    """A run whose process died without saying how it ended: its ledger charges what it may have
    spent (the steps it logged and the one it may have begun, by its saved plan; before training,
    the rest of its ε), its table's budget is settled from that ledger, and its status says so."""
    try:
        ledger = run.ledger()
    except RunError:
        ledger = None
    try:
        plan = run.config().get("plan")
    except (RunError, AttributeError):
        plan = None
    if ledger is None:  # it died before writing one: its table's budget keeps the whole reservation
        message = ("the training process stopped unexpectedly (killed, or the machine restarted) before it wrote "
                   "its ledger; the table's budget keeps this run's whole ε reserved")
    else:
        if not ledger.has_training():
            if plan is not None:
                charge_interrupted(ledger, plan, steps=len(run.events()))
            else:
                charge_unfinished(ledger)
            run.write_ledger(ledger)
        message = ("the training process stopped unexpectedly (killed, or the machine restarted); what it may "
                   f"have spent, ε = {ledger.spent_epsilon:.4g}, is charged in its ledger")
        try:
            charge = run_charge(run)
        except NotThisRun as e:  # a copy: its original's charge is its original's to settle
            charge, message = None, f"{message}; {e}"
        # the book is damaged: its whole reservation stays until it is repaired
        except BookError as e:
            charge, message = None, f"{message}; its table's budget was not settled: {e}"
        if charge is not None:
            charge.settle(ledger)
    run.set_status("failed", message)


def read_private(run: RunDir, which: str = "train") -> pd.DataFrame | LinkedTables | None:
    """The private rows stored with the run (for the steward's own review; never to be exported):
    the columns its schema names (a run made before the copy held only those kept every uploaded
    column); linked tables: both (LinkedTables)."""
    path = run.private_path(which)
    if not path.exists():
        return None
    schema = run.schema()
    if isinstance(schema, LinkedSchema):
        children = run.private_path(f"{which}_children")
        if not children.exists():
            return None
        return linked_columns(LinkedTables(pd.read_parquet(path), pd.read_parquet(children)), schema)[0]
    return schema_columns(pd.read_parquet(path), schema)[0]


def list_runs(root: str | os.PathLike, table: str | None = None) -> list[dict]:
    """Every run under `root` as `run_summary` gives it, newest first; unreadable ones say so.

    table: a table's fingerprint; only that table's runs are listed."""
    root = Path(root)
    if not root.exists():
        return []
    out = []
    for path in sorted((p for p in root.iterdir() if p.is_dir()), reverse=True):
        run = RunDir(path)
        if run.exists():
            out.append(run_summary(run))
    return [r for r in out if table is None or r.get("table") == table]


def run_summary(run: RunDir) -> dict:
    """The one account of a run that every listing, picker, sidebar and page shows.

    spent_epsilon is the whole run's ε so far: the ledger's total once training is recorded, and the
    live curve's last value (the events) while it trains, so a page and its sidebar never
    disagree."""
    try:
        status = job_state(run)
        try:
            request = run.request()
        except RunError:  # a run made by the API or the CLI, not by a background job
            request = {}
        try:
            config = run.config()
        except RunError:
            config = {}
        events = run.events()
        last = events[-1] if events else {}
        ledger = ledger_of(run)
        if ledger is not None and ledger.has_training():
            spent = ledger.spent_epsilon
        else:
            spent = float(last.get("epsilon") or (ledger.spent_epsilon if ledger is not None else 0.0))
        # the config has what the run resolved (auto's family and size)
        facts = {**request, **config}
        return {
            "id": run.path.name, "path": str(run.path), "state": status.get("state"),
            "message": status.get("message"),
            # the name is what was asked (stable from the start: 'auto'), the model what the run
            # resolved
            "name": facts.get("name") or _default_name(request or config) or run.path.name, "model": facts.get("model"),
            "preset": facts.get("preset"), "size": facts.get("size") or facts.get("preset"),
            "epsilon": facts.get("epsilon"), "delta": facts.get("delta"),
            "spent_epsilon": spent, "rows": request.get("rows", config.get("rows")),
            "unit": request.get("unit", "rows"), "steps": last.get("step", 0),
            "steps_planned": last.get("steps"), "loss": last.get("loss"), "created": request.get("created"),
            "table": request.get("table"), "table_name": request.get("table_name"),
        }
    except (RunError, SchemaError, OSError, ValueError, KeyError, TypeError) as e:
        return {"id": run.path.name, "path": str(run.path), "state": "unreadable", "message": str(e)}


def _default_name(facts: dict) -> str | None:
    """'<table> · <model> ε=<ε> <size> <when>': which table a run came from comes first."""
    if not facts.get("model"):
        return None
    when = time.strftime("%d %b %H:%M", time.localtime(facts["created"])) if facts.get("created") else ""
    size = facts.get("size") or facts.get("preset") or ""
    name = f"{facts['model']} ε={facts.get('epsilon') or 0:g} {size} {when}".strip()
    return f"{facts['table_name']} · {name}" if facts.get("table_name") else name


RECENT_ROUNDS = 3  # an adaptive mechanism's next rounds take about as long as its last three
# saving a model and drawing a small review sample, when no past run timed it (0.2-3 s measured)
FINISH_S = 1.0


def progress(run: RunDir) -> dict:
    """Steps done and planned, elapsed and remaining seconds: the run's own steps so far, times the
    steps left, plus drawing the review sample after training (timed by past runs of the same model,
    when there are any; remaining None once the draw has outlasted its estimate, `drawing_s` saying
    how long it has taken)."""
    events = run.events()
    try:
        config = run.config()
    except RunError:
        config = {}
    plan = config.get("plan") or {}
    kind = plan_class(plan)
    # an adaptive mechanism's rounds: each event says how many it expects now
    adaptive = kind.steps_adapt
    try:
        planned = int(events[-1]["steps"]) if adaptive and events else int(plan["steps"])
    except (KeyError, TypeError, ValueError):
        planned = events[-1]["steps"] if events else None
    done = events[-1]["step"] if events else 0
    elapsed = events[-1].get("elapsed_s", 0.0) if events else 0.0
    sampling = config.get("sampling_estimate_s")
    # drawing: seconds since training ended, while the review sample is drawn
    remaining = drawing = None
    if planned and done:
        # a step's time from the run's own steps; an adaptive mechanism's rounds differ: the first
        # (every column measured, the estimation compiled) takes longer than those after it, so
        # until a second one is timed a round takes what a past run's did (the stored cost), and
        # each later one a little longer than the one before (its model grows), so its next rounds
        # are timed by its last few
        per_step = elapsed / done
        if adaptive and done == 1 and config.get("step_estimate_s"):
            per_step = float(config["step_estimate_s"])
        if adaptive and done >= 2 and len(events) >= 2:
            last = events[-min(len(events), RECENT_ROUNDS + 1):]
            per_step = (elapsed - float(last[0].get("elapsed_s") or 0.0)) / max(1, done - int(last[0]["step"]))
        since_last = max(0.0, time.time() - run.events_stamp())  # the step under way has begun
        remaining = max(0.0, per_step * (planned - done) - (since_last if done < planned else 0.0))
        # then saving the model and drawing the review sample: timed by past runs, else a few
        # seconds
        after = float(sampling) if sampling is not None else FINISH_S
        remaining += max(0.0, after - (since_last if done >= planned else 0.0))
        if done >= planned:
            drawing = since_last
            if sampling is not None and since_last > after:
                # past its estimate: a calibrated sample draws more candidates (up to the family's
                # pool growth) while few of them fit the measured marginals, which no estimate
                # before the draw can know
                remaining = None
    return {"steps_done": done, "steps_planned": planned, "elapsed_s": elapsed, "remaining_s": remaining,
            "fraction": (done / planned) if planned else 0.0, "sampling_s": sampling,
            "drawing_s": drawing, "unit": kind.unit,
            # why the time left may rise while the run trains, where it may: said beside it
            "may_rise": (f"its {kind.unit} grow longer as its model grows, and it may take more of them "
                         "than it first expected, so the time left can rise") if adaptive else None}


def ledger_of(run: RunDir) -> PrivacyLedger | None:
    try:
        return run.ledger()
    except RunError:
        return None
