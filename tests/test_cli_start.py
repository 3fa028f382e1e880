"""The command line answers at once where nothing is trained (issue 41 item 9): `--help`, `runs` and
the schema commands import neither torch nor Opacus (about 8 s of imports on a loaded 2-core
machine); the commands that train import them when they run, and sampling imports torch alone.
No wall-clock limit here: what is checked is what gets imported."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from synth_core import api
from synth_core.demo import demo_schema, demo_table

ROOT = Path(__file__).resolve().parents[1]
PROBE = """
import contextlib, io, json, sys
from synth_core.cli import main
out = io.StringIO()
with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
    try:
        code = main(sys.argv[1:])
    except SystemExit as e:
        code = e.code
print(json.dumps({"code": code, "torch": "torch" in sys.modules, "opacus": "opacus" in sys.modules,
                  "sklearn": "sklearn" in sys.modules, "out": out.getvalue()}))
"""


def _probe(argv: list[str], cwd: Path) -> dict:
    done = subprocess.run([sys.executable, "-c", PROBE, *argv], cwd=cwd, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_help_runs_and_the_schema_commands_import_neither_torch_nor_opacus(tmp_path):
    table = demo_table(200, seed=1)
    table.to_csv(tmp_path / "t.csv", index=False)
    api.fit(table, demo_schema(), epsilon=1.0, preset="tiny", accountant="rdp", run_dir=tmp_path / "run",
            public_table=True)
    for argv in (["--help"], ["runs", "run"], ["runs", "run", "--json"], ["schema", "draft", "--data", "t.csv",
                 "--out", "s.json"], ["schema", "confirm", "s.json"], ["schema", "check", "--data", "t.csv",
                 "--schema", "s.json"], ["nonsense"]):
        result = _probe(argv, tmp_path)
        assert not result["torch"] and not result["opacus"], (argv, result)
        assert result["code"] in (0, 2), (argv, result)
    assert "completed" in _probe(["runs", "run"], tmp_path)["out"]
    assert json.loads((tmp_path / "s.json").read_text())["confirmed"] is True
    # drawing rows (the CLI's sample, the app's draw process) loads the model with torch but not
    # Opacus nor scikit-learn: 2 s of imports a draw does not need (Opacus: when training starts)
    drawn = _probe(["sample", "--run", "run", "--rows", "50", "--out", "out.csv"], tmp_path)
    assert drawn["code"] == 0 and drawn["torch"], drawn
    assert not drawn["opacus"] and not drawn["sklearn"], drawn
    assert len((tmp_path / "out.csv").read_text().splitlines()) == 51


@pytest.mark.parametrize("argv", [["fit", "--help"], ["audit", "--help"]])
def test_the_training_commands_still_name_every_family(argv, tmp_path):
    result = _probe(argv, tmp_path)
    assert result["code"] == 0 and "dp-tbart" in result["out"] and "aim" in result["out"]
