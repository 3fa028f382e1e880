"""The forecast (synth_core/forecast.py): what a run's measurements guarantee of each column, from
public facts only, checked against the mechanism itself."""
import json
import subprocess

import numpy as np
import pytest

from synth_core.demo import demo_schema, demo_table
from synth_core.forecast import forecast
from synth_core.privacy.ledger import PrivacyLedger
from synth_core.privacy.measurements import measure_marginals
from synth_core.privacy.randomness import noisy_counts
from synth_core.schema import validate_table


def test_the_closed_form_holds_nine_draws_in_ten_of_the_mechanism_it_forecasts():
    schema, rows = demo_schema(), 3200
    made = forecast(schema, 0.5, rows, "dp-tbart", delta=1e-5, calibration_share=0.3)
    assert made.model == "dp-tbart" and made.noise_std > 0 and len(made.columns) == len(schema.columns)
    table, _ = validate_table(demo_table(rows), schema)
    # the run's own measurement, at the ε the split gives it: the same noise on every cell
    from synth_core.privacy.split import planned_split
    split = planned_split(0.5, 1e-5, 0.0, False, 0.3, 0.0)
    marginals, _ = measure_marginals(table, schema, split.marginals, 1e-5, PrivacyLedger(0.5, 1e-5, rows), rows)
    assert marginals.noise_std == pytest.approx(made.noise_std)
    # 1,000 draws of the mechanism's noise on every column's true counts: shares within the
    # half-width 9 in 10
    inside = []
    for m in marginals.marginals:
        if len(m.columns) != 1:
            continue
        truth = np.bincount(marginals.encoder(schema, m).cells(table, m.columns)[0],
                            minlength=int(np.prod(m.shape))).astype(float)
        for _ in range(1000 // len(schema.columns) + 1):
            error = np.abs(noisy_counts(truth, marginals.noise_std) - truth) / rows
            inside.extend(error <= made.columns[0].half_width)
    share = float(np.mean(inside))
    assert 0.88 <= share <= 0.92, share
    assert made.columns[1].words().startswith("each category's share within about ±")


def test_the_forecast_reads_no_row_and_aims_comes_from_its_first_round():
    schema = demo_schema()
    one, two = forecast(schema, 1.0, 3200, "aim"), forecast(schema, 1.0, 3200, "aim")
    # a function of the public facts alone: it is never given the rows
    assert one.to_dict() == two.to_dict()
    from synth_core.models import get_model_class
    model = get_model_class("aim")(schema, preset="cpu", device="cpu", seed=0)
    assert one.source.startswith("the first measurement of every column")
    assert one.noise_std > 0 and one.columns[0].half_width == pytest.approx(1.6448536 * one.noise_std / 3200)
    assert model.count_noise is not None
    # more ε, less noise and a lower expected TVD; more rows, a smaller share error
    assert forecast(schema, 4.0, 3200, "aim").figures["tvd2"].expected < one.figures["tvd2"].expected
    assert forecast(schema, 4.0, 3200, "aim").noise_std < one.noise_std
    assert forecast(schema, 1.0, 32000, "dp-tbart").columns[0].half_width < \
        forecast(schema, 1.0, 3200, "dp-tbart").columns[0].half_width


def _cli(capsys, *args) -> subprocess.CompletedProcess:
    """The forecast command in this process (what `python -m synth_core forecast ...` runs)."""
    from synth_core.cli import main
    code = main(["forecast", *args])
    out = capsys.readouterr()
    return subprocess.CompletedProcess(args, code, out.out, out.err)


def test_the_forecast_command_prints_each_column_and_refuses_bad_input_in_one_line(tmp_path, capsys):
    path, unbounded = tmp_path / "schema.json", tmp_path / "unbounded.json"
    demo_schema().save(path)
    lacking = demo_schema()
    lacking.columns[0].lower = lacking.columns[0].upper = None
    lacking.save(unbounded)
    done = _cli(capsys, "--schema", str(path), "--epsilon", "1", "--rows", "3200", "--model", "dp-tbart", "--json")
    assert done.returncode == 0, done.stderr
    made = json.loads(done.stdout)
    assert made["model"] == "dp-tbart" and [c["column"] for c in made["columns"]] == demo_schema().names
    # the fidelity a run would reach, from the benchmark results' model
    for what in ("tvd1", "tvd2", "tstr"):
        assert made[what]["low"] <= made[what]["expected"] <= made[what]["high"]
    assert made["tvd1"]["expected"] < made["tvd2"]["expected"] and 0.5 < made["tstr"]["expected"] < 1
    # no run beats the table's own rows
    assert made["floor"]["tvd2"]["expected"] <= made["tvd2"]["expected"]
    for args, says in [(("--schema", str(tmp_path / "none.json"), "--epsilon", "1", "--rows", "10"), "cannot read"),
                       (("--schema", str(path), "--epsilon", "0", "--rows", "3200"), "ε must be"),
                       (("--schema", str(path), "--epsilon", "1", "--rows", "3200", "--model", "gpt"), "unknown model"),
                       (("--schema", str(path), "--epsilon", "1"), "give --rows"),
                       (("--schema", str(unbounded), "--epsilon", "1", "--rows", "3200"), "public bounds; 'age'")]:
        done = _cli(capsys, *args)
        assert done.returncode == 2 and says in done.stderr and len(done.stderr.strip().splitlines()) == 1


def _model_page(tmp_path, monkeypatch):
    """The model page on the built-in demo table, in a workbench home of the test's own."""
    from test_app import new_app, no_exceptions
    monkeypatch.setenv("SYNTH_WORKBENCH_HOME", str(tmp_path / "home"))
    at = new_app()
    at.switch_page("app_pages/data.py").run()
    at.button(key="use_demo").click().run()
    at.switch_page("app_pages/model.py").run()
    no_exceptions(at)
    return at


def test_the_model_page_shows_what_each_harm_level_buys(tmp_path, monkeypatch):
    at = _model_page(tmp_path, monkeypatch)
    assert "What each level buys on this table" in [str(h.value) for h in at.subheader]
    levels = next(d.value for d in at.dataframe if "harm level" in d.value.columns)
    widths = [float(text.split("±")[1].split()[0]) for text in levels["each column's shares, 9 times in 10"]]
    # less ε, wider: the steward sees what each level costs
    assert len(widths) == 4 and widths == sorted(widths)


def test_a_run_keeps_its_forecast_and_the_review_flags_a_figure_outside_it(tmp_path):
    from synth_core import api
    from synth_core.forecast import findings
    from synth_core.release.privacy_report import privacy_report, report_markdown
    from synth_core.runs import RunDir
    api.fit(demo_table(600), demo_schema(), "dp-tbart", epsilon=1.0, preset="tiny", public_table=True,
            run_dir=tmp_path / "run", options={"epochs": 1})
    kept = RunDir(tmp_path / "run").config()["forecast"]
    assert kept["tvd2"]["low"] <= kept["tvd2"]["expected"] <= kept["tvd2"]["high"]
    assert "## Forecast before training" in report_markdown(privacy_report(RunDir(tmp_path / "run")))
    worse = findings(kept, {"2-way TVD": kept["tvd2"]["high"] + 0.05, "1-way TVD": kept["tvd1"]["expected"]})
    assert len(worse) == 1 and worse[0].startswith("Worse than expected for this table: 2-way TVD")
    assert findings(kept, {"2-way TVD": kept["tvd2"]["low"] / 2})[0].startswith("Better than expected")
    assert findings(None, {"2-way TVD": 0.5}) == []  # a run from before forecasts: nothing to say


def test_the_curve_falls_with_epsilon_and_stops_at_the_tables_own_floor():
    from synth_core.benchmark_model import floor
    from synth_core.forecast import curve
    schema = demo_schema()
    points = curve(schema, 400)
    bottom = floor(schema, 400)["tvd2"]
    assert [p[0] for p in points] == sorted(p[0] for p in points) and points[0][0] < 0.1 and points[-1][0] == 10
    assert points[0][2].expected > points[-1][2].expected  # more ε buys fidelity ...
    # ... down to the real rows' own distance
    assert all(p[2].expected >= bottom.expected for p in points)
    # a larger table is closer to its population
    assert floor(schema, 40000)["tvd2"].expected < bottom.expected


def test_the_steward_plans_releases_and_the_book_takes_the_plans_total(tmp_path, monkeypatch):
    from synth_core.home import budgets_path
    from synth_core.privacy.table_budget import TableBudgets
    from test_app import no_exceptions
    at = _model_page(tmp_path, monkeypatch)
    planned = next(d.value for d in at.dataframe if "left of the total after it" in d.value.columns)
    assert list(planned["release"]) == ["a quick look", "the release", "a later refresh"]
    # no total chosen yet: the plan's
    assert list(planned["left of the total after it"]) == ["1.5", "0.5", "0"]
    # each forecast
    assert all("(" in text for text in planned["pairs of columns: mismatch expected (80%)"])
    at.button(key="set_release_plan").click().run()
    no_exceptions(at)
    account = TableBudgets(budgets_path()).account(at.session_state["table_identity"].table_id)
    assert account.total_epsilon == pytest.approx(1.6) and len(account.plan) == 3


def _installed(tmp_path, monkeypatch, model: dict):
    from synth_core import benchmark_model
    path = tmp_path / "forecast_model.json"
    path.write_text(json.dumps(model))
    monkeypatch.setattr(benchmark_model, "MODEL_FILE", path)


def test_auto_takes_the_candidate_the_forecast_expects_best_and_says_so(tmp_path, monkeypatch):
    """Issue 44 item 4: auto ranks its candidates, each as auto runs it, by the model of benchmark
    results. A model in which DP-TBART's 2-way TVD falls faster with the signal than AIM's: AIM
    below the crossing (rows × ε = 10,000 here), DP-TBART above, the reason quoting both figures;
    the same public facts, the same choice."""
    from synth_core.benchmark_model import rank
    from synth_core.models.recommend import recommend
    names = ["log_signal", "log_rows", "log_columns", "log_values", "numeric_share"]
    slope = {"coefficients": [0.0, -0.5, 0, 0, 0, 0, 1.0, -0.25, 0, 0, 0, 0], "spread": 0.2}
    _installed(tmp_path, monkeypatch, {"features": names, "families": ["aim", "dp-tbart"],
                                        "interacting": ["dp-tbart"], "tvd2": slope, "tvd1": slope})
    schema = demo_schema()
    low, high = recommend(schema, 2_000, 1.0), recommend(schema, 200_000, 1.0)
    assert low.family == "aim" and high.family == "dp-tbart"
    assert [f for f, _ in rank(schema, 200_000, 1.0, ["aim", "dp-tbart"], rule_pick="aim")] == ["dp-tbart", "aim"]
    expected = dict(rank(schema, 200_000, 1.0, ["aim", "dp-tbart"], rule_pick="aim"))
    assert f"{expected['dp-tbart'].expected:.3f}" in high.reason and f"AIM {expected['aim'].expected:.3f}" in high.reason
    assert "lowest expected 2-way TVD" in high.reason and "200,000 rows at ε = 1" in high.reason
    # each candidate keeps the configuration auto runs it with
    assert high.calibration_share == 0.5 and low.options == {"one_way_share": 0.5}
    assert recommend(schema, 200_000, 1.0) == high


def test_without_a_model_to_rank_them_auto_falls_back_on_its_rule(tmp_path, monkeypatch):
    from synth_core.models.recommend import by_rule, recommend
    schema = demo_schema()
    # no runs of DP-TBART: no ranking
    _installed(tmp_path, monkeypatch, {"features": [], "families": ["aim"]})
    assert recommend(schema, 40_000, 1.0) == by_rule(schema, 40_000, 1.0)
    # DP-TBART with runs but one fixed offset from AIM: the same order on every table, no ranking
    # either
    fixed = {"coefficients": [-2.0, 0.1], "spread": 0.2}
    _installed(tmp_path, monkeypatch, {"features": [], "families": ["aim", "dp-tbart"], "tvd2": fixed})
    assert recommend(schema, 40_000, 1.0) == by_rule(schema, 40_000, 1.0) != recommend(schema, 600, 1.0)
    (tmp_path / "forecast_model.json").unlink()
    assert recommend(schema, 600, 1.0) == by_rule(schema, 600, 1.0)


def test_the_shipped_model_ranks_autos_candidates_and_the_reason_quotes_it():
    """The model fitted on the benchmark results (synth_core/forecast_model.json) lets auto's
    candidates differ table by table, so auto's reason is the forecast's; its LOTO check is
    benchmarks/fit_forecast.py's."""
    from synth_core.benchmark_model import installed
    from synth_core.models.recommend import CANDIDATES, recommend
    model = installed()
    assert model is not None and set(CANDIDATES) - {model["families"][0]} <= set(model["interacting"])
    for rows, epsilon in ((600, 1.0), (40_000, 1.0)):
        choice = recommend(demo_schema(), rows, epsilon)
        assert "lowest expected 2-way TVD" in choice.reason and f"{rows:,} rows" in choice.reason


def test_the_forecast_says_what_the_review_compares_and_the_review_measures_just_that():
    """One definition (evaluate/protocol.py): the forecast's words are the review's, for the same
    rows, and the review's figure is the benchmarks' comparison with the compared rows drawn from
    the table."""
    from synth_core.evaluate import protocol, quick_figures
    schema, table, synthetic = demo_schema(), demo_table(800), demo_table(800, seed=3)
    made = forecast(schema, 1.0, 800, "aim")
    figs = {f.name: f for f in quick_figures(table, synthetic, schema)}
    assert made.compares == figs["2-way TVD"].details["compares"]
    assert "800 synthetic rows against 200 real rows" in made.compares
    same = protocol.comparison(table, synthetic)
    assert figs["2-way TVD"].value == pytest.approx(protocol.tvd(same, schema.numeric_columns)[2])


def test_the_interval_widens_and_says_so_beyond_the_benchmark_runs(monkeypatch):
    import copy
    from synth_core import benchmark_model
    schema = demo_schema()
    inside = forecast(schema, 1.0, 20000, "aim")
    assert inside.extrapolation is None
    model = copy.deepcopy(benchmark_model.installed())
    model["ranges"]["rows"] = [30000, 40000]  # the runs as if all larger than this table
    monkeypatch.setattr(benchmark_model, "installed", lambda: model)
    beyond = forecast(schema, 1.0, 20000, "aim")
    assert "20,000 rows below them" in beyond.extrapolation and "2 times as wide" in beyond.extrapolation
    a, b = inside.figures["tvd2"], beyond.figures["tvd2"]
    assert a.expected == pytest.approx(b.expected)
    assert np.log(b.high / b.expected) == pytest.approx(2 * np.log(a.high / a.expected))
    assert 0.0 <= b.low <= b.high <= 1.0
