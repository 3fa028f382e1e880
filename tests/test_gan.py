"""DTGAN_D, DTGAN_G, DP-WGAN: the torch.func DP step, the gradient penalty inside clipping,
accounting."""
import math

import numpy as np
import pandas as pd
import pytest
import torch
import torch.nn as nn
from opacus import GradSampleModule
from opacus.optimizers import DPOptimizer

from synth_core import api
from synth_core.training.engine import FuncDPStep
from synth_core.models import get_model_class
from synth_core.models.gan import GANConfig
from synth_core.models.gan_nets import Critic, critic_pair_loss, slerp
from synth_core.privacy import NoisePlan, epsilon_after
from synth_core.runs import RunDir

FAMILIES = ["dtgan-d", "dtgan-g", "dp-wgan"]


def fit_tiny(schema, table, model="dtgan-d", epsilon=4.0, tmp_path=None, **options):
    return api.fit(table, schema, model=model, epsilon=epsilon, preset="tiny", options=options, seed=0,
                   accountant="rdp", run_dir=None if tmp_path is None else tmp_path / "run", public_table=True,
                   calibration_share=0.0)  # the model's own rows (calibration: test_calibration.py)


def capture_step(optimizer):
    """Record the gradient each parameter holds when the optimizer steps."""
    seen, orig = {}, optimizer.step

    def step(*a, **k):
        for group in optimizer.param_groups:
            for p in group["params"]:
                seen[id(p)] = p.grad.clone()
        return orig(*a, **k)

    optimizer.step = step
    return seen


# --- the torch.func DP step ------------------------------------------------------------------------------
def test_func_dp_step_matches_opacus_clipping_on_a_plain_loss():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(5, 8), nn.Tanh(), nn.Linear(8, 1))
    twin = nn.Sequential(nn.Linear(5, 8), nn.Tanh(), nn.Linear(8, 1))
    twin.load_state_dict(net.state_dict())
    x = torch.randn(12, 5) * 3

    # Opacus: GradSampleModule + DPOptimizer, noise 0, clip 0.05, mean over an expected batch of 10
    gsm = GradSampleModule(twin, loss_reduction="mean")
    inner = torch.optim.SGD(gsm.parameters(), lr=0.0)
    opt = DPOptimizer(inner, noise_multiplier=0.0, max_grad_norm=0.05, expected_batch_size=10, loss_reduction="mean")
    ref = capture_step(inner)  # after DPOptimizer's clipping and scaling
    (gsm(x).squeeze(1) ** 2).mean().backward()
    opt.step()

    sgd = torch.optim.SGD(net.parameters(), lr=0.0)
    mine = capture_step(sgd)
    step = FuncDPStep(net, lambda forward, row: (forward(row) ** 2).sum(), sgd, noise_multiplier=0.0,
                      max_grad_norm=0.05, expected_batch_size=10, chunk_size=5)
    step.step(x)
    for p, q in zip(net.parameters(), twin.parameters()):
        assert torch.allclose(mine[id(p)], ref[id(q)], atol=1e-7)


def _penalty_only_reference(critic, real, fake, cond, alpha, clip):
    """Per-sample gradients one at a time with autograd (create_graph for the penalty), clipped,
    averaged."""
    out = []
    for i in range(len(real)):
        critic.zero_grad()
        critic_pair_loss(critic, real[i:i + 1], fake[i:i + 1], cond[i:i + 1], alpha[i:i + 1], 10.0, True).backward()
        g = [p.grad.clone() for p in critic.parameters()]
        norm = torch.sqrt(sum((x ** 2).sum() for x in g))
        out.append([x * min(1.0, clip / float(norm)) for x in g])
    return [torch.stack(xs).sum(dim=0) / len(real) for xs in zip(*out)]


def test_gradient_penalty_is_inside_the_clipped_per_sample_gradient():
    """The critic's DP step must clip each real row's WHOLE loss, penalty included. The applied
    gradient is compared with per-sample gradients computed one at a time and clipped by hand; it
    would differ if the penalty were added outside the clipping, and its norm would exceed the
    clipping bound."""
    torch.manual_seed(1)
    cfg = GANConfig(critic_width=16, critic_layers=2)
    critic = Critic(cfg, dim=6, cond_dim=6)
    real, fake = torch.randn(8, 6), torch.randn(8, 6) * 3
    cond = torch.zeros(8, 6)
    cond[:, 2] = 1.0
    alpha = torch.rand(8)
    clip = 0.01
    expected = _penalty_only_reference(critic, real, fake, cond, alpha, clip)

    opt = torch.optim.SGD(critic.parameters(), lr=0.0)
    seen = capture_step(opt)
    step = FuncDPStep(critic, lambda f, r, fk, c, a: critic_pair_loss(f, r, fk, c, a, 10.0, True), opt,
                      noise_multiplier=0.0, max_grad_norm=clip, expected_batch_size=8)
    step.step(real, fake, cond, alpha)
    got = [seen[id(p)] for p in critic.parameters()]
    for g, e in zip(got, expected):
        assert torch.allclose(g, e, atol=1e-8)
    assert torch.sqrt(sum((g ** 2).sum() for g in got)) <= clip + 1e-9

    # the penalty's own gradient is large here: without it the clipped sum would be another vector
    critic.zero_grad()
    total = sum(critic_pair_loss(critic, real[i:i + 1], fake[i:i + 1], cond[i:i + 1], alpha[i:i + 1], 0.0, True)
                for i in range(8))
    total.backward()
    assert not all(torch.allclose(p.grad / 8, e, atol=1e-6) for p, e in zip(critic.parameters(), expected))


def test_spherical_interpolation_stays_between_the_rows():
    x, y = torch.tensor([[1.0, 0.0]]), torch.tensor([[0.0, 2.0]])
    mid = slerp(x, y, torch.tensor([0.5]))
    assert torch.allclose(slerp(x, y, torch.tensor([0.0])), x) and torch.allclose(slerp(x, y, torch.tensor([1.0])), y)
    assert mid[0, 0] > 0 and mid[0, 1] > 0
    same = slerp(x, 2 * x, torch.tensor([0.5]))  # parallel rows: straight line
    assert torch.allclose(same, 1.5 * x)


# --- privacy accounting ------------------------------------------------------------------------------------
@pytest.mark.parametrize("family", FAMILIES)
def test_final_epsilon_within_target_and_ledger_written(toy_schema, toy_table, family):
    result = fit_tiny(toy_schema, toy_table, model=family, epsilon=3.0)
    model, ledger = result.model, result.ledger
    assert 0 < ledger.spent_epsilon <= 3.0 and ledger.spent_delta <= ledger.target_delta
    assert model.train_result.epsilon_spent <= 3.0 and model.train_result.steps_done == model.plan.steps
    assert ledger.training_entry().mechanism.startswith("DP-SGD")
    synth = model.sample(500, seed=0)
    assert synth["age"].between(18, 80).all() and (synth["age"] % 1 == 0).all()
    assert synth["hours"].between(0, 100).all()
    assert set(synth["sex"]) <= {"Female", "Male"} and set(synth["job"].dropna()) <= {"clerk", "nurse", "pilot"}


@pytest.mark.parametrize("family", ["dtgan-d", "dp-wgan"])
def test_every_critic_iteration_is_an_accounted_poisson_step(toy_schema, toy_table, family):
    events = []
    result = api.fit(toy_table, toy_schema, model=family, epsilon=2.0, preset="tiny", accountant="rdp",
                     options={"n_critic": 3, "epochs": 3}, on_event=events.append, public_table=True)
    model = result.model
    p = model.plan
    # one event and one DP step per critic iteration
    assert len(events) == p.steps == model.train_result.steps_done
    assert result.ledger.training_entry().details["steps"] == p.steps
    assert result.ledger.training_entry().epsilon == pytest.approx(epsilon_after(p.noise_multiplier, p.sample_rate, p.steps,
                                                                      p.delta, "rdp"))
    assert p.sample_rate < 1 and len({e["batch_size"] for e in events}) > 1   # Poisson batches
    generator_steps = [e["step"] for e in events if e["generator_loss"] is not None]
    # after n_critic critic iterations
    assert generator_steps[0] == 3
    assert all({"step", "epoch", "loss", "epsilon", "samples_per_s"} <= set(e) for e in events)


def test_dtgan_g_accounting_is_group_privacy_over_the_critic_subsampled_gaussian(toy_schema, toy_table):
    result = fit_tiny(toy_schema, toy_table, model="dtgan-g", epsilon=2.0)
    model, p = result.model, result.model.plan
    q = model.config.critics_per_step / model.config.n_critics
    assert p.sample_rate == pytest.approx(q)
    d1 = p.delta / (1 + math.exp(p.epsilon / 2))
    e1 = epsilon_after(p.noise_multiplier, q, p.steps, d1, "rdp")
    entry = result.ledger.training_entry()
    assert entry.epsilon == pytest.approx(2 * e1) and entry.epsilon <= 2.0
    assert entry.delta == pytest.approx(d1 * (1 + math.exp(e1))) and entry.delta <= p.delta
    assert entry.details["sensitivity"] == pytest.approx(p.max_grad_norm * math.sqrt(model.config.generator_batch))


def test_dtgan_g_saves_the_generator_only(toy_schema, toy_table, tmp_path):
    fit_tiny(toy_schema, toy_table, model="dtgan-g", tmp_path=tmp_path)
    weights = torch.load(tmp_path / "run" / "model" / "model.pt", weights_only=True)
    # no critic: they never leave training
    assert weights and all(k.startswith("body.") for k in weights)


# --- conditions and sampling ---------------------------------------------------------------------------------
def test_generator_conditions_are_uniform_over_public_categories(toy_schema):
    model = get_model_class("dtgan-d")(toy_schema, preset="tiny", cond_null_prob=0.0)
    torch.manual_seed(0)
    cond, blocks, slots = model.public_conditions(40000)
    job = model.encoder.block("job")
    j = model.row_blocks.index((job.start, job.stop))
    share = np.bincount(slots[blocks == j].numpy(), minlength=4) / int((blocks == j).sum())
    # clerk, nurse, pilot, missing: uniform, no data involved
    assert np.allclose(share, 0.25, atol=0.02)
    assert torch.equal(cond.sum(dim=1), torch.ones(40000))


def test_conditions_from_rows_use_each_row_alone(toy_schema, toy_table):
    model = get_model_class("dtgan-d")(toy_schema, preset="tiny")
    rows = model.encode(toy_table.iloc[:50].assign(hours=toy_table["hours"].iloc[:50].astype(float)))
    g1, g2 = torch.Generator().manual_seed(3), torch.Generator().manual_seed(3)
    a = model.conditions_from_rows(rows, g1)
    changed = rows.clone()
    changed[10:] = changed[10:].flip(0)  # other rows change: rows 0-9 keep their conditions
    b = model.conditions_from_rows(changed, g2)
    assert torch.equal(a[:10], b[:10])
    own = rows[:, model.cond_index]
    assert ((a == 0) | (a == own)).all()  # a condition is a part of the row's own one-hot


def test_dtgan_d_conditions_exactly_on_a_category_and_rejects_on_the_rest(toy_schema, toy_table):
    model = fit_tiny(toy_schema, toy_table, model="dtgan-d").model
    synth = model.sample(80, conditions={"job": "pilot"}, seed=0)
    assert (synth["job"] == "pilot").all() and model.last_sample_info["method"] == "exact"
    assert model.last_sample_info["exact_columns"] == ["job"]
    synth = model.sample(30, conditions={"job": "nurse", "age": 45}, seed=0)
    assert (synth["job"] == "nurse").all() and (synth["age"] == 45).all()
    info = model.last_sample_info
    assert info["method"] == "rejection" and info["rejection_columns"] == ["age"] and 0 < info["acceptance_rate"] <= 1
    wgan = fit_tiny(toy_schema, toy_table, model="dp-wgan").model  # no conditioning: rejection
    wgan.sample(20, conditions={"sex": "Male"}, seed=0)
    assert wgan.last_sample_info["method"] == "rejection"


def test_gan_run_reloads_and_samples_the_same(toy_schema, toy_table, tmp_path):
    result = fit_tiny(toy_schema, toy_table, model="dtgan-d", tmp_path=tmp_path)
    loaded = api.load_model(RunDir(tmp_path / "run").path)
    pd.testing.assert_frame_equal(loaded.sample(40, seed=2), result.model.sample(40, seed=2))


def test_model_contract_for_the_app():
    for family in FAMILIES:
        klass = get_model_class(family)
        assert klass.description and klass.when_to_pick and "tiny" in klass.presets and "cpu" in klass.presets
        assert set(klass.size_presets) == {"quick", "standard", "best"}
        assert all(p in klass.presets for p in klass.size_presets.values())


@pytest.mark.parametrize("family", ["dtgan-d", "dtgan-g"])
def test_cancel_and_crash_are_paid_for(toy_schema, toy_table, tmp_path, family):
    seen = []
    api.fit(toy_table, toy_schema, model=family, epsilon=2.0, preset="tiny", accountant="rdp",
            run_dir=tmp_path / "cancelled", on_event=seen.append, should_stop=lambda: len(seen) >= 2, public_table=True)
    run = RunDir(tmp_path / "cancelled")
    assert run.status()["state"] == "cancelled" and len(run.events()) == 2
    assert 0 < run.ledger().spent_epsilon < 2.0

    def boom(event):
        if event["step"] == 2:
            raise RuntimeError("disk on fire")
    with pytest.raises(RuntimeError):
        api.fit(toy_table, toy_schema, model=family, epsilon=2.0, preset="tiny", accountant="rdp",
                run_dir=tmp_path / "failed", on_event=boom, public_table=True)
    failed = RunDir(tmp_path / "failed")
    entry = failed.ledger().training_entry()
    assert entry.mechanism == "DP-SGD (interrupted)" and entry.details["steps"] == 2
    # what the model's own accounting says two steps cost (for dtgan-g: group privacy, twice the
    # inner ε)
    model = get_model_class(family)(toy_schema, preset="tiny")
    model.plan = NoisePlan.from_dict(failed.config()["plan"])
    assert (entry.epsilon, entry.delta) == pytest.approx(model.plan.spent(2))
