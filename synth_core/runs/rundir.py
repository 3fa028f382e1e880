"""A run directory on disk: what one training run was asked, did and produced. This module is the only
place that spells a path inside a run folder; everything else asks a RunDir.

    config.json       model family, preset, options, ε, δ, accountant, the noise plan
    charge.json       which charge on which table's budget the run draws (privacy.table_budget)
    schema.json       the public schema the run used (with its provenance)
    ledger.json       every mechanism that touched the private table and its ε (dates, not times)
    status.json       created / running / completed / cancelled / failed, with a message (never a
                      time or a duration)
    model/            weights and the model's own description (SynthModel.save)
    samples/          synthetic tables: review.csv (sampled after training, for the review page),
                      synthetic.csv (the CLI's demo), synthetic-<date>-<n>.csv (the app's generate
                      page: the day's n-th)
  for a background job (runs.jobs):
    request.json      what the steward asked for: model, preset, options, ε, δ, ...
    cancel            present once the steward asked to stop
  private/            what describes the private table and only the steward sees, owner-only; a steward who
                      shares the run folder leaves it out (release.privacy_report never reads it):
    facts.json        the exact row count, the rows kept aside, the validation counts (clipped,
                      missing values), when the run was created
    status.json       when the status was last written
    worker.json       the process that trains the run (runs.process), to tell a live run from a
                      dead one
    worker.rank0.json under torchrun: rank 0's process (the worker's is torchrun's)
    events.jsonl      one JSON line per optimizer step (step, epoch, loss, ε, batch size, rows/s): the
                      losses are not private and the batch sizes add up to about the row count
    training.json     what training did: steps, seconds, device, last loss, rows seen
    reports/          the steward's evaluation reports (statistics of the private table)
    worker.log        the worker's progress and error messages (never rows)
    samples.lock      held while a draw names and writes its table under samples/
    draws/<id>/       a draw the app started (DrawDir): request, status, progress, result (its
                      table's name in samples/), worker.json and worker.log of its process, cancel
    train.parquet, holdout.parquet   a background job's rows to train on and rows kept aside for the review
    train_children.parquet, holdout_children.parquet   linked tables: those persons' child rows

Outside private/ a run holds dates, never times (no clock time, duration or process start): how
long a run's phases took grows with the rows they read, and the row count is private. Runs written
before keep worker.json and a status's time at the top; they are read from there.

Every JSON file is written atomically (write to a temporary file, then rename), so a reader never sees a
half-written file; a crash or a cancel leaves a readable directory whose status says what happened.
"""
from __future__ import annotations

import datetime
import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

import pandas as pd

from ..privacy import PrivacyLedger
from ..privacy import book_file
from ..privacy.ledger import LedgerError
from ..schema import Schema
from ..schema.linked import LinkedSchema, LinkedTables, load_schema
from . import process
from ..files import atomic_output, check_output_folder, locked, write_atomic

LINKED_PARTS = ("parents", "children")  # a linked sample's two CSVs in its folder, as PART.csv

STATES = ("created", "running", "completed", "cancelled", "failed")
LIVE_STATES = STATES[:2]  # a run still to end: its process starting or training
# keys of a run's config or request that describe the private table: in private/facts.json, never
# beside the shareable files (a report reads public_config): facts of the table, where its file is
# (runs.file_runs), and times measured on runs of it (a step's or a draw's seconds follow its rows;
# when the run was created, beside when its status changed, tells how long it took)
PRIVATE_KEYS = ("private_validation_counts", "rows", "holdout_rows", "left_out", "sampling_estimate_s",
                "step_estimate_s", "created", "source")
PRIVATE = "private"
# the process records (runs.process): private/NAME (a run written before: the top of its folder)
WORKER_RECORDS = ("worker.json", "worker.rank0.json")
DRAW_FILES = {"request": "request.json", "status": "status.json", "progress": "progress.json",
              "result": "result.json", "worker": WORKER_RECORDS[0], "log": "worker.log"}


class RunError(RuntimeError):
    """A run directory is missing, unreadable or not in a state that allows the operation."""


class RunGone(RunError):
    """The run folder was deleted while its run was still writing to it; nothing re-creates it."""


class RunDir:
    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)

    # --- creation -----------------------------------------------------------------------------------
    @classmethod
    def create(cls, path: str | os.PathLike, overwrite: bool = False) -> "RunDir":
        """A new, empty run folder. With `overwrite`, a finished run already there is cleared first (its
        model and samples go with it, so a failed refit can never sample the old model); a folder that holds
        other files, or a run still in progress, is refused."""
        run = cls(check_output_folder(path, "run folder"))
        if run.path.exists() and not run.path.is_dir():
            raise RunError(f"{run.path} is a file, not a folder for a run")
        if run.path.exists() and any(run.path.iterdir()):
            if not overwrite:
                raise RunError(f"{run.path} already holds a run; choose another directory or allow overwriting")
            if not run.exists():
                raise RunError(f"{run.path} holds files that are not a run; choose a new or empty directory")
            if run.status().get("state") in LIVE_STATES:
                raise RunError(f"{run.path} holds a run that is still running")
            for entry in run.path.iterdir():
                shutil.rmtree(entry) if entry.is_dir() and not entry.is_symlink() else entry.unlink()
        run.path.mkdir(parents=True, exist_ok=True)
        os.chmod(run.path, 0o700)  # the run describes private data: owner only
        run.private_dir.mkdir(mode=0o700, exist_ok=True)
        os.close(os.open(run._events_file(), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600))
        # when the run was made: the steward's pages name a run by it
        run._write_json(f"{PRIVATE}/facts.json", {"created": time.time()})
        run.set_status("created")
        return run

    def exists(self) -> bool:
        return (self.path / "status.json").exists()

    def require(self) -> "RunDir":
        if not self.exists():
            raise RunError(f"no run at {self.path} (status.json is missing)")
        return self
        
    def _gone(self) -> RunGone:
        return RunGone(f"the run folder {self.path} was deleted; nothing more is written for this run")

    # --- JSON files ---------------------------------------------------------------------------------
    def _write_json(self, name: str, data: Any) -> None:
        """Write one of the run's files, owner-only. A run folder that was deleted is never re-created: the
        write fails with RunGone."""
        if not self.path.is_dir():
            raise self._gone()
        if name.startswith(f"{PRIVATE}/"):  # a run made before every run had private/
            self.private_dir.mkdir(mode=0o700, exist_ok=True)
        try:
            write_atomic(self.path / name, json.dumps(data, indent=2, default=_json_default), make_parent=False,
                         private=True)
        except FileNotFoundError:
            raise self._gone() from None

    def _read_json(self, name: str) -> Any:
        try:
            return json.loads((self.path / name).read_text())
        except FileNotFoundError:
            raise RunError(f"the run at {self.path} has no {name}") from None
        except json.JSONDecodeError as e:
            raise RunError(f"{self.path / name} is not valid JSON: {e}") from None

    def set_status(self, state: str, message: str | None = None, **extra) -> None:
        """status.json: the state and a message, never a time (a message says no duration either);
        when it was written goes to private/status.json."""
        assert state in STATES, state
        self._write_json("status.json", {"state": state, "message": message, **extra})
        self._write_json(f"{PRIVATE}/status.json", {"state": state, "time": time.time()})

    def status(self) -> dict:
        """status.json as written: the state and its message (no time: `status_time` has it)."""
        return self._read_json("status.json")

    def status_time(self) -> float | None:
        """When the status was last written (the steward's own view), None where none was kept."""
        for name in (f"{PRIVATE}/status.json", "status.json"):  # a run written before: at the top
            try:
                return float(self._read_json(name)["time"])
            except (RunError, KeyError, TypeError, ValueError):
                continue
        return None

    @property
    def private_dir(self) -> Path:
        return self.path / PRIVATE

    def _write_split(self, name: str, data: dict) -> None:
        """`data` in `name`, but its PRIVATE_KEYS in private/facts.json (added to what is there)."""
        private = {k: data[k] for k in PRIVATE_KEYS if k in data}
        if private:
            self._write_json(f"{PRIVATE}/facts.json", {**self.private_facts(), **private})
        self._write_json(name, {k: v for k, v in data.items() if k not in PRIVATE_KEYS})

    def private_facts(self) -> dict:
        """What the run keeps of the private table itself (PRIVATE_KEYS), for the steward's own pages."""
        return self._read_json(f"{PRIVATE}/facts.json") if (self.private_dir / "facts.json").exists() else {}

    def write_config(self, config: dict) -> None:
        self._write_split("config.json", config)

    def config(self) -> dict:
        """The run's config with its private facts (the steward's own view; a report reads
        public_config). A run written before private/facts.json keeps them in config.json."""
        facts = {k: v for k, v in self.private_facts().items() if k != "holdout_rows"}
        return {**self._read_json("config.json"), **facts}

    def public_config(self) -> dict:
        """config.json: nothing in it describes the private table (PRIVATE_KEYS are in private/)."""
        config = self._read_json("config.json")
        return {k: v for k, v in config.items() if k not in PRIVATE_KEYS}  # a run written before private/facts

    def write_request(self, request: dict) -> None:
        self._write_split("request.json", request)

    def request(self) -> dict:
        """What the steward asked for, with the private facts ({} for a run not started by a background job)."""
        if not (self.path / "request.json").exists():
            return {}
        return {**self._read_json("request.json"), **self.private_facts()}

    def write_training(self, result: dict) -> None:
        self._write_json(f"{PRIVATE}/training.json", result)

    def write_schema(self, schema: Schema | LinkedSchema) -> None:
        self._write_json("schema.json", schema.to_dict())

    def schema(self) -> Schema | LinkedSchema:
        """The run's public schema: of one table, or of two linked ones (schema.linked)."""
        return load_schema(self.path / "schema.json")

    @property
    def ledger_path(self) -> Path:
        return self.path / "ledger.json"

    def write_ledger(self, ledger: PrivacyLedger) -> None:
        self._write_json(self.ledger_path.name, ledger.to_dict())

    def ledger(self) -> PrivacyLedger:
        """The run's ledger; RunError in one line when the file is not a ledger this workbench wrote (edited
        by hand, cut short)."""
        try:
            return PrivacyLedger.from_dict(self._read_json("ledger.json"))
        except (LedgerError, KeyError, TypeError, ValueError, AttributeError) as e:
            raise RunError(f"{self.ledger_path} is not a ledger this workbench wrote ({type(e).__name__}: {e}); "
                           "restore it from a backup: what the run spent is recorded nowhere else") from None

    # --- its charge on the table's budget --------------------------------------------------------------
    def write_charge(self, charge: dict) -> None:
        """What the run keeps of its charge on its table's budget (privacy.table_budget.TableCharge.to_dict:
        its run id; the book, in the workbench home, knows which charge and which folder that is)."""
        self._write_json("charge.json", charge)

    def charge(self) -> dict | None:
        """What the run keeps of its charge ({"run_id"}; a run made before: {"book", "table", "key"}, of which
        only the key is used), None for a run that draws from none."""
        if not (self.path / "charge.json").exists():
            return None
        data = self._read_json("charge.json")
        if not isinstance(data, dict) or not data or len(data) > 3 \
                or not all(isinstance(v, str) and len(v) < 300 for v in data.values()) \
                or not (set(data) == {"run_id"} or set(data) == {"book", "table", "key"}):
            raise RunError(f"{self.path / 'charge.json'} is not a charge this workbench wrote")
        return data

    # --- the background job's files -----------------------------------------------------------------
    def private_path(self, which: str) -> Path:
        """Where the job keeps its private rows: "train" or "holdout" (linked tables: the parents'; their child
        rows: "train_children", "holdout_children")."""
        if which not in ("train", "holdout", "train_children", "holdout_children"):
            raise ValueError(f"private rows are 'train' or 'holdout', not {which!r}")
        return self.private_dir / f"{which}.parquet"

    def write_worker(self, pid: int) -> None:
        """The process that trains the run (the app's worker, or the CLI or script that called
        `api.fit`), in private/: its start time is a time."""
        self._write_json(f"{PRIVATE}/{WORKER_RECORDS[0]}", process.record(pid))

    def _worker_record(self, name: str) -> dict | None:
        """A process record in private/, or where a run written before kept it (at the top)."""
        for where in (f"{PRIVATE}/{name}", name):
            if (self.path / where).exists():
                try:
                    entry = self._read_json(where)
                except RunError:
                    return None
                return entry if isinstance(entry, dict) and "pid" in entry else None
        return None

    def worker_pid(self) -> int | None:
        """The worker's process id, or None if no worker was started (or its record is unreadable)."""
        try:
            return int(self._worker_record(WORKER_RECORDS[0])["pid"])
        except (KeyError, TypeError, ValueError):
            return None

    def write_training_process(self, pid: int) -> None:
        """Under torchrun: the process of rank 0, which trains and writes the run (the worker's pid is torchrun's)."""
        self._write_json(f"{PRIVATE}/{WORKER_RECORDS[1]}", process.record(pid))

    def worker_records(self) -> list[dict]:
        """The records (runs.process) of the process that trains the run and, under torchrun, of rank 0's: the
        run trains while either process does."""
        records = (self._worker_record(name) for name in WORKER_RECORDS)
        return [entry for entry in records if entry is not None]

    @property
    def worker_log(self) -> Path:
        return self.private_dir / "worker.log"

    def request_cancel(self) -> None:
        (self.path / "cancel").touch()

    def cancel_requested(self) -> bool:
        return (self.path / "cancel").exists()

    # --- events -------------------------------------------------------------------------------------
    def _events_file(self) -> Path:
        """private/events.jsonl; for a run made before every run had private/, its events.jsonl."""
        legacy = self.path / "events.jsonl"
        return legacy if legacy.exists() else self.private_dir / "events.jsonl"

    def append_event(self, event: dict) -> None:
        """One line for one step; the log is created with the run, never again (RunGone if it is gone)."""
        try:
            fd = os.open(self._events_file(), os.O_WRONLY | os.O_APPEND)
        except FileNotFoundError:
            raise self._gone() from None
        with os.fdopen(fd, "a") as f:
            f.write(json.dumps(event, default=_json_default) + "\n")

    def events_stamp(self) -> float:
        """When the last event was written (the log's modification time)."""
        try:
            return self._events_file().stat().st_mtime
        except FileNotFoundError:
            raise self._gone() from None

    def events(self) -> list[dict]:
        """Every complete event line; a line cut short by a crash is skipped."""
        out = []
        try:
            with open(self._events_file()) as f:
                for line in f:
                    try:
                        out.append(json.loads(line))
                    except json.JSONDecodeError:
                        continue
        except FileNotFoundError:
            pass
        return out

    # --- model and samples --------------------------------------------------------------------------
    @property
    def model_dir(self) -> Path:
        return self.path / "model"

    @property
    def samples_dir(self) -> Path:
        return self.path / "samples"

    def sample_path(self, name: str = "synthetic.csv") -> Path:
        return self.samples_dir / name

    def next_sample_name(self) -> str:
        """A name for one more generated table: synthetic-<date>-<n>.csv, n counting that day's
        tables (ordered as they were drawn). A date, not a time: the time a sample was written would
        tell how long the draw, or the training before it, took."""
        prefix = f"synthetic-{datetime.date.today():%Y%m%d}-"
        taken = [p.name[len(prefix):].split(".")[0] for p in self.samples_dir.glob(f"{prefix}*")]
        count = max((int(c) for c in taken if c.isdigit()), default=0) + 1
        return f"{prefix}{count:03d}.csv"

    @property
    def review_sample(self) -> Path:
        """The synthetic rows sampled right after training, for the review page (a linked run's: `write_sample`'s
        folder of that name without .csv)."""
        return self.sample_path("review.csv")

    def read_review_sample(self, schema):
        """The review sample as `write_sample` wrote it, its categories read as text: a DataFrame, or LinkedTables
        for a linked schema; None where the run has none (cancelled, or made before runs drew one)."""
        return self.read_sample(self.review_sample.name, schema)

    def read_sample(self, name: str, schema):
        """A sample `write_sample` wrote, read as `read_review_sample` reads it; None if missing."""
        def read(path: Path, table_schema):
            return pd.read_csv(path, dtype={c.name: "string" for c in table_schema.columns if not c.is_numeric})
        path = self.sample_path(name)
        if isinstance(schema, LinkedSchema):
            paths = [path.with_suffix("") / f"{which}.csv" for which in LINKED_PARTS]
            if not all(p.exists() for p in paths):
                return None
            return LinkedTables(read(paths[0], schema.parent), read(paths[1], schema.child))
        return read(path, schema) if path.exists() else None

    def write_next_sample(self, table) -> Path:
        """`write_sample` under the next free name, one at a time across processes: draws that end
        together never take the same name (FileNotFoundError once the run folder is gone)."""
        with locked(self.private_dir / "samples.lock"):
            return self.write_sample(table, self.next_sample_name())

    def save_model(self, model) -> None:
        """Save a model (SynthModel) in model/; RunGone if the run folder was deleted."""
        try:
            self.model_dir.mkdir(exist_ok=True)
        except FileNotFoundError:
            raise self._gone() from None
        model.save(self.model_dir)

    def write_sample(self, table, name: str = "synthetic.csv") -> Path:
        """Write a synthetic table (a DataFrame) as CSV under samples/, atomically; returns its path. Linked tables
        (LinkedTables) go into the folder samples/NAME (without .csv) as parents.csv and children.csv."""
        try:
            self.samples_dir.mkdir(exist_ok=True)
        except FileNotFoundError:
            raise self._gone() from None
        path = self.sample_path(name)
        if isinstance(table, LinkedTables):
            path = path.with_suffix("")
            path.mkdir(mode=0o700, exist_ok=True)
            for which in LINKED_PARTS:
                with atomic_output(path / f"{which}.csv", private=True, make_parent=False) as f:
                    getattr(table, which).to_csv(f, index=False)
            return path
        with atomic_output(path, private=True, make_parent=False) as f:
            table.to_csv(f, index=False)
        return path

    def samples_stamp(self) -> float:
        """When samples/ last changed (0 if it does not exist): a cache key for the review page."""
        try:
            return self.samples_dir.stat().st_mtime
        except OSError:
            return 0.0

    def report_dir(self, name: str) -> Path:
        return self.private_dir / "reports" / name

    def has_model(self) -> bool:
        return (self.model_dir / "model.pt").exists() and (self.model_dir / "model.json").exists()

    def model_stamp(self) -> float:
        """When the model was last saved: a cache key for a loaded model."""
        return (self.model_dir / "model.pt").stat().st_mtime

    def ledger_dict(self) -> dict | None:
        """The ledger as a report shows it, None if the run has none yet."""
        try:
            return self.ledger().to_dict()
        except RunError:
            return None


class DrawDir:
    """A draw the app started from a run, in its own process (runs.draws): private/draws/<id>/,
    its id the time it was asked, written through the run (RunGone once its folder is gone)."""
    request_cancel = RunDir.request_cancel  # the run's flag file, in the draw's folder
    cancel_requested = RunDir.cancel_requested

    def __init__(self, run: RunDir, draw_id: str):
        self.run, self.id = run, draw_id
        self.name = f"{PRIVATE}/draws/{draw_id}"
        self.path = run.path / self.name

    @classmethod
    def create(cls, run: RunDir) -> "DrawDir":
        if not run.require().private_dir.is_dir():
            raise run._gone()
        draw = cls(run, f"{datetime.datetime.now():%Y%m%d-%H%M%S-%f}-{os.urandom(2).hex()}")
        draw.path.parent.mkdir(mode=0o700, exist_ok=True)
        draw.path.mkdir(mode=0o700)
        return draw

    @classmethod
    def all(cls, run: RunDir) -> list["DrawDir"]:
        """The run's draws that say how they stand, newest first."""
        folder = run.private_dir / "draws"
        found = sorted(folder.iterdir(), reverse=True) if folder.is_dir() else []
        return [cls(run, p.name) for p in found if (p / DRAW_FILES["status"]).exists()]

    def write(self, what: str, data: dict) -> None:
        """One of its DRAW_FILES: request, status, progress, result, worker (its process record);
        `read` gives `missing` where the file is absent (None: RunError)."""
        self.run._write_json(f"{self.name}/{DRAW_FILES[what]}", data)

    def read(self, what: str, missing: dict | None = None) -> dict:
        if missing is not None and not (self.path / DRAW_FILES[what]).exists():
            return missing
        return self.run._read_json(f"{self.name}/{DRAW_FILES[what]}")


def charged_runs(root: Path) -> int:
    """How many run folders under `root` hold a charge on a table's budget (the budget book asks, to tell a
    book deleted while runs charged it from a new one)."""
    try:
        return sum(1 for p in Path(root).iterdir() if (p / "charge.json").is_file())
    except OSError:
        return 0


book_file.CHARGED_RUNS = charged_runs


def _json_default(obj):
    if hasattr(obj, "item"):
        return obj.item()
    if hasattr(obj, "tolist"):
        return obj.tolist()
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"{type(obj).__name__} is not JSON serialisable")
