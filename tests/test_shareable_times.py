"""Issue 58 item 4: the shareable part of a run folder (everything outside private/) and its
privacy report hold dates, never times: no clock time, epoch stamp, duration or process record,
since how long a run's phases took grows with the private row count. A single table and linked
tables fitted through the API, a table with a rule trained by a background job; the steward's own
view keeps the times, in private/; a run folder written before this layout is still read."""
from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from conftest import PATIENCE_S, wait_until
from synth_core import api
from synth_core.demo import demo_schema, demo_table
from synth_core.release.privacy_report import privacy_report, report_json, report_markdown
from synth_core.runs import RunDir, jobs, process
from synth_core.schema import Schema
from test_linked import patients, public_schema

ISO_TIME = re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{1,2}:\d{2}")         # 2026-11-28T14:03
STAMP = re.compile(r"(?:19|20)\d{6}[-_T]?\d{4,6}(?!\d)")             # 20261128-140312
CLOCK = re.compile(r"(?<![\d.:])\d{1,2}:\d{2}(?::\d{2})?(?![\d:])")  # 14:03, 14:03:12
DURATION = re.compile(r"\d[\d.,]*\s?(?:s|ms|secs?|seconds?|mins?|minutes?|hours?|hrs?)\b",
                      re.IGNORECASE)                                 # 14 s, 2.5 minutes
EPOCH = re.compile(r"(?<![\w.])[1-4]\d{9}(?:\.\d+)?(?![\w.])")      # 1795889577.83
TIME_KEY = re.compile(r"(?:^|_)(?:time|started|created|seconds|elapsed|duration|ticks|pid)(?:$|_)"
                      r"|_s$")
DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
TEXT = (ISO_TIME, STAMP, CLOCK, DURATION, EPOCH)
NAMES = (ISO_TIME, STAMP, CLOCK, EPOCH)


def _in_text(where: str, text: str, patterns=TEXT) -> list[str]:
    return [f"{where}: {m.group(0)!r}" for p in patterns for m in p.finditer(text)]


def _in_json(where: str, value, key: str = "") -> list[str]:
    """Anything finer than a day in a JSON value: a key that names a time, a duration or a process
    (unless its value is a date), a number that reads as seconds since 1970 (2001 to 2128), a string
    with a time or a duration."""
    if isinstance(value, dict):
        found = []
        for k, v in value.items():
            a_date = isinstance(v, str) and DATE.fullmatch(v)
            if TIME_KEY.search(str(k)) and v is not None and not a_date:
                found.append(f"{where}: {k} = {v!r}")
            found += _in_json(where, v, str(k))
        return found
    if isinstance(value, list):
        return [f for v in value for f in _in_json(where, v, key)]
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return [f"{where}: {key} = {value}"] if 1e9 <= value < 5e9 else []
    return _in_text(where, value) if isinstance(value, str) else []


def finer_than_a_day(run: RunDir) -> list[str]:
    """Every time, duration or process record outside private/: the folder's own name, file names,
    JSON (every key and value), text, and the synthetic CSVs (their cells are rows: stamps and epoch
    numbers only); then the privacy report that travels with an export."""
    found = _in_text("the run folder's name", run.path.name, NAMES)
    for path in sorted(run.path.rglob("*")):
        rel = path.relative_to(run.path)
        if rel.parts[0] == "private":
            continue
        found += _in_text(f"the name {rel}", path.name, NAMES)
        if not path.is_file() or path.suffix in (".pt", ".parquet", ".npz", ".npy"):
            continue
        text = path.read_text()
        if path.suffix == ".json":
            found += _in_json(str(rel), json.loads(text))
        else:
            patterns = (ISO_TIME, STAMP, EPOCH) if path.suffix == ".csv" else TEXT
            found += _in_text(str(rel), text, patterns)
    report = privacy_report(run, sampling={"method": "unconditional"}, synthetic_rows=10)
    return (found + _in_json("the privacy report", json.loads(report_json(report)))
            + _in_text("the privacy report (markdown)", report_markdown(report)))


def _nothing_shared_the_steward_keeps_it(run: RunDir) -> None:
    """Nothing finer than a day is shared; the steward's own view keeps when the run was made and
    ended, the worker's record and how long training took."""
    assert finer_than_a_day(run) == []
    kept = {p.name for p in run.private_dir.iterdir()}
    assert {"status.json", "worker.json", "facts.json"} <= kept
    assert "worker.json" not in {p.name for p in run.path.iterdir()}
    assert run.status_time() is not None
    assert run.config()["created"] <= run.status_time()
    assert run.worker_records() and run.worker_pid() is not None
    training = json.loads((run.private_dir / "training.json").read_text())
    assert training["seconds"] >= 0 and run.events()[-1]["elapsed_s"] >= 0  # the train page's time


def test_a_fitted_table_and_linked_tables_share_no_time_finer_than_a_day(tmp_path):
    single = api.fit(demo_table(200), demo_schema(), "dp-tbart", epsilon=1.0, preset="tiny",
                     run_dir=tmp_path / "single", options={"epochs": 1}, review_rows=20)
    linked = api.fit(patients(60), public_schema(), "dp-tbart", epsilon=2.0, preset="tiny",
                     public_table=True, run_dir=tmp_path / "linked", options={"epochs": 2},
                     review_rows=10)
    for result in (single, linked):
        assert result.run.status()["state"] == "completed"
        _nothing_shared_the_steward_keeps_it(result.run)
    # a table the steward generates is named by the date and that day's count, in the order drawn
    names = [single.run.write_sample(demo_table(5), single.run.next_sample_name()).name
             for _ in range(2)]
    assert names[0] < names[1] and re.fullmatch(r"synthetic-\d{8}-001\.csv", names[0])
    assert finer_than_a_day(single.run) == []


def test_a_background_job_with_a_rule_shares_no_time_finer_than_a_day(worker_root):
    data = demo_schema().to_dict()
    data["rules"] = ["`hours-per-week` >= 30 or income == '<=50K'"]
    request = {"model": "dp-tbart", "preset": "tiny", "epsilon": 1.0, "options": {"epochs": 1},
               "review_rows": 20}
    run = jobs.start_fit_job(worker_root, demo_table(200), Schema.from_dict(data), request)
    wait_until(lambda: jobs.job_state(run)["state"] not in ("created", "running"), "the worker",
               PATIENCE_S)
    assert jobs.job_state(run)["state"] == "completed", run.worker_log.read_text()[-500:]
    _nothing_shared_the_steward_keeps_it(run)
    assert run.request()["created"] <= run.status_time()  # the job's request keeps it in private/
    summary = jobs.run_summary(run)
    assert summary["created"] == run.request()["created"] and summary["state"] == "completed"
    # runs started one after another sort as they were started: by the day's count
    assert jobs.new_run_path(worker_root, "dp-tbart").name > run.path.name


def test_a_run_folder_written_before_keeps_its_worker_record_and_status_time_at_the_top(tmp_path):
    """Runs written before this layout: worker.json and a status's time at the top of the folder
    still tell a live run from a dead one, and when the status was written."""
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        live, dead = RunDir.create(tmp_path / "live"), RunDir.create(tmp_path / "dead")
        for run in (live, dead):
            (run.private_dir / "status.json").unlink(missing_ok=True)  # as RunDir.create wrote it
            (run.path / "worker.json").write_text(json.dumps(process.record(sleeper.pid)))
            (run.path / "status.json").write_text(json.dumps(
                {"state": "running", "message": "training", "time": 1795889577.5}))
        assert jobs.job_state(live)["state"] == "running" and live.worker_pid() == sleeper.pid
        assert live.status_time() == pytest.approx(1795889577.5)
        sleeper.kill()
        sleeper.wait()
        assert jobs.job_state(dead)["state"] == "failed"
        assert "stopped unexpectedly" in dead.status()["message"]
    finally:
        if sleeper.poll() is None:
            sleeper.kill()
            sleeper.wait()


def test_the_scan_catches_each_kind_of_time_and_lets_dates_through():
    """The scan itself, on what the layout before this one shared: each kind of time it catches."""
    shared_before = {
        "config.json": {"created": 1795889575.23, "epsilon": 1.0},
        "status.json": {"state": "completed", "message": "8 steps in 14 s on CPU",
                        "time": 1795889577.82},
        "worker.json": {"pid": 3896, "started": 1795889573.58, "start_ticks": 18228},
    }
    found = {name: _in_json(name, value) for name, value in shared_before.items()}
    # a key that names a time and its epoch value count once each
    assert [len(f) for f in found.values()] == [2, 3, 4], found
    assert _in_text("a name", "synthetic-20261128-140312.csv")
    assert _in_text("a note", "at 2026-11-28T14:03") and _in_text("a log", "done at 14:03:12")
    assert _in_text("a message", "took 2.5 minutes")
    ledger = {"entries": [{"time": "2026-11-28", "epsilon": 0.5, "steps": 8}], "n_rows": 2000}
    assert _in_json("ledger.json", ledger) == []
    assert _in_text("names", "synthetic-20261128-001.csv 20261128-003-dp-tbart-ab12 8 steps") == []
