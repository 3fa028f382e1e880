"""One DP-SGD run across processes under torchrun, on the CPU with gloo (training.distributed): the
step equals the single-process step, the accounting equals the single-process plan, rank 0 alone
writes the run, a cancel stops every rank, and a killed rank fails the run with its steps
charged."""
from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import wait_until
from synth_core import api
from synth_core.demo import demo_schema, demo_table
from synth_core.models import get_model_class
from synth_core.privacy.ledger import TRAINING
from synth_core.runs import RunDir, jobs

ROOT = Path(__file__).resolve().parents[1]
TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2"]


def env() -> dict:
    """This test's environment (its own workbench home), one thread a process: two processes on two
    cores."""
    return {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}

SLOW = {"epochs": 400, "batch_size": 16}


def test_one_noiseless_step_over_two_processes_equals_the_mean_of_clipped_gradients(tmp_path):
    out = tmp_path / "found.json"
    done = subprocess.run([*TORCHRUN, str(ROOT / "tests" / "distributed_checks.py"), str(out)], env=env(),
                          cwd=tmp_path, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    ranks = json.loads(out.read_text())
    for found in ranks:
        for name, value in found.items():
            if name.endswith("weights"):
                assert value is True, name  # Opacus' DPDDP: every rank starts from rank 0's weights
            elif name.startswith(("hooks", "ghost", "torch.func")):
                # Opacus' hooks, ghost clipping and torch.func per-sample gradients, with an empty
                # batch on rank 1 too: the same step as one process, and as clipping row by row
                assert value < 1e-6, (name, value)
        assert found["stop agreed"] is True  # rank 1 alone asked: both stop after the same step
        # events: the global batch and its mean loss
        assert found["totals"] == [5, pytest.approx(2.2)]
    assert ranks[0]["gradient"] == ranks[1]["gradient"]  # every rank applies the same update


def _kill_rank(torchrun_pid: int, rank: int) -> int:
    """SIGKILL the process of `rank` started by torchrun (found by its environment); its pid."""
    for child in Path(f"/proc/{torchrun_pid}/task/{torchrun_pid}/children").read_text().split():
        env = Path(f"/proc/{child}/environ").read_bytes().split(b"\0")
        if f"RANK={rank}".encode() in env:
            os.kill(int(child), signal.SIGKILL)
            return int(child)
    raise AssertionError(f"no process of rank {rank} under torchrun ({torchrun_pid})")


def _training_entry(run: RunDir):
    (entry,) = [e for e in run.ledger().entries if e.kind == TRAINING]
    return entry


@pytest.mark.slow  # 10-13 s: two torchrun ranks; the noiseless-step test stays fast
@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="finds the ranks' processes through /proc")
def test_the_app_trains_in_two_processes_and_a_cancel_stops_every_rank(worker_root):
    # the count declared public: a plan to compare with
    schema = dataclasses.replace(demo_schema(), rows=400)
    request = {"model": "dp-tbart", "preset": "tiny", "epsilon": 1.0, "accountant": "rdp", "options": SLOW,
               "seed": 0, "processes": 2, "review_rows": 50, "calibration_share": 0.0}
    run = jobs.start_fit_job(worker_root, demo_table(400), schema, request)
    assert b"torch.distributed.run" in Path(f"/proc/{run.worker_pid()}/cmdline").read_bytes()
    wait_until(lambda: len(run.events()) >= 3 or jobs.job_state(run)["state"] == "failed", "two ranks training")
    jobs.cancel_job(run)
    wait_until(lambda: jobs.job_state(run)["state"] not in ("created", "running"), "every rank to stop")
    status = jobs.job_state(run)
    assert status["state"] == "cancelled", (status, run.worker_log.read_text()[-3000:])
    events = run.events()
    # one writer: each step once
    assert [e["step"] for e in events] == list(range(1, len(events) + 1))
    entry = _training_entry(run)
    assert entry.details["processes"] == 2 and entry.details["cancelled"]
    assert entry.details["steps"] in (len(events), len(events) + 1)
    # the accounting is the single-process plan's for the same table and budget
    plan = run.config()["plan"]
    alone = get_model_class("dp-tbart")(schema, preset="tiny", **SLOW).plan_privacy(
        400, 1.0, run.ledger().target_delta, "rdp")
    assert (plan["noise_multiplier"], plan["sample_rate"], plan["steps"]) == (
        alone.noise_multiplier, alone.sample_rate, alone.steps)
    assert entry.epsilon == pytest.approx(alone.spent(entry.details["steps"])[0])
    assert 0 < run.ledger().spent_epsilon <= 1.0
    table, _ = api.sample(run.path, 20, seed=1)  # rank 0 saved the model: it reloads and samples
    assert len(table) == 20 and list(table.columns) == schema.names


@pytest.mark.slow  # 10-13 s: two torchrun ranks; the noiseless-step test stays fast
def test_a_killed_rank_fails_the_run_and_its_steps_are_charged(tmp_path):
    data, schema_path = tmp_path / "rows.csv", tmp_path / "schema.json"
    demo_table(400).to_csv(data, index=False)
    demo_schema().save(schema_path)
    out = tmp_path / "run"
    proc = subprocess.Popen([*TORCHRUN, "-m", "synth_core", "fit", "--data", str(data), "--schema", str(schema_path),
                             "--model", "dp-tbart", "--preset", "tiny", "--epsilon", "1", "--accountant", "rdp",
                             "--epochs", "400", "--batch-size", "16", "--out", str(out)],
                            env=env(), cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True)
    try:
        run = RunDir(out)
        wait_until(lambda: run.exists() and len(run.events()) >= 3 or proc.poll() is not None,
                   "two ranks training")
        assert proc.poll() is None, proc.stdout.read().decode()[-3000:]
        _kill_rank(proc.pid, 1)
        log = proc.communicate(timeout=900)[0].decode()
        assert proc.returncode != 0
        status = run.status()
        assert status["state"] == "failed" and "another training process stopped" in status["message"], log[-3000:]
        entry = _training_entry(run)
        assert entry.mechanism == "DP-SGD (interrupted)" and entry.details["processes"] == 2
        assert entry.details["steps"] >= len(run.events()) >= 3
        assert 0 < run.ledger().spent_epsilon <= 1.0
        assert log.count("calibrating noise") == 1  # rank 0 alone reports
    finally:
        try:
            # torchrun and what is left of its ranks, pass or fail
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()
