"""SynLM's AugMult and the TAN batch rule for DP-TBART: k copies of a row in k random column orders
inside one sample (so the per-sample gradient averages them before clipping), copies that never
attend to each other, and a batch grown until the noise multiplier reaches a floor."""
import pytest
import torch
import torch.nn.functional as F
from opacus import GradSampleModule

from synth_core.encoding import TokenEncoder
from synth_core.models import get_model_class
from synth_core.schema import validate_table


def model_(schema, **options):
    return get_model_class("dp-tbart")(schema, preset="tiny", seed=0, random_order=True, augmult=3, **options)


def inputs(model, rows, order):
    B, k, C = order.shape
    in_order = torch.gather(rows.unsqueeze(1).expand(B, k, C), 2, order)
    bos = torch.full((B, k, 1), TokenEncoder.BOS, dtype=rows.dtype)
    return torch.cat([bos, in_order[:, :, :-1]], dim=2).reshape(B, k * C)


def test_copies_never_attend_to_each_other(toy_schema, toy_table):
    model = model_(toy_schema)
    rows = model.encode(validate_table(toy_table.head(4), toy_schema)[0])
    torch.manual_seed(1)
    order = torch.argsort(torch.rand(4, 3, rows.shape[1]), dim=2)
    with torch.no_grad():
        together = model.net(inputs(model, rows, order), order)
        for i in range(3):
            alone = model.net(inputs(model, rows, order[:, i:i + 1]), order[:, i:i + 1])
            for c in range(len(together)):
                assert torch.allclose(together[c][:, i], alone[c][:, 0], atol=1e-5)


def test_per_sample_gradient_is_the_mean_over_copies(toy_schema, toy_table):
    model = model_(toy_schema)
    rows = model.encode(validate_table(toy_table.head(3), toy_schema)[0])
    B, C, k = rows.shape[0], rows.shape[1], 3
    torch.manual_seed(2)
    order = torch.argsort(torch.rand(B, k, C), dim=2)
    local = (rows - model.offsets).unsqueeze(1).expand(B, k, C)

    def losses(net, r, o, loc):
        logits = net(inputs(model, r, o), o)
        n = r.shape[0]
        return torch.stack([F.cross_entropy(lg.reshape(n * k, -1), loc[:, :, c].reshape(-1), reduction="none").view(n, k)
                            for c, lg in enumerate(logits)], dim=2).mean(dim=(1, 2))

    gsm = GradSampleModule(model.net, loss_reduction="sum")
    losses(gsm, rows, order, local).sum().backward()
    per_sample = {n: p.grad_sample.clone() for n, p in model.net.named_parameters()}
    gsm.remove_hooks()
    for i in range(B):
        model.net.zero_grad()
        losses(model.net, rows[i:i + 1], order[i:i + 1], local[i:i + 1]).sum().backward()
        for n, p in model.net.named_parameters():
            assert torch.allclose(per_sample[n][i], p.grad, atol=1e-5), n


def test_augmult_trains_and_the_tan_rule_raises_the_noise(toy_schema, toy_table):
    clean = validate_table(toy_table, toy_schema)[0]
    base = get_model_class("dp-tbart")(toy_schema, preset="tiny", seed=0)
    tan = model_(toy_schema, min_noise_multiplier=2.0)
    p0, p1 = base.plan_privacy(len(clean), 8.0, 1e-5, "rdp"), tan.plan_privacy(len(clean), 8.0, 1e-5, "rdp")
    assert p1.noise_multiplier > p0.noise_multiplier and p1.expected_batch_size > p0.expected_batch_size
    assert p1.noise_multiplier >= 2.0 or p1.expected_batch_size * 2 > len(clean) / 2
    tan.fit(clean, 8.0, 1e-5, "rdp")
    assert tan.train_result.epsilon_spent <= 8.0
    assert len(tan.sample(20, conditions={"job": "nurse"}, seed=0)) == 20
    with pytest.raises(ValueError, match="random_order"):
        bad = get_model_class("dp-tbart")(toy_schema, preset="tiny", seed=0, augmult=2)
        bad.loss_fn(bad.net, bad.encode(clean.head(4)))
