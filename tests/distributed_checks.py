"""Run by tests/test_distributed.py under torchrun (2 processes, gloo): one DP step with the noise
off, across the processes and in one, on the same Poisson batch. Rank 0 writes what it found as JSON
to argv[1]."""
from __future__ import annotations

import json
import sys

import torch

from synth_core.privacy import NoisePlan
from synth_core.training import distributed
from synth_core.training.engine import FuncDPStep, TrainConfig, _one_step, private_parts


def net(seed: int) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(4, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))


def loss_fn(module, rows):
    return (module(rows[:, :4]).squeeze(1) - rows[:, 4]) ** 2 * 10  # large: most rows are clipped


def grads(module) -> list[torch.Tensor]:
    return [p.grad.detach().clone() for p in module.parameters()]


def one_step(group, batch, mode, data, plan) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """(the weights each rank starts from, the step's gradient) for this rank's part of `batch`."""
    # the ranks start apart: the wrapper must give every rank rank 0's weights
    module = net(seed=group.rank)
    model, optimizer, _ = private_parts(module, TrainConfig(grad_sample_mode=mode), plan, group, torch.device("cpu"))
    start = [p.detach().clone() for p in module.parameters()]
    mine = torch.as_tensor([i for i in batch if i % group.world_size == group.rank], dtype=torch.long)
    # chunks of 3: the skip path too
    _one_step(model, optimizer, data, mine, loss_fn, physical=3, mode=mode)
    model.remove_hooks()
    return start, grads(module)


def func_step(group, batch, data, plan) -> list[torch.Tensor]:
    """The gradient FuncDPStep.step applied (plain SGD with rate 1: the weights moved by exactly
    it)."""
    module = net(seed=group.rank)
    opt = torch.optim.SGD(module.parameters(), lr=1.0)

    def per_sample(forward, rows):
        return ((forward(rows[:, :4]).squeeze(1) - rows[:, 4]) ** 2 * 10).sum()

    step = FuncDPStep(module, per_sample, opt, plan.noise_multiplier, plan.max_grad_norm, plan.expected_batch_size,
                      group=group)
    before = [p.detach().clone() for p in module.parameters()]
    mine = torch.as_tensor([i for i in batch if i % group.world_size == group.rank], dtype=torch.long)
    step.step(data[mine])
    return [b - p.detach() for b, p in zip(before, module.parameters())]


def by_hand(batch, data, plan) -> list[torch.Tensor]:
    """The mean of clipped per-sample gradients, one row at a time: what a noiseless DP step must
    give."""
    module = net(seed=0)
    total = [torch.zeros_like(p) for p in module.parameters()]
    for i in batch:
        module.zero_grad()
        loss_fn(module, data[i:i + 1]).sum().backward()
        g = [p.grad for p in module.parameters()]
        norm = torch.sqrt(sum((x ** 2).sum() for x in g))
        for t, x in zip(total, g):
            t.add_(x * min(1.0, plan.max_grad_norm / (float(norm) + 1e-6)))
    return [t / plan.expected_batch_size for t in total]


def main(out: str) -> int:
    group = distributed.init_from_env()
    assert group.world_size == 2, group
    gen = torch.Generator().manual_seed(0)
    data = torch.randn(40, 5, generator=gen)
    plan = NoisePlan(noise_multiplier=0.0, sample_rate=0.25, expected_batch_size=10.0, steps=1, epsilon=1.0,
                     delta=1e-5, accountant="rdp", max_grad_norm=0.5, planned_epsilon=1.0)
    batches = {"poisson": (torch.rand(40, generator=gen) < 0.25).nonzero().squeeze(1).tolist(),
               "rank 1 empty": [0, 2, 4, 6, 8, 10]}  # rows of rank 0's shard only
    found = {}
    for name, batch in batches.items():
        for mode in ("hooks", "ghost"):
            start, got = one_step(group, batch, mode, data, plan)
            if group.is_main:
                _, want = one_step(distributed.Group(), batch, mode, data, plan)
            else:
                want = got
            found[f"{mode}, {name}"] = max(float((a - b).abs().max()) for a, b in zip(got, want))
            found[f"{mode}, {name}, by hand"] = max(float((a - b).abs().max())
                                                    for a, b in zip(got, by_hand(batch, data, plan)))
            ref = net(seed=0)
            found[f"{mode}, {name}: starts from rank 0's weights"] = all(
                torch.equal(a, b) for a, b in zip(start, ref.parameters()))
        got = func_step(group, batch, data, plan)
        want = func_step(distributed.Group(), batch, data, plan) if group.is_main else got
        found[f"torch.func, {name}"] = max(float((a - b).abs().max()) for a, b in zip(got, want))
    found["gradient"] = [float(g.abs().sum()) for g in got]  # the same on every rank
    stop = distributed.current().agree_to_stop(group.rank == 1)  # one rank asked: every rank stops
    found["stop agreed"] = stop
    found["totals"] = distributed.current().step_totals(3 if group.is_main else 2, 1.0 if group.is_main else 4.0)
    rank_results = [None, None]
    torch.distributed.all_gather_object(rank_results, found)
    if group.is_main:
        with open(out, "w") as f:
            json.dump(rank_results, f)
    distributed.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
