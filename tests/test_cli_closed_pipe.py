"""A CLI fit stopped by SIGTERM after the reader of its output went away (issue 62, "Why": a fit
piped to a reader that had ended read `failed`, with a BrokenPipeError from the Ctrl-C handler's
message): what it says about the stop cannot be written, and the run still ends cancelled, its
ledger and the table's budget settled as for any cancel."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from conftest import wait_until
from synth_core.demo import demo_schema, demo_table
from synth_core.runs import RunDir
from test_faults import ROOT, _charged


# stdout alone, unbuffered (as under a service manager or in a container: the handler's message
# meets the closed pipe at once, the case); both, buffered (the progress bar meets it, and
# what stdout still holds at the end)
@pytest.mark.parametrize("closed", ["stdout", "stdout and stderr"])
def test_a_cli_fit_whose_reader_went_away_ends_cancelled_on_sigterm(closed, tmp_path):
    demo_table(600, seed=12).to_csv(tmp_path / "t.csv", index=False)
    demo_schema().save(tmp_path / "s.json")
    both = closed == "stdout and stderr"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    env.update(PYTHONPATH=str(ROOT), **({} if both else {"PYTHONUNBUFFERED": "1"}))
    log = open(tmp_path / "stderr.log", "w")
    proc = subprocess.Popen([sys.executable, "-m", "synth_core", "fit", "--data", "t.csv",
                             "--schema", "s.json", "--preset", "tiny", "--epochs", "400",
                             "--batch-size", "16", "--accountant", "rdp", "--epsilon", "1",
                             "--out", "run"], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT if both else log)
    try:
        run = RunDir(tmp_path / "run")
        wait_until(lambda: run.exists() and len(run.events()) >= 3, "three steps")
        proc.stdout.close()  # the reader went away: the fit's next message meets a closed pipe
        proc.terminate()
        proc.wait(timeout=600)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        log.close()
    said = (tmp_path / "stderr.log").read_text()
    status = run.status()
    assert status["state"] == "cancelled", (status, said[-3000:])
    assert proc.returncode == 0, said[-3000:]  # the reader's going is no error of the fit's
    assert "BrokenPipeError" not in said and "Traceback" not in said, said[-3000:]
    ledger = run.ledger()
    entry = ledger.training_entry()
    assert entry.details["cancelled"] and entry.details["steps"] < entry.details["steps_planned"]
    assert _charged(run) == pytest.approx(ledger.spent_epsilon) and ledger.spent_epsilon < 1.0
