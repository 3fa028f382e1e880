"""Linked tables with person-level privacy (schema.linked, privacy.contribution, encoding.persons,
models.persons): declaring the link, bounding each person's contribution with secret randomness,
DP-SGD over persons, sampling both tables with fresh keys, and one-line refusals of bad input with
nothing charged."""
from __future__ import annotations

import contextlib
import io
import json

import numpy as np
import pandas as pd
import pytest
import torch

from synth_core import api
from synth_core.models.calibration import MIN_PERSON_POOL
from synth_core.request import REVIEW_RELEASED
from synth_core.cli import main
from synth_core.home import budgets_path
from synth_core.models import get_model_class
from synth_core.shape import PERSONS
from synth_core.privacy.contribution import bound_children
from synth_core.request import FitRequest
from synth_core.schema import ColumnSpec, Schema, SchemaError
from synth_core.schema.linked import LinkedSchema, LinkedTables, draft_linked, link_tables, load_schema

K = 4  # max_children in these tests


def patients(n: int = 120, seed: int = 0) -> LinkedTables:
    """Invented patients (age, sex, a treatment) and their visits (day, a lab value, a stage); the
    older a patient, the more visits and the higher the stage. Key: `pid`, a text code; one patient
    in ten has more than K visits."""
    rng = np.random.default_rng(seed)
    age = rng.integers(20, 80, n)
    parents = pd.DataFrame({"pid": [f"P{i:04d}" for i in range(n)], "age": age,
                            "sex": rng.choice(["f", "m"], n), "trt": rng.choice(["drug", "placebo"], n)})
    visits = np.clip(1 + (age - 20) // 20 + rng.integers(0, 2, n), 1, None)
    visits[::10] = K + 3
    person = np.repeat(np.arange(n), visits)
    children = pd.DataFrame({"pid": parents["pid"].to_numpy()[person],
                             "day": rng.integers(0, 1000, len(person)),
                             "bili": np.round(rng.gamma(2, 1, len(person)), 1),
                             "stage": np.where(age[person] > 55, "late", "early")})
    return LinkedTables(parents, children.sample(frac=1, random_state=seed).reset_index(drop=True))


def public_schema() -> LinkedSchema:
    parent = Schema(columns=[ColumnSpec("age", "integer", lower=18, upper=90),
                             ColumnSpec("sex", "categorical", categories=["f", "m"]),
                             ColumnSpec("trt", "categorical", categories=["drug", "placebo"])])
    child = Schema(columns=[ColumnSpec("day", "integer", lower=0, upper=1000),
                            ColumnSpec("bili", "continuous", lower=0, upper=20, decimals=1),
                            ColumnSpec("stage", "categorical", categories=["early", "late"])])
    return LinkedSchema(parent=parent, child=child, key="pid", max_children=K, order="day")


@pytest.fixture(scope="module")
def fitted(tmp_path_factory):
    """One run on the invented patients (ε = 2, the tiny model), through the API the CLI and the app
    call, with a review sample drawn after training as the app's jobs draw one."""
    tmp = tmp_path_factory.mktemp("linked")
    # a module's fixture starts before each test's own home is set
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SYNTH_WORKBENCH_HOME", str(tmp / "home"))
        result = api.fit(patients(), public_schema(), "dp-tbart", epsilon=2.0, preset="tiny", run_dir=tmp / "run",
                         options={"epochs": 6}, review_rows=REVIEW_RELEASED)
    return result, tmp


def test_a_person_with_all_their_rows_is_one_sample_and_the_ledger_says_so(fitted):
    result, tmp = fitted
    ledger = json.loads((tmp / "run" / "ledger.json").read_text())
    assert ledger["spent_epsilon"] <= 2.0 + 1e-9
    training = next(e for e in ledger["entries"] if e["kind"] == "dp-sgd")
    assert training["details"]["unit"] == "person" and training["details"]["max_children"] == K
    plan = result.model.plan
    # Poisson sampling over persons: the sampling rate is the expected batch over the persons
    # released
    assert plan.sample_rate == pytest.approx(plan.expected_batch_size / ledger["n_rows"], rel=1e-6)
    # the count released is of persons (120), not of visits (about 400): what the noisy count is
    # given
    from synth_core import pipeline
    admitted = pipeline.admit(patients(), public_schema(), FitRequest(epsilon=2.0, preset="tiny"))
    assert len(admitted.rows) == 120 and len(admitted.rows.children) > 300
    assert any(e["kind"] == "noisy-count" for e in ledger["entries"])
    # one loss per person, and a person's loss reads their rows alone: changing one person's visits
    # changes nobody else's (per-sample clipping then bounds a whole person)
    model = result.model
    rows, report = bound_children(*link_tables(patients(), public_schema()), K)
    data = model.encode(rows)[:8]
    before = model.loss_fn(model.net, data)
    changed, enc = data.clone(), model.encoder
    t = int(enc.child_start(0))  # person 3's first visit's first column: another value of it
    offset, size = int(enc.kind_offsets[enc.kinds[t]]), enc.sizes[enc.kinds[t]]
    changed[3, t] = offset + (int(changed[3, t]) - offset + 1) % size
    after = model.loss_fn(model.net, changed)
    assert before.shape == (8,)
    assert torch.equal(torch.cat([before[:3], before[4:]]), torch.cat([after[:3], after[4:]]))
    assert before[3] != after[3]


def test_a_linked_run_stores_its_costs_so_the_next_estimate_is_a_lookup(fitted, monkeypatch):
    """The run's steps and its review sample's draw are stored for the model page's next estimate of
    the same model (no probe, no button), as after a single table's run."""
    from synth_core.runs.timing import estimate_fit_seconds, stored_costs
    result, tmp = fitted
    monkeypatch.setenv("SYNTH_WORKBENCH_HOME", str(tmp / "home"))
    costs = stored_costs("dp-tbart", "tiny", public_schema())
    assert costs is not None and costs.measured.startswith("measured on a run")
    assert costs.per_step_s > 0 and costs.draw_row_s > 0 and costs.steps_share == 1.0
    plan = result.model.plan
    # the persons the run released (a noisy count): the model page plans with it too, so its batch
    # is the run's
    estimate = estimate_fit_seconds("dp-tbart", public_schema(), "tiny", result.ledger.n_rows, plan.epsilon, plan.delta,
                                    options={"epochs": 6}, review_rows=0)
    assert estimate["measured"] == costs.measured and estimate["phases"]["sampling"] == 0


def test_sampling_writes_both_tables_with_fresh_consistent_keys_and_bounded_children(fitted, tmp_path):
    result, tmp = fitted
    tables, info = api.sample(tmp / "run", 200, seed=3, out=tmp_path / "synthetic")
    parents = pd.read_csv(tmp_path / "synthetic" / "parents.csv")
    children = pd.read_csv(tmp_path / "synthetic" / "children.csv")
    assert list(parents.columns) == ["pid", "age", "sex", "trt"] and len(parents) == 200
    assert list(children.columns) == ["pid", "day", "bili", "stage"]
    # fresh keys: no real key leaves the machine
    assert parents["pid"].tolist() == list(range(1, 201))
    assert set(children["pid"]) <= set(parents["pid"])
    assert children.groupby("pid").size().max() <= K
    assert not set(patients().parents["pid"]) & set(parents["pid"].astype(str))
    # the same seed, the same persons, from the run folder reloaded
    again, _ = api.sample(tmp / "run", 200, seed=3)
    pd.testing.assert_frame_equal(again.parents, tables.parents)
    # conditions on a parent's column; a child column is refused in one line
    women, _ = api.sample(tmp / "run", 30, conditions={"sex": "f"}, seed=1)
    assert (women.parents["sex"] == "f").all()
    with pytest.raises(SchemaError, match="column of the child rows"):
        api.sample(tmp / "run", 5, conditions={"stage": "late"})


def test_each_person_keeps_a_secret_random_subset_of_at_most_max_children_rows():
    rows, report = link_tables(patients(), public_schema())
    counts = rows.children_per_person()
    assert counts.max() == K + 3
    bounded, bounded_report = bound_children(rows, report, K)
    assert bounded.children_per_person().max() == K
    assert bounded_report.truncated_persons == int((counts > K).sum()) == 12
    assert bounded_report.dropped_children == 12 * 3
    # persons within the bound keep every row; the others a subset that differs from one run to the
    # next
    assert (bounded.children_per_person()[counts <= K] == counts[counts <= K]).all()
    again, _ = bound_children(rows, report, K)
    assert not bounded.children.equals(again.children)
    # a person's rows follow the declared order column
    for p in range(5):
        days = bounded.children["day"][bounded.person == p]
        assert days.is_monotonic_increasing


def test_child_rows_without_a_parent_are_counted_and_dropped():
    tables = patients(40)
    orphans = tables.children.head(5).assign(pid="NOBODY")
    rows, report = link_tables(LinkedTables(tables.parents, pd.concat([tables.children, orphans])), public_schema())
    assert report.orphans == 5 and len(rows.children) == len(tables.children)
    assert any("matches no parent" in line for line in report.summary())


def _refused(tables, schema, match, **options):
    with pytest.raises((SchemaError, ValueError), match=match) as e:
        api.fit(tables, schema, "dp-tbart", epsilon=1.0, preset="tiny", **options)
    assert "\n" not in str(e.value)
    # nothing charged
    assert not budgets_path().exists() or "spent" not in budgets_path().read_text()
    return str(e.value)


def test_bad_linked_input_is_refused_in_one_line_before_anything_is_spent(tmp_path):
    t, schema = patients(30), public_schema()
    _refused(LinkedTables(t.parents.drop(columns=["pid"]), t.children), schema, "parents' table has no key column")
    _refused(LinkedTables(t.parents, t.children.rename(columns={"pid": "patient"})), schema,
             "children's table has no key column")
    _refused(LinkedTables(pd.concat([t.parents, t.parents.head(2)]), t.children), schema, "keys repeat")
    _refused(LinkedTables(t.children, t.parents), schema, "swapped")
    numbered = t.children.assign(pid=np.arange(len(t.children)) % 30)
    _refused(LinkedTables(t.parents, numbered), schema, "holds text in the parents' table and numbers")
    _refused(LinkedTables(t.parents.head(0), t.children), schema, "has no rows")
    _refused(t.parents, schema, "two tables")
    _refused(t, schema, "does not support linked tables", model="aim")
    _refused(t, schema, "DP bounds", bounds_epsilon=0.1)
    with pytest.raises(SchemaError, match="max_children"):
        LinkedSchema(parent=schema.parent, child=schema.child, key="pid", max_children=0)
    data = schema.to_dict()
    data["linked"]["max_children"] = -2  # a hand-edited file
    (tmp_path / "s.json").write_text(json.dumps(data))
    with pytest.raises(SchemaError, match="max_children"):
        load_schema(tmp_path / "s.json")


def test_the_cli_drafts_confirms_fits_and_samples_linked_tables(tmp_path):
    t = patients(80)
    t.parents.to_csv(tmp_path / "parents.csv", index=False)
    t.children.to_csv(tmp_path / "visits.csv", index=False)

    def run(*argv) -> tuple[int, str]:
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main([str(a) for a in argv])
        return code, out.getvalue() + err.getvalue()

    code, said = run("schema", "draft", "--data", tmp_path / "parents.csv", "--child", tmp_path / "visits.csv",
                     "--key", "pid", "--order", "day", "--out", tmp_path / "s.json")
    assert code == 0, said
    drafted = load_schema(tmp_path / "s.json")
    assert drafted.key == "pid" and "pid" not in drafted.parent and "pid" not in drafted.child
    assert drafted.max_children == 10  # the public default, never the data's most (7 here)
    assert "pid" in drafted.parent.excluded and "pid" in drafted.child.excluded
    code, said = run("fit", "--data", tmp_path / "parents.csv", "--schema", tmp_path / "s.json", "--epsilon", 1,
                     "--out", tmp_path / "run")
    assert code == 2 and "--child" in said
    code, said = run("schema", "confirm", tmp_path / "s.json")
    assert code == 0 and "linked by 'pid'" in said
    assert load_schema(tmp_path / "s.json").provenance["warning"] is None
    code, said = run("fit", "--data", tmp_path / "parents.csv", "--child", tmp_path / "visits.csv", "--key", "pid",
                     "--schema", tmp_path / "s.json", "--epsilon", 1, "--preset", "tiny", "--out", tmp_path / "run")
    assert code == 0, said
    code, said = run("sample", "--run", tmp_path / "run", "--rows", 25, "--out", tmp_path / "synthetic")
    assert code == 0, said
    assert len(pd.read_csv(tmp_path / "synthetic" / "parents.csv")) == 25
    assert "child rows" in said
    # said before the draw, its time after
    assert "drawing 25 persons with their child rows from" in said
    assert said.strip().splitlines()[-1].split(" in ")[-1].endswith(" s")
    held = patients(40, seed=5)
    held.parents.to_csv(tmp_path / "held.csv", index=False)
    held.children.to_csv(tmp_path / "held_visits.csv", index=False)
    code, said = run("evaluate", "--real", tmp_path / "parents.csv", "--real-child", tmp_path / "visits.csv",
                     "--run", tmp_path / "run", "--synthetic", f"drawn={tmp_path / 'synthetic'}", "--out", tmp_path / "review",
                     "--holdout", tmp_path / "held.csv", "--holdout-child", tmp_path / "held_visits.csv", "--target", "age")
    assert code == 0, said
    assert "drawing 80 persons" in said and "measuring both levels' figures and training on" in said
    review = json.loads((tmp_path / "review" / "report.json").read_text())
    assert set(review["results"]) == {"run", "drawn"} and review["persons"] == 80
    assert review["in_order"]["run"] == 1.0  # a person's rows follow the declared order column
    assert 0 <= review["results"]["run"]["parent_child_2way"] <= 1
    assert review["results"]["drawn"]["person_utility"]["target"] == "age"
    assert "Child rows per person" in (tmp_path / "review" / "report.html").read_text()


def test_a_draft_is_refused_a_key_neither_table_has():
    t = patients(30)
    with pytest.raises(SchemaError, match="no key column 'id'"):
        draft_linked(t, "id")


def test_the_flat_families_list_is_unchanged_and_dp_tbart_is_the_linked_one():
    assert get_model_class("dp-tbart", PERSONS).family == "dp-tbart"
    assert get_model_class("dp-tbart") is not get_model_class("dp-tbart", PERSONS)
    with pytest.raises(ValueError, match="does not support linked tables"):
        FitRequest(model="dp-wgan").check(public_schema())
    FitRequest(model="auto", epsilon=1.0).check(public_schema())


def test_a_person_moves_each_measured_marginal_by_at_most_one(monkeypatch):
    """The marginals of both levels are released by one Gaussian mechanism of L2 sensitivity √m for
    m marginals: adding a person (with max_children rows, all in one cell) moves each marginal by at
    most 1 in L2."""
    from synth_core.privacy import PrivacyLedger
    from synth_core.privacy import person_marginals
    # the exact counts
    monkeypatch.setattr(person_marginals, "noisy_counts", lambda counts, std: counts)
    schema = public_schema()
    rows, _ = bound_children(*link_tables(patients(40), schema), K)

    def measured(r):
        ledger = PrivacyLedger(target_epsilon=1.0, target_delta=1e-5, n_rows=40)
        marginals, _ = person_marginals.measure_person_marginals(r, schema, 0.5, 1e-5, ledger, 40)
        return marginals, ledger

    before, ledger = measured(rows)
    heavy = pd.DataFrame({"day": [7] * K, "bili": [19.0] * K, "stage": ["late"] * K})
    more = type(rows)(pd.concat([rows.parents, rows.parents.head(1)], ignore_index=True),
                      pd.concat([rows.children, heavy], ignore_index=True),
                      np.concatenate([rows.person, np.full(K, len(rows))]))
    after, _ = measured(more)
    moves = [np.linalg.norm(a.counts - b.counts) for a, b in zip(after.marginals, before.marginals)]
    assert len(moves) == len(before.marginals) > 10 and max(moves) <= 1 + 1e-9
    # released, a child marginal is scaled by CHILD_WEIGHT: the sensitivity the noise is calibrated
    # to covers it
    w, m = person_marginals.CHILD_WEIGHT, len(before.persons.marginals)
    released = np.sqrt(sum(d ** 2 for d in moves[:m]) + sum((w * d) ** 2 for d in moves[m:]))
    entry = next(e for e in ledger.to_dict()["entries"] if e["kind"] == "marginals")
    assert entry["details"]["unit"] == "person"
    sensitivity = np.sqrt(m + w ** 2 * (len(moves) - m))
    assert released <= sensitivity + 1e-9
    assert entry["details"]["noise_std"] == pytest.approx(entry["details"]["noise_multiplier"] * sensitivity)
    assert after.children.std(after.children.marginals[0]) == pytest.approx(entry["details"]["noise_std"] / w)


def test_a_calibrated_linked_run_resamples_persons_towards_both_levels(fitted):
    result, tmp = fitted
    ledger = json.loads((tmp / "run" / "ledger.json").read_text())
    assert {e["kind"] for e in ledger["entries"]} >= {"marginals", "dp-sgd"}
    # the measurement composed with training within the target
    assert ledger["spent_epsilon"] <= 2.0 + 1e-9
    tables, info = api.sample(tmp / "run", 150, seed=4)
    assert info["calibration"]["pool_rows"] >= 150 * 3 and info["calibration"]["marginals"] > 0
    # a person is a long sequence to draw: a small request's first pool holds MIN_PERSON_POOL
    # persons, not the 5,000 rows a table's sampler draws
    assert info["calibration"]["pool_rows"] in {MIN_PERSON_POOL * 2 ** k for k in range(3)}
    assert len(tables.parents) == 150 and set(tables.children["pid"]) <= set(range(1, 151))
    assert tables.children.groupby("pid").size().max() <= K
    own, _ = api.sample(tmp / "run", 150, seed=4)
    # a reloaded run calibrates to the same counts
    pd.testing.assert_frame_equal(own.children, tables.children)


def test_a_person_count_far_off_does_not_collapse_calibration_onto_a_few_persons(tmp_path, monkeypatch):
    """The released count of persons is noisy (Laplace, a small share of ε): one four times too low
    once made calibration put a sample's weight on 11 persons. The total calibration aims at pools
    the count with the persons' marginals (privacy.measurements.pooled_rows), so the sample keeps
    about as many persons as it asks for."""
    from synth_core import pipeline
    real_count = pipeline.noisy_count

    def far_off(n, epsilon, ledger, of="rows"):
        real_count(n, epsilon, ledger, of)  # recorded as it is; released as a quarter of the truth
        return n // 4

    monkeypatch.setattr(pipeline, "noisy_count", far_off)
    tables = patients(160, seed=2)
    api.fit(tables, public_schema(), "dp-tbart", epsilon=2.0, preset="tiny", run_dir=tmp_path / "run",
            options={"epochs": 4}, calibration_share=0.3)
    model = api.load_model(tmp_path / "run")
    assert model.calibration.persons.rows == 40
    assert abs(model.calibration.persons.total - 160) < abs(40 - 160) / 2
    sample, info = api.sample(tmp_path / "run", 120, seed=1)
    assert info["calibration"]["effective_rows"] > 60  # not a handful of persons repeated
    assert len(sample.parents.drop(columns="pid").drop_duplicates()) > 40


def test_the_review_sees_what_synthesizing_the_tables_apart_loses():
    """evaluate.linked: the real tables against themselves score 0; the same rows with every child
    row given to a random person keep both levels' marginals (0) and lose the link (parent × child)
    and the counts per person."""
    from synth_core.evaluate.linked import canonical, linked_fidelity
    schema = public_schema()
    real = canonical(patients(), schema)
    same = linked_fidelity(real, real, schema)
    assert same["parents"] == {"1way": 0.0, "2way": 0.0} and same["children"]["2way"] == 0.0
    assert same["children_per_person_tvd"] == 0.0 and same["parent_child_2way"] == 0.0
    owners = np.random.default_rng(0).integers(1, len(real.parents) + 1, len(real.children))
    apart = linked_fidelity(real, LinkedTables(real.parents, real.children.assign(pid=owners)), schema)
    assert apart["parents"]["2way"] == 0.0 and apart["children"]["2way"] == 0.0
    assert apart["parent_child_2way"] > 0.05 and apart["children_per_person_tvd"] > 0.1


def test_a_person_level_target_is_learned_from_persons_with_their_rows_summarised():
    from synth_core.evaluate.linked import canonical, person_table, person_utility
    schema = public_schema()
    real, test = canonical(patients(300, seed=1), schema), canonical(patients(100, seed=2), schema)
    table, persons = person_table(real, schema)
    assert len(table) == 300 and list(table.columns) == persons.names
    assert set(persons.names) >= {"age", "(child rows)", "day (mean)", "stage (most often)"}
    assert table["(child rows)"].sum() == len(real.children)
    # age drives the visits and the stage: a learner finds it from the persons' rows
    same = person_utility(real, real, test, schema, "age")
    assert same["ratio"]["r2"] == pytest.approx(1.0) and same["learners"]["linear regression"]["real"]["r2"] > 0.5
    with pytest.raises(Exception, match="not a column of the parents"):
        person_utility(real, real, test, schema, "stage")


def test_the_privacy_report_says_a_person_is_protected_and_keeps_the_draft_s_reading_out(fitted):
    from synth_core.release.privacy_report import privacy_report, report_markdown
    from synth_core.runs import RunDir
    result, tmp = fitted
    report = privacy_report(RunDir(tmp / "run"))
    assert "excluded" not in json.dumps(report["schema"])
    text = report_markdown(report)
    assert "## Linked tables" in text and f"at most {K} child rows" in text
    assert "Public schema: the children's table" in text and "| bili | continuous |" in text
    assert "Noisy count of persons" in json.dumps(report["privacy"]["ledger"])


def test_a_background_job_trains_linked_tables_and_keeps_held_out_persons_whole(worker_root):
    """The app's path: the job stores both tables (the columns the schema names, a share of the
    persons kept aside with all their rows), its worker trains on persons, and the run samples both
    tables."""
    from conftest import PATIENCE_S, wait_until
    from synth_core.runs import jobs
    tables = patients(100)
    tables.parents["note"] = "free text the schema leaves out"
    run = jobs.start_fit_job(worker_root, tables, public_schema(), {"model": "dp-tbart", "preset": "tiny",
                                                                    "epsilon": 1.0, "holdout_share": 0.2})
    wait_until(lambda: jobs.job_state(run)["state"] not in ("created", "running"), "the worker", PATIENCE_S)
    assert jobs.job_state(run)["state"] == "completed", run.worker_log.read_text()[-500:]
    train, held = jobs.read_private(run, "train"), jobs.read_private(run, "holdout")
    assert (len(train), len(held)) == (80, 20) and "note" not in train.parents.columns
    # a person is on one side, with all their rows
    assert not set(train.parents["pid"]) & set(held.parents["pid"])
    assert set(held.children["pid"]) == set(held.parents["pid"])
    assert len(train.children) + len(held.children) == len(tables.children)
    ledger = run.ledger()
    assert ledger.spent_epsilon <= 1.0 + 1e-9 and any(e.details.get("unit") == "person" for e in ledger.entries)
    sampled, _ = api.sample(run.path, 10, seed=0)
    assert len(sampled.parents) == 10


def test_a_grown_pool_of_persons_keeps_each_person_s_rows_with_them():
    from synth_core.models.persons import join_persons, pick_persons, with_keys
    a = with_keys(pd.DataFrame({"age": [30, 40]}), pd.DataFrame({"day": [1, 2, 3]}), np.array([0, 0, 1]), "pid")
    b = with_keys(pd.DataFrame({"age": [50]}), pd.DataFrame({"day": [7, 8]}), np.array([0, 0]), "pid")
    pool = join_persons(a, b, "pid")
    assert pool.parents["pid"].tolist() == [1, 2, 3] and pool.children["pid"].tolist() == [1, 1, 2, 3, 3]
    picked = pick_persons(pool, np.array([2, 0, 2]), "pid")
    assert picked.parents["age"].tolist() == [50, 30, 50] and picked.parents["pid"].tolist() == [1, 2, 3]
    assert picked.children.groupby("pid")["day"].apply(list).to_dict() == {1: [7, 8], 2: [1, 2], 3: [7, 8]}


def test_random_persons_from_the_public_schema_link_within_max_children():
    """What the model page's time estimate times DP-SGD steps over (test_linked_app clicks it):
    persons drawn from the public schema alone, 1 to max_children rows each, keys that link."""
    from synth_core.demo import pbcseq_schema
    from synth_core.schema.linked import random_tables
    schema = pbcseq_schema()
    rows, report = link_tables(random_tables(schema, 60, seed=1), schema)
    per = rows.children_per_person()
    assert len(rows) == 60 and report.orphans == 0 and per.min() >= 1 and per.max() <= schema.max_children


def test_a_persons_rows_are_ordered_by_their_dates_not_only_by_the_year_the_schema_keeps():
    """An order column of dates (validation keeps each date's year) orders a person's rows by the
    dates: visits within one year written in scrambled order come out in time order; a missing date
    goes last."""
    parents = pd.DataFrame({"pid": [1, 2], "age": [40, 60]})
    children = pd.DataFrame({"pid": [1, 1, 1, 2, 2, 1],
                             "seen": ["2020-11-03", "2020-02-17", "2021-01-05", "2020-06-01", "2020-03-09", None],
                             "lab": [3, 1, 4, 2, 1, 9]})
    tables = LinkedTables(parents, children)
    schema = LinkedSchema(parent=Schema([ColumnSpec("age", "integer", lower=18, upper=90)]),
                          child=Schema([ColumnSpec("seen", "integer", lower=2000, upper=2030, date="year",
                                                   nullable=True),
                                        ColumnSpec("lab", "integer", lower=0, upper=10)]),
                          key="pid", max_children=5, order="seen")
    rows, _ = link_tables(tables, schema)
    # the year is what is modelled
    assert rows.children["seen"].dropna().tolist() == [2020, 2020, 2021, 2020, 2020]
    first = rows.children[rows.person == 0]
    # 17 Feb, 3 Nov 2020, 5 Jan 2021, then the undated row
    assert first["lab"].tolist() == [1, 3, 4, 9]
    assert rows.children[rows.person == 1]["lab"].tolist() == [1, 2]


def test_a_model_saved_before_the_shared_calibration_key_still_calibrates(fitted, tmp_path):
    """model.json kept a person family's marginals under "person_calibration" until sampling was
    written once; such a run folder (a backup, an old home) samples as it did."""
    import shutil
    from synth_core.models.base import SynthModel
    from synth_core.privacy.person_marginals import PersonMarginals
    _, tmp = fitted
    old = tmp_path / "model"
    shutil.copytree(tmp / "run" / "model", old)
    state = json.loads((old / "model.json").read_text())
    assert state["calibration"] and "person_calibration" not in state
    state["person_calibration"], state["calibration"] = state["calibration"], None
    (old / "model.json").write_text(json.dumps(state))
    model = SynthModel.load(old, device="cpu")
    assert isinstance(model.calibration, PersonMarginals)
    tables = model.sample(100, seed=1)
    assert model.last_sample_info["calibration"]["unit"] == "persons"
    assert len(tables.parents) == 100
