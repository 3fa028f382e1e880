import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from synth_core import api
from synth_core.encoding import TokenEncoder
from synth_core.models import SamplingError
from synth_core.runs import RunDir, RunError
from synth_core.schema import ColumnSpec, Schema, SchemaError, validate_table

ROOT = Path(__file__).resolve().parents[1]


def fit_tiny(schema, table, tmp_path=None, **options):
    opts = {"epochs": 3, "batch_size": 100, "lr": 2e-2}
    opts.update(options)
    # RDP: the PRV accountant is slow at the large sampling rates of tiny tables (tests below use
    # PRV too)
    return api.fit(table, schema, epsilon=8.0, preset="tiny", options=opts, seed=0, accountant="rdp",
                   run_dir=None if tmp_path is None else tmp_path / "run", public_table=True,
                   calibration_share=0.0)  # the model's own rows (calibration: test_calibration.py)


# --- encoding: from the public schema only ---------------------------------------------------------
def test_bins_come_from_public_bounds_not_from_the_data(toy_schema):
    enc = TokenEncoder(toy_schema, n_bins=10)
    hours = enc.codecs[3]
    assert np.allclose(hours.edges, np.linspace(0, 100, 11))
    # a table whose values sit far inside the bounds does not move the bins
    narrow = pd.DataFrame({"age": [40.0] * 5, "sex": ["Male"] * 5, "job": ["nurse"] * 5, "hours": [50.0] * 5})
    enc2 = TokenEncoder(toy_schema, n_bins=10)
    enc2.encode(narrow)
    assert np.array_equal(enc2.codecs[3].edges, hours.edges)
    assert enc.vocab_size == enc2.vocab_size


def test_integer_column_with_small_range_gets_one_bin_per_value_and_log_bins_are_fine_near_zero():
    small = ColumnSpec("n", "integer", lower=1, upper=16)
    assert len(small.edges(100)) - 1 == 16
    heavy = ColumnSpec("gain", "integer", lower=0, upper=99999, binning="log")
    edges = heavy.edges(100)
    assert edges[0] == 0 and edges[-1] == pytest.approx(99999) and edges[1] < 1


def test_encode_decode_round_trip_keeps_categories_and_bins(toy_schema, toy_table):
    clean, _ = validate_table(toy_table, toy_schema)
    enc = TokenEncoder(toy_schema, n_bins=100)
    tokens = enc.encode(clean)
    mask = enc.vocab_mask()
    for j in range(enc.n_columns):  # every token lies in its own column's slice
        assert mask[j, tokens[:, j]].all()
    back = enc.decode(tokens, np.random.default_rng(0))
    assert back["sex"].tolist() == clean["sex"].tolist()
    assert back["job"].isna().tolist() == clean["job"].isna().tolist()
    assert (back["age"] == clean["age"]).all()  # one bin per integer
    assert (np.abs(back["hours"] - clean["hours"]) <= 1.0 + 1e-9).all()  # within a 1-wide bin
    mid = enc.decode(tokens, np.random.default_rng(0), numeric_decoding="midpoint")
    assert set(np.round(mid["hours"] % 1, 6)) <= {0.5}


# --- the model ---------------------------------------------------------------------------------------
def test_masked_sampling_only_produces_valid_tokens(toy_schema, toy_table):
    result = fit_tiny(toy_schema, toy_table)
    model = result.model
    gen = torch.Generator().manual_seed(0)
    tokens = model.generate_tokens(500, {}, [], gen)
    mask = model.encoder.vocab_mask()
    for j in range(model.encoder.n_columns):
        assert mask[j, tokens[:, j]].all()
    synth = model.sample(300, seed=1)
    assert list(synth.columns) == toy_schema.names and len(synth) == 300
    assert set(synth["sex"]) <= {"Female", "Male"}
    assert set(synth["job"].dropna()) <= {"clerk", "nurse", "pilot"}
    assert synth["age"].between(18, 80).all() and (synth["age"] % 1 == 0).all()
    assert synth["hours"].between(0, 100).all()


def test_cached_sampling_sees_exactly_what_the_full_forward_sees(toy_schema, toy_table):
    net = fit_tiny(toy_schema, toy_table, n_layer=2).model.net
    C = len(toy_schema.columns)
    tokens_in = torch.randint(1, 5, (7, C))
    order = torch.arange(C).expand(7, C)
    full = net.hidden(tokens_in, order)
    caches = [dict() for _ in net.blocks]
    step_by_step = torch.cat([net.hidden(tokens_in[:, t:t + 1], order[:, t:t + 1], caches, start=t)
                              for t in range(C)], dim=1)
    assert torch.allclose(full, step_by_step, atol=1e-5)


def test_tiny_fit_and_sample_take_seconds_and_stay_within_budget(toy_schema, toy_table):
    import time
    t = time.perf_counter()
    result = fit_tiny(toy_schema, toy_table)
    result.model.sample(200, seed=0)
    assert time.perf_counter() - t < 120  # seconds on a quiet machine; generous for a loaded one
    assert result.ledger.spent_epsilon <= 8.0
    assert result.ledger.spent_epsilon >= 0.95 * 8.0
    assert result.model.plan.sample_rate < 1.0


def test_the_seed_reproduces_sampling_but_not_training(toy_schema, toy_table):
    model = fit_tiny(toy_schema, toy_table, random_order=True).model
    a = model.sample(100, seed=4)
    torch.manual_seed(999)  # global state in between must not matter
    pd.testing.assert_frame_equal(a, model.sample(100, seed=4))
    # same seed: DP noise is secret
    again = fit_tiny(toy_schema, toy_table, random_order=True).model
    assert not again.sample(100, seed=4).equals(a)


def test_tiny_model_learns_the_dependency(toy_schema, toy_table):
    result = fit_tiny(toy_schema, toy_table, epochs=20, n_embd=32)
    synth = result.model.sample(2000, seed=0)
    female = synth[synth["sex"] == "Female"]["job"].value_counts(normalize=True)
    male = synth[synth["sex"] == "Male"]["job"].value_counts(normalize=True)
    assert female.get("nurse", 0) > female.get("pilot", 0)
    assert male.get("pilot", 0) > male.get("nurse", 0)


def test_conditions_on_leading_columns_are_exact(toy_schema, toy_table):
    model = fit_tiny(toy_schema, toy_table).model
    synth = model.sample(200, conditions={"age": 30}, seed=0)
    assert (synth["age"] == 30).all()
    assert model.last_sample_info["method"] == "exact"


def test_conditions_on_later_columns_use_rejection_and_report_acceptance(toy_schema, toy_table):
    model = fit_tiny(toy_schema, toy_table).model
    synth = model.sample(100, conditions={"sex": "Female", "job": "nurse"}, seed=0)
    assert (synth["sex"] == "Female").all() and (synth["job"] == "nurse").all()
    info = model.last_sample_info
    assert info["method"] == "rejection" and 0 < info["acceptance_rate"] <= 1
    assert set(info["rejection_columns"]) == {"sex", "job"}


def test_random_order_model_conditions_exactly_on_any_column(toy_schema, toy_table):
    model = fit_tiny(toy_schema, toy_table, random_order=True).model
    synth = model.sample(150, conditions={"job": "pilot", "hours": 42.0}, seed=0)
    assert (synth["job"] == "pilot").all() and (synth["hours"] == 42.0).all()
    assert model.last_sample_info["method"] == "exact"


def test_bad_conditions_and_impossible_requests_are_clear_errors(toy_schema, toy_table):
    model = fit_tiny(toy_schema, toy_table).model
    with pytest.raises(SchemaError, match="no public category 'astronaut'"):
        model.sample(10, conditions={"job": "astronaut"})
    with pytest.raises(SchemaError, match="no such column"):
        model.sample(10, conditions={"shoe": "42"})
    with pytest.raises(SchemaError, match="outside the public bounds"):
        model.sample(10, conditions={"age": 200})
    with pytest.raises(ValueError, match="positive integer"):
        model.sample(0)
    with pytest.raises(SamplingError, match="acceptance rate"):
        model.sample(50, conditions={"sex": "Female", "job": "pilot", "hours": 99.5}, max_tries_factor=2)


# --- runs on disk ----------------------------------------------------------------------------------
def test_run_directory_reloads_and_samples_without_retraining(toy_schema, toy_table, tmp_path):
    result = fit_tiny(toy_schema, toy_table, tmp_path)
    run = RunDir(tmp_path / "run")
    assert run.status()["state"] == "completed"
    assert {"config.json", "schema.json", "ledger.json", "status.json", "private"} <= {p.name for p in run.path.iterdir()}
    # the losses and batch sizes: the steward's own
    assert (run.private_dir / "events.jsonl").exists()
    events = run.events()
    assert len(events) == result.model.train_result.steps_done
    assert all({"step", "epoch", "loss", "epsilon", "samples_per_s"} <= set(e) for e in events)
    assert [e["epsilon"] for e in events] == sorted(e["epsilon"] for e in events)
    ledger = run.ledger()
    assert ledger.spent_epsilon <= 8.0 and ledger.training_entry().mechanism.startswith("DP-SGD")
    # the private table is not in the run directory
    blob = b"".join(p.read_bytes() for p in run.path.rglob("*") if p.is_file() and p.suffix != ".pt")
    assert b"nurse,Female" not in blob and b"pilot" in blob  # categories (public) yes, rows no
    loaded = api.load_model(run.path)
    a = loaded.sample(50, seed=3)
    b = result.model.sample(50, seed=3)
    pd.testing.assert_frame_equal(a, b)


def test_cancelled_run_keeps_its_model_and_is_marked(toy_schema, toy_table, tmp_path):
    seen = []
    api.fit(toy_table, toy_schema, epsilon=4.0, preset="tiny", options={"epochs": 5, "batch_size": 50},
                     accountant="rdp", run_dir=tmp_path / "run", on_event=seen.append,
                     should_stop=lambda: len(seen) >= 2, public_table=True)
    run = RunDir(tmp_path / "run")
    assert run.status()["state"] == "cancelled" and "kept" in run.status()["message"]
    assert run.has_model() and len(run.events()) == 2
    assert 0 < run.ledger().spent_epsilon < 4.0
    assert len(api.load_model(run.path).sample(5, seed=0)) == 5


def test_crash_leaves_a_readable_failed_run_with_the_spent_budget(toy_schema, toy_table, tmp_path):
    def boom(event):
        if event["step"] == 2:
            raise RuntimeError("disk on fire")
    with pytest.raises(RuntimeError):
        api.fit(toy_table, toy_schema, epsilon=4.0, preset="tiny", options={"epochs": 5, "batch_size": 50},
                accountant="rdp", run_dir=tmp_path / "run", on_event=boom, public_table=True)
    run = RunDir(tmp_path / "run")
    assert run.status()["state"] == "failed" and "disk on fire" in run.status()["message"]
    assert run.ledger().spent_epsilon > 0  # the steps taken were paid for
    with pytest.raises(RunError, match="no trained model"):
        api.load_model(run.path)


def test_existing_run_is_not_overwritten_by_accident(toy_schema, toy_table, tmp_path):
    fit_tiny(toy_schema, toy_table, tmp_path)
    with pytest.raises(RunError, match="already holds a run"):
        fit_tiny(toy_schema, toy_table, tmp_path)


def test_drafted_unconfirmed_schema_is_flagged_in_the_ledger(toy_table, tmp_path):
    from synth_core.schema import draft_schema
    schema = draft_schema(toy_table)
    # refused unless the steward accepts it
    with pytest.raises(SchemaError, match="never confirmed"):
        api.fit(toy_table, schema, epsilon=2.0, preset="tiny", accountant="rdp", run_dir=tmp_path / "refused", public_table=True)
    assert not (tmp_path / "refused").exists()
    result = api.fit(toy_table, schema, epsilon=2.0, preset="tiny", accountant="rdp", run_dir=tmp_path / "run",
                     accept_draft=True, public_table=True)
    ledger = RunDir(tmp_path / "run").ledger().to_dict()
    assert ledger["schema_provenance"]["drafted_from_data"] and not ledger["schema_provenance"]["confirmed"]
    assert any("drafted" in w for w in ledger["warnings"])
    assert any("drafted" in w for w in result.warnings)


def test_missing_bounds_are_estimated_with_dp_and_paid_for(toy_schema, toy_table):
    toy_schema["hours"].lower = None
    toy_schema["hours"].upper = None
    with pytest.raises(SchemaError, match="without public bounds.*hours"):
        api.fit(toy_table, toy_schema, epsilon=2.0, preset="tiny", public_table=True)
    result = api.fit(toy_table, toy_schema, epsilon=2.0, bounds_epsilon=0.5, preset="tiny",
                     accountant="rdp", coarse_range=(0.0, 1000.0), public_table=True)
    entries = result.ledger.entries
    (bounds,) = [e for e in entries if e.kind == "dp-bounds"]
    assert bounds.epsilon == 0.5
    assert result.ledger.spent_epsilon <= 2.0
    assert result.ledger.training_entry().epsilon <= 1.5
    lo, hi = result.schema["hours"].lower, result.schema["hours"].upper
    assert 0 <= lo < 20 and 50 < hi <= 1000


# --- the CLI end to end ----------------------------------------------------------------------------
def run_cli(*args, cwd):
    return subprocess.run([sys.executable, "-m", "synth_core", *args], cwd=cwd, capture_output=True, text=True,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "2",
                               "SYNTH_WORKBENCH_HOME": os.environ["SYNTH_WORKBENCH_HOME"]})


def test_cli_draft_fit_sample_end_to_end(toy_table, tmp_path, capsys, monkeypatch):
    from synth_core.cli import main
    data = tmp_path / "people.csv"
    toy_table.to_csv(data, index=False)
    # the module entry point in a process of its own, once; the other steps in-process (each process
    # of its own spends seconds importing torch)
    r = run_cli("schema", "draft", "--data", str(data), "--out", str(tmp_path / "s.json"), cwd=tmp_path)
    assert r.returncode == 0 and "DRAFTED FROM THE DATA" in r.stdout
    monkeypatch.chdir(tmp_path)
    assert main(["schema", "confirm", str(tmp_path / "s.json")]) == 0
    assert main(["fit", "--data", str(data), "--schema", str(tmp_path / "s.json"), "--epsilon", "2",
                 "--preset", "tiny", "--out", str(tmp_path / "run")]) == 0
    out = capsys.readouterr()
    assert "ε spent" in out.out and "DP-SGD" in out.err  # the progress bar goes to stderr
    assert main(["sample", "--run", str(tmp_path / "run"), "--rows", "40", "--out", str(tmp_path / "synth.csv"),
                 "--condition", "sex=Female"]) == 0
    synth = pd.read_csv(tmp_path / "synth.csv")
    assert len(synth) == 40 and (synth["sex"] == "Female").all()
    capsys.readouterr()
    assert main(["runs", str(tmp_path / "run"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["ledger"]["spent_epsilon"] <= 2.0


def test_cli_reports_bad_input_in_one_line(tmp_path, capsys):
    # in-process (a process of its own spends seconds importing torch; the module entry point runs
    # in one above)
    from synth_core.cli import main
    bad = tmp_path / "bad.csv"
    bad.write_text("a,a\n1,2\n")
    assert main(["schema", "draft", "--data", str(bad), "--out", str(tmp_path / "s.json")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and len(err.strip().splitlines()) == 1
    assert main(["sample", "--run", str(tmp_path / "nope"), "--rows", "5", "--out", str(tmp_path / "x.csv")]) == 2
    err = capsys.readouterr().err
    assert "no run" in err and len(err.strip().splitlines()) == 1


def test_demo_command_trains_and_samples_on_the_built_in_table(tmp_path, capsys):
    from synth_core.cli import main
    from synth_core.demo import demo_schema, demo_table
    clean, report = validate_table(demo_table(), demo_schema())
    assert len(clean) == 4000 and not report.summary()
    assert main(["demo", "--preset", "tiny", "--out", str(tmp_path / "demo"), "--rows", "30"]) == 0
    synth = pd.read_csv(tmp_path / "demo" / "samples" / "synthetic.csv")
    assert len(synth) == 30 and list(synth.columns) == demo_schema().names
    assert "ε spent" in capsys.readouterr().out


def test_the_demo_csv_and_a_confirm_that_shows_what_it_confirms(tmp_path, monkeypatch, capsys):
    """README's example needs files: `demo --csv` writes the demo table and its schema; `schema
    confirm` lists every fact it confirms."""
    from synth_core.cli import main
    monkeypatch.chdir(tmp_path)
    assert main(["demo", "--csv", "demo.csv"]) == 0
    assert len(pd.read_csv("demo.csv")) == 4000 and "fit --data demo.csv --schema demo.schema.json" in capsys.readouterr().out
    assert main(["schema", "confirm", "demo.schema.json"]) == 0
    out = capsys.readouterr().out
    assert "age: integer, from 17 to 90" in out and "income: categories: <=50K, >50K; role target" in out
    assert Schema.load("demo.schema.json").confirmed
