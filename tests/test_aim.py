"""AIM as a family, and the zCDP accounting it needs: the exponential mechanism's selections and the
Gaussian measurements paid from a ρ budget, composed with the run's other mechanisms within the
target."""
from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy.optimize import brentq
from scipy.stats import norm

from synth_core import api, import_clock
from synth_core.models import graphical
from synth_core.models.aim import AIMConfig, mbi, workload
from synth_core.models.aim_config import compile_quickly
from synth_core.models.aim_rounds import band
from synth_core.models.base import SynthModel
from synth_core.models.recommend import aim_bins, by_rule, candidates
from synth_core.privacy import BudgetError, PrivacyLedger
from synth_core.privacy.accounting import ZCDP, Gaussian, compose, gaussian_for, gaussian_rho, rho_for, zcdp_epsilon
from synth_core.privacy.planning import plan_rho
from synth_core.privacy.ledger import MARGINALS, SELECTED, charge_interrupted
from synth_core.privacy.randomness import secret_rng
from synth_core.privacy.selection import RhoBudget, record
from synth_core.runs import RunDir
from synth_core.runs.jobs import progress
from synth_core.runs.timing import estimate_fit_seconds


# --- the accountant -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("sigma,delta", [(1.0, 1e-5), (6.0, 1e-6), (25.0, 1e-6)])
def test_a_zcdp_gaussian_costs_at_least_its_exact_curve_and_at_most_the_classic_bound(sigma, delta):
    """A Gaussian mechanism of noise σ is 1/(2σ²)-zCDP: its ε by our conversion lies between the
    mechanism's exact curve (Balle & Wang 2018) and the classic conversion ρ + 2√(ρ log 1/δ) (Bun &
    Steinke 2016)."""
    def delta_of(eps):
        return norm.cdf(1 / (2 * sigma) - eps * sigma) - math.exp(eps) * norm.cdf(-1 / (2 * sigma) - eps * sigma)

    exact = brentq(lambda e: delta_of(e) - delta, 1e-9, 100)
    rho = gaussian_rho(sigma)
    ours = zcdp_epsilon(rho, delta)
    assert exact <= ours <= rho + 2 * math.sqrt(rho * math.log(1 / delta))
    # the same curve as a whole-table Gaussian's, read at more orders (a large σ's best order is
    # past 63)
    assert ours <= compose((Gaussian(sigma),), delta, "rdp") * (1 + 1e-9)


@pytest.mark.parametrize("epsilon", [0.25, 1.0, 4.0])
def test_a_mixture_of_mechanisms_planned_together_stays_within_the_target(epsilon):
    """A measurement (Gaussian), DP-SGD-like subsampled steps and a zCDP mechanism given what they
    leave: composed, they end at the target and never above it, below the sum of their parts."""
    delta = 1e-6
    measurement, steps = gaussian_for(0.3 * epsilon, delta), Gaussian(8.0, 0.01, 300)
    rho = rho_for(epsilon, delta, (measurement, steps))
    total = compose((ZCDP(rho), measurement, steps), delta)
    assert 0.99 * epsilon <= total <= epsilon
    parts = zcdp_epsilon(rho, delta) + compose((measurement,), delta) + compose((steps,), delta)
    assert total < parts
    with pytest.raises(BudgetError, match="nothing is left"):
        rho_for(0.2 * epsilon, delta, (measurement,))


def test_a_ledger_composes_a_zcdp_entry_with_a_gaussian_one_within_the_target():
    plan = plan_rho(1.0, 1e-6, rounds=10, rows=1000, alongside=(gaussian_for(0.3, 1e-6),))
    ledger = PrivacyLedger(target_epsilon=1.0, target_delta=1e-6, n_rows=1000)
    m = plan.gaussians_alongside()[0]
    ledger.record("marginals", epsilon=0.3, delta=1e-6, kind=MARGINALS, noise_multiplier=m.noise_multiplier,
                  sample_rate=1.0, steps=1)
    budget = RhoBudget(plan.rho)
    # the whole ρ in one measurement
    budget.measure(np.zeros(5), math.sqrt(1 / (2 * plan.rho)), secret_rng())
    entry = record(ledger, budget, 1e-6)
    assert entry.kind == SELECTED and entry.details["rho"] == pytest.approx(plan.rho)
    assert ledger.sum_epsilon > 1.0 >= ledger.spent_epsilon >= 0.99
    assert PrivacyLedger.from_dict(ledger.to_dict()).spent_epsilon == pytest.approx(ledger.spent_epsilon)


def test_a_rho_budget_refuses_what_it_does_not_have_and_its_mechanisms_draw_secretly():
    budget = RhoBudget(0.1)
    rng = secret_rng()
    noisy = budget.measure(np.zeros(20_000), 10.0, rng)  # ρ = 0.005
    assert noisy.std() == pytest.approx(10.0, rel=0.05) and budget.spent == pytest.approx(0.005)
    # ρ = 0.08
    assert budget.select(np.array([0.0, 50.0, 1.0]), epsilon=0.8, sensitivity=1.0, rng=rng) == 1
    assert budget.selections == 1 and budget.measurements == 1
    with pytest.raises(BudgetError, match="left"):
        budget.select(np.zeros(3), epsilon=0.8, sensitivity=1.0, rng=rng)
    assert budget.spent <= budget.total


def test_the_exponential_mechanism_over_the_allowed_candidates_draws_by_their_scores_and_asks_few():
    """Drawing the first allowed candidate in the order of the Gumbel-perturbed scores is the
    exponential mechanism over the allowed ones alone; `allowed` is asked only of the candidates
    above the one drawn."""
    q, epsilon, sensitivity = np.array([3.0, 2.0, 1.0, 0.0, 2.5]), 2.0, 1.0
    allowed = {1, 2, 3}
    expected = np.exp(0.5 * epsilon / sensitivity * q[[1, 2, 3]])
    expected /= expected.sum()
    rng, asked = np.random.default_rng(7), []  # a seeded generator, for this statistical check only
    draws = []
    for _ in range(20_000):
        budget = RhoBudget(10.0)
        draws.append(budget.select(q, epsilon, sensitivity, rng, lambda i: asked.append(i) or i in allowed))
    counts = np.bincount(draws, minlength=5)
    assert counts[0] == counts[4] == 0
    assert np.allclose(counts[[1, 2, 3]] / len(draws), expected, atol=0.01)
    assert len(asked) < 3 * len(draws)  # not every candidate each time


def test_the_models_marginals_on_many_cliques_agree_with_mbi_across_and_within_its_components():
    """project_many splits a clique by the model's connected components (independent under the
    model) and contracts each part over its own component: the same marginals as mbi's own
    projection."""
    m = mbi()
    rng = np.random.default_rng(0)
    sizes = {"a": 3, "b": 4, "c": 2, "d": 5, "e": 3}
    data = {k: rng.integers(0, n, 400) for k, n in sizes.items()}
    data["b"] = (data["a"] + rng.integers(0, 2, 400)) % 4
    data["e"] = (data["d"] + data["c"]) % 3
    domain = m.Domain(list(sizes), list(sizes.values()))
    table = m.Dataset(data, domain)
    measured = [("a", "b"), ("c",), ("d", "e"), ("c", "e")]
    measurements = [m.LinearMeasurement(np.asarray(table.project(cl).datavector()), cl, stddev=1.0)
                    for cl in measured + [("a",), ("d",)]]
    model = m.estimation.MirrorDescent().estimate(domain, measurements, known_total=400.0, iters=200)
    cliques = [("b", "a"), ("a", "c"), ("e", "a", "c"), ("c", "d"), ("d", "a", "b"), ("b", "e", "d"), ("a",)]
    ours = graphical.project_many(model, cliques)
    for cl in cliques:
        assert np.allclose(ours[cl], np.asarray(model.project(cl).datavector()), rtol=1e-3, atol=1e-3), cl
    assert graphical.components(model)["a"] == graphical.components(model)["b"] != graphical.components(model)["c"]


@pytest.mark.parametrize("off", [-600.0, -800.0])
def test_a_components_marginals_are_contracted_without_underflow(monkeypatch, off):
    """A chain of factors whose best cells disagree: the product of the whole component underflows
    to zeros in float64 (at -800 a pair's product too), and mbi's uncompiled elimination had stood
    in (on ames, 20-120 s a round from its 18th). Contracted pair by pair in logs, the marginals
    are mbi's own."""
    m = mbi()
    names = [f"c{i}" for i in range(14)]
    domain = m.Domain(names, [2] * len(names))
    cliques = [(a, b) for a, b in zip(names, names[1:])]
    # each factor prefers (0, 1): its neighbour's prefers its second column at 0, so any row pays
    # `off` on every other factor (e^-3600 or less over the chain)
    log = np.full((2, 2), off)
    log[0, 1] = 0.0
    factors = {cl: m.Factor(domain.project(cl), log) for cl in cliques}
    potentials = m.CliqueVector(domain, tuple(factors), factors)
    marginals = m.marginal_oracles.message_passing_stable(potentials, 1000.0)
    model = m.MarkovRandomField(potentials=potentials, total=1000.0, marginals=marginals)
    asked = [("c0", "c13"), ("c3", "c7"), ("c5",)]
    expected = {cl: np.asarray(model.project(cl).datavector()) for cl in asked}
    monkeypatch.setattr(type(model), "project", lambda *a, **k: pytest.fail("mbi stood in"))
    ours = graphical.project_many(model, asked)
    for cl in asked:
        assert np.isfinite(ours[cl]).all() and ours[cl].sum() == pytest.approx(1000.0), cl
        assert np.allclose(ours[cl], expected[cl], rtol=1e-6, atol=1e-6), cl


def test_compiled_programs_are_freed_before_the_process_runs_out_of_memory_maps(monkeypatch):
    """mbi compiles anew for every model structure; a long AIM run held ~600 more memory maps a
    round until the kernel's limit stopped it ("LLVM ERROR: Unable to allocate section memory").
    Past the soft limit the compiled programs are freed; below it they are kept (freeing costs
    recompiling)."""
    import jax

    freed = []
    monkeypatch.setattr(jax, "clear_caches", lambda: freed.append(True))
    monkeypatch.setattr(graphical, "MAPS_SOFT_LIMIT", 10**9)
    graphical.release_compiled(10)
    assert not freed
    monkeypatch.setattr(graphical, "MAPS_SOFT_LIMIT", 0)
    graphical.release_compiled(3)
    assert freed == [True]


def test_jax_compiles_quickly_unless_the_environment_names_its_own_level():
    """An AIM round is mostly XLA compiling the model's new structure: mbi's programs are compiled
    at LLVM's level 0 (set before JAX makes its backend), keeping other flags and a level the
    steward's environment names."""
    flag = "--xla_backend_optimization_level"
    env: dict = {}
    compile_quickly(env)
    assert env["XLA_FLAGS"] == f"{flag}=0"
    env = {"XLA_FLAGS": "--xla_cpu_enable_fast_math=false"}
    compile_quickly(env)
    assert env["XLA_FLAGS"].split() == ["--xla_cpu_enable_fast_math=false", f"{flag}=0"]
    env = {"XLA_FLAGS": f"{flag}=2"}
    compile_quickly(env)
    assert env["XLA_FLAGS"] == f"{flag}=2"
    # this process's JAX was set up by mbi(), as a run's worker sets it up
    mbi()
    assert flag in os.environ["XLA_FLAGS"]


def test_a_dead_aim_worker_is_charged_its_whole_budget():
    plan = plan_rho(2.0, 1e-6, rounds=40, rows=5000)
    ledger = PrivacyLedger(target_epsilon=2.0, target_delta=1e-6, n_rows=5000)
    entry = charge_interrupted(ledger, plan.to_dict(), steps=3)
    assert entry.kind == SELECTED and entry.details["rho"] == plan.rho
    assert entry.epsilon == pytest.approx(2.0, rel=1e-3) and ledger.spent_epsilon <= 2.0 * 1.0001


def test_the_workload_comes_from_the_public_domain_sizes():
    w = workload({"a": 3, "b": 4, "c": 50_000}, degree=2, max_cells=10_000)
    assert ("a", "b") in w and ("a", "c") not in w and ("c",) in w
    assert w[("a",)] == 1.0 and w[("a", "b")] == 2.0
    # a declared target adds its triples with two others (within the cells), and what they contain
    sizes = {"y": 2, "a": 3, "b": 4, "c": 50_000, "d": 5}
    plain, focused = workload(sizes, 2, 10_000), workload(sizes, 2, 10_000, target="y")
    assert ("y", "a", "b") in focused and ("y", "a", "d") in focused and not any(len(cl) == 3 for cl in plain)
    assert not any(len(cl) == 3 and "c" in cl for cl in focused) and ("a", "b", "d") not in focused
    assert focused[("y",)] > plain[("y",)] and set(plain) <= set(focused)


# --- the family -----------------------------------------------------------------------------------------------
def test_aim_spends_its_budget_round_by_round_and_samples_exactly_under_conditions(toy_schema, toy_table, tmp_path):
    events = []
    result = api.fit(toy_table, toy_schema, model="aim", epsilon=2.0, preset="tiny", run_dir=tmp_path / "run",
                     on_event=events.append, review_rows=20, public_table=True)
    model, ledger = result.model, result.ledger
    # the last round spends what is left
    assert model.budget.spent == pytest.approx(model.plan.rho, rel=1e-6)
    assert model.budget.selections == model.train_result.steps_done - 1 >= 1
    # its rounds lie within the band around those expected (models.aim_rounds)
    low, high = band(max(2, model.expected_steps(model.plan)), model.config.rounds_band)
    most = model.most_steps(model.plan)
    assert low <= model.train_result.steps_done <= most == min(high, model.plan.rounds)
    assert ledger.spent_epsilon <= 2.0 and ledger.spent_epsilon == pytest.approx(2.0, rel=0.01)
    # the live ε is the whole run's: rising round by round to the ledger's total
    live = [e["epsilon"] for e in events]
    assert live == sorted(live) and live[-1] == pytest.approx(ledger.spent_epsilon, rel=1e-6)
    assert {k for k in ledger.entries[-1].details} >= {"rho", "selections", "measurements", "marginals"}
    # the next time estimate is a lookup of this run's costs; its rounds are the number the run's
    # count started from (one number on the model page, the train page and the report), not the
    # ceiling planned
    estimate = estimate_fit_seconds("aim", toy_schema, "tiny", len(toy_table), 2.0, 1e-5)
    assert estimate["measured"].startswith("measured on a run") and estimate["steps_adapt"]
    assert estimate["steps"] == events[0]["steps"] == model.expected_steps(model.plan)
    most = model.most_steps(model.plan)
    assert model.train_result.steps_done <= estimate["steps_at_most"] == most
    assert estimate["steps_at_most"] < model.plan.rounds
    # the train page counts rounds, as many as the run expected at its last one
    shown = progress(RunDir(tmp_path / "run"))
    assert shown["unit"] == "rounds" and shown["steps_done"] == shown["steps_planned"] == model.train_result.steps_done
    # exact conditions, a number too
    rows, info = api.sample(tmp_path / "run", 40, conditions={"job": "pilot", "age": 33}, seed=3)
    assert (rows["job"] == "pilot").all() and (rows["age"] == 33).all() and info["method"] == "exact"
    assert set(rows["sex"]) <= {"Female", "Male"} and rows["hours"].between(0, 100).all()


def test_the_cli_says_how_many_rounds_aim_took_and_that_nothing_of_the_table_is_left(toy_schema, toy_table,
                                                                                   tmp_path, monkeypatch, capsys):
    """AIM's planned rounds are an upper bound: the run ends when its budget does, and the CLI says
    the rounds it took (not '5/528'); a table whose whole ε is spent has 0 left, not a rounding
    residue like 2e-07."""
    from synth_core.cli import main

    monkeypatch.chdir(tmp_path)
    toy_table.to_csv("t.csv", index=False)
    toy_schema.save("s.json")
    assert main(["fit", "--data", "t.csv", "--schema", "s.json", "--model", "aim", "--preset", "tiny",
                 "--epsilon", "1", "--out", "run"]) == 0
    out = capsys.readouterr().out
    run = RunDir(tmp_path / "run")
    rounds = run.events()[-1]["step"]
    assert rounds < run.config()["plan"]["rounds"]
    assert f"completed: {rounds} rounds, " in out and "rows/s" not in out and "/" not in out.split("completed:")[1].split(",")[0]
    assert "this table: ε 1 spent of 1 across its runs, 0 left" in out


def test_a_first_time_estimate_expects_the_rounds_aim_usually_takes_and_says_the_most_it_could(toy_schema, toy_table):
    """Before any run, the estimate expects a few times the schedule's fewest rounds, not the 16 per
    column planned (a table of 86 columns was estimated at 4 hours and took 6 minutes); a run takes
    at least the fewest."""
    estimate = estimate_fit_seconds("aim", toy_schema, "cpu", len(toy_table), 1.0, 1e-5,
                                    options={"one_way_share": 0.5})
    assert estimate["measured"].startswith("timed on rows") and estimate["steps_adapt"]
    # the most: the top of the band the rounds are held in, not the 16 a column planned
    assert estimate["steps"] < estimate["steps_at_most"] < 16 * len(toy_schema.columns)
    assert estimate["at_most_s"] > estimate["seconds"]
    # its worker imports Opacus and JAX afresh as it sets up (3.7 s of a 2-core worker's 3.7 s
    # setting up), which this process holds already
    imports = import_clock.seconds("opacus") + import_clock.seconds("mbi")
    assert estimate["phases"]["setup"] >= imports > 0
    result = api.fit(toy_table, toy_schema, model="aim", epsilon=1.0, options={"one_way_share": 0.5}, public_table=True)
    fewest = result.model.fewest_rounds(result.model.plan)
    assert 2 <= fewest <= result.model.train_result.steps_done
    assert estimate["steps"] == fewest  # small signal: 4 modelled columns × 600 rows × ε 1
    # a signal of 80,000 (4 modelled columns, 20,000 rows, ε 1): 1 + 2 log10(80,000 / 15,000) =
    # 2.45 times the fewest
    large = plan_rho(1.0, 1e-5, rounds=result.model.plan.rounds, rows=20_000)
    assert len(result.model.sizes) == 4
    fewest_large = result.model.fewest_rounds(large)
    assert result.model.expected_steps(large) == math.ceil(2.454 * fewest_large)


def test_the_estimates_probe_times_rounds_of_a_model_holding_the_runs_middle_cliques(toy_schema,
                                                                                   monkeypatch):
    """A round is mostly compiling the model's new structure, which grows with the cliques it
    holds: the probe's model holds random cliques from its first fit, as many as the run's middle
    round holds (within half the model's size, and only those a round could select), drawn only
    where the probe set it up; a run draws none. Its rounds each spend an equal share of what is
    left over the rounds expected (they do not anneal), so it times as many as it asks for."""
    from synth_core.models.base import model_class_for
    from synth_core.plan import plan_run
    from synth_core.request import FitRequest
    from synth_core.runs.timing import random_rows

    run_plan = plan_run(FitRequest(model="aim", preset="cpu"), toy_schema, 20_000).noise
    synth = model_class_for("aim", toy_schema)(toy_schema, preset="cpu", seed=0)
    assert synth.held_for_timing == synth.timing_rounds == 0
    plan = synth.timed_plan(run_plan)
    assert plan == run_plan and synth.timing_rounds == synth.expected_steps(run_plan) >= 5
    assert synth.held_for_timing == synth.timing_rounds // 2 - 2 > 0
    drawn: list = []
    draw = graphical.random_cliques
    monkeypatch.setattr(graphical, "random_cliques", lambda *a: drawn.append(a[3]) or draw(*a))
    seen: list = []
    lefts: list = []
    synth.fit(random_rows(toy_schema, 300), plan.epsilon, plan.delta, "rdp", plan=plan,
              on_event=lambda e: seen.append(e) or lefts.append(synth.budget.left),
              should_stop=lambda: len(seen) > 3)
    assert [e["step"] for e in seen] == [1, 2, 3, 4]  # the budget lasts the rounds it times
    assert drawn == [synth.held_for_timing]  # once, before its first fit
    # each later round spent an equal share of what the first left over the rounds expected
    share = lefts[0] / (synth.timing_rounds - 1)
    assert np.diff(lefts) == pytest.approx([-share] * 3, rel=1e-6)
    # a model not set up by the probe (a run's) draws none
    run = model_class_for("aim", toy_schema)(toy_schema, preset="cpu", seed=0)
    seen.clear()
    run.fit(random_rows(toy_schema, 300), run_plan.epsilon, run_plan.delta, "rdp", plan=run_plan,
            on_event=seen.append, should_stop=lambda: len(seen) > 3)
    assert len(seen) == 4 and drawn == [synth.held_for_timing]
    # its rounds choose among every candidate and carry no weight for a probe's seconds
    assert not any("timing_weight" in e for e in seen)
    limit = synth.config.max_model_size / 2
    candidates = list(workload(synth.model_sizes, synth.config.degree, synth.config.max_cells))
    domain, one_way = synth.domain(), [(name,) for name in synth.sizes]
    picked = graphical.random_cliques(domain, one_way, candidates, 3, limit, secret_rng())
    assert len(set(picked)) == len(picked) <= 3 and set(picked) <= set(map(tuple, candidates))
    assert graphical.random_cliques(domain, one_way, candidates, 3, 0.0, secret_rng()) == []
    smallest = min(domain.size(tuple(c)) for c in candidates)
    small = graphical.random_cliques(domain, one_way, candidates, 10, limit, secret_rng(), smallest)
    assert small and all(domain.size(c) == smallest for c in small)


def test_the_probes_timed_rounds_add_a_clique_then_measure_one_again_weighed_as_runs_take_them(
        toy_schema, monkeypatch):
    """On random rows a probe's own choice between a column measured again (cheap) and a new pair
    (a structure compiled anew) was a coin's toss, and its seconds a round followed it (ames: 0.55
    or 1.0 of the run's). Its 3rd round adds a clique of two or more columns the model did not
    hold, its 4th measures a held one again, and the estimate weighs their seconds as often as
    runs take each kind; its warm-up round (the 2nd) is not timed. (A run's rounds carry no
    weight: the test above.)"""
    from synth_core.models import aim_rounds
    from synth_core.plan import plan_run
    from synth_core.request import FitRequest
    from synth_core.runs import timing

    # 5,000 rows: the probe holds one random clique, so new ones are left for its 3rd round
    run_plan = plan_run(FitRequest(model="aim", preset="cpu"), toy_schema, 5_000).noise
    held_before: list = []
    of_kind = aim_rounds.of_kind
    monkeypatch.setattr(aim_rounds, "of_kind", lambda c, held, new: held_before.append(
        [set(h) for h in held]) or of_kind(c, held, new))
    # the probe's clock: its start, then rounds 1 to 4 ending at 5, 6, 8 and 18 s
    clock = iter([0.0, 5.0, 6.0, 8.0, 18.0] + [30.0] * 50)
    monkeypatch.setattr(timing, "time", type("Clock", (), {"perf_counter": lambda: next(clock)}))
    synth, per_round, _, _ = timing._timed_steps("aim", toy_schema, "cpu", 1, None, None, 3,
                                                 run_plan=run_plan)
    share = aim_rounds.PROBE_NEW_SHARE
    assert per_round == pytest.approx(share * 2.0 + (1 - share) * 10.0)
    # the selections of its rounds 2 to 4, and the cliques the model held before each
    assert len(synth.rounds_log) == len(held_before) == 3
    added, again = set(synth.rounds_log[1]), set(synth.rounds_log[2])
    assert len(added) > 1 and not any(added <= h for h in held_before[1])
    assert any(again <= h for h in held_before[2])
    candidates = {("age",): 1.0, ("age", "sex"): 1.0, ("sex", "job"): 1.0}
    held = [("age",), ("sex", "job")]
    assert aim_rounds.of_kind(candidates, held, None) == candidates
    assert list(aim_rounds.of_kind(candidates, held, True)) == [("age", "sex")]
    assert list(aim_rounds.of_kind(candidates, held, False)) == [("age",), ("sex", "job")]
    # none of the kind: every candidate
    assert aim_rounds.of_kind(candidates, [("age", "sex", "job")], True) == candidates


def test_aim_chooses_its_numeric_bins_from_the_released_rows_and_epsilon(toy_schema, toy_table, tmp_path):
    """Unless a size fixes them, AIM's bins follow rows × ε per column (public: the released count),
    and the run's saved config records the choice, so the reloaded model reads the same bins."""
    assert aim_bins(600, 1.0, 5) == 32 and aim_bins(600, 5.0, 5) == 100 and aim_bins(2_500, 1.0, 10) == 100
    assert aim_bins(2_500, 1.0, 11) == 32  # more columns: more rounds share the same ρ
    result = api.fit(toy_table, toy_schema, model="aim", epsilon=1.0, preset="tiny", options={"n_bins": 0},
                     run_dir=tmp_path / "run", public_table=True)
    assert result.model.config.n_bins == 32 and result.model.encoder.n_bins == 32
    reloaded = SynthModel.load(RunDir(tmp_path / "run").model_dir)
    assert reloaded.config.n_bins == 32 and len(reloaded.encoder.codecs[3].edges) == 33
    assert len(api.sample(tmp_path / "run", 5, seed=0)[0]) == 5
    assert "32 ranges" in candidates(toy_schema, 600, 1.0)["aim"].reason


def test_aim_cancelled_after_two_rounds_keeps_its_model_and_is_charged_what_it_spent(toy_schema, toy_table,
                                                                                      tmp_path):
    events = []
    result = api.fit(toy_table, toy_schema, model="aim", epsilon=2.0, preset="tiny", run_dir=tmp_path / "run",
                     on_event=events.append, should_stop=lambda: len(events) >= 2, public_table=True)
    assert result.model.train_result.cancelled and result.model.train_result.steps_done == 2
    entry = result.ledger.entries[-1]
    assert entry.kind == SELECTED and entry.details["cancelled"]
    assert 0 < entry.details["rho"] < result.model.plan.rho
    assert RunDir(tmp_path / "run").status()["state"] == "cancelled"
    assert len(api.sample(tmp_path / "run", 10, seed=0)[0]) == 10


def test_aim_gives_every_columns_first_measurement_the_share_of_rho_asked(toy_schema, toy_table):
    """one_way_share: the first measurement of every column spends that share of ρ (AIM's own, 0: a
    round's worth each), the rounds the rest; the total is still the plan's."""
    spent = {}
    for share in (0.0, 0.8):
        model = api.fit(toy_table, toy_schema, model="aim", epsilon=2.0, preset="tiny",
                        options={"one_way_share": share}, public_table=True).model
        one_way = [rho for what, rho in model.budget.log if what == "one-way marginal"]
        spent[share] = sum(one_way) / model.plan.rho
        assert model.budget.spent == pytest.approx(model.plan.rho, rel=1e-6)
        # the model page shows the noise the run gave each column: what `opening` says for the plan
        # (a column costs 1/2σ²)
        sigma = model.opening(model.plan.rho, model.plan.rounds)["one_way_sigma"]
        assert one_way == pytest.approx([1 / (2 * sigma ** 2)] * len(toy_schema.columns), rel=1e-9)
    # (AIM: at most half)
    assert spent[0.8] == pytest.approx(0.8, rel=1e-6) and spent[0.0] <= 0.5 + 1e-9
    for bad in (1.0, -0.1, True, "half"):
        with pytest.raises(ValueError, match="one_way_share"):
            api.fit(toy_table, toy_schema, model="aim", epsilon=1.0, preset="tiny", options={"one_way_share": bad}, public_table=True)


def test_aim_refuses_training_options_it_does_not_have(toy_schema, toy_table):
    with pytest.raises(ValueError, match="unknown options for aim: epochs"):
        api.fit(toy_table, toy_schema, model="aim", epsilon=1.0, preset="tiny", options={"epochs": 2}, public_table=True)
    with pytest.raises(ValueError, match="n_bins"):
        api.fit(toy_table, toy_schema, model="aim", epsilon=1.0, preset="tiny", options={"n_bins": 1}, public_table=True)


def test_auto_chooses_aim_when_rows_times_epsilon_is_small(toy_schema, toy_table, tmp_path, by_the_rule):
    """Below 1,000 rows × ε, AIM with four fifths of ρ on the columns alone (up to 2,000), half from
    there (benchmarks/history/2026-11-27.md);
    the choice reads the row count the run releases."""
    schema = toy_schema.confirm()
    schema.rows = len(toy_table)  # 600 public rows: at ε = 1, 600 < 1,000
    result = api.fit(toy_table, schema, model="auto", epsilon=1.0, preset="tiny", run_dir=tmp_path / "run", public_table=True)
    config = result.run.public_config()
    assert config["model"] == config["auto"]["family"] == "aim" and config["calibration_share"] == 0
    # most of ρ for every column alone first (benchmarks/history: AIM's own twentieth left its 1-way
    # figures behind, and below 1,000 rows × ε the pairs are mostly below the noise)
    assert config["options"] == {"one_way_share": 0.8} == config["auto"]["options"]
    assert result.model.config.one_way_share == 0.8
    assert "four fifths of ε measures each column alone" in config["auto"]["reason"]
    assert "AIM" in config["auto"]["reason"] and result.ledger.spent_epsilon <= 1.0
    # 1,200: AIM still (no number as the target) ...
    assert by_rule(schema, 600, 2.0).family == "aim"
    # ... four fifths below 2,000 ...
    assert by_rule(schema, 600, 2.0).options == {"one_way_share": 0.8}
    assert by_rule(schema, 600, 4.0).options == {"one_way_share": 0.5}  # ... half from there
    assert by_rule(schema, 999, 1.0).options == {"one_way_share": 0.8}
    assert by_rule(schema, 6_000, 1.0).family == "dp-tbart"


def test_a_noisy_row_count_is_combined_with_the_totals_the_measurements_imply(toy_schema, toy_table):
    """AIM holds its model to a known total. A released count off by 300 rows (Laplace noise of
    scale 50 can be off by 224, as one HMDA run was) would spread the difference over the cells: the
    count is weighed against the totals the first measurement implies (post-processing), while a
    public count is kept exact."""
    from synth_core.models.aim import mbi
    m = mbi()
    fitted = api.fit(toy_table, toy_schema.confirm(), model="aim", epsilon=1.0, preset="tiny", public_table=True).model
    # the run's own noisy count: ε 0.02, Laplace scale 50
    assert fitted.count_variance == 2 * (1 / 0.02) ** 2
    n = len(toy_table)
    rng = np.random.default_rng(0)
    measured = [m.LinearMeasurement(np.full(k, n / k) + rng.normal(0, 2.0, k), (name,), stddev=2.0)
                for name, k in (("a", 2), ("b", 5), ("c", 10))]
    fitted.count_variance = 2 * 50.0 ** 2
    assert abs(fitted.best_total(n + 300, measured) - n) < 10
    fitted.count_variance = 0.0  # public: exact, whatever the measurements say
    assert fitted.best_total(n + 300, measured) == n + 300
    ledger = PrivacyLedger(target_epsilon=1.0, target_delta=1e-5, n_rows=n)
    assert ledger.count_variance == 0.0  # rows public by default


def test_compression_merges_the_cells_the_first_measurement_finds_below_three_sigma():
    """MST's domain compression, post-processing of the noisy first measurement alone: the cells
    below 3σ become one cell of the model, its measurement their noisy counts summed with σ's noise
    (weighted by 1/√k), and rows drawn there are shared among them by their noisy counts clipped at
    zero."""
    from synth_core.models.aim import AIM
    from synth_core.schema import ColumnSpec, Schema
    schema = Schema(columns=[ColumnSpec("x", "categorical", categories=list("abcdef")),
                             ColumnSpec("y", "categorical", categories=["u", "v", "w"])])
    model = AIM(schema, preset="tiny")
    sigma = 10.0
    first = {"x": np.array([500.0, 29.0, -12.0, 8.0, 300.0, 0.0]), "y": np.array([100.0, 5.0, 200.0])}
    model._compress(first, sigma)
    assert list(model.kept) == ["x"]  # y has one cell below 30: nothing to merge
    assert model.kept["x"].tolist() == [0, 4] and model.model_sizes == {"x": 3, "y": 3}
    assert model.merged_weights["x"] == pytest.approx([29 / 37, 0.0, 8 / 37, 0.0])
    assert model._to_model("x", np.array([0, 1, 2, 3, 4, 5])).tolist() == [0, 2, 2, 2, 1, 2]
    measured = model._first_measurement("x", first["x"], sigma)
    # (29-12+8+0)/√4
    assert np.asarray(measured.noisy_measurement) == pytest.approx([500.0, 300.0, 25.0 / 2.0])
    back = model._to_public("x", np.array([0, 1] + [2] * 4000), np.random.default_rng(0))
    assert back[:2].tolist() == [0, 4] and set(back[2:]) == {1, 3}
    assert np.mean(back[2:] == 1) == pytest.approx(29 / 37, abs=0.03)


def test_aim_with_a_compressed_domain_samples_exactly_under_conditions_after_a_reload(toy_schema, toy_table, tmp_path):
    """`hours` lies between 10 and 60 of its public 0-100: at ε = 8 the first measurement finds its
    empty bins (σ about 4 rows against 120 in each bin with rows), the model holds the bins with
    rows and one cell for the rest, and the saved run keeps what was merged and how its rows are
    shared."""
    result = api.fit(toy_table, toy_schema, model="aim", epsilon=8.0, preset="tiny", options={"compress": True},
                     run_dir=tmp_path / "run", public_table=True)
    model = result.model
    kept = set(model.kept["hours"].tolist())  # an empty bin's noise passes 3σ once in 740 draws
    assert kept >= {1, 2, 3, 4, 5} and len(kept) <= 8 and model.model_sizes["hours"] == len(kept) + 1
    assert ledger_total_ok(result.ledger, 8.0)
    reloaded = SynthModel.load(RunDir(tmp_path / "run").model_dir)
    assert reloaded.model_sizes == model.model_sizes
    assert reloaded.merged_weights["hours"] == pytest.approx(model.merged_weights["hours"])
    rows, info = api.sample(tmp_path / "run", 60, conditions={"hours": 95.0, "job": "pilot"}, seed=1)
    assert (rows["hours"] == 95.0).all() and (rows["job"] == "pilot").all() and info["method"] == "exact"
    rows, _ = api.sample(tmp_path / "run", 2000, seed=2)
    assert rows["hours"].between(0, 100).all() and rows["hours"].between(10, 60).mean() > 0.8
    with pytest.raises(ValueError, match="compress"):
        api.fit(toy_table, toy_schema, model="aim", epsilon=1.0, preset="tiny", options={"compress": "yes"}, public_table=True)


def ledger_total_ok(ledger, epsilon: float) -> bool:
    return ledger.spent_epsilon <= epsilon and ledger.spent_epsilon == pytest.approx(epsilon, rel=0.01)


def test_aims_report_and_cli_speak_of_its_rounds_and_the_size_is_named_as_chosen(toy_schema, toy_table, tmp_path,
                                                                                    monkeypatch, capsys):
    """Issue 41 item 8: AIM's report printed 'σ = —, q = —, clipping norm —' and the CLI
    'calibrating noise … with the PRV accountant'; the standard size was called 'cpu' in run names
    and reports."""
    from synth_core.cli import main
    from synth_core.release.privacy_report import privacy_report, report_markdown
    from synth_core.runs import RunDir
    api.fit(toy_table, toy_schema, model="aim", epsilon=2.0, preset="tiny", run_dir=tmp_path / "aim",
            public_table=True)
    report = privacy_report(RunDir(tmp_path / "aim"))
    text = report_markdown(report)
    # in the family's own words
    assert "Its own mechanism, no DP-SGD: AIM: marginals selected" in text
    assert "σ = —" not in text and "clipping norm" not in text
    assert report["privacy"]["rounds_taken"] >= 1 and report["privacy"]["accountant"] == "zCDP (Rényi)"
    # one number of rounds: those the train page counted last, not the schedule's ceiling
    taken = RunDir(tmp_path / "aim").events()[-1]["step"]
    assert report["privacy"]["rounds_taken"] == taken and f"in {taken} rounds" in text and "planned" not in text
    api.fit(toy_table, toy_schema, model="dp-tbart", epsilon=2.0, preset="cpu", run_dir=tmp_path / "tbart",
            options={"epochs": 1}, public_table=True)
    assert RunDir(tmp_path / "tbart").public_config()["size"] == "standard"
    assert "size standard" in report_markdown(privacy_report(RunDir(tmp_path / "tbart")))
    monkeypatch.chdir(tmp_path)
    toy_table.to_csv("t.csv", index=False)
    toy_schema.save("s.json")
    assert main(["fit", "--data", "t.csv", "--schema", "s.json", "--model", "aim", "--preset", "tiny", "--epsilon",
                 "2", "--out", "cli", "--public-table"]) == 0
    out = capsys.readouterr().out
    assert "planning aim's rounds" in out and "PRV" not in out


def test_the_live_count_of_rounds_starts_where_the_estimate_did_and_shortens_only_on_evidence():
    """Issue 41 item 4: the count the train page shows starts at the rounds the estimate expected
    (the share of rounds that quadruple the next one's cost is solved for it), and ends at the
    rounds taken."""
    from synth_core.models.aim_rounds import fewest_left, growth_expected
    for left, cost, rounds in ((1.0, 0.01, 20), (1.0, 0.05, 6), (1.0, 0.002, 120), (0.3, 0.02, 9)):
        share = growth_expected(left, cost, rounds)
        assert 0.0 <= share <= 1.0
        assert abs(fewest_left(left, cost, 4.0 ** share) - rounds) <= 1, (left, cost, rounds, share)
    # every round quadrupling: the fewest; none: the most the budget pays at this cost
    assert fewest_left(1.0, 0.01, 4.0) < fewest_left(1.0, 0.01, 1.0) == 99


def test_the_train_page_times_an_adaptive_runs_first_round_by_a_past_run_and_adds_the_finish(tmp_path):
    """The first round of AIM compiles its estimation and takes several later rounds' time: until a
    second is timed, the time left uses what a past run's rounds took (stored in the run's private
    facts), and saving and drawing the review sample are counted even when no past run timed
    them."""
    from synth_core.runs.jobs import FINISH_S
    run = RunDir.create(tmp_path / "run")
    run.write_config({"model": "aim", "plan": {"kind": "zcdp", "steps": 100}, "step_estimate_s": 0.5})
    # a time measured on the private table stays private
    assert "step_estimate_s" not in run.public_config()
    run.append_event({"step": 1, "steps": 9, "elapsed_s": 6.0, "epsilon": 0.1})
    shown = progress(run)
    assert shown["steps_planned"] == 9 and shown["unit"] == "rounds"
    assert shown["remaining_s"] == pytest.approx(8 * 0.5 + FINISH_S, abs=0.5)  # not 8 × 6 s
    run.append_event({"step": 2, "steps": 9, "elapsed_s": 7.0, "epsilon": 0.2})
    run.append_event({"step": 3, "steps": 9, "elapsed_s": 8.5, "epsilon": 0.3})
    shown = progress(run)  # its own rounds from now on: the last ones, without the first
    assert shown["remaining_s"] == pytest.approx(6 * 1.25 + FINISH_S, abs=0.5)
    # its rounds lengthen and their number is re-estimated: the page says the time left can rise,
    # and why
    assert "grow longer as its model grows" in shown["may_rise"] and "rise" in shown["may_rise"]


def test_the_programs_folder_keeps_the_newest_within_its_bound_and_jax_never_scans_it(tmp_path):
    """models.aim_config.prune_compiled holds the compiled programs' folder under its bound, once a
    process: the newest kept, the older deleted with JAX's last-use records. JAX is not asked to
    bound it: its bound read every entry on every write, and a run's rounds slowed as it wrote."""
    import jax
    from synth_core.models.aim_config import mbi, prune_compiled
    folder = tmp_path / "jax"
    folder.mkdir()
    for i in range(6):
        program = folder / f"p{i}-cache"
        program.write_bytes(b"x" * 100)
        os.utime(program, (1000 + i, 1000 + i))
        (folder / f"p{i}-atime").write_bytes(b"t")
    (folder / "gone-atime").write_bytes(b"t")  # a record whose program is gone
    assert prune_compiled(folder, 350) == 300
    kept = [f"p{i}-{k}" for i in (3, 4, 5) for k in ("atime", "cache")]
    assert sorted(p.name for p in folder.iterdir()) == kept
    assert prune_compiled(tmp_path / "none", 350) == 0
    mbi()
    if "JAX_COMPILATION_CACHE_MAX_SIZE" not in os.environ:
        assert jax.config.jax_compilation_cache_max_size == -1  # JAX's own: no bound, no scan


def test_compiled_programs_are_kept_in_the_homes_cache_for_the_next_fit(tmp_path):
    """A fit in a new process finds what the last one compiled (models.aim_config.keep_compiled): in
    the workbench home's cache/jax, unless $JAX_COMPILATION_CACHE_DIR says elsewhere."""
    env = {k: v for k, v in os.environ.items() if k != "JAX_COMPILATION_CACHE_DIR"}
    env["SYNTH_WORKBENCH_HOME"] = str(tmp_path / "home")
    code = ("from synth_core.models.aim_config import mbi\nimport jax\nmbi()\n"
            "print(float(jax.jit(lambda x: x * 2.5)(2.0)))")
    for _ in range(2):
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600,
                             cwd=str(Path(__file__).resolve().parents[1]))
        assert out.returncode == 0, out.stderr
        assert out.stdout.strip() == "5.0"
        kept = list((tmp_path / "home" / "cache" / "jax").glob("*-cache"))
        assert kept  # even a program that compiled in milliseconds (JAX's own floor is a second)
    # the second reused it
    assert len(list((tmp_path / "home" / "cache" / "jax").glob("*-cache"))) == len(kept)


def _rounds_held(expected: int, width: float, quadruples) -> tuple[int, RhoBudget]:
    """Rounds of a schedule as AIM's loop runs it (`aim_rounds.held`, the last round spending what
    is left), each round quadrupling the next one's cost where `quadruples(done)` says so."""
    from synth_core.models.aim_rounds import held
    budget = RhoBudget(1.0)
    budget._spend(0.5, "one-way")  # the first round: every column's counts
    epsilon, sigma = budget.schedule(budget.round_cost(16 * 10))
    low, high = band(expected, width)
    done = 1
    while not budget.exhausted:
        epsilon, sigma = held(budget, epsilon, sigma, done, low, high)
        if budget.left < 2 * budget.cost(epsilon, sigma):
            epsilon, sigma = budget.schedule(budget.left)
        budget._spend(budget.cost(epsilon, sigma), "round")
        done += 1
        if quadruples(done):
            epsilon, sigma = epsilon * 2, sigma / 2
    return done, budget


def test_aims_rounds_stay_within_the_band_around_those_expected_and_spend_the_budget_exactly():
    """Issue 61 item 6: the time a steward is told before an AIM run is its rounds times a round's
    seconds, and the rounds follow the private rows (5 and 12 on one table). Held within 1.25
    times those expected either way, a run that never anneals ends at the band's top, and one
    that anneals every round at its bottom (or later, where its schedule's fewest are more); each
    spends exactly its ρ."""
    assert band(7, 1.25) == (6, 8) and band(20, 1.25) == (16, 25) and band(7, 0) == (2, 10 ** 9)
    for expected in (5, 7, 20):
        low, high = band(expected, 1.25)
        never, budget = _rounds_held(expected, 1.25, lambda done: False)
        assert never == high and budget.spent == pytest.approx(1.0, rel=1e-9)
        always, budget = _rounds_held(expected, 1.25, lambda done: True)
        assert low <= always < never and budget.spent == pytest.approx(1.0, rel=1e-9)
        # annealing every round alone would end after 5: the band holds it to its bottom
        assert always == low if low > 5 else always == 5
        sometimes, _ = _rounds_held(expected, 1.25, lambda done: done % 3 == 0)
        assert low <= sometimes <= high
    # unbounded, AIM's own: a run that never anneals goes on far past the band
    assert _rounds_held(7, 0, lambda done: False)[0] > 50
    with pytest.raises(ValueError, match="rounds_band"):
        AIMConfig(rounds_band=0.5).check()
