"""One fit request (issue 42 item 1): the API, the CLI, background jobs and the worker build the
same FitRequest, its defaults are the only ones, and its check says every problem at once before
anything is spent."""
from __future__ import annotations

import dataclasses

import pytest

from synth_core.cli_args import build_parser
from synth_core.privacy import BudgetError
from synth_core.privacy.budget import DEFAULT_CALIBRATION_SHARE
from synth_core.request import MIN_ROWS, REVIEW_RELEASED, FitRequest
from synth_core.runs import RunDir, jobs
from synth_core.schema import SchemaError


def test_every_problem_is_said_at_once_and_nothing_is_spent(toy_schema, toy_table, tmp_path):
    from synth_core import api
    from synth_core.home import budgets_path
    bad = FitRequest(model="dp-tbart", epsilon=-1.0, preset="huge", calibration_share=2.0, holdout_share=0.7)
    problems = [str(p) for p in bad.problems(toy_schema)]
    assert len(problems) == 4, problems
    assert any("preset" in p for p in problems) and any("ε must be" in p for p in problems)
    assert any("calibration share" in p for p in problems) and any("kept aside" in p for p in problems)
    with pytest.raises(ValueError) as caught:
        api.fit(toy_table, toy_schema, bad, run_dir=tmp_path / "run")
    assert all(p in str(caught.value) for p in problems)  # one message, every problem
    # nothing made, nothing reserved
    assert not (tmp_path / "run").exists() and not budgets_path().exists()
    unbounded = dataclasses.replace(toy_schema, columns=[dataclasses.replace(c, lower=None, upper=None)
                                                         if c.name == "hours" else c for c in toy_schema.columns])
    assert any("bounds" in str(p) for p in FitRequest().problems(unbounded))
    assert not FitRequest(bounds_epsilon=0.1).problems(unbounded)  # paid for: no problem
    drafted = dataclasses.replace(toy_schema, drafted_from_data=True, confirmed=False)
    assert isinstance(FitRequest().problems(drafted)[0], SchemaError)
    assert not FitRequest(accept_draft=True).problems(drafted)
    with pytest.raises(BudgetError, match=f"at least {MIN_ROWS} rows"):
        # a model's name will do
        api.fit(toy_table.head(MIN_ROWS - 1), toy_schema, "aim", public_table=True)
    with pytest.raises(TypeError, match="FitRequest or a model's name"):
        api.fit(toy_table, toy_schema, 3)


def test_the_defaults_are_the_requests_own(toy_schema):
    named = FitRequest(model="dp-tbart").resolved(toy_schema, 600)
    assert (named.preset, named.calibration_share, named.quantile_share) == ("cpu", DEFAULT_CALIBRATION_SHARE, 0.0)
    assert named.choice is None
    # it measures them itself
    assert FitRequest(model="aim").resolved(toy_schema, 600).calibration_share == 0.0
    assert FitRequest(model="dp-tbart", calibration_share=0.0).resolved(toy_schema, 600).calibration_share == 0.0
    auto = FitRequest(model="auto", epsilon=1.0).resolved(toy_schema, 600)
    assert auto.choice is not None and auto.model == auto.choice.family and auto.auto
    assert (auto.preset, auto.calibration_share) == (auto.choice.preset, auto.choice.calibration_share)
    assert FitRequest(model="auto", preset="tiny").resolved(toy_schema, 600).preset == "tiny"


def test_the_cli_builds_the_request_the_api_defaults_to():
    from synth_core.cli import _request
    args = build_parser().parse_args(["fit", "--data", "t.csv", "--schema", "s.json", "--epsilon", "2", "--out", "r"])
    # every default the same: the request's (the CLI names the table in the book by its file, as the
    # app does)
    assert _request(args) == FitRequest(epsilon=2.0, table_name="t.csv")
    args = build_parser().parse_args(["fit", "--data", "t.csv", "--schema", "s.json", "--epsilon", "1", "--out", "r",
                                      "--model", "aim", "--quantile-share", "0.1", "--option", "rounds=5",
                                      "--public-table"])
    assert _request(args) == FitRequest(model="aim", epsilon=1.0, quantile_share=0.1, options={"rounds": 5},
                                        public_table=True, table_name="t.csv")


def test_a_job_stores_the_request_and_its_worker_reads_it_back(toy_schema, toy_table, tmp_path, monkeypatch):
    # the request, not training
    monkeypatch.setattr(jobs, "_start_worker", lambda run, python, processes: run)
    asked = FitRequest(model="dp-tbart", preset="tiny", epsilon=1.0, quantile_share=0.1, options={"epochs": 1},
                       holdout_share=0.1, name="mine")
    run = jobs.start_fit_job(tmp_path, toy_table, toy_schema, asked)
    stored = RunDir(run.path).request()
    assert set(FitRequest().to_dict()) <= set(stored)
    read = FitRequest.from_dict(stored, extra_ok=True)  # as the worker reads it
    assert read == asked.replace(review_rows=REVIEW_RELEASED)  # a job draws its review sample
    with pytest.raises(ValueError, match="unknown request keys: colour"):
        FitRequest.from_dict({"model": "aim", "colour": "blue"})
    with pytest.raises(ValueError, match="unknown request keys"):
        jobs.start_fit_job(tmp_path, toy_table, toy_schema, {"model": "aim", "epsilon": 1.0, "colour": "blue"})
