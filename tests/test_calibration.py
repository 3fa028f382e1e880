"""Marginal measurement, one accountant for the run's mechanisms, and calibration of a model's
samples."""
from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pandas as pd
import pytest
from scipy.optimize import brentq
from scipy.stats import norm

from synth_core import api
from synth_core.models.calibration import POOL_GROWTH, calibrate_weights, grow_and_calibrate, pool_size, summary
from synth_core.models.resampling import resample
from synth_core.models.recommend import by_rule
from synth_core.privacy import BudgetError, PrivacyLedger
from synth_core.privacy.accounting import Gaussian, compose, gaussian_for
from synth_core.privacy.planning import SamplingShape, plan
from synth_core.privacy.ledger import MARGINALS, TRAINING
from synth_core.privacy.measurements import (FINE_BINS, Marginal, Marginals, choose_marginals, measure_marginals,
                                             measured_marginals)
from synth_core.schema import ColumnSpec, Schema


def _with_target(schema: Schema, name: str = "sex") -> Schema:
    return Schema(columns=[dataclasses.replace(c, role="target" if c.name == name else None) for c in schema.columns])


# --- the accountant -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("sigma,delta", [(0.8, 1e-5), (2.0, 1e-6), (13.4, 1e-6)])
def test_one_gaussian_mechanism_costs_its_closed_form(sigma, delta):
    """The Gaussian mechanism's exact (ε, δ) curve (Balle & Wang 2018): the accountant's ε is an
    upper bound on it, and tight."""
    def delta_of(eps):
        return norm.cdf(1 / (2 * sigma) - eps * sigma) - math.exp(eps) * norm.cdf(-1 / (2 * sigma) - eps * sigma)

    exact = brentq(lambda e: delta_of(e) - delta, 1e-6, 100)
    composed = compose((Gaussian(sigma),), delta)
    assert exact <= composed <= exact + 0.02
    assert compose((Gaussian(sigma),), delta, "rdp") >= composed  # RDP is the looser bound


def test_composition_is_tighter_than_the_sum_and_plans_to_the_target():
    shape = SamplingShape(population=20_000, expected_batch=512, epochs=5)
    measurement = gaussian_for(0.3, 1e-6)
    together = plan(shape, 1.0, 1e-6, alongside=(measurement,))
    alone = plan(shape, 1.0, 1e-6)
    split = plan(shape, 0.7, 1e-6)
    total = compose((Gaussian(together.noise_multiplier, together.sample_rate, together.steps), measurement), 1e-6)
    assert 0.98 <= total <= 1.0
    assert together.planned_epsilon + 0.3 > 1.0  # the sum of the parts would exceed the target ...
    # ... composition costs less
    assert alone.noise_multiplier < together.noise_multiplier < split.noise_multiplier


@pytest.mark.parametrize("epsilon", [0.05, 0.08])
def test_a_small_epsilon_with_measurements_alongside_plans_within_it(epsilon, toy_schema, toy_table):
    """The app offers ε = 0.05: there RDP's bound on the measurement alone exceeds the whole budget
    (a Gaussian the PRV accountant sets to 0.025 costs 0.10 by RDP), which once made every
    calibrated DP-SGD run fail to plan."""
    measurement = gaussian_for(0.5 * epsilon, 1e-5)
    assert compose((measurement,), 1e-5, "rdp") > epsilon
    together = plan(SamplingShape(population=40_000, expected_batch=2048, epochs=10), epsilon, 1e-5,
                    alongside=(measurement,))
    total = compose((Gaussian(together.noise_multiplier, together.sample_rate, together.steps), measurement), 1e-5)
    assert 0.98 * epsilon <= total <= epsilon
    if epsilon == 0.05:  # the same through a run: the ledger ends within the budget
        result = api.fit(toy_table, toy_schema.confirm(), model="dp-tbart", epsilon=epsilon, preset="tiny",
                         calibration_share=0.3)
        assert result.ledger.spent_epsilon <= epsilon and result.model.calibration is not None


def test_measurements_that_leave_nothing_for_training_are_refused():
    shape = SamplingShape(population=2_000, expected_batch=64, epochs=1)
    with pytest.raises(BudgetError, match="nothing is left for training"):
        plan(shape, 0.5, 1e-5, alongside=(gaussian_for(0.6, 1e-5),))


def test_a_ledger_composes_its_gaussian_mechanisms_and_keeps_the_total_through_a_file():
    ledger = PrivacyLedger(target_epsilon=1.0, target_delta=1e-6, n_rows=20_000)
    ledger.record("count", epsilon=0.02, kind="noisy-count")
    m = gaussian_for(0.3, 1e-6)
    ledger.record("marginals", epsilon=0.3, delta=1e-6, kind=MARGINALS, noise_multiplier=m.noise_multiplier,
                  sample_rate=1.0, steps=1)
    ledger.record("DP-SGD", epsilon=0.9, delta=1e-6, kind=TRAINING, noise_multiplier=3.3, sample_rate=0.025, steps=200)
    assert ledger.sum_epsilon == pytest.approx(1.22)
    assert ledger.spent_epsilon < ledger.sum_epsilon
    assert ledger.spent_epsilon == pytest.approx(0.02 + compose((m, Gaussian(3.3, 0.025, 200)), 1e-6))
    assert ledger.spent_delta == 1e-6
    again = PrivacyLedger.from_dict(ledger.to_dict())
    assert again.spent_epsilon == pytest.approx(ledger.spent_epsilon)
    # a group entry (DTGAN_G) is not a plain Gaussian mechanism: summed, never composed
    ledger.entries[-1].details["group_size"] = 2
    assert ledger.spent_epsilon == pytest.approx(ledger.sum_epsilon)


# --- measurement -----------------------------------------------------------------------------------------------
def test_measured_marginals_follow_the_public_discretisation_only(toy_schema, toy_table):
    schema = _with_target(toy_schema)
    chosen = choose_marginals(schema)
    assert chosen[:4] == [("age",), ("sex",), ("job",), ("hours",)]
    assert len(chosen) == 10 and set(chosen[4:]) >= {("age", "sex"), ("age", "hours"), ("job", "hours")}
    # a wider table: every column alone, and the pairs of the target and sensitive columns with the
    # others
    wide = Schema(columns=[*schema.columns, *[ColumnSpec(f"c{i}", "categorical", categories=["a", "b"],
                                                         role="sensitive" if i == 0 else None) for i in range(6)]])
    pairs = choose_marginals(wide)[10:]
    assert len(pairs) == 9 + 8 and all({"sex", "c0"} & set(p) for p in pairs)
    # other values, same schema
    other = toy_table.assign(age=30, hours=55.5, job="clerk", sex="Male")
    shapes = []
    for table in (toy_table, other):
        ledger = PrivacyLedger(target_epsilon=1.0, target_delta=1e-5, n_rows=len(table))
        measured, mechanism = measure_marginals(table, schema, 0.5, 1e-5, ledger, rows=len(table))
        shapes.append([(m.columns, m.shape) for m in measured.marginals])
        entry = ledger.entries[-1]
        assert entry.kind == MARGINALS and entry.epsilon == 0.5 and entry.gaussian() == mechanism
        assert measured.noise_std == pytest.approx(
            mechanism.noise_multiplier * math.sqrt(len(measured_marginals(schema))))
    assert shapes[0] == shapes[1]
    # cells: public categories (+ missing for a nullable column), public bins between the bounds
    assert [columns for columns, _ in shapes[0][:len(chosen)]] == chosen
    assert dict(shapes[0][:len(chosen)])[("job",)] == (4,) and dict(shapes[0][:len(chosen)])[("hours",)] == (10,)
    assert shapes[0][len(chosen):] == [(("age",), (FINE_BINS,)), (("hours",), (FINE_BINS,))]


def test_numbers_alone_are_measured_again_on_finer_bins_and_calibration_reads_them_so(toy_schema, toy_table):
    """Every numeric column alone a second time on finer bins (not one whose values the coarse bins
    already hold one per bin): the sensitivity counts every marginal, the bins travel with the saved
    marginals, and calibration moves a pool on the finer bins."""
    schema = _with_target(toy_schema)
    ledger = PrivacyLedger(target_epsilon=1.0, target_delta=1e-5, n_rows=len(toy_table))
    measured, mechanism = measure_marginals(toy_table, schema, 0.5, 1e-5, ledger, rows=len(toy_table), fine_bins=40)
    numbers = [c.name for c in schema.columns if c.is_numeric]
    fine = [m for m in measured.marginals if measured.bins(m) == 40]
    assert sorted(m.columns[0] for m in fine) == sorted(numbers) and all(m.shape == (40,) for m in fine)
    coarse = {m.columns: m.shape for m in measured.marginals if measured.bins(m) == 10}
    assert coarse[("hours",)] == (10,) and coarse[("age", "hours")][1] == 10 and coarse[("job",)] == (4,)
    assert list(coarse) == choose_marginals(schema)
    assert measured.noise_std == pytest.approx(
        mechanism.noise_multiplier * math.sqrt(len(choose_marginals(schema)) + len(numbers)))
    entry = ledger.entries[-1].details
    assert entry["fine_bins"] == 40 and sorted(c for (c,) in entry["fine_marginals"]) == sorted(numbers)
    # none where the coarse bins already hold every value, or when asked for none
    few = Schema(columns=[ColumnSpec("k", "integer", lower=0, upper=6),
                          ColumnSpec("x", "continuous", lower=0, upper=1)])
    assert [(c, b) for c, b in measured_marginals(few) if b != 10] == [(("x",), FINE_BINS)]
    assert all(b == 10 for _, b in measured_marginals(schema, fine_bins=None))
    again = Marginals.from_dict(measured.to_dict())
    assert [(m.columns, m.shape, again.bins(m)) for m in again.marginals] == \
        [(m.columns, m.shape, measured.bins(m)) for m in measured.marginals]
    # a pool spread evenly over [0, 40) is moved to the fine target: all its mass in the lowest of
    # 40 bins
    one = Schema(columns=[ColumnSpec("x", "continuous", lower=0, upper=40)])
    pool = pd.DataFrame({"x": np.linspace(0.01, 39.99, 4000)})
    counts = np.zeros(40)
    counts[0] = 1000.0
    target = Marginals(n_bins=10, noise_std=1.0, rows=1000, marginals=[Marginal(("x",), (40,), counts, n_bins=40)])
    weights, _ = calibrate_weights(pool, target, one)
    # (the first of 10 bins would have allowed up to 4)
    assert weights[pool["x"].to_numpy() < 1].sum() > 0.95


def test_measurement_noise_is_secret(toy_schema, toy_table):
    draws = []
    for _ in range(2):
        ledger = PrivacyLedger(target_epsilon=1.0, target_delta=1e-5, n_rows=len(toy_table))
        measured, _ = measure_marginals(toy_table, toy_schema, 0.5, 1e-5, ledger, rows=len(toy_table))
        draws.append(measured.marginals[1].counts)
    assert not np.array_equal(*draws)


# --- calibration ---------------------------------------------------------------------------------------------
def test_calibration_moves_a_pool_to_the_measured_marginals():
    schema = Schema(columns=[ColumnSpec("g", "categorical", categories=["a", "b"]),
                             ColumnSpec("x", "integer", lower=0, upper=3)])
    rng = np.random.default_rng(0)
    pool = pd.DataFrame({"g": rng.choice(["a", "b"], 4000), "x": rng.integers(0, 4, 4000)})
    target = Marginals(n_bins=10, noise_std=5.0, rows=10_000, marginals=[
        Marginal(("g",), (2,), np.array([8000.0, 2000.0])),
        Marginal(("x",), (4,), np.array([1000.0, 2000.0, 3000.0, 4000.0]))])
    weights, info = calibrate_weights(pool, target, schema)
    assert weights.sum() == pytest.approx(1.0) and info["error_after"] < info["error_before"] / 100
    picked = pool.iloc[resample(weights, 10_000, np.random.default_rng(1))]
    assert picked["g"].eq("a").mean() == pytest.approx(0.8, abs=0.01)
    assert picked["x"].value_counts(normalize=True).sort_index().tolist() == pytest.approx([.1, .2, .3, .4], abs=0.01)
    # with a condition, only the marginals that include the conditioned column bear on the pool
    female = pool[pool["g"] == "a"].reset_index(drop=True)
    w, info = calibrate_weights(female, target, schema, {"g": "a"})
    assert info["marginals"] == 1 and np.allclose(w, 1 / len(female))


def test_the_pool_grows_with_the_request():
    assert [pool_size(n) for n in (10, 200, 10_000)] == [500, 5_000, 30_000]
    assert [pool_size(n, floor=1_000) for n in (10, 200, 10_000)] == [500, 1_000, 30_000]  # persons


def test_a_pool_too_thin_for_the_measurements_grows_until_the_sample_need_not_repeat_rows():
    """The model draws "a" one time in ten, the measurements say nine in ten: weights on a pool of 3
    × the rows asked hold fewer effective rows than asked (a sample would repeat few rows many
    times), so the pool doubles with fresh rows, each further draw its own, until they hold enough;
    never past POOL_GROWTH × the first."""
    schema = Schema(columns=[ColumnSpec("g", "categorical", categories=["a", "b"])])
    n = 2000
    target = Marginals(n_bins=10, noise_std=1.0, rows=n, marginals=[Marginal(("g",), (2,), np.array([1800.0, 200.0]))])

    def model(share_a):
        rng, asked = np.random.default_rng(0), []

        def more(rows, k):
            asked.append((rows, k))
            return pd.DataFrame({"g": rng.choice(["a", "b"], rows, p=[share_a, 1 - share_a])})
        return more, asked

    more, asked = model(0.1)
    pool, weights, info = grow_and_calibrate(more(pool_size(n), 0), n, more, target, schema)
    # effective rows ≈ pool / 8: 750 and 1,500 fall short of 2,000, 3,000 does not
    assert asked == [(6000, 0), (6000, 1), (12_000, 2)] and len(pool) == 24_000 == len(weights)
    assert info["pool_draws"] == 3 and info["pool_rows"] == 24_000 and info["effective_rows"] >= n
    picked = pool.iloc[resample(weights, n, np.random.default_rng(1))]
    assert picked["g"].eq("a").mean() == pytest.approx(0.9, abs=0.01)
    assert picked.index.value_counts().max() <= 2  # no candidate repeated more than twice
    # a model that almost never draws "a": the pool stops at POOL_GROWTH × the first, and says how
    # thin it is
    more, asked = model(0.01)
    pool, weights, info = grow_and_calibrate(more(pool_size(n), 0), n, more, target, schema)
    assert len(pool) == POOL_GROWTH * pool_size(n) and info["effective_rows"] < n
    # a family whose rows are slow to draw (the language model) keeps its first pool
    more, asked = model(0.1)
    pool, weights, info = grow_and_calibrate(more(pool_size(n), 0), n, more, target, schema, growth=1)
    assert len(asked) == 1 and len(pool) == pool_size(n) and info["pool_draws"] == 1
    # a model that cannot draw more (conditions met too rarely) keeps its pool
    pool, weights, info = grow_and_calibrate(model(0.1)[0](6000, 0), n, lambda rows, k: None, target, schema)
    assert len(pool) == 6000 and info["pool_draws"] == 1


def test_the_summary_says_what_calibration_did_and_when_rows_repeat():
    info = {"pool_rows": 24_000, "marginals": 12, "effective_rows": 3_000.4}
    assert summary(info, 2000).startswith("calibrated to 12 measured statistics") and "24,000 rows" in summary(info, 2000)
    assert "repeat" not in summary(info, 2000)
    assert summary(info, 5000).endswith("the weights rest on about 3,000 rows, so some rows repeat")
    assert summary(None, 10) is None
    assert summary({"note": "too few rows meet the conditions for a calibration pool"}, 10).startswith("too few")


def test_calibration_stops_at_the_noise_level():
    """Targets that differ from the pool by no more than their noise leave the pool as it is."""
    schema = Schema(columns=[ColumnSpec("g", "categorical", categories=["a", "b"])])
    pool = pd.DataFrame({"g": ["a"] * 500 + ["b"] * 500})
    target = Marginals(n_bins=10, noise_std=50.0, rows=1000, marginals=[Marginal(("g",), (2,), np.array([520.0, 480.0]))])
    weights, info = calibrate_weights(pool, target, schema)
    assert info["iterations"] == 0 and np.allclose(weights, 1 / 1000)


def test_saved_marginals_reload_to_the_very_counts_measured():
    """A run's noisy counts are saved whole: rounded, a reloaded run calibrated to slightly
    different targets and its samples for a seed differed from the fitted model's now and then (1
    run in 8 of the test below)."""
    rng = np.random.default_rng(0)
    counts = rng.normal(100, 7, 12) + rng.random(12) * 1e-7
    m = Marginals(n_bins=10, noise_std=7.0, rows=1200, marginals=[Marginal(("a", "b"), (3, 4), counts)])
    back = Marginals.from_dict(json.loads(json.dumps(m.to_dict())))
    assert np.array_equal(back.marginals[0].counts, counts)


def test_a_calibrated_run_through_the_user_path(toy_schema, toy_table, tmp_path):
    """fit with a calibration share -> run folder -> api.sample -> reload: the ledger lists the
    measurement, the composed total stays within the target, samples are calibrated and conditions
    hold."""
    schema = _with_target(toy_schema)
    result = api.fit(toy_table, schema, model="dp-tbart", epsilon=2.0, preset="tiny", accountant="rdp",
                     options={"epochs": 1, "batch_size": 64}, run_dir=tmp_path / "run", calibration_share=0.3)
    ledger = result.ledger
    assert [e.kind for e in ledger.entries] == ["noisy-count", MARGINALS, TRAINING]
    assert ledger.spent_epsilon <= 2.0 and ledger.spent_delta == ledger.target_delta
    table, info = api.sample(tmp_path / "run", 200, seed=3)
    assert len(table) == 200 and info["calibration"]["marginals"] == 10 + 2 and info["calibration"]["pool_rows"] >= 600
    assert info["calibration"]["pool_draws"] >= 1
    reloaded = api.load_model(tmp_path / "run")
    assert reloaded.calibration is not None
    pd.testing.assert_frame_equal(reloaded.sample(50, seed=4), result.model.sample(50, seed=4))
    fixed, info = api.sample(tmp_path / "run", 40, conditions={"sex": "Female"}, seed=2)
    assert (fixed["sex"] == "Female").all() and info["calibration"]["marginals"] >= 1
    own = reloaded.sample(50, seed=4, calibrate=False)
    assert "calibration" not in reloaded.last_sample_info and len(own) == 50


def test_share_zero_measures_nothing_and_samples_are_the_models_own(toy_schema, toy_table, tmp_path):
    result = api.fit(toy_table, toy_schema, model="tablediffusion", epsilon=2.0, preset="tiny", accountant="rdp",
                     options={"epochs": 1, "batch_size": 64}, run_dir=tmp_path / "run", calibration_share=0.0)
    assert all(e.kind != MARGINALS for e in result.ledger.entries) and result.model.calibration is None
    pd.testing.assert_frame_equal(result.model.sample(40, seed=5), result.model.draw(40, seed=5))


@pytest.mark.parametrize("share", [-0.1, 0.95, float("nan"), "half", True])
def test_a_bad_calibration_share_is_refused_before_anything_is_spent(share, toy_schema, toy_table, tmp_path):
    with pytest.raises(BudgetError, match="calibration share"):
        api.fit(toy_table, toy_schema, epsilon=1.0, preset="tiny", run_dir=tmp_path / "run", calibration_share=share)
    assert not (tmp_path / "run").exists()


# --- auto's rule (where no forecast ranks its candidates) -------------------------------------------------------------------------------------------------------
def test_auto_chooses_from_public_facts_only(toy_schema, toy_table, tmp_path, by_the_rule):
    """Two tables with the same public schema and row count, but other values, get the same choice;
    the run records it and why. (A number as the target: at 1,200 rows × ε, DP-TBART with
    calibration.)"""
    schema = dataclasses.replace(_with_target(toy_schema, "hours"), rows=len(toy_table))
    other = toy_table.assign(sex=toy_table["sex"].iloc[::-1].to_numpy(), age=45, hours=12.5)
    configs = []
    for i, table in enumerate((toy_table, other)):
        result = api.fit(table, schema, model="auto", epsilon=2.0, preset="tiny", accountant="rdp",
                         run_dir=tmp_path / f"run{i}")
        configs.append(result.run.public_config())
    assert configs[0]["auto"] == configs[1]["auto"]
    choice = configs[0]["auto"]
    assert configs[0]["model"] == choice["family"] == "dp-tbart" and configs[0]["preset"] == "tiny"
    assert configs[0]["calibration_share"] == choice["calibration_share"] > 0 and "600 rows" in choice["reason"]
    assert by_rule(schema, 600, 2.0) == by_rule(schema, 600, 2.0)
    assert by_rule(schema, 600, 2.0).calibration_share == by_rule(schema, 40_000, 2.0).calibration_share == 0.5
    # few rows per unit of ε: numbers in fewer bins, unless the size has fewer already (tiny: 10)
    small, large = by_rule(schema, 600, 2.0), by_rule(schema, 40_000, 2.0)
    assert small.options_for("cpu") == {"n_bins": 50} and small.options_for("tiny") == {}
    assert large.options_for("cpu") == {} and configs[0]["options"] == {}


def test_auto_picks_aim_up_to_5000_rows_times_epsilon_unless_the_target_is_a_number(toy_schema):
    """benchmarks/history (issue 15, tables new to the rule): from 1,000 to 5,000 rows × ε AIM's TVD
    was level with DP-TBART's and its 1-way and TSTR better, except where the target is a number
    (King's price: R² ≈ 0)."""
    for target, family in (("sex", "aim"), (None, "aim"), ("hours", "dp-tbart"), ("age", "dp-tbart")):
        schema = _with_target(toy_schema, target) if target else toy_schema
        mid = by_rule(schema, 4_000, 1.0)
        assert mid.family == family and (mid.calibration_share > 0) == (family == "dp-tbart"), target
        assert by_rule(schema, 500, 1.0).family == "aim"  # below 1,000 whatever the target
        assert by_rule(schema, 5_000, 1.0).family == "dp-tbart"  # from 5,000 the neural model
    aim = by_rule(_with_target(toy_schema), 4_000, 1.0)
    assert aim.options == {"one_way_share": 0.5} and "4,000 rows" in aim.reason
    assert "no number as the target" in aim.reason


def test_auto_never_picks_aim_for_a_table_wider_than_it_can_measure_in_reasonable_time():
    """AIM refuses more than AIM_MAX_COLUMNS modelled columns (its rounds would take hours): auto
    takes DP-TBART."""
    from synth_core.models import get_model_class
    from synth_core.models.recommend import AIM_MAX_COLUMNS
    from synth_core.schema import ColumnSpec, Schema
    for columns, family in ((20, "aim"), (AIM_MAX_COLUMNS, "aim"), (AIM_MAX_COLUMNS + 1, "dp-tbart")):
        schema = Schema(columns=[ColumnSpec(f"c{i}", "categorical", categories=["a", "b"]) for i in range(columns)])
        assert by_rule(schema, 500, 1.0).family == family
        if family == "dp-tbart":
            with pytest.raises(ValueError, match="would take hours"):
                get_model_class("aim").check_schema(schema)


def test_auto_picks_aim_with_a_compressed_domain_at_a_small_epsilon_from_5000_to_10000_rows_times_epsilon(toy_schema):
    """benchmarks/history (issue 15): at ε ≤ 0.25 from 5,000 to 10,000 rows × ε AIM with MST's
    domain compression had 2-way TVD lower or level and 1-way lower than DP-TBART's on six tables
    (three new to the rule); at ε = 1 in the same band DP-TBART stayed ahead, and a number as the
    target keeps DP-TBART (TSTR)."""
    for target in ("sex", None):
        schema = _with_target(toy_schema, target) if target else toy_schema
        for rows, epsilon in ((30_000, 0.25), (20_000, 0.25), (39_000, 0.25), (40_000, 0.2)):
            choice = by_rule(schema, rows, epsilon)
            assert choice.family == "aim" and choice.options == {"one_way_share": 0.5, "compress": True}, (rows, epsilon)
            assert "pooled" in choice.reason and choice.calibration_share == 0.0
        # below 5,000: AIM, not compressed
        assert by_rule(schema, 19_000, 0.25).options == {"one_way_share": 0.5}
        # 10,000 and up; ε above 0.25
        for rows, epsilon in ((40_000, 0.25), (8_000, 1.0), (20_000, 0.3)):
            assert by_rule(schema, rows, epsilon).family == "dp-tbart", (rows, epsilon)
    # a number as the target
    assert by_rule(_with_target(toy_schema, "hours"), 30_000, 0.25).family == "dp-tbart"


def test_auto_picks_aim_at_any_size_when_every_number_has_few_values(toy_schema, toy_table, tmp_path,
                                                                     by_the_rule):
    """benchmarks/history (issue 15): above 5,000 rows × ε AIM's 2-way TVD was lower than DP-TBART's
    on SmokeBan, WVS, GSSvocab and Fertility2, whose numbers have at most 100 values at their
    precision; DP-TBART's was lower on Computers (prices of thousands of values), Adult, King and
    SLID."""
    # age 18-80: 63 values
    narrow = Schema(columns=[c for c in toy_schema.columns if c.name != "hours"])
    # a narrow number as the target too (Arrests' checks: level TVD)
    for target in (None, "sex", "age"):
        schema = _with_target(narrow, target) if target else narrow
        assert {by_rule(schema, rows, 1.0).family for rows in (500, 4_000, 40_000)} == {"aim"}, target
    reason = by_rule(narrow, 40_000, 1.0).reason
    assert "no number with more than 100 possible values" in reason and "every value of a number" in reason
    only_categories = Schema(columns=[c for c in narrow.columns if c.name != "age"])
    assert "only categories" in by_rule(only_categories, 40_000, 1.0).reason
    # the values are counted at the declared precision: 0-9.9 to a tenth is 100 values, 0-10 is 101
    for upper, family in ((9.9, "aim"), (10.0, "dp-tbart")):
        score = ColumnSpec("score", "continuous", lower=0.0, upper=upper, decimals=1)
        assert by_rule(Schema(columns=[*narrow.columns, score]), 40_000, 1.0).family == family, upper
    # a number without declared bounds is not narrow, as the model page sees it before the run
    # estimates them
    unbounded = Schema(columns=[dataclasses.replace(narrow.columns[0], lower=None, upper=None), *narrow.columns[1:]])
    assert by_rule(unbounded, 40_000, 1.0).family == "dp-tbart"
    # the run chooses it too, and says why (600 public rows at ε = 10: 6,000 rows × ε)
    schema = dataclasses.replace(narrow, rows=len(toy_table)).confirm()
    result = api.fit(toy_table.drop(columns="hours"), schema, model="auto", epsilon=10.0, preset="tiny",
                     run_dir=tmp_path / "run")
    config = result.run.public_config()
    assert config["model"] == "aim" and "no number with more than 100" in config["auto"]["reason"]


def test_auto_takes_no_family_options_and_the_cli_says_what_it_chose(toy_schema, toy_table, tmp_path, capsys,
                                                                       monkeypatch, by_the_rule):
    with pytest.raises(ValueError, match="name a family"):
        api.fit(toy_table, toy_schema, model="auto", options={"epochs": 1}, run_dir=tmp_path / "r")
    assert not (tmp_path / "r").exists()
    from synth_core.cli import main
    toy_table.to_csv(tmp_path / "t.csv", index=False)
    # a number as the target at 1,200 rows × ε: DP-TBART. The row count is declared public: a noisy
    # count (Laplace, scale 25 at ε = 2) falls below 500 about once in a hundred runs, and AIM would
    # be the right choice there
    dataclasses.replace(_with_target(toy_schema, "hours"), rows=len(toy_table)).confirm().save(tmp_path / "s.json")
    monkeypatch.chdir(tmp_path)
    assert main(["fit", "--data", "t.csv", "--schema", "s.json", "--model", "auto", "--preset", "tiny",
                 "--accountant", "rdp", "--epsilon", "2", "--out", "run"]) == 0
    out = capsys.readouterr().out
    assert "auto chose dp-tbart (standard size, calibration share 0.5)" in out and "marginals: 12 measured" in out


def test_the_live_epsilon_is_the_whole_runs_and_ends_where_the_ledger_does(toy_schema, toy_table):
    """The count and the measurement are spent before the first step; the last step's ε is the
    ledger's total."""
    result = api.fit(toy_table, toy_schema, model="dp-tbart", epsilon=2.0, preset="tiny",
                     options={"epochs": 1, "batch_size": 64}, calibration_share=0.3)
    events, ledger = result.model.train_result.events, result.ledger
    assert ledger.spent_epsilon < ledger.sum_epsilon  # composed
    first = result.model.plan.curve().at(0)
    assert first == pytest.approx(ledger.entries[0].epsilon + ledger.entries[1].epsilon, rel=1e-3)
    assert first < events[0]["epsilon"] <= events[-1]["epsilon"]
    assert events[-1]["epsilon"] == pytest.approx(ledger.spent_epsilon, rel=1e-6)


def test_the_marginals_sums_narrow_a_noisy_row_count_and_leave_a_public_one_as_it_is():
    """privacy.measurements.pooled_rows: every marginal of the whole table sums to the row count;
    pooled with the Laplace count by their noises' variances, a count far off comes back close, and
    a public count is kept."""
    from synth_core.privacy.measurements import pooled_rows
    rng = np.random.default_rng(0)
    n, std = 300, 40.0
    marginals = []
    for cells in (2, 2, 3, 10, 10, 6, 4, 30):
        counts = rng.multinomial(n, np.full(cells, 1.0 / cells)).astype(float)
        marginals.append(Marginal(("x",), (cells,), counts + rng.normal(0, std, cells)))
    scale = 50.0  # the Laplace count's at ε = 1 (its share: 0.02)
    # a count four scales off
    estimates = [pooled_rows(n - 200, 2 * scale ** 2, marginals, lambda m: std)]
    assert abs(estimates[0] - n) < 100  # the count alone is 200 off
    assert pooled_rows(n, 0.0, marginals, lambda m: std) == n  # public: exact, nothing pooled
    errors = []
    # unbiased, and about three times narrower than the count's noise (sd 71)
    for seed in range(200):
        r = np.random.default_rng(seed)
        noisy = [Marginal(m.columns, m.shape, r.multinomial(n, np.full(m.counts.size, 1 / m.counts.size))
                          + r.normal(0, std, m.counts.size)) for m in marginals]
        errors.append(pooled_rows(n + r.laplace(0, scale), 2 * scale ** 2, noisy, lambda m: std) - n)
    assert abs(np.mean(errors)) < 5 and np.std(errors) < 0.6 * math.sqrt(2) * scale
