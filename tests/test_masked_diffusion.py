"""Masked TableDiffusion: the absorbing-state loss, privacy plumbing, step-wise sampling, exact
conditions."""
import time

import numpy as np
import pandas as pd
import pytest
import torch
import torch.nn.functional as F

from synth_core import api
from synth_core.models import get_model_class
from synth_core.schema import validate_table

FAMILY = "tablediffusion-masked"


def fit_tiny(schema, table, epsilon=8.0, tmp_path=None, **options):
    opts = {"epochs": 3, "batch_size": 100, "lr": 2e-2}
    opts.update(options)
    return api.fit(table, schema, model=FAMILY, epsilon=epsilon, preset="tiny", options=opts, seed=0,
                   accountant="rdp", run_dir=None if tmp_path is None else tmp_path / "run", public_table=True,
                   calibration_share=0.0)  # the model's own rows (calibration: test_calibration.py)


def link(synth: pd.DataFrame) -> float:
    """How strongly job follows sex in a table: P(nurse | Female) − P(nurse | Male)."""
    f = (synth.loc[synth["sex"] == "Female", "job"] == "nurse").mean()
    m = (synth.loc[synth["sex"] == "Male", "job"] == "nurse").mean()
    return f - m


@pytest.mark.parametrize("copies,weighting", [(1, "flat"), (3, "flat"), (2, "elbo")])
def test_loss_is_the_cross_entropy_of_the_masked_columns_given_the_others(toy_schema, toy_table, copies, weighting):
    """Each noised copy hides m ≥ 1 columns behind [MASK]; the network never sees a hidden column's
    value, and the row's loss is the hidden columns' cross-entropy (summed over C, or their mean for
    the ELBO's weighting), averaged over the copies."""
    model = get_model_class(FAMILY)(toy_schema, preset="tiny", copies=copies, loss_weighting=weighting)
    clean, _ = validate_table(toy_table.iloc[:50], toy_schema)
    rows = model.encode(clean)
    seen = {}

    def spy(tokens):
        seen["tokens"] = tokens.clone()
        seen["logits"] = model.net(tokens)
        return seen["logits"]

    torch.manual_seed(0)
    loss = model.loss_fn(spy, rows)
    B, C = rows.shape
    tokens = seen["tokens"].view(B, copies, C)
    hidden = tokens == model.net.mask_id
    # at least one column hidden per copy
    assert hidden.any(-1).all()
    visible = rows.unsqueeze(1).expand(B, copies, C)
    # the others are the row's own tokens
    assert torch.equal(tokens[~hidden], visible[~hidden])
    assert 0 < hidden.float().mean() < 1
    local = rows - model.offsets
    ce = torch.stack([F.cross_entropy(lg.reshape(B * copies, -1), local[:, c].repeat_interleave(copies),
                                      reduction="none").view(B, copies) for c, lg in enumerate(seen["logits"])], 2)
    per_copy = (ce * hidden).sum(-1) / (C if weighting == "flat" else hidden.sum(-1))
    expected = per_copy.mean(1)
    assert torch.allclose(loss, expected)
    # a hidden column's value cannot leak into the prediction of itself: change it, the logits stay
    changed = rows.clone()
    b, k, c = [int(i) for i in hidden.nonzero()[0]]
    codec = model.encoder.codecs[c]
    changed[b, c] = codec.offset + (int(rows[b, c]) - codec.offset + 1) % codec.size
    torch.manual_seed(0)
    model.loss_fn(spy, changed)
    assert torch.equal(seen["tokens"].view(B, copies, C)[b, k], tokens[b, k])


def test_tiny_fit_and_sample_take_seconds_within_budget_with_poisson_batches(toy_schema, toy_table):
    sizes = []
    t = time.perf_counter()
    result = api.fit(toy_table, toy_schema, model=FAMILY, epsilon=2.0, preset="tiny", accountant="rdp",
                     options={"epochs": 3, "batch_size": 100, "copies": 2},
                     on_event=lambda e: sizes.append(e["batch_size"]), public_table=True)
    synth = result.model.sample(300, seed=0)
    assert time.perf_counter() - t < 120  # seconds on a quiet machine; generous for a loaded one
    assert len(synth) == 300 and list(synth.columns) == toy_schema.names
    assert result.ledger.spent_epsilon <= 2.0 and result.model.train_result.epsilon_spent <= 2.0
    assert result.ledger.training_entry().mechanism.startswith("DP-SGD")
    # Poisson: the batch size varies
    assert result.model.plan.sample_rate < 1.0 and len(set(sizes)) > 1


@pytest.mark.parametrize("network", ["mlp", "transformer"])
def test_revealing_columns_step_by_step_keeps_their_links(toy_schema, toy_table, network):
    """With one column per step each is drawn knowing those before it and the learned link survives;
    with a single step every column is drawn at once from its marginal and the link is gone: the
    steps matter."""
    model = fit_tiny(toy_schema, toy_table, epochs=20, n_embd=32, network=network).model
    real = link(toy_table)
    model.config.diffusion_steps = 0
    stepwise = link(model.sample(3000, seed=0))
    model.config.diffusion_steps = 1
    at_once = link(model.sample(3000, seed=0))
    assert real > 0.6
    assert stepwise > 0.5 * real, (stepwise, real)
    assert abs(at_once) < 0.1, at_once


def test_any_column_conditions_exactly_and_values_stay_public(toy_schema, toy_table):
    model = fit_tiny(toy_schema, toy_table, epochs=10).model
    synth = model.sample(300, conditions={"job": "pilot", "hours": 42.0}, seed=0)
    assert (synth["job"] == "pilot").all() and (synth["hours"] == 42.0).all()
    info = model.last_sample_info
    assert info["method"] == "exact" and info["rejection_columns"] == []
    # conditioned on job, sex follows the learned link
    female_pilots = (model.sample(1000, conditions={"job": "pilot"}, seed=1)["sex"] == "Female").mean()
    female_nurses = (model.sample(1000, conditions={"job": "nurse"}, seed=1)["sex"] == "Female").mean()
    assert female_nurses > female_pilots
    free = model.sample(2000, seed=2)
    assert free["age"].between(18, 80).all() and (free["age"] % 1 == 0).all()
    assert free["hours"].between(0, 100).all()
    assert set(free["sex"]) <= {"Female", "Male"} and set(free["job"].dropna()) <= {"clerk", "nurse", "pilot"}
    everything = {"age": 30, "sex": "Male", "job": "clerk", "hours": 10.0}
    assert (model.sample(5, conditions=everything, seed=3)[list(everything)] == pd.Series(everything)).all().all()


def test_same_sampling_seed_same_table_and_the_run_reloads(toy_schema, toy_table, tmp_path):
    result = fit_tiny(toy_schema, toy_table, tmp_path=tmp_path)
    torch.manual_seed(123)
    pd.testing.assert_frame_equal(result.model.sample(100, seed=4), result.model.sample(100, seed=4))
    again = fit_tiny(toy_schema, toy_table).model  # the same training seed: the DP noise is secret
    assert not again.sample(100, seed=4).equals(result.model.sample(100, seed=4))
    loaded = api.load_model(tmp_path / "run")
    pd.testing.assert_frame_equal(loaded.sample(50, seed=3), result.model.sample(50, seed=3))


def test_a_run_saved_before_the_network_option_reloads_as_the_transformer_it_was(toy_schema, toy_table, tmp_path):
    import json
    result = fit_tiny(toy_schema, toy_table, tmp_path=tmp_path, network="transformer", epochs=1)
    state_file = tmp_path / "run" / "model" / "model.json"
    state = json.loads(state_file.read_text())
    del state["config"]["network"]
    state_file.write_text(json.dumps(state))
    loaded = api.load_model(tmp_path / "run")
    assert loaded.config.network == "transformer"
    pd.testing.assert_frame_equal(loaded.sample(50, seed=3), result.model.sample(50, seed=3))


def test_bad_options_are_clear_errors(toy_schema):
    klass = get_model_class(FAMILY)
    with pytest.raises(ValueError, match="copies"):
        klass(toy_schema, preset="tiny", copies=0)
    with pytest.raises(ValueError, match="diffusion_steps"):
        klass(toy_schema, preset="tiny", diffusion_steps=-1)
    with pytest.raises(ValueError, match="loss_weighting"):
        klass(toy_schema, preset="tiny", loss_weighting="uniform")
    with pytest.raises(ValueError, match="reveal_schedule"):
        klass(toy_schema, preset="tiny", reveal_schedule="linear")
    with pytest.raises(ValueError, match="network"):
        klass(toy_schema, preset="tiny", network="unet")


def test_model_contract_for_the_app():
    klass = get_model_class(FAMILY)
    assert klass.description and klass.when_to_pick and "tiny" in klass.presets and "cpu" in klass.presets
    assert set(klass.size_presets) == {"quick", "standard", "best"}
    assert all(p in klass.presets for p in klass.size_presets.values())
    assert np.all([klass.presets[p]["train"]["max_grad_norm"] > 0 for p in klass.presets])


def test_reveal_schedule_reveals_every_column_once_the_first_ones_alone():
    from synth_core.models.masked_diffusion import reveal_steps
    for columns in (1, 2, 4, 15, 40):
        for steps in range(1, columns + 1):
            for schedule in ("cosine", "uniform"):
                plan = reveal_steps(columns, steps, schedule)
                assert len(plan) == columns and plan == sorted(plan)
                assert set(plan) == set(range(steps))  # every step reveals at least one column
    # 1, 2, 3, 4, 5 columns
    assert reveal_steps(15, 5) == [0, 1, 1, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 4]
