"""Background training jobs, the exported privacy report, fairness-controlled sampling, the schema
table the app edits, and the training-time estimate."""
from __future__ import annotations

import dataclasses
import json
import os
import signal
import time

import numpy as np
import pandas as pd
import pytest

from conftest import PATIENCE_S, wait_until
from synth_core import api
from synth_core.api import fit
from synth_core.runs import jobs
from synth_core.demo import demo_schema, demo_table
from synth_core.evaluate.fairness import demographic_parity_gap
from synth_core.models import get_model_class
from synth_core.release.fair_sampling import fair_sample, plan_conditioned_rows, planned_gap, share_for_gap
from synth_core.release.privacy_report import privacy_report, report_json, report_markdown
from synth_core.runs import RunDir
from synth_core.schema import ColumnSpec, Schema, SchemaError, draft_schema, read_table_bytes
from synth_core.runs.timing import estimate_fit_seconds
from workbench.schema_table import frame_to_schema, number_text, schema_to_frame, text_to_categories

SLOW_REQUEST = {"model": "dp-tbart", "preset": "tiny", "epsilon": 1.0, "accountant": "rdp",
                "options": {"epochs": 400, "batch_size": 16}, "seed": 0}


def wait(run: RunDir, until, timeout_s: float = PATIENCE_S):
    try:
        wait_until(until, "the worker", timeout_s)
    except AssertionError:
        raise AssertionError(f"timed out; status {run.status()}; log {run.worker_log.read_text()[-500:]}") from None


def test_cancel_keeps_the_model_and_charges_only_the_steps_taken(worker_root):
    tmp_path = worker_root
    run = jobs.start_fit_job(tmp_path, demo_table(400), demo_schema(), SLOW_REQUEST)
    wait(run, lambda: len(run.events()) >= 3)
    jobs.cancel_job(run)
    wait(run, lambda: jobs.job_state(run)["state"] not in ("created", "running"))
    assert jobs.job_state(run)["state"] == "cancelled"
    assert run.has_model()
    ledger = run.ledger()
    steps = [e for e in ledger.entries if e.mechanism.startswith("DP-SGD")][0]
    assert steps.details["cancelled"] and steps.details["steps"] < steps.details["steps_planned"]
    assert 0 < ledger.spent_epsilon < 1.0


def test_a_killed_worker_is_detected_and_its_steps_are_charged(worker_root):
    tmp_path = worker_root
    run = jobs.start_fit_job(tmp_path, demo_table(400), demo_schema(), SLOW_REQUEST)
    wait(run, lambda: len(run.events()) >= 3)
    os.kill(run.worker_pid(), signal.SIGKILL)
    wait(run, lambda: jobs.job_state(run)["state"] == "failed")
    assert "stopped unexpectedly" in run.status()["message"]
    ledger = run.ledger()
    interrupted = [e for e in ledger.entries if e.mechanism == "DP-SGD (interrupted)"]
    assert len(interrupted) == 1 and interrupted[0].details["steps"] >= 3 and 0 < ledger.spent_epsilon <= 1.0


def test_private_rows_stay_owner_only_and_the_holdout_never_trains(worker_root):
    tmp_path = worker_root
    table = demo_table(200)
    schema = demo_schema()
    # declared public: the training rows' count follows from it and the public share
    schema.rows = 200
    run = jobs.start_fit_job(tmp_path, table, schema, {**SLOW_REQUEST, "options": {}, "holdout_share": 0.25})
    # the review sample is written right after training, and the run is marked completed just after
    # it
    wait(run, lambda: run.review_sample.exists() and jobs.job_state(run)["state"] != "running")
    train, hold = jobs.read_private(run, "train"), jobs.read_private(run, "holdout")
    assert (len(train), len(hold)) == (150, 50)
    # the accountant saw only the training rows
    assert run.ledger().n_rows == 150 and run.ledger().rows_public
    for name in ("train", "holdout"):
        assert oct(os.stat(run.path / "private" / f"{name}.parquet").st_mode & 0o777) == "0o600"
    assert oct(os.stat(run.path).st_mode & 0o777) == "0o700"
    assert jobs.job_state(run)["state"] == "completed"
    listing = jobs.list_runs(tmp_path)
    assert listing[0]["state"] == "completed" and listing[0]["rows"] == 150


def test_bad_requests_are_refused_before_anything_is_written(worker_root):
    tmp_path = worker_root
    for bad, message in (({"epsilon": 0}, "ε must be a positive"), ({"holdout_share": 0.7}, "kept aside"),
                         ({"model": ""}, "names no model"), ({"colour": "red"}, "unknown request keys")):
        with pytest.raises(ValueError, match=message):
            jobs.start_fit_job(tmp_path / "runs", demo_table(50), demo_schema(), {**SLOW_REQUEST, **bad})
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


# --- the exported report ------------------------------------------------------------------------------
def test_the_report_carries_the_ledger_and_provenance_but_no_private_counts(tmp_path):
    table = demo_table(300)
    drafted = draft_schema(table)  # read from the data, never confirmed
    result = fit(table, drafted, model="dp-tbart", epsilon=1.0, accountant="rdp", preset="tiny",
                 run_dir=tmp_path / "run", accept_draft=True)
    report = privacy_report(result.run, sampling={"method": "unconditional"}, synthetic_rows=10)
    text = report_json(report)
    assert "private_validation_counts" in json.dumps(result.run.config())
    assert "private_validation_counts" not in text
    assert report["privacy"]["epsilon_spent"] <= report["privacy"]["epsilon_target"] == 1.0
    assert [e for e in report["privacy"]["ledger"] if e["kind"] == "dp-sgd"][0]["mechanism"].startswith("DP-SGD")
    assert report["schema_provenance"] == {**report["schema_provenance"], "drafted_from_data": True,
                                           "confirmed": False}
    md = report_markdown(report)
    assert "never confirmed" in md and "Drafted from the data: **yes**" in md
    # the first line says so
    assert md.startswith("**The schema of this table was read from the private data")
    assert "δ =" in md and result.run.path.name in md


# --- fairness-controlled sampling ---------------------------------------------------------------------
def test_conditioned_rows_go_where_they_close_the_gap():
    # 1,000 rows: group a 300 with 30 positives (10%), group b 700 with 210 (30%)
    counts, positives = {"a": 300, "b": 700}, {"a": 30, "b": 210}
    add_pos, add_neg = plan_conditioned_rows(counts, positives, 100)
    assert sum(add_pos.values()) + sum(add_neg.values()) == 100
    # (30 + 86) / (300 + 86) = 0.30: then the rest in proportion
    assert add_pos["a"] >= 85 and add_neg["b"] <= 10
    assert planned_gap(counts, positives, 100) < 0.02     # 10% more rows: 0.20 -> about 0
    # spread in proportion at the overall rate the same 100 rows would only have scaled the gap by
    # 0.9
    many_pos, many_neg = plan_conditioned_rows(counts, positives, 1000)
    assert planned_gap(counts, positives, 1000) < 0.01 and many_neg["a"] + many_neg["b"] > 0
    assert plan_conditioned_rows(counts, positives, 0) == ({}, {})
    with pytest.raises(ValueError):
        share_for_gap(pd.DataFrame({"s": ["a"], "y": ["1"]}), 10, "s", "y", "1", -0.1)


def test_demographic_parity_gap_of_a_known_table():
    table = pd.DataFrame({"s": ["a"] * 4 + ["b"] * 4, "y": ["1", "1", "1", "0", "1", "0", "0", "0"]})
    assert demographic_parity_gap(table, "s", "y", "1") == pytest.approx(0.5)


class BiasedModel:
    """A stand-in sampler with a known bias, to test the mixing arithmetic exactly (the app tests
    run the same function on a trained model)."""

    def __init__(self):
        self.schema = demo_schema()
        self.rng = np.random.default_rng(0)

    def sample(self, n, conditions=None, seed=None):
        conditions = conditions or {}
        sex = np.array([conditions.get("sex")] * n) if "sex" in conditions else self.rng.choice(["Female", "Male"], n)
        rate = np.where(sex == "Male", 0.6, 0.1)
        income = np.where(self.rng.random(n) < rate, ">50K", "<=50K")
        if "income" in conditions:
            income = np.array([conditions["income"]] * n)
        return pd.DataFrame({"sex": pd.Series(sex, dtype="string"), "income": pd.Series(income, dtype="string")})


def test_fair_sample_reaches_the_asked_gap():
    result = fair_sample(BiasedModel(), 20000, "sex", "income", ">50K", target_gap=0.1, seed=0, pilot_rows=20000)
    assert result.gap_before == pytest.approx(0.5, abs=0.03)
    assert result.gap_after == pytest.approx(0.1, abs=0.03)
    # aimed at the cells that close the gap, fewer rows than the mixing rule's 1 - 0.1/0.5 = 80%
    assert 0 < result.share < 0.6
    assert len(result.table) == 20000 and sum(result.conditioned_rows.values()) == round(result.share * 20000)
    tenth = fair_sample(BiasedModel(), 20000, "sex", "income", ">50K", share=0.1, seed=0, pilot_rows=20000)
    # positives for the group with the lower rate
    assert tenth.conditioned_rows == {"Female / >50K": 2000}
    assert tenth.gap_after < 0.8 * tenth.gap_before              # the proportional rule: 0.9
    everything = fair_sample(BiasedModel(), 2000, "sex", "income", ">50K", share=1.0, seed=0)
    assert len(everything.table) == 2000 and everything.gap_after < 0.1
    none = fair_sample(BiasedModel(), 5000, "sex", "income", ">50K", share=0.0, seed=0)
    assert none.conditioned_rows == {} and none.gap_after == pytest.approx(none.gap_before, abs=0.05)


def test_fair_sample_refuses_unusable_columns():
    with pytest.raises(SchemaError, match="categorical"):
        fair_sample(BiasedModel(), 10, "age", "income", ">50K", share=0.5)
    with pytest.raises(SchemaError, match="not a category"):
        fair_sample(BiasedModel(), 10, "sex", "income", "rich", share=0.5)


# --- the schema table the app edits -------------------------------------------------------------------
def test_schema_table_round_trip_and_reconfirmation():
    schema = draft_schema(demo_table(200)).confirm()
    frame = schema_to_frame(schema)
    assert frame_to_schema(frame, schema).to_dict() == schema.to_dict()
    assert set(frame["source"]) == {"drafted from the data, confirmed by you"}
    # no cell the grid would write "None" in: empty bounds and decimals are empty text, no role is a
    # dash
    assert not frame.drop(columns=["derived"]).isna().any().any() and "—" in set(frame["role"])
    assert number_text(2_000_000.0) == "2000000" and number_text(0.25) == "0.25" and number_text(None) == ""
    frame.loc[frame["column"] == "age", "upper"] = "120"  # as the grid's text cell gives it
    edited = frame_to_schema(frame, schema)
    # a changed fact needs confirming again
    assert edited["age"].upper == 120 and not edited.confirmed
    assert text_to_categories('a, "b, c", d') == ["a", "b, c", "d"]
    frame.loc[frame["column"] == "age", "lower"] = "500"
    with pytest.raises(SchemaError, match="age"):
        frame_to_schema(frame, schema)
    # text in a number's cell: said, not applied
    frame.loc[frame["column"] == "age", "lower"] = "ten"
    with pytest.raises(SchemaError, match="'ten' is not a number"):
        frame_to_schema(frame, schema)


def test_unreadable_uploads_are_schema_errors():
    with pytest.raises(SchemaError, match="not text"):
        read_table_bytes(bytes(range(256)), "x.csv")
    with pytest.raises(SchemaError, match="cannot read x.parquet"):
        read_table_bytes(b"not parquet at all", "x.parquet")


def test_time_estimate_adds_up_its_phases_and_the_next_one_is_a_lookup(tmp_path, monkeypatch):
    from synth_core.runs import timing
    monkeypatch.setenv("SYNTH_WORKBENCH_HOME", str(tmp_path / "home"))  # no costs stored yet
    schema = demo_schema()
    book = timing.CostBook()
    first = estimate_fit_seconds("dp-tbart", schema, "tiny", 1000, 1.0, 1e-4, probe_steps=2, review_rows=500,
                                 book=book)
    phases = first["phases"]
    assert first["steps"] > 0 and first["per_step_s"] > 0 and first["device"].startswith(("CPU", "GPU"))
    assert first["seconds"] == pytest.approx(sum(phases.values()))
    assert phases["training"] == pytest.approx(first["per_step_s"] * first["steps"]) and phases["sampling"] > 0
    # a pool
    assert timing.rows_drawn(500, calibrated=True) > 2 * timing.rows_drawn(500, calibrated=False)

    # a run measures its phases and stores them; the next estimate of that model is a lookup, not a
    # probe (the row count declared public: a noisy count 150 rows off would make the run's batch
    # too unlike the estimate's for its costs to stand in, and the estimate would rightly time the
    # model again)
    fit(demo_table(300), dataclasses.replace(schema, rows=300), model="dp-tbart", epsilon=1.0, accountant="rdp",
        preset="tiny", run_dir=tmp_path / "run", review_rows=100, calibration_share=0.0)
    monkeypatch.setattr(timing, "probe_costs", lambda *a, **k: pytest.fail("timed again"))
    again = estimate_fit_seconds("dp-tbart", schema, "tiny", 300, 1.0, 1e-4, review_rows=100)
    assert again["measured"].startswith("measured on a run") and again["seconds"] > 0
    # nothing was stored before it: its review sample's draw (100 rows) was guessed at DRAW_ROW_S a
    # row, and no round or step time was known
    config = RunDir(tmp_path / "run").config()
    assert config["sampling_estimate_s"] == pytest.approx(timing.DRAW_ROW_S * timing.rows_drawn(100, False))
    assert config["step_estimate_s"] is None and "sampling_estimate_s" not in RunDir(tmp_path / "run").public_config()
    # a pretrained language model costs another order of magnitude per row: its costs are kept
    # apart, and its probe steps are small
    key = timing.costs_key("dp-llmtgen", "cpu", "CPU", schema)
    assert timing.costs_key("dp-llmtgen", "cpu", "CPU", schema, {"backbone": "smollm2"}) == key + "|backbone smollm2"
    assert timing.costs_key("dp-llmtgen", "cpu", "CPU", schema, {"backbone": None}) == key
    assert get_model_class("dp-llmtgen").probe_batch_limit({"backbone": "smollm2"}) < timing.PROBE_MAX_BATCH


def test_a_first_estimate_times_a_fresh_workers_start_in_a_child_process(tmp_path, monkeypatch):
    """A worker imports the core and readies its device before its first step, which the process
    timing the estimate did long before: a GPU machine's runs took 4-10 s more than their first
    estimates, and a 2-core one's start had grown from 2.8 s to 3.5 s. A child process does the
    same, once per process and device; where it cannot run, the stored constant stands in."""
    from synth_core.runs import timing, worker_start
    monkeypatch.setenv("SYNTH_WORKBENCH_HOME", str(tmp_path / "home"))  # no costs stored yet
    worker_start.forget()
    first = estimate_fit_seconds("dp-tbart", demo_schema(), "tiny", 1000, 1.0, 1e-4, probe_steps=2)
    start_s, device_s = worker_start.seconds("cpu", timing.STARTUP_S)
    # measured, not the constant, and on the CPU no device to ready
    assert first["phases"]["start"] == start_s and start_s > 0 and start_s != timing.STARTUP_S
    assert device_s < 1.0
    # once a process: the next estimate does not start another child
    monkeypatch.setattr(worker_start.subprocess, "run", lambda *a, **k: pytest.fail("timed again"))
    assert worker_start.seconds("cpu", timing.STARTUP_S) == (start_s, device_s)
    monkeypatch.undo()
    # a child that fails (here: a Python that exits at once) leaves the constant, not an error
    monkeypatch.setattr(worker_start, "CHILD", "raise SystemExit(3)")
    worker_start.forget()
    assert worker_start.seconds("cpu", timing.STARTUP_S) == (timing.STARTUP_S, 0.0)
    worker_start.forget()


def test_a_probe_extends_a_steps_cost_along_the_rows_its_poisson_batches_drew(monkeypatch):
    """SmolLM2's first estimate was 40% short: its probes of 32 and 16 expected rows drew about as
    many rows each over their two timed steps, and the line through the expected sizes came out
    nearly flat."""
    from synth_core.runs import timing

    class Drawn:
        def draw(self, rows, seed=None):
            return None

    def probe(drawn: dict) -> float:
        def timed(model, schema, preset, batch, options, device, steps, fixed_too=False,
                  run_plan=None):
            # a step: 0.5 s, and 0.1 s a row
            return Drawn(), 0.5 + 0.1 * drawn[batch], drawn[batch], 0.0
        monkeypatch.setattr(timing, "_timed_steps", timed)
        costs, _ = timing.probe_costs("dp-llmtgen", demo_schema(), "cpu", 64, {"backbone": "/models/any"})
        assert costs.batch == 64
        return costs.per_step_s

    truth = 0.5 + 0.1 * 64
    assert probe({32: 24, 16: 10}) == pytest.approx(truth)  # the line through what was drawn
    # drawn about as many (the expected sizes' line: 3.7 s): the larger probe scaled in proportion,
    # over
    assert truth <= probe({32: 24, 16: 20}) <= 1.15 * truth


# --- the run folder under faults ----------------------------------------------------------------------
def _wait_exit(pid: int) -> None:
    deadline = time.time() + PATIENCE_S
    while time.time() < deadline:
        try:
            os.kill(pid, 0)
            if open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] == "Z":
                return
        except (ProcessLookupError, FileNotFoundError):
            return
        time.sleep(0.1)
    raise AssertionError("the worker did not exit")


def test_a_deleted_run_folder_stops_the_worker_and_is_never_recreated(worker_root):
    import shutil
    run = jobs.start_fit_job(worker_root, demo_table(400), demo_schema(), SLOW_REQUEST)
    wait(run, lambda: len(run.events()) >= 3)
    pid = run.worker_pid()
    for _ in range(5):  # the worker may append a line while the tree is removed
        try:
            shutil.rmtree(run.path)
            break
        except OSError:
            time.sleep(0.1)
    _wait_exit(pid)
    time.sleep(0.5)
    assert not run.path.exists()


def test_sigterm_keeps_the_model_as_cancel_does(worker_root):
    run = jobs.start_fit_job(worker_root, demo_table(400), demo_schema(), SLOW_REQUEST)
    wait(run, lambda: len(run.events()) >= 3)
    os.kill(run.worker_pid(), signal.SIGTERM)
    wait(run, lambda: jobs.job_state(run)["state"] not in ("created", "running"))
    assert jobs.job_state(run)["state"] == "cancelled" and run.has_model()
    (entry,) = [e for e in run.ledger().entries if e.kind == "dp-sgd"]
    assert entry.details["steps"] >= 3 and entry.details["cancelled"] and 0 < entry.epsilon < 1.0
    table, _ = api.sample(run.path, 5, seed=0)  # a cancelled run samples what it learned
    assert len(table) == 5


def test_overwrite_clears_the_old_model_and_sample_refuses_unfinished_runs(tmp_path):
    from synth_core.runs import RunError
    table, schema = demo_table(300), demo_schema()
    fit(table, schema, epsilon=1.0, preset="tiny", accountant="rdp", run_dir=tmp_path / "run", public_table=True)
    (tmp_path / "run" / "samples").mkdir()
    (tmp_path / "run" / "samples" / "old.csv").write_text("a\n1\n")

    def boom(event):
        raise RuntimeError("disk on fire")
    with pytest.raises(RuntimeError):
        fit(table, schema, epsilon=1.0, preset="tiny", accountant="rdp", run_dir=tmp_path / "run", overwrite=True,
            on_event=boom, public_table=True)
    run = RunDir(tmp_path / "run")
    assert run.status()["state"] == "failed" and not run.has_model() and not run.samples_dir.exists()
    with pytest.raises(RunError, match="failed, not completed"):
        api.sample(run.path, 5)
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("mine")
    with pytest.raises(RunError, match="not a run"):
        fit(table, schema, epsilon=1.0, preset="tiny", run_dir=tmp_path / "mine", overwrite=True, public_table=True)
    assert (tmp_path / "mine" / "notes.txt").read_text() == "mine"


def _shareable_json(run: RunDir) -> dict:
    """Every JSON value in the run folder outside private/ (what a steward shares), by file."""
    out = {}
    for path in run.path.rglob("*"):
        if path.is_file() and run.private_dir not in path.parents and path.suffix in (".json", ".jsonl"):
            out[str(path.relative_to(run.path))] = [json.loads(line) for line in path.read_text().splitlines()
                                                    if line.strip()] if path.suffix == ".jsonl" else \
                json.loads(path.read_text())
    return out


def _pairs(value) -> list[tuple]:
    """Every (key, value) in nested JSON."""
    if isinstance(value, dict):
        return [(k, v) for k, v in value.items()] + [p for v in value.values() for p in _pairs(v)]
    if isinstance(value, list):
        return [p for v in value for p in _pairs(v)]
    return []


@pytest.mark.parametrize("model", ["aim", "dp-tbart"])
def test_the_shareable_run_folder_holds_nothing_the_budget_did_not_pay_for(worker_root, model):
    """Issue 40 item 4: no exact row count, batch sizes, non-private losses or rows seen outside
    private/; the review sample sized by the released count (pooled with the released marginals);
    dates, not times, in the ledger; a keyed table fingerprint."""
    from synth_core.privacy.table_identity import legacy_fingerprint
    table = demo_table(347, seed=3)
    options = {} if model == "aim" else {"epochs": 2}
    run = jobs.start_fit_job(worker_root, table, demo_schema(), {**SLOW_REQUEST, "options": options,
                                                                 "model": model, "holdout_share": 0.0})
    wait(run, lambda: jobs.job_state(run)["state"] not in ("created", "running"))
    assert jobs.job_state(run)["state"] == "completed", run.status()
    shared = _shareable_json(run)
    assert set(shared) >= {"config.json", "ledger.json", "status.json", "request.json", "schema.json"}
    assert not {"events.jsonl", "training.json", "worker.log", "reports"} & {p.name for p in run.path.iterdir()}
    pairs = [p for v in shared.values() for p in _pairs(v)]
    assert not {k for k, _ in pairs} & {"holdout_rows", "samples_seen", "loss", "private_validation_counts"}
    ledger = run.ledger()
    (count,) = [e for e in ledger.entries if e.kind == "noisy-count"]
    # the released count
    assert {v for k, v in pairs if k in ("rows", "n_rows")} <= {count.details["count"]}
    assert ledger.n_rows == count.details["count"]
    # the released count, narrowed by the released marginals where the run measured them
    # (post-processing)
    from synth_core.api import load_model
    from synth_core.privacy.measurements import rows_to_draw
    drawn = rows_to_draw(count.details["count"], load_model(run.path).calibration)
    assert len(pd.read_csv(run.review_sample)) == min(drawn, jobs.REVIEW_ROWS)
    assert all(len(e.time) == 10 for e in ledger.entries)  # YYYY-MM-DD
    assert run.request()["table"] != legacy_fingerprint(table)
    # the steward's own view still has them
    assert run.request()["rows"] == 347 and run.config()["rows"] == 347
    assert jobs.list_runs(worker_root)[0]["rows"] == 347 and run.events()
    assert oct(run.private_dir.stat().st_mode & 0o777) == "0o700"


def test_columns_the_schema_leaves_out_never_reach_the_run_and_the_review_and_evaluate_take_the_upload(worker_root,
                                                                                                     monkeypatch):
    """Issue 41 item 1: a steward's table with an identifier and a case-number column the schema
    leaves out trains, and its review and `evaluate --real FILE` work on the table as uploaded
    (before: a dead end after the budget was spent, 'the real table has column(s) the schema does
    not declare')."""
    import contextlib
    import io
    from synth_core.cli import main
    from synth_core.evaluate import check_comparable
    table = demo_table(300, seed=5)
    table.insert(0, "person_id", range(100000, 100300))
    table["case_number"] = [f"CR-2021-{i:05d}" for i in range(300)]
    schema = demo_schema()
    run = jobs.start_fit_job(worker_root / "runs", table, schema,
                             {**SLOW_REQUEST, "options": {"epochs": 2}, "holdout_share": 0.2})
    wait(run, lambda: jobs.job_state(run)["state"] not in ("created", "running"))
    assert jobs.job_state(run)["state"] == "completed", run.status()
    for which in ("train", "holdout"):  # the private copy holds only what the schema names
        assert list(pd.read_parquet(run.private_path(which)).columns) == schema.names
    assert run.request()["left_out"] == ["person_id", "case_number"]
    # the steward's own, in private/
    assert "left_out" not in json.loads((run.path / "request.json").read_text())
    real, synthetic = check_comparable(jobs.read_private(run, "train"), pd.read_csv(run.review_sample), schema)
    assert len(real) == 240 and len(synthetic["synthetic"]) > 0
    # evaluate takes the file the steward has, and says once what it leaves out
    table.to_csv(worker_root / "upload.csv", index=False)
    pd.read_csv(run.review_sample).to_csv(worker_root / "synthetic.csv", index=False)
    monkeypatch.chdir(worker_root)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["evaluate", "--real", "upload.csv", "--synthetic", "synthetic.csv", "--schema",
                     str(run.path / "schema.json"), "--quick", "--out", "review"]) == 0
    text = out.getvalue()
    assert text.count("2 columns left out by the schema: 'person_id', 'case_number'") == 1 and "tvd" in text.lower()


def test_fairness_control_leaves_groups_too_small_to_judge_out_of_the_gap_and_names_them():
    """Issue 41 item 7: a group of one or two rows decided the gap ('before' 1.0) and could vanish
    unsaid. A group expected below `min_group_rows` is kept as sampled, out of the gap and the plan,
    and named; every group's rows before and after are given."""
    class TinyGroupModel:
        schema = Schema(columns=[ColumnSpec("race", "categorical", categories=["a", "b", "tiny"]),
                                 ColumnSpec("outcome", "categorical", categories=["good", "bad"])])

        def sample(self, n, conditions=None, seed=None):
            rng = np.random.default_rng(seed)
            conditions = conditions or {}
            race = np.full(n, conditions["race"]) if "race" in conditions else \
                rng.choice(["a", "b", "tiny"], n, p=[0.6, 0.3996, 0.0004])
            rate = np.select([race == "a", race == "b"], [0.6, 0.3], 1.0)
            outcome = np.full(n, conditions["outcome"]) if "outcome" in conditions else \
                np.where(rng.random(n) < rate, "good", "bad")
            return pd.DataFrame({"race": race, "outcome": outcome})

    out = fair_sample(TinyGroupModel(), 2000, "race", "outcome", "good", target_gap=0.02, seed=1, pilot_rows=20000)
    assert out.too_small == ["tiny"] and out.groups["tiny"]["rows_before"] < 30
    # a and b only: tiny's rate of 1 is left out
    assert abs(out.gap_before - 0.3) < 0.05 and out.gap_after <= 0.05
    assert not any(k.startswith("tiny") for k in out.conditioned_rows)  # no row aimed at it
    assert sum(d["rows_after"] for d in out.groups.values()) == 2000
    assert out.summary()["groups_too_small_to_judge"] == ["tiny"]
    with pytest.raises(ValueError, match="smallest group"):
        fair_sample(TinyGroupModel(), 100, "race", "outcome", "good", share=0.5, min_group_rows=0)


def test_the_train_page_says_when_the_review_draw_outlasts_its_estimate(tmp_path):
    """A calibrated review sample may draw up to four pools where the estimate counted one (a wide
    linked table: 28,128 persons drawn for 2,344): once the draw passes its estimate, the time left
    is unknown, not 0 s, and the page says how long the draw has taken."""
    from synth_core.runs.jobs import progress
    from workbench.display import drawing_text
    run = RunDir.create(tmp_path / "run")
    run.write_config({"model": "dp-tbart", "plan": {"kind": "dp-sgd", "steps": 10}, "sampling_estimate_s": 30.0})
    run.append_event({"step": 10, "steps": 10, "elapsed_s": 20.0, "epsilon": 1.0})
    stamp = time.time()
    os.utime(run._events_file(), (stamp - 10, stamp - 10))  # trained 10 s ago: within the estimate
    shown = progress(run)
    assert shown["remaining_s"] == pytest.approx(20.0, abs=2.0) and shown["drawing_s"] == pytest.approx(10, abs=2)
    assert "about 20 s left" in drawing_text(shown)
    os.utime(run._events_file(), (stamp - 95, stamp - 95))  # past it
    shown = progress(run)
    assert shown["remaining_s"] is None and shown["drawing_s"] == pytest.approx(95, abs=2)
    assert "1 min 35 s so far, longer than the 30 s estimated" in drawing_text(shown)


def test_a_generate_request_past_its_estimate_has_no_time_left_to_show():
    """The export page's background draw: 'about 0 s left' while a calibrated pool grows was wrong;
    past its estimate the job is overdue and says how long it has taken."""
    from concurrent.futures import Future
    from synth_core.release.generate import SamplingJob
    from workbench.display import past_estimate
    job = SamplingJob(key="run", rows=100, future=Future(), expected_s=30.0)
    assert not job.overdue and job.left() == pytest.approx(30.0, abs=2.0)
    job.started -= 40
    assert job.overdue and job.left() is None
    assert past_estimate(job.elapsed(), job.expected_s).startswith("40 s so far, longer than the 30 s estimated")
    # nothing timed: no estimate
    assert SamplingJob(key="run", rows=100, future=Future()).left() is None


def test_training_takes_the_cores_a_busy_neighbour_leaves_free(monkeypatch):
    """Beside a busy process on 2 cores, two torch threads made a DP-SGD step 15 times slower than
    one (each waits for the other at every operation): the worker and the estimate's probe take
    the cores free now, at least one."""
    import multiprocessing
    import os
    from synth_core.training.device import free_cores, torch_threads
    import torch
    monkeypatch.delenv("SYNTH_CPU_THREADS", raising=False)  # the tests pin it (conftest)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    cores = len(os.sched_getaffinity(0))
    assert 1 <= free_cores() <= cores
    busy = multiprocessing.get_context("spawn").Process(target=_spin, daemon=True)
    busy.start()
    try:
        time.sleep(0.5)
        assert free_cores() <= max(1, cores - 1)
    finally:
        busy.terminate()
        busy.join()
    before = torch.get_num_threads()
    with torch_threads(1):
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == before


def _spin() -> None:
    while True:
        pass
