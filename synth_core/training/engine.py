"""The DP-SGD loop every model family shares.

Poisson sampling (Opacus' UniformWithReplacementSampler: each row joins each batch independently
with probability q), per-sample gradients (Opacus' GradSampleModule), per-sample clipping and
Gaussian noise (Opacus' DPOptimizer), with σ calibrated by privacy.plan_noise. A step emits an event
(step, epoch, loss, ε spent, samples/s) to a callback; training stops between steps when asked and
keeps what it has. Large Poisson batches are split into physical chunks whose clipped gradients are
summed before the one noisy step, so memory stays bounded without changing the privacy analysis.
"""
from __future__ import annotations

import math
import time
import warnings
from dataclasses import asdict, dataclass, field
from typing import Callable

import torch

from ..privacy import NoisePlan, gaussian_noise, secret_generator
from . import distributed, layers
from .device import device_label, pick_device, seed_everything

# Opacus' hooks see module outputs whose inputs need no gradient (token ids): harmless, and noisy
warnings.filterwarnings("ignore", message="Full backward hook is firing", category=UserWarning)

# loss_fn(module, batch) -> per-sample losses, shape (batch,)
LossFn = Callable[[torch.nn.Module, torch.Tensor], torch.Tensor]


# more epochs than this would plan millions of steps; the accountant alone would take hours
MAX_EPOCHS = 1000


@dataclass
class TrainConfig:
    epochs: float = 10.0
    batch_size: int = 1024            # expected Poisson batch size
    lr: float = 1e-3
    max_grad_norm: float = 1.0
    weight_decay: float = 0.0
    lr_decay: bool = True             # cosine decay to 10% of lr over the planned steps
    # memory bound; each extra chunk repeats the hooks' fixed costs
    physical_batch_size: int = 8192
    # "ghost": Opacus' ghost clipping computes per-sample gradient norms without materialising
    # per-sample gradients (two backward passes); "hooks": materialised per-sample gradients.
    # Both clip each sample's whole gradient to max_grad_norm.
    grad_sample_mode: str = "ghost"
    seed: int | None = 0
    device: str | None = None

    def to_dict(self) -> dict:
        return asdict(self)

    def check(self) -> None:
        """ValueError naming the first option that cannot train (a batch of 0, a clipping norm of 0,
        ...)."""
        def number(name: str, positive: bool = True) -> None:
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or (positive and v <= 0):
                raise ValueError(f"{name} must be a positive finite number, not {v!r}")

        def count(name: str) -> None:
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{name} must be a whole number of at least 1, not {v!r}")

        number("epochs")
        if self.epochs > MAX_EPOCHS:
            raise ValueError(f"epochs ({self.epochs:g}) is more than {MAX_EPOCHS:,}: the steps would not end "
                             "in a day; train fewer epochs (more noise per step buys little)")
        count("batch_size")
        count("physical_batch_size")
        number("lr")
        # 0 would clip every gradient to nothing: training that learns nothing
        number("max_grad_norm")
        number("weight_decay", positive=False)
        if self.weight_decay < 0:
            raise ValueError(f"weight_decay must be ≥ 0, not {self.weight_decay!r}")
        if self.grad_sample_mode not in ("ghost", "hooks"):
            raise ValueError(f"grad_sample_mode must be 'ghost' or 'hooks', not {self.grad_sample_mode!r}")
        if self.seed is not None and (isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0):
            raise ValueError(f"the seed must be a whole number ≥ 0, not {self.seed!r}")


@dataclass
class TrainResult:
    steps_done: int
    steps_planned: int
    cancelled: bool
    epsilon_spent: float
    seconds: float
    samples_seen: int
    last_loss: float | None
    device: str
    events: list = field(default_factory=list, repr=False)

    @property
    def samples_per_second(self) -> float:
        return self.samples_seen / self.seconds if self.seconds > 0 else 0.0


@dataclass
class StepCount:
    """DP steps started, counted in memory by the loop: what the ledger charges however training
    ends (a step counts from the moment its batch touches the rows)."""

    started: int = 0


def train(
    module: torch.nn.Module,
    data: torch.Tensor,
    loss_fn: LossFn,
    config: TrainConfig,
    plan: NoisePlan | None,
    on_event: Callable[[dict], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
    steps: StepCount | None = None,
) -> TrainResult:
    """Train `module` on the rows of `data` with DP-SGD (plan given) or without privacy (plan=None).

    The non-private mode exists to measure what privacy costs (benchmarks); it is never offered as a
    way to train on private data. Both modes draw Poisson batches with the same expected size.

    Under torchrun (training.distributed) DP training runs across the processes: rank 0's weights on
    every rank (Opacus' DifferentiallyPrivateDistributedDataParallel), each rank's Poisson batch
    from its shard, clipped on the rank, the clipped sums all-reduced with the noise added once
    (Opacus' distributed optimizers); the result is the single-process step on the union of the
    ranks' batches.
    """
    device = pick_device(config.device)
    n = int(data.shape[0])
    if n < 2:
        raise ValueError("training needs at least two rows")
    group = distributed.current() if plan is not None else distributed.Group()
    # a loss's own randomness (diffusion noise, masks) differs between ranks; the weights start as
    # rank 0's
    seed_everything(None if config.seed is None else config.seed + 1_000_003 * group.rank)
    module.to(device)
    data = data.to(device)
    module.train()

    if plan is not None:
        model, optimizer, base_opt = private_parts(module, config, plan, group, device)
    else:
        sample_rate = min(1.0, config.batch_size / n)
        planned = max(1, int(round(config.epochs / sample_rate)))
        model = module
        optimizer = base_opt = torch.optim.Adam(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    scheduler = cosine_decay(base_opt, plan.steps if plan is not None else planned) if config.lr_decay else None

    def step_fn(indices) -> float | None:
        batch_idx = torch.as_tensor(indices, dtype=torch.long, device=device)
        loss_value = _one_step(model, optimizer, data, batch_idx, loss_fn, config.physical_batch_size,
                               mode=config.grad_sample_mode if plan is not None else None)
        if scheduler is not None:
            scheduler.step()
        return loss_value

    try:
        if plan is not None:
            result = run_steps(step_fn, n, plan=plan, on_event=on_event, should_stop=should_stop, steps=steps,
                               group=group)
        else:
            result = run_steps(step_fn, n, sample_rate=sample_rate, planned=planned, on_event=on_event,
                               should_stop=should_stop)
    finally:
        module.eval()
        if plan is not None:
            model.remove_hooks()  # the trained module goes on to sampling without Opacus attached
    result.device = device_label(device)
    return result


def private_parts(module: torch.nn.Module, config: TrainConfig, plan: NoisePlan, group: distributed.Group,
                  device: torch.device):
    """(the module wrapped for per-sample gradients, Opacus' DP optimizer, the optimizer inside it)
    for `config`'s clipping mode; under torchrun with rank 0's weights and the distributed optimizer
    (noise once, clipped sums all-reduced)."""
    # Opacus' distributed optimizers divide by the batch each rank expects and average over the
    # ranks
    from opacus import GradSampleModule
    from opacus.distributed import DifferentiallyPrivateDistributedDataParallel as DPDDP
    from opacus.grad_sample import GradSampleModuleFastGradientClipping
    from opacus.optimizers import (DistributedDPOptimizer,
                                   DistributedDPOptimizerFastGradientClipping, DPOptimizer,
                                   DPOptimizerFastGradientClipping)
    layers.register_samplers()
    expected = plan.expected_batch_size / group.world_size
    wrapped = DPDDP(module) if group.active else module
    if config.grad_sample_mode == "ghost":
        model = GradSampleModuleFastGradientClipping(wrapped, loss_reduction="mean", use_ghost_clipping=True,
                                                     max_grad_norm=plan.max_grad_norm)
        dp_optimizer = DistributedDPOptimizerFastGradientClipping if group.active else DPOptimizerFastGradientClipping
    elif config.grad_sample_mode == "hooks":
        model = GradSampleModule(wrapped, loss_reduction="mean")
        dp_optimizer = DistributedDPOptimizer if group.active else DPOptimizer
    else:
        raise ValueError(f"grad_sample_mode must be 'ghost' or 'hooks', not {config.grad_sample_mode!r}")
    base_opt = torch.optim.Adam(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    optimizer = dp_optimizer(base_opt, noise_multiplier=plan.noise_multiplier, max_grad_norm=plan.max_grad_norm,
                             expected_batch_size=expected, loss_reduction="mean",
                             generator=secret_generator(device), secure_mode=True)
    return model, optimizer, base_opt


def poisson_batches(n: int, sample_rate: float, steps: int, group: distributed.Group):
    """`steps` Poisson batches of indices among n, each drawn by a secret generator: Opacus'
    sampler, or under torchrun this rank's shard of them (distributed.ShardSampler)."""
    if group.active:
        return distributed.ShardSampler(n, sample_rate, steps, group)
    from opacus.utils.uniform_sampler import UniformWithReplacementSampler
    return UniformWithReplacementSampler(num_samples=n, sample_rate=sample_rate,
                                         generator=secret_generator(), steps=steps)


def run_steps(step_fn: Callable[[list], float | dict | None], n: int, plan: NoisePlan | None = None,
              sample_rate: float | None = None, planned: int | None = None,
              on_event: Callable[[dict], None] | None = None,
              should_stop: Callable[[], bool] | None = None,
              steps: StepCount | None = None, group: distributed.Group | None = None) -> TrainResult:
    """The loop every DP training shares: Poisson batches of indices into n items (each item joins
    each batch independently with the plan's sampling rate), one call of `step_fn(indices)` per
    batch, one event per step, a stop check between steps. With `plan=None` (no privacy, to measure
    what privacy costs) the sampling rate and the number of steps are given instead.

    step_fn returns the step's loss, or a dict with "loss" and extra figures for the event (a GAN's
    generator loss). Each event carries the ε spent so far (the plan's curve); the result's
    epsilon_spent is that of the steps taken (inf without privacy). `steps` counts every step
    started, before its batch touches the rows, so a failure inside a step is still charged.

    The batches are drawn from a secret generator (privacy.secret_generator): no seed can replay
    them.

    `group` (DP training only; the torchrun group by default): each rank draws its batches from its
    shard of the n items (distributed.ShardSampler), the ranks agree before each step whether to
    stop, and the events carry the global batch and loss. `step_fn` does the rest (the all-reduce of
    the noisy sum).
    """
    if plan is not None:
        sample_rate, planned = plan.sample_rate, plan.steps
        epsilon_at = plan.curve().at
        group = group if group is not None else distributed.current()
    else:
        epsilon_at = None
        group = distributed.Group()
    counter = steps if steps is not None else StepCount()
    steps_per_epoch = 1.0 / sample_rate
    sampler = poisson_batches(n, sample_rate, planned, group)
    events: list[dict] = []
    start = time.perf_counter()
    samples_seen, step, last_loss, cancelled = 0, 0, None, False
    rate_ema = None
    for indices in sampler:
        if group.agree_to_stop(should_stop is not None and should_stop()):
            cancelled = True
            break
        t0 = time.perf_counter()
        counter.started += 1
        try:
            out = step_fn(indices)
        except (RuntimeError, torch.distributed.DistError) as e:
            # the optimizer's all-reduce found a rank gone
            gone = distributed.lost(e) if group.active else None
            if gone is None:
                raise
            raise gone from e
        extra = {}
        if isinstance(out, dict):
            extra = {k: v for k, v in out.items() if k != "loss"}
            out = out.get("loss")
        step += 1
        batch, out = group.step_totals(len(indices), out)
        samples_seen += batch
        dt = time.perf_counter() - t0
        rate = batch / dt if dt > 0 else 0.0
        rate_ema = rate if rate_ema is None else 0.8 * rate_ema + 0.2 * rate
        if out is not None:
            last_loss = out
        event = {
            "step": step, "steps": planned, "epoch": step / steps_per_epoch,
            "loss": last_loss, "epsilon": epsilon_at(step) if epsilon_at else None,
            "batch_size": batch, "samples_per_s": rate_ema,
            "elapsed_s": time.perf_counter() - start, "unit": "steps", "mechanism": "DP-SGD", **extra,
        }
        events.append(event)
        if on_event is not None:
            on_event(event)
    seconds = time.perf_counter() - start
    spent = plan.spent(step)[0] if plan is not None else float("inf")
    return TrainResult(steps_done=step, steps_planned=planned, cancelled=cancelled, epsilon_spent=spent,
                       seconds=seconds, samples_seen=samples_seen, last_loss=last_loss, device="", events=events)


def cosine_decay(optimizer: torch.optim.Optimizer, steps: int):
    """Cosine decay of the learning rate to 10% over `steps` scheduler steps."""
    return torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(s, steps) / steps)))


def _ghost_clipping_backward(model, optimizer, losses: torch.Tensor) -> None:
    """Opacus' two-pass ghost clipping (DPTensorFastGradientClipping.backward), with one saving.

    Pass 1 runs the norm hooks, which need only the gradients flowing through each layer's output;
    Opacus asks autograd for every parameter's gradient there and throws them away. When the network
    reads its input through embeddings, asking only for the embedding weights' gradients still sends
    the backward through every layer (all depend on the embeddings) but skips the weight-gradient
    products of the other layers. A network without embeddings may name such parameters itself
    (`ghost_targets()`, e.g. its first layer's weight, on which every later layer depends); a layer
    the pass does not reach fails loudly rather than being clipped wrongly. Pass 2 is Opacus' own:
    the loss reweighted by each sample's clip factor, so p.grad is the sum of clipped per-sample
    gradients.
    """
    from opacus.distributed import DifferentiallyPrivateDistributedDataParallel as DPDDP
    from opacus.utils.fast_gradient_clipping_utils import DPTensorFastGradientClipping
    targets = [m.weight for m in model.modules() if isinstance(m, torch.nn.Embedding) and m.weight.requires_grad]
    network = model._module.module if isinstance(model._module, DPDDP) else model._module
    declared = getattr(network, "ghost_targets", None)
    if declared is not None:
        # the network names parameters every layer's output depends on (e.g. its first layer's
        # weight)
        targets = [p for p in declared() if p.requires_grad]
    if not targets:
        DPTensorFastGradientClipping(model, optimizer, losses, "mean").backward()
        return
    for p in model.trainable_parameters:
        # a stale norm from the previous step must never stand in for this one: clear them all, so a
        # layer that pass 1 did not reach fails loudly below instead of being clipped wrongly
        if hasattr(p, "_norm_sample"):
            del p._norm_sample
    torch.autograd.grad(losses.mean(), targets, retain_graph=True)
    optimizer.zero_grad()
    missed = [p for p in model.trainable_parameters if not hasattr(p, "_norm_sample")]
    if missed:
        raise RuntimeError(f"ghost clipping computed no per-sample norm for {len(missed)} parameters; "
                           "use grad_sample_mode='hooks' for this network")
    coeff = model.get_clipping_coef()
    model.disable_hooks()
    (coeff.to(losses.device) * losses).sum().backward()
    model.enable_hooks()


def _one_step(model, optimizer, data, batch_idx, loss_fn, physical: int, mode: str | None) -> float | None:
    """One optimizer step on one Poisson batch, in physical chunks; returns the batch's mean loss.

    mode: None (no privacy), "hooks" or "ghost" (see TrainConfig.grad_sample_mode).
    """
    optimizer.zero_grad(set_to_none=True)
    n = len(batch_idx)
    if n == 0:
        # An empty Poisson batch still costs a step: the update is pure noise, as the analysis
        # assumes.
        if mode == "hooks":
            for p in optimizer.params:
                p.grad_sample = torch.zeros((0, *p.shape), device=p.device, dtype=p.dtype)
            optimizer.step()
        elif mode == "ghost":
            for p in optimizer.params:
                p.grad = torch.zeros_like(p)
            optimizer.step()
        return None
    total, chunks = 0.0, list(torch.split(batch_idx, physical))
    for i, chunk in enumerate(chunks):
        losses = loss_fn(model, data[chunk])
        if mode == "ghost":
            _ghost_clipping_backward(model, optimizer, losses)
        elif mode == "hooks":
            losses.mean().backward()
        else:
            (losses.mean() * (len(chunk) / n)).backward()
        total += float(losses.detach().sum())
        if mode is not None and i < len(chunks) - 1:
            # clip and sum this chunk; noise once, at the end
            optimizer.signal_skip_step(do_skip=True)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
    optimizer.step()
    return total / n


class FuncDPStep:
    """One DP-SGD step whose per-sample gradients come from torch.func (vmap of grad) instead of
    Opacus' hooks.

    Opacus' hooks see one backward pass; a loss that differentiates inside itself (the gradient
    penalty of a WGAN-GP critic, ‖∇ₓD(x̂)‖ on interpolates of a real and a fake row) needs a double
    backward, whose per-sample gradients the hooks cannot give. Here the whole per-sample loss,
    inner gradient included, is differentiated for each sample on its own (torch.func.grad of a
    one-row function, vectorised with vmap), so everything a sample's row touches is in its
    gradient. Then the same arithmetic as Opacus' DPOptimizer (loss_reduction="mean"): clip each
    sample's whole gradient to max_grad_norm, sum, add N(0, (σ·max_grad_norm)²) once per step,
    divide by the expected batch size, apply the optimizer. The noise is drawn in secure mode from
    `generator`, a secret one (privacy.secret_generator) when not given. The accountant sees exactly
    what it assumes of DP-SGD; tests/test_gan.py checks this step against the Opacus path on a plain
    loss. Under torchrun the clipped sums are all-reduced and rank 0 adds the noise.

    per_sample_loss(forward, *rows) -> scalar: the loss of ONE sample; `forward` calls the module
    with the parameters being differentiated; each of `rows` is that sample's slice of a batch
    tensor with a leading batch dimension of 1.
    """

    def __init__(self, module: torch.nn.Module, per_sample_loss: Callable, optimizer: torch.optim.Optimizer,
                 noise_multiplier: float, max_grad_norm: float, expected_batch_size: float,
                 generator: torch.Generator | None = None, chunk_size: int = 512,
                 group: distributed.Group | None = None):
        self.module = module
        self.per_sample_loss = per_sample_loss
        self.optimizer = optimizer
        self.noise_multiplier = float(noise_multiplier)
        self.max_grad_norm = float(max_grad_norm)
        self.expected_batch_size = float(expected_batch_size)
        self.chunk_size = chunk_size
        self.names = [k for k, p in module.named_parameters() if p.requires_grad]
        self.params = [p for _, p in module.named_parameters() if p.requires_grad]
        device = self.params[0].device if self.params else torch.device("cpu")
        self.generator = generator if generator is not None else secret_generator(device)
        # under torchrun: rank 0's weights (Opacus' DPDDP broadcasts them as it wraps), the noisy
        # sum over the ranks
        self.group = group if group is not None else distributed.current()
        if self.group.active:
            from opacus.distributed import DifferentiallyPrivateDistributedDataParallel as DPDDP
            DPDDP(module)

    def _per_sample_grads(self, batch: tuple[torch.Tensor, ...]):
        from torch.func import functional_call, grad_and_value, vmap
        params = {k: p.detach() for k, p in zip(self.names, self.params)}
        buffers = {k: b.detach() for k, b in self.module.named_buffers()}

        def one(p, *row):
            def forward(*inputs):
                return functional_call(self.module, ({**p, **buffers}), inputs)
            return self.per_sample_loss(forward, *[r.unsqueeze(0) for r in row])

        return vmap(grad_and_value(one), in_dims=(None,) + (0,) * len(batch), randomness="different")(params, *batch)

    def clipped_sum(self, *batch: torch.Tensor) -> tuple[list[torch.Tensor], torch.Tensor]:
        """Sum over the batch of per-sample gradients each clipped to max_grad_norm, and the
        per-sample losses."""
        total = [torch.zeros_like(p) for p in self.params]
        losses = []
        n = batch[0].shape[0]
        for start in range(0, n, self.chunk_size):
            chunk = tuple(b[start:start + self.chunk_size] for b in batch)
            grads, loss = self._per_sample_grads(chunk)
            g = [grads[k] for k in self.names]
            norms = torch.sqrt(sum(x.reshape(x.shape[0], -1).pow(2).sum(dim=1) for x in g))
            factor = (self.max_grad_norm / (norms + 1e-6)).clamp(max=1.0)
            for t, x in zip(total, g):
                t.add_(torch.einsum("b,b...->...", factor, x))
            losses.append(loss.detach())
        return total, (torch.cat(losses) if losses else torch.zeros(0))

    def step(self, *batch: torch.Tensor) -> float | None:
        """One noisy step on a Poisson batch (batch tensors share their first dimension, possibly
        0). Returns the batch's mean loss (None for an empty batch, whose update is pure noise)."""
        n = batch[0].shape[0]
        if n:
            total, losses = self.clipped_sum(*batch)
        else:
            total, losses = [torch.zeros_like(p) for p in self.params], None
        std = self.noise_multiplier * self.max_grad_norm
        self.group.sum_noisy(total, lambda t: gaussian_noise(std, t, self.generator))
        for p, t in zip(self.params, total):
            p.grad = t / self.expected_batch_size
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        return float(losses.mean()) if losses is not None else None
