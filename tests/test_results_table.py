"""benchmarks/RESULTS.md opens with a table made from the result files, never typed: the file in the
repository is what the files give, and the table says what each run measured and how to make it
again."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


@pytest.fixture(scope="module")
def table_module():
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import results_table
        yield results_table
    finally:
        sys.path.remove(str(BENCHMARKS))


def test_results_md_holds_the_table_the_result_files_give():
    done = subprocess.run([sys.executable, str(BENCHMARKS / "results_table.py"), "--check"],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    text = (BENCHMARKS / "RESULTS.md").read_text(encoding="utf-8")
    opening = text.index("<!-- the grid's table")
    # today's figures first, then how
    assert opening < text.index("## Protocol") < text.index("## History")
    assert (BENCHMARKS / "history").is_dir() and any((BENCHMARKS / "history").glob("20*.md"))


def _run(folder: Path, table: str, epsilon: float, method: str, two_way: float, **extra) -> None:
    fid = {"tvd": {"1": 0.01, "2": two_way, "3": 0.1}, "detection_auc": 0.7, "ml": {"roc_auc": 0.9}}
    figures = {"model": method, "epsilon_target": epsilon, "fit_plus_sample_s": 12.0, "synthetic": fid, **extra}
    (folder / f"{table}_e{epsilon:g}_{method}_s0.json").write_text(json.dumps(figures))


def test_each_row_names_its_command_and_auto_is_ranked_against_its_peers(table_module, tmp_path):
    _run(tmp_path, "wages1", 1.0, "auto", 0.15, family="aim", calibrated=False)
    _run(tmp_path, "wages1", 1.0, "aim", 0.16)
    _run(tmp_path, "wages1", 1.0, "mst", 0.14)
    uncalibrated = {"tvd": {"1": 0.02, "2": 0.2, "3": 0.3}, "detection_auc": 0.8, "ml": {"roc_auc": 0.8}}
    _run(tmp_path, "wages1", 1.0, "dp-tbart", 0.17, uncalibrated=uncalibrated)
    text = table_module.text(tmp_path)
    lines = text.splitlines()
    glance = next(line for line in lines if line.startswith("| wages1 | 1 | aim |"))
    # MST alone is ahead
    assert "| 0.150 | 2 of 5 | 0.140 (MST (reference)) | 0.160 | 0.140 |" in glance
    own = next(line for line in lines if "dp-tbart own" in line)
    assert "0.200" in own and "`bench_grid.py --tables wages1 --epsilons 1 --methods dp-tbart`" in own
    # the best of the block in bold
    assert any("**0.140**" in line and "MST" in line for line in lines)
    assert "Not run yet, tablediffusion: every table at every ε." in text
    assert "Not run yet, aim: adult ε = 1, adult ε = 0.25, king ε = 1" in text


def test_a_results_file_without_its_markers_is_refused_not_overwritten(table_module, tmp_path):
    page = tmp_path / "RESULTS.md"
    page.write_text("# notes typed by hand\n")
    with pytest.raises(SystemExit, match="marker lines"):
        table_module.main(["--grid", str(tmp_path), "--results", str(page)])
    assert page.read_text() == "# notes typed by hand\n"


def test_results_md_holds_the_forecasts_coverage_the_fitted_model_records():
    """The forecast's table-by-table check (issue 59 item 4) is made from forecast_model.json, which
    fit_forecast.py --write makes from the result files: RESULTS.md holds exactly that, and the
    check meets its aim (at least 75% of tables inside, 1-way and 2-way, at ε 1 and 0.25)."""
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import fit_forecast
    finally:
        sys.path.remove(str(BENCHMARKS))
    model = json.loads((BENCHMARKS.parent / "synth_core" / "forecast_model.json").read_text())
    assert fit_forecast.write_coverage(model, check=True), "run python benchmarks/fit_forecast.py --coverage"
    for what in ("tvd1", "tvd2"):
        tables = model[what]["loto_tables"]
        assert set(tables) == {"1", "0.25"}
        for eps, c in tables.items():
            outside = {o.split(" (")[0] for o in c["outside"]}
            assert len(c["inside"]) / (len(c["inside"]) + len(outside)) >= 0.75, (what, eps)
