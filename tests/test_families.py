"""Every registered family through the path a steward takes: fit into a run folder, sample through
the API (what the CLI and the Generate page call), reload the run, sample again with a condition. A
family that offers a backbone found on this machine (DP-LLMTGen) also runs with a pretrained one
from a local directory (saved as a LoRA adapter only). Options follow what a family declares, never
its name."""
from __future__ import annotations

import dataclasses
import inspect
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from synth_core import api
from synth_core.models import MODELS, SynthModel, register
from synth_core.models.traits import Described
from synth_core.privacy.ledger import TRAINING, ZCDP_MECHANISM
from synth_core.runs import RunDir, timing
from synth_core.schema import Schema
from synth_core.training.engine import TrainConfig

# the shortest training each option allows, for a family that declares the option: DP-SGD's
# training options where it trains by DP-SGD (`uses_dp_sgd`), or a field of its config
SHORTEST = {"epochs": 1, "batch_size": 64, "stage1_rows": 64, "stage1_epochs": 1}


def _tiny_options(klass: type[SynthModel]) -> dict:
    """What shortens a family's tiny preset, from what it declares (nothing: its own mechanism)."""
    declared = {f.name for f in dataclasses.fields(klass.config_class)}
    if klass.uses_dp_sgd:
        declared |= {f.name for f in dataclasses.fields(TrainConfig)}
    return {option: value for option, value in SHORTEST.items() if option in declared}


def _offers_local_choices(klass: type[SynthModel]) -> bool:
    return klass.local_choices.__func__ is not Described.local_choices.__func__


def _local_backbone(schema, directory):
    """A tiny GPT-2 saved like a downloaded pretrained model: config, weights and tokenizer in a
    directory."""
    from transformers import GPT2Config, GPT2LMHeadModel

    from synth_core.encoding.text import build_schema_tokenizer
    tok = build_schema_tokenizer(schema)
    GPT2LMHeadModel(GPT2Config(vocab_size=len(tok), n_positions=128, n_embd=32, n_layer=1, n_head=2,
                               bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id)).save_pretrained(directory)
    tok.save_pretrained(directory)
    return str(directory)


CASES = sorted(MODELS) + [f"{name} with a local backbone" for name in sorted(MODELS)
                           if _offers_local_choices(MODELS[name])]


# a declared rule the toy table obeys (pilots are men) and a computed column: every family's rows
# obey the one and agree with the other (schema/rules.py, schema/derived.py)
PILOTS = "not (job == 'pilot') or sex == 'Male'"


def with_rules(schema: Schema) -> Schema:
    data = schema.to_dict()
    data["rules"] = [PILOTS]
    data["columns"].append({"name": "minutes", "kind": "continuous", "derived": {"expr": "hours * 60"}})
    return Schema.from_dict(data)


def obeys(table: pd.DataFrame) -> bool:
    return bool((~((table["job"] == "pilot") & (table["sex"] != "Male"))).all()
                and np.allclose(table["minutes"], table["hours"] * 60, equal_nan=True))


@pytest.mark.parametrize("case", CASES)
def test_fit_run_folder_api_sample_reload_condition(case, toy_schema, toy_table, tmp_path):
    family = case.split(" ")[0]
    options = _tiny_options(MODELS[family])
    if case.endswith("local backbone"):
        options["backbone"] = _local_backbone(toy_schema, tmp_path / "lm")
    walk_the_users_path(family, options, with_rules(toy_schema), toy_table, tmp_path)


def walk_the_users_path(family: str, options: dict, toy_schema, toy_table, tmp_path) -> None:
    """fit into a run folder (the request's defaults: marginals measured where the family does not
    measure them itself), the review sample, the API's sample and CSV, a reload that samples the
    same rows, a condition; with a rule declared, every row obeys it."""
    run_dir = tmp_path / "run"
    result = api.fit(toy_table, toy_schema, model=family, epsilon=4.0, preset="tiny", accountant="rdp",
                     options=options, run_dir=run_dir, review_rows=20)  # the review sample, as the app asks
    run = RunDir(run_dir)
    assert run.status()["state"] == "completed" and run.has_model()
    assert len(pd.read_csv(run.review_sample)) == 20
    assert run.ledger().has_training() and 0 < run.ledger().spent_epsilon <= 4.0

    table, info = api.sample(run_dir, 30, seed=1, out=tmp_path / "out.csv")
    assert len(table) == 30 and list(table.columns) == toy_schema.names
    assert len(pd.read_csv(tmp_path / "out.csv")) == 30 and info["rows"] == 30
    assert set(table["sex"].dropna()) <= {"Female", "Male"}
    assert table["age"].between(18, 80).all()

    reloaded = api.load_model(run_dir)
    assert type(reloaded) is type(result.model)
    pd.testing.assert_frame_equal(reloaded.sample(20, seed=4), result.model.sample(20, seed=4))
    fixed, info = api.sample(run_dir, 10, conditions={"sex": "Female"}, seed=2)
    assert (fixed["sex"] == "Female").all() and info["rows"] == 10
    if toy_schema.rules:
        assert obeys(table) and obeys(fixed) and obeys(pd.read_csv(run.review_sample))
        assert "pilot" not in set(fixed["job"].dropna())  # the rule, under a condition


@pytest.fixture
def example_family():
    """tests/family_example.py registered for one test, as a newcomer's family would be in
    models/."""
    from family_example import IndependentColumns
    klass = register("independent-columns")(IndependentColumns)
    try:
        yield klass
    finally:
        MODELS.pop("independent-columns", None)


@pytest.fixture
def example_family_rho():
    """tests/family_example_rho.py (its own mechanism, no DP-SGD) registered for one test, alike."""
    from family_example_rho import NoisyMarginals
    klass = register("noisy-marginals")(NoisyMarginals)
    try:
        yield klass
    finally:
        MODELS.pop("noisy-marginals", None)


def _lines(klass) -> int:
    return len(Path(inspect.getsourcefile(klass)).read_text().splitlines())


def test_a_newcomers_family_of_a_few_lines_takes_the_same_path(example_family, toy_schema, toy_table, tmp_path):
    assert _lines(example_family) < 80, f"the example has grown to {_lines(example_family)} lines"
    walk_the_users_path("independent-columns", _tiny_options(example_family),
                        with_rules(toy_schema), toy_table, tmp_path)
    ledger = RunDir(tmp_path / "run").ledger()
    kinds = [e.kind for e in ledger.entries]
    assert kinds == ["noisy-count", "marginals", TRAINING]  # the engine's DP-SGD
    assert ledger.training_entry().mechanism == example_family.dp_mechanism


def test_a_family_with_its_own_mechanism_takes_the_same_path(example_family_rho, toy_schema,
                                                              toy_table, tmp_path):
    """No DP-SGD: ρ planned, made and charged by the base from what the family declares; the ledger
    says its words, not AIM's, and its kind; the model page's plan and the time estimate need no
    hook of it."""
    klass = example_family_rho
    assert _lines(klass) < 100, f"the example has grown to {_lines(klass)} lines"
    walk_the_users_path("noisy-marginals", _tiny_options(klass), with_rules(toy_schema), toy_table,
                        tmp_path)
    ledger = RunDir(tmp_path / "run").ledger()
    kinds = [e.kind for e in ledger.entries]
    assert kinds == ["noisy-count", ZCDP_MECHANISM]  # no calibration: it measures the marginals
    entry = ledger.training_entry()
    assert entry.mechanism == klass.dp_mechanism and "exponential" not in entry.mechanism
    assert entry.details["measurements"] == len(toy_schema.names)
    assert entry.details["selections"] == 0
    assert 0 < entry.details["rho"] <= entry.details["rho_budget"] * (1 + 1e-9)
    model = klass(toy_schema, preset="tiny")
    plan = model.plan_privacy(600, 1.0, 1e-6)
    summary = model.plan_summary(plan, 600, 1.0, "prv")
    assert klass.dp_mechanism in summary.caption and model.expected_steps(plan) == 1
    estimate = timing.estimate_fit_seconds("noisy-marginals", toy_schema, "tiny", 600, 1.0, 1e-6,
                                           book=timing.CostBook(tmp_path / "costs.json"))
    assert estimate["steps"] == 1 and estimate["seconds"] > 0


def test_a_family_that_leaves_its_contract_unfinished_is_refused_at_registration():
    from synth_core.models.token import TokenModel

    class NoLoss(TokenModel):
        def build(self) -> None:
            self.build_encoder()

    with pytest.raises(TypeError, match="loss_fn"):
        register("no-loss")(NoLoss)
    with pytest.raises(TypeError, match="build"):
        register("nothing")(type("Nothing", (SynthModel,), {}))
    from family_example_rho import NoisyMarginals
    with pytest.raises(TypeError, match="train_private"):  # its own mechanism, and none given
        register("no-mechanism")(type("NoMechanism", (NoisyMarginals,),
                                      {"train_private": SynthModel.train_private}))
    assert not {"no-loss", "nothing", "no-mechanism"} & set(MODELS)
