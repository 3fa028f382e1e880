"""DTGAN (Kunar et al. 2021, "DTGAN: Differential private training for tabular GANs") and plain
DP-WGAN.

All three are Wasserstein GANs with a gradient penalty of weight τ = 10 on points between a real and
a fake row. Rows are vectors from the public schema (encoding.vectors): categoricals one-hot over
the PUBLIC list, numbers as bins between the PUBLIC bounds (by default) or scaled by them to [-1,
1]; the generator ends each one-hot block with a Gumbel-softmax and each scaled number with tanh.
The generator is a residual MLP (CTGAN's: Linear → GroupNorm → ReLU, input concatenated); the critic
an MLP with LeakyReLU. No BatchNorm anywhere (it mixes rows).

dtgan-d   DP-SGD on the critic. One critic iteration = one Poisson batch of real rows = one DP step; each
          real row i is paired with a fake row f_i and a point on the great circle between them (DTGAN's
          spherical interpolation), and row i's loss D(f_i) − D(x_i) + τ·(‖∇D(slerp(x_i, f_i))‖ − 1)² is
          differentiated as a whole, gradient penalty included, clipped and noised (training.engine.FuncDPStep:
          per-sample gradients from torch.func, since the penalty needs a double backward). `n_critic`
          critic iterations per round, ALL of them accounted: the accountant's steps are the critic
          iterations. Then `g_steps` generator updates: the generator only sees the critic (and public
          conditions), so they are post-processing and cost no ε.
dtgan-g   DP on the generator (GS-WGAN style, as the paper's DTGAN_G): see DTGANG's docstring.
dp-wgan   the baseline: DP-SGD critic as dtgan-d, no conditioning, straight-line interpolation.

Conditioning (dtgan-d, dtgan-g): CTGAN's condition vector (one categorical column fixed to one
category), with no exact frequency of the private table anywhere. A real row's condition is taken
from the row itself (a column chosen uniformly at random, or no condition) inside its own clipped
gradient, and its paired fake row is generated under the same condition; the generator's own steps
draw conditions uniformly over the PUBLIC categories. CTGAN's training-by-sampling (picking real
rows by category frequency) is replaced by Poisson sampling, which the privacy analysis needs. With
probability `cond_null_prob` the condition is empty, so the generator also learns the unconditional
distribution, which `sample` uses; conditioning on a categorical column at sampling time is native
(exact).

Left out, as the issue allows: the paper's information loss and auxiliary classifier. Both compare
generated rows with real ones outside the critic's accounted gradient; run under DP they would need
their own share of the budget, and they were not needed to beat the DP-WGAN baseline.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from ..privacy import NoisePlan, gaussian_noise, secret_generator
from ..privacy.planning import SamplingShape
from ..training.device import device_label, seed_everything
from ..training.engine import FuncDPStep, StepCount, TrainResult, cosine_decay, run_steps
from .base import register
from .options import check_bins, check_choices, check_groups
from .gan_nets import Critic, Generator, critic_pair_loss
from .vector import VectorModel


@dataclass
class GANConfig:
    width: int = 256             # generator: residual block width
    n_blocks: int = 2
    groups: int = 8
    noise_dim: int = 64
    critic_width: int = 256
    critic_layers: int = 2
    # critic iterations per round (dtgan-d, dp-wgan: each one a DP step)
    n_critic: int = 5
    # generator updates per round; against a released critic they cost no ε
    g_steps: int = 1
    gp_weight: float = 10.0      # τ
    # learning rate of the network trained without DP-SGD (the other uses `lr`)
    partner_lr: float = 1e-3
    generator_batch: int = 1024  # fake rows per generator step
    cond_null_prob: float = 0.5  # share of rows with an empty condition (dtgan-d, dtgan-g)
    gumbel_tau: float = 0.2
    n_critics: int = 10          # dtgan-g: critics, each on its own partition of the rows
    # dtgan-g: expected critics consulted per generator step (Poisson)
    critics_per_step: float = 1.0
    numeric_encoding: str = "bins"   # or "scalar" (see encoding.vectors)
    n_bins: int = 32                 # bins of a wide or continuous numeric column
    # an integer column with at most this many values: one bin per value
    integer_bins: int = 100

    def check(self) -> None:
        check_groups(self.width, self.groups)
        if not 0 <= self.cond_null_prob <= 1:
            raise ValueError(f"cond_null_prob is a probability, from 0 to 1, not {self.cond_null_prob!r}")
        for name in ("gumbel_tau", "critics_per_step", "partner_lr"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be above 0, not {getattr(self, name)!r}")
        check_choices(self, numeric_encoding=("bins", "scalar"))
        check_bins(self)


def _presets(tiny_extra: dict | None = None) -> dict:
    return {
        "quick": dict(model=dict(width=64, critic_width=64, n_critic=2, g_steps=2, generator_batch=512),
                      train=dict(epochs=2, batch_size=1024, lr=2e-3, max_grad_norm=1.0)),
        # Adult (39k rows) at ε=1 in a few minutes on 2 CPU cores
        "cpu": dict(model=dict(width=128, critic_width=128, n_critic=2, g_steps=2, generator_batch=512),
                    train=dict(epochs=4, batch_size=1024, lr=2e-3, max_grad_norm=1.0)),
        "large": dict(model=dict(width=256, critic_width=256, n_blocks=3, n_critic=3, g_steps=2),
                      train=dict(epochs=10, batch_size=2048, lr=1e-3, max_grad_norm=1.0)),
        "tiny": dict(model=dict(width=32, n_blocks=1, groups=4, noise_dim=16, critic_width=32,
                                generator_batch=64, n_critic=2, n_bins=10, integer_bins=10, **(tiny_extra or {})),
                     train=dict(epochs=2, batch_size=64, lr=5e-3, max_grad_norm=1.0)),
    }


SIZE_PRESETS = {"quick": "quick", "standard": "cpu", "best": "large"}


# --- the models ----------------------------------------------------------------------------------------
class _WGAN(VectorModel):
    """What the three GANs share: networks, conditions, generator steps, sampling."""

    config_class = GANConfig
    size_presets = SIZE_PRESETS
    conditional = True
    spherical = True

    def build_net(self) -> None:
        enc, cfg = self.encoder, self.config
        self.spans = enc.categorical_spans()
        # conditions are on the categorical columns (as CTGAN's); the condition vector lays their
        # one-hot blocks side by side: row_blocks[j] is block j in the row, cond_blocks[j] in the
        # condition vector
        self.row_blocks = [(b.start, b.stop) for b in enc.columns if not b.is_numeric] if self.conditional else []
        self.cond_blocks, pos = [], 0
        for a, b in self.row_blocks:
            self.cond_blocks.append((pos, pos + b - a))
            pos += b - a
        self.cond_dim = pos
        self.cond_index = torch.cat([torch.arange(a, b) for a, b in self.row_blocks]) if self.row_blocks else None
        # only the generator is kept and saved (self.net); critics live during fit
        self.net = Generator(cfg, self.cond_dim, enc.dim, self.spans)

    def new_critic(self) -> Critic:
        return Critic(self.config, self.encoder.dim, self.cond_dim).to(self.device)

    # --- conditions ---------------------------------------------------------------------------------
    def _pick_blocks(self, n: int, device, generator=None) -> torch.Tensor:
        """Per row, which categorical column is the condition (-1: none), from public randomness
        only."""
        k = len(self.cond_blocks)
        blocks = torch.randint(0, k, (n,), device=device, generator=generator)
        empty = torch.rand(n, device=device, generator=generator) < self.config.cond_null_prob
        return torch.where(empty, torch.full_like(blocks, -1), blocks)

    def _block_mask(self, blocks: torch.Tensor) -> torch.Tensor:
        mask = torch.zeros(len(blocks), self.cond_dim, device=blocks.device)
        for j, (a, b) in enumerate(self.cond_blocks):
            mask[blocks == j, a:b] = 1.0
        return mask

    def conditions_from_rows(self, rows: torch.Tensor, generator=None) -> torch.Tensor:
        """Each real row's condition: its own one-hot in a randomly chosen block (or none). A
        function of that row alone, used only inside the row's own clipped gradient."""
        if not self.cond_dim:
            return rows.new_zeros(len(rows), 0)
        own = rows[:, self.cond_index.to(rows.device)]
        return own * self._block_mask(self._pick_blocks(len(rows), rows.device, generator))

    def public_conditions(self, n: int, generator=None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Conditions for generator steps: block uniform, category uniform over the PUBLIC
        categories. Returns (cond, block per row, slot per row)."""
        device = self.device
        if not self.cond_dim:
            z = torch.zeros(n, 0, device=device)
            return z, torch.full((n,), -1, device=device), torch.zeros(n, dtype=torch.long, device=device)
        blocks = self._pick_blocks(n, device, generator)
        cond = torch.zeros(n, self.cond_dim, device=device)
        slots = torch.zeros(n, dtype=torch.long, device=device)
        for j, (a, b) in enumerate(self.cond_blocks):
            rows = (blocks == j).nonzero().squeeze(1)
            s = torch.randint(0, b - a, (len(rows),), device=device, generator=generator)
            cond[rows, a + s] = 1.0
            slots[rows] = s
        return cond, blocks, slots

    def condition_loss(self, raw: torch.Tensor, blocks: torch.Tensor, slots: torch.Tensor) -> torch.Tensor:
        """CTGAN's generator cross-entropy: the conditioned block of the fake row should show the
        condition. Generated rows only: no real data."""
        total = raw.new_zeros(())
        for j, (a, b) in enumerate(self.row_blocks):
            rows = (blocks == j).nonzero().squeeze(1)
            if len(rows):
                total = total + F.cross_entropy(raw[rows, a:b], slots[rows], reduction="sum")
        return total / max(len(blocks), 1)

    def fake_rows(self, cond: torch.Tensor, generator=None) -> tuple[torch.Tensor, torch.Tensor]:
        z = torch.randn(len(cond), self.config.noise_dim, device=cond.device, generator=generator)
        return self.net(z, cond, tau=self.config.gumbel_tau, generator=generator)

    def generator_step(self, critic_term, optimizer) -> float:
        """One generator update from public conditions; `critic_term(fake, cond)` gives the critic's
        part of the loss (a plain critic for dtgan-d/dp-wgan, the sanitised gradient for
        dtgan-g)."""
        cond, blocks, slots = self.public_conditions(self.config.generator_batch)
        fake, raw = self.fake_rows(cond)
        loss = critic_term(fake, cond)
        if self.cond_dim:
            loss = loss + self.condition_loss(raw, blocks, slots)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        return float(loss.detach())

    # --- sampling -----------------------------------------------------------------------------------
    def native_conditions(self, conditions: dict) -> dict:
        """One categorical condition is taken by the condition vector (the first one asked)."""
        if not self.cond_dim:
            return {}
        for name, value in conditions.items():
            if not self.schema[name].is_numeric:
                return {name: value}
        return {}

    @torch.no_grad()
    def generate_vectors(self, n: int, native: dict, generator: torch.Generator) -> np.ndarray:
        self.net.eval()
        cond = torch.zeros(n, self.cond_dim, device=self.device)
        fixed = None
        for name, value in native.items():
            block = self.encoder.block(name)
            j = self.row_blocks.index((block.start, block.stop))
            local = block.labels.index(value)
            fixed = (block.start, block.stop, block.start + local)
            cond[:, self.cond_blocks[j][0] + local] = 1.0
        z = torch.randn(n, self.config.noise_dim, device=self.device, generator=generator)
        rows, _ = self.net(z, cond, tau=None, generator=generator)
        # the condition is exact: the generator was trained to honour it; make sure
        if fixed is not None:
            a, b, slot = fixed
            rows[:, a:b] = 0.0
            rows[:, slot] = 1.0
        return rows.cpu().numpy()


class _DPCriticGAN(_WGAN):
    """DP-SGD on the critic (dtgan-d, dp-wgan): every critic iteration is an accounted DP step."""

    dp_mechanism = ("DP-SGD on the critic (Poisson sampling, per-sample clipping incl. gradient penalty, "
                    "Gaussian noise)")

    def ledger_details(self) -> dict:
        return {"critic_iterations_per_generator_step": self.config.n_critic,
                "conditions": "from each row inside its clipped gradient; generator: uniform over public categories"}

    def train_private(self, data: torch.Tensor, p: NoisePlan, on_event, should_stop, steps: StepCount) -> TrainResult:
        cfg, tc = self.config, self.train_config
        seed_everything(tc.seed)
        data = data.to(self.device)
        critic = self.new_critic()
        self.net.train()
        c_opt = torch.optim.Adam(critic.parameters(), lr=tc.lr, betas=(0.5, 0.9), weight_decay=tc.weight_decay)
        g_opt = torch.optim.Adam(self.net.parameters(), lr=cfg.partner_lr, betas=(0.5, 0.9))
        c_sched = cosine_decay(c_opt, p.steps) if tc.lr_decay else None
        g_sched = cosine_decay(g_opt, max(1, cfg.g_steps * p.steps // cfg.n_critic)) if tc.lr_decay else None
        weight, spherical = cfg.gp_weight, self.spherical

        def pair_loss(forward, real, fake, cond, alpha):
            return critic_pair_loss(forward, real, fake, cond, alpha, weight, spherical)

        dp = FuncDPStep(critic, pair_loss, c_opt, p.noise_multiplier, p.max_grad_norm, p.expected_batch_size,
                        chunk_size=min(tc.physical_batch_size, 256))
        last_g = {"loss": None}

        def step_fn(indices) -> dict:
            real = data[torch.as_tensor(indices, dtype=torch.long, device=self.device)]
            with torch.no_grad():
                cond = self.conditions_from_rows(real)
                fake, _ = self.fake_rows(cond)
            alpha = torch.rand(len(real), device=self.device)
            loss = dp.step(real, fake, cond, alpha)
            self._critic_iter += 1
            if self._critic_iter % cfg.n_critic == 0:
                for q in critic.parameters():
                    # the generator step must not leave gradients on the critic
                    q.requires_grad_(False)
                for _ in range(cfg.g_steps):
                    last_g["loss"] = self.generator_step(lambda f, c: -critic(f, c).mean(), g_opt)
                    if g_sched is not None:
                        g_sched.step()
                for q in critic.parameters():
                    q.requires_grad_(True)
            if c_sched is not None:
                c_sched.step()
            return {"loss": loss, "generator_loss": last_g["loss"]}

        self._critic_iter = 0
        try:
            result = run_steps(step_fn, len(data), plan=p, on_event=on_event, should_stop=should_stop, steps=steps)
        finally:
            self.net.eval()
        result.device = device_label(self.device)
        return result


@register("dtgan-d")
class DTGAND(_DPCriticGAN):
    """DTGAN_D: conditional WGAN-GP with spherical interpolation, the critic trained with DP-SGD."""

    label = "Generator and critic (GAN)"
    description = ("Two networks trained against each other: a generator makes rows, and a critic, the only one "
                   "that sees real rows (with privacy noise), learns to tell them apart. Conditional GAN (DTGAN_D), "
                   "the critic trained with DP-SGD, without the paper's information loss and auxiliary classifier "
                   "(they would touch real rows outside the privacy accounting).")
    when_to_pick = ("When you want a GAN, or need rows conditioned exactly on one category; usually behind the "
                    "transformer and diffusion models on fidelity at small ε.")
    presets = _presets()


@register("dp-wgan")
class DPWGAN(_DPCriticGAN):
    """Plain DP-WGAN: unconditional WGAN-GP, critic trained with DP-SGD (the baseline DTGAN is
    compared with)."""

    label = "Generator and critic, plain (baseline)"
    description = ("The simplest generator-and-critic model: the critic learns, with privacy noise, to tell made "
                   "rows from real ones, and the generator learns to fool it (a Wasserstein GAN with a DP-SGD "
                   "critic, no conditioning). The baseline the DTGAN paper compares against.")
    when_to_pick = "Only as a baseline for comparisons; prefer DTGAN_D or the other models for real use."
    presets = _presets()
    conditional = False
    spherical = False


@register("dtgan-g")
class DTGANG(_WGAN):
    """DTGAN_G: the generator is what DP protects; critics train without DP on disjoint partitions.

    After GS-WGAN (Chen et al. 2020), which the paper's DTGAN_G follows. Each row is assigned to one
    of K partitions by its own uniform coin (so adding or removing a row changes exactly one
    partition); critic k trains on partition k, without noise, and is never released (it is not
    saved). At each generator step a Poisson subset S of the critics (each with probability q =
    critics_per_step / K) first trains `n_critic` iterations on its partition, then answers: for a
    batch of B generated rows X (public conditions), critic k gives V_k = ∂(−Σⱼ D_k(xⱼ))/∂X with
    every row clipped to norm c (max_grad_norm), so ‖V_k‖ ≤ C = c·√B. The generator receives Σ_{k∈S}
    V_k + N(0, σ²C²I) and backpropagates it (plus CTGAN's condition cross-entropy, on generated rows
    only): post-processing.

    Accounting. A row influences only its own critic's answers, and each answer has norm at most C.
    So the generator's view on a table with the row and its view on the same table with that
    critic's answers replaced by zero differ as the two sides of a Poisson-subsampled Gaussian step
    (rate q, sensitivity C, noise σC) would, step after step: Opacus' accountant bounds that at (ε₁,
    δ₁) over the T steps. The same holds for the neighbouring table (without the row), so
    neighbouring tables are two such steps apart, and group privacy gives (2ε₁, δ₁(1 + e^{ε₁})). σ
    is therefore calibrated to ε₁ = ε/2 and δ₁ = δ / (1 + e^{ε/2}). Each generator step composes
    exactly one mechanism (the paper's information and classification losses, which would add their
    own, are left out), so the accountant's steps are the generator steps. The paper and GS-WGAN
    instead use a sensitivity of 2C with the subsampled-RDP bound for sampling a fixed partition;
    the group-privacy route reaches a bound of the same kind with the accountant every other model
    uses.
    """

    # its private step samples critics, not rows, and its unreleased critics live in one process: it
    # trains in one process (a run under torchrun with several processes is refused before anything
    # is spent)
    trains_distributed = False

    label = "Generator with several critics (GAN)"
    description = ("A generator with several critics, each on its own part of the table (conditional GAN, DTGAN_G); "
                   "what they tell the generator is clipped and noised. Without the paper's information loss and "
                   "auxiliary classifier.")
    when_to_pick = "For comparison with DTGAN_D; it usually needs a larger ε to reach the same fidelity."
    presets = _presets(dict(n_critics=4))

    def _steps(self, n_rows: int) -> int:
        """Generator steps: `epochs` passes over the rows by the critics that are consulted."""
        cfg, tc = self.config, self.train_config
        rows_per_step = cfg.critics_per_step * cfg.n_critic * min(tc.batch_size, max(1, n_rows // cfg.n_critics))
        return max(1, int(round(tc.epochs * n_rows / rows_per_step)))

    dp_mechanism = ("DP-SGD on the generator (sanitised critic gradients, Poisson-sampled critics on disjoint "
                    "partitions; group privacy of 2)")

    def sampling_shape(self, n_rows: int) -> SamplingShape:
        """Each step samples critics, not rows: Poisson with q = critics_per_step / n_critics; a row
        moves its own critic's answers on both neighbouring tables, so the group size is 2 (see the
        class docstring)."""
        cfg, tc = self.config, self.train_config
        if cfg.n_critics < 2:
            raise ValueError("dtgan-g needs at least two critics")
        if not 0 < cfg.critics_per_step < cfg.n_critics:
            raise ValueError("critics_per_step must lie between 0 and n_critics")
        q = cfg.critics_per_step / cfg.n_critics
        return SamplingShape(population=cfg.n_critics, expected_batch=cfg.critics_per_step,
                             epochs=self._steps(n_rows) * q, max_grad_norm=tc.max_grad_norm, group_size=2)

    def ledger_details(self) -> dict:
        cfg, clip = self.config, self.train_config.max_grad_norm
        return {"critics": cfg.n_critics, "max_grad_norm_per_row": clip,
                "sensitivity": clip * math.sqrt(cfg.generator_batch)}

    def train_private(self, data: torch.Tensor, p: NoisePlan, on_event, should_stop, steps: StepCount) -> TrainResult:
        cfg, tc = self.config, self.train_config
        seed_everything(tc.seed)
        noise_gen = secret_generator(self.device)
        data = data.to(self.device)
        K = cfg.n_critics
        # each row's partition from its own coin, independent of the row's content; drawn in secret
        # too
        assignment = torch.randint(0, K, (len(data),), generator=secret_generator())
        # each partition as its rows' indices: a batch is read when a critic trains (rows on disk)
        partitions = [(assignment == k).nonzero().squeeze(1) for k in range(K)]
        critics = [self.new_critic() for _ in range(K)]
        c_opts = [torch.optim.Adam(c.parameters(), lr=cfg.partner_lr, betas=(0.5, 0.9)) for c in critics]
        g_opt = torch.optim.Adam(self.net.parameters(), lr=tc.lr, betas=(0.5, 0.9))
        schedule = cosine_decay(g_opt, p.steps) if tc.lr_decay else None
        self.net.train()
        B = cfg.generator_batch
        clip, C = p.max_grad_norm, p.max_grad_norm * math.sqrt(B)
        std = p.noise_multiplier * C

        def train_critic(k: int) -> float:
            """Non-private WGAN-GP iterations of critic k on its own partition (never released)."""
            rows, critic, loss = partitions[k], critics[k], None
            if len(rows) == 0:
                return float("nan")
            for _ in range(cfg.n_critic):
                idx = torch.randint(0, len(rows), (min(tc.batch_size, len(rows)),), device=self.device)
                real = data[rows[idx.cpu()].to(self.device)]
                with torch.no_grad():
                    cond = self.conditions_from_rows(real)
                    fake, _ = self.fake_rows(cond)
                alpha = torch.rand(len(real), device=self.device)
                loss = critic_pair_loss(critic, real, fake, cond, alpha, cfg.gp_weight, True) / len(real)
                c_opts[k].zero_grad(set_to_none=True)
                loss.backward()
                c_opts[k].step()
            return float(loss.detach())

        def sanitised(fake: torch.Tensor, cond: torch.Tensor, chosen: list[int]) -> torch.Tensor:
            """A surrogate loss whose gradient w.r.t. `fake` is (Σ_k clipped V_k + noise) / B."""
            x = fake.detach().requires_grad_(True)
            total = torch.zeros_like(x)
            for k in chosen:
                (v,) = torch.autograd.grad(-critics[k](x, cond).sum(), x)
                norms = v.norm(dim=1, keepdim=True)
                total += v * (clip / (norms + 1e-6)).clamp(max=1.0)
            noisy = total + gaussian_noise(std, total, noise_gen)
            return (fake * noisy.detach()).sum() / B

        def step_fn(chosen) -> dict:
            chosen = [int(k) for k in chosen]
            w = [train_critic(k) for k in chosen]
            for c in critics:
                for q in c.parameters():
                    q.requires_grad_(False)
            g_loss = self.generator_step(lambda f, c: sanitised(f, c, chosen), g_opt)
            for c in critics:
                for q in c.parameters():
                    q.requires_grad_(True)
            if schedule is not None:
                schedule.step()
            w = [x for x in w if not math.isnan(x)]
            return {"loss": float(np.mean(w)) if w else None, "generator_loss": g_loss, "critics": len(chosen)}

        try:
            result = run_steps(step_fn, K, plan=p, on_event=on_event, should_stop=should_stop, steps=steps)
        finally:
            self.net.eval()
            del critics  # never released, never saved
        result.device = device_label(self.device)
        return result
