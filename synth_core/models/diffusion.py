"""TableDiffusion (Truda 2023, "Generating tabular datasets under differential privacy", Algorithms
1 and 2).

Rows are vectors (encoding.vectors, from the PUBLIC schema only: categoricals one-hot over the
public list; numbers either as bins between the public bounds, one-hot like a category, or as one
value scaled by the bounds); in the diffusion space a one-hot slot is 2·slot − 1 and a scaled number
is multiplied by `numeric_scale`.

Forward process, few steps (T = 3-5): at step t = 1..T the row is

    x_t = √(1 − β_t) · x_0 + √β_t · ε,   ε ~ N(0, I),   β_t = (1 − cos(πt/T)) / 2,

β_t is the noise variance of step t (capped at `max_beta` = 0.999), so x_T is (almost exactly) N(0,
I), where sampling starts. (The paper's code adds the noise without shrinking x_0, x_t = x_0 +
√β_t·ε, and still starts sampling from N(0, I): on one-hot blocks in ±1 that start is far from any
x_T seen in training, and the chain never recovered: Adult 1-way TVD 0.45 without privacy.)

Training (Algorithm 1): for each Poisson batch, every row is noised at all T steps, the T per-step
losses are averaged into ONE per-row loss, and that loss makes ONE DP-SGD step (per-row clipping,
Gaussian noise): T costs computation, not ε. The network sees all T noised copies of a row in one
forward pass (a length-T "sequence" through position-wise layers), so Opacus' ghost clipping bounds
the whole row's gradient.

    TableDiffusion          the network predicts ε; loss = MSE(ε̂, ε)
    TableDiffusionDenoiser  the network predicts x_0; loss = MSE on scaled numbers + the KL divergence from
                            each one-hot block to the predicted softmax, divided by log(block size)

Sampling (Algorithm 2): x_T ~ N(0, I); for t = T..1 the network's prediction gives x̂_0 (for the
noise predictor x̂_0 = (x_t − √β_t·ε̂)/√(1 − β_t), the SAME scaling the noise was drawn with in
training: the reference code scales the predicted noise a second time), values clipped to their
range and each one-hot block made a probability vector; every block is then committed to one
category drawn from it, and x_{t−1} is drawn from the forward process' posterior q(x_{t−1} | x_t,
x̂_0). The last step's x̂_0 is decoded: each block by a draw from its probabilities (E[one-hot |
x_1]) or by argmax (`block_decoding`), a value drawn inside a numeric bin, scaled numbers clipped to
the public bounds, integers rounded.

Network: residual MLP blocks as in CTGAN (Linear → GroupNorm → ReLU, the block's input concatenated
to its output), with the step t given as a one-hot. GroupNorm without learned affine parameters (the
next Linear absorbs scale and shift), and no BatchNorm, which would mix rows and which Opacus
forbids.

Not taken from the reference code: its quantile transformer fitted on the private table (a leak);
numbers here are scaled by the public bounds only.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from ..training.layers import GhostLinear
from .base import register
from .options import check_bins, check_choices, check_groups
from .vector import VectorModel


@dataclass
class DiffusionConfig:
    width: int = 256
    n_blocks: int = 3
    groups: int = 8
    diffusion_steps: int = 4
    max_beta: float = 0.999
    numeric_scale: float = 1.0
    numeric_encoding: str = "bins"   # or "scalar" (see encoding.vectors)
    n_bins: int = 32                 # bins of a wide or continuous numeric column
    # an integer column with at most this many values: one bin per value
    integer_bins: int = 100
    # a one-hot block of the final estimate x̂_0: "sample" draws from it (x̂_0 estimates E[one-hot |
    # x_1], the probabilities), "argmax" takes its largest slot (the paper's choice)
    block_decoding: str = "sample"

    def check(self) -> None:
        check_groups(self.width, self.groups)
        if not 0 < self.max_beta < 1:
            raise ValueError(f"max_beta must lie strictly between 0 and 1, not {self.max_beta!r}")
        check_choices(self, numeric_encoding=("bins", "scalar"), block_decoding=("sample", "argmax"))
        check_bins(self)


def _presets(clip: float = 1.0, **model: object) -> dict[str, dict]:
    """`clip` is the per-row clipping norm C of DP-SGD (see DENOISER_PRESETS for why it is not
    1)."""
    return {
        # a first look in well under a minute on 2 CPU cores for a table the size of Adult
        "quick": dict(model=dict(width=64, n_blocks=2, diffusion_steps=3, **model),
                      train=dict(epochs=3, batch_size=4096, lr=1e-2, max_grad_norm=clip)),
        # Adult (39k rows) at ε=1: fit + sample in 1-2 minutes on the 2-core machine
        # (benchmarks/history/2026-11-27.md)
        "cpu": dict(model=dict(width=128, n_blocks=2, diffusion_steps=3, **model),
                    train=dict(epochs=6, batch_size=4096, lr=1e-2, max_grad_norm=clip)),
        # wider and longer, for a GPU or patience
        "large": dict(model=dict(width=256, n_blocks=3, diffusion_steps=5, **model),
                      train=dict(epochs=10, batch_size=8192, lr=5e-3, max_grad_norm=clip)),
        # seconds, for tests and demos on tiny tables
        "tiny": dict(model=dict(width=32, n_blocks=1, groups=4, diffusion_steps=3, n_bins=10, integer_bins=10, **model),
                     train=dict(epochs=2, batch_size=64, lr=1e-2, max_grad_norm=clip)),
    }


# The noise predictor gets numbers as one scaled value and argmax decoding (the paper's setup): its
# x̂_0 is the noisy input minus the predicted noise, and over a wide one-hot block of bins the small
# errors of every slot add up to a nearly flat block (Adult at ε=1: 1-way TVD 0.41 with bins and
# sampled blocks, see benchmarks/history).
NOISE_PRESETS = _presets(numeric_encoding="scalar", block_decoding="argmax")
# The denoiser clips each row's gradient at C = 2.5, not 1. Clipping below the typical per-row norm
# biases the model towards the majority class: a row of a rare value has a larger gradient (Adult,
# trained model: rows with income >50K 1.78 on average, the others 1.35), so after clipping to norm
# 1 it counts for less, and the fitted share is 0.24·/1.78 / (0.24/1.78 + 0.76/1.35) = 0.19 instead
# of 0.24: what the model produced. With C = 2.5 most rows are not clipped at the end of training
# (90% of norms below 1.9); Adult at ε=1 1-way TVD 0.045 -> 0.032
# (benchmarks/history/2026-11-27.md).
DENOISER_PRESETS = _presets(clip=2.5)
# More, smaller steps for the denoiser on the CPU: 191 steps of ~2,048 rows instead of 57 of ~4,096
# (σ 2.93 vs 3.26 at ε=1 on Adult) took 1-way TVD 0.032 -> 0.028 and 2-way 0.098 -> 0.093, in about
# twice the time
DENOISER_PRESETS["cpu"]["train"].update(batch_size=2048, epochs=10)
SIZE_PRESETS = {"quick": "quick", "standard": "cpu", "best": "large"}


def noise_schedule(steps: int, cap: float = 0.999) -> torch.Tensor:
    """β_1..β_T (index 0 is t = 1): the noise variance of step t, β_t = (1 − cos(πt/T)) / 2,
    capped."""
    t = torch.arange(1, steps + 1, dtype=torch.float64)
    return ((1 - torch.cos(math.pi * t / steps)) / 2).clamp(max=cap).float()


def group_norm(x: torch.Tensor, groups: int, eps: float = 1e-5) -> torch.Tensor:
    """GroupNorm over the last dimension, without affine parameters: each (row, step) is normalised
    on its own, so rows never mix."""
    shape = x.shape
    g = x.reshape(*shape[:-1], groups, shape[-1] // groups)
    g = (g - g.mean(dim=-1, keepdim=True)) / torch.sqrt(g.var(dim=-1, unbiased=False, keepdim=True) + eps)
    return g.reshape(shape)


class ResidualBlock(nn.Module):
    """Linear → GroupNorm → ReLU, with the block's input concatenated to its output (CTGAN's
    Residual)."""

    def __init__(self, d_in: int, width: int, groups: int):
        super().__init__()
        if width % groups:
            raise ValueError(f"width {width} must be a multiple of groups {groups}")
        self.fc = GhostLinear(d_in, width)
        self.groups = groups

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([F.relu(group_norm(self.fc(x), self.groups)), x], dim=-1)


class ResidualMLP(nn.Module):
    def __init__(self, d_in: int, d_out: int, width: int, n_blocks: int, groups: int):
        super().__init__()
        blocks, d = [], d_in
        for _ in range(n_blocks):
            blocks.append(ResidualBlock(d, width, groups))
            d += width
        self.blocks = nn.Sequential(*blocks)
        self.out = GhostLinear(d, d_out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(self.blocks(x))

    def ghost_targets(self) -> list[nn.Parameter]:
        """Every layer's output depends on the first layer's weight: enough for ghost clipping's
        first pass (engine._ghost_clipping_backward)."""
        return [self.blocks[0].fc.weight] if len(self.blocks) else [self.out.weight]


@register("tablediffusion")
class TableDiffusion(VectorModel):
    """Few-step diffusion model predicting the noise, trained with DP-Adam (Truda 2023)."""

    label = "Denoising model (as published)"
    description = ("Learns to remove the noise added to whole rows, a few steps at a time (Truda 2023's "
                   "noise-predicting TableDiffusion). Numbers are scaled by the public bounds.")
    when_to_pick = ("Mostly numeric tables, or to compare with the paper; on tables with many categories prefer "
                    "the denoising variant.")
    config_class = DiffusionConfig
    presets = NOISE_PRESETS
    size_presets = SIZE_PRESETS
    predicts = "noise"

    @property
    def sample_blocks(self) -> bool:
        return self.config.block_decoding == "sample"

    def build_net(self) -> None:
        cfg, d = self.config, self.encoder.dim
        T = cfg.diffusion_steps
        if T < 1:
            raise ValueError("diffusion_steps must be at least 1")
        self.net = ResidualMLP(d + T, d, cfg.width, cfg.n_blocks, cfg.groups)
        self.betas = noise_schedule(T, cfg.max_beta)
        # diffusion space: numeric coordinates as encoded, one-hot slots as 2·slot − 1
        self.scale = torch.full((d,), float(cfg.numeric_scale))
        self.shift = torch.zeros(d)
        for a, b in self.encoder.categorical_spans():
            self.scale[a:b], self.shift[a:b] = 2.0, -1.0
        self.spans = self.encoder.categorical_spans()
        self.limit = self.scale.clone()  # numeric: ±numeric_scale; one-hot slots ±1
        for a, b in self.spans:
            self.limit[a:b] = 1.0
        self.numeric = torch.as_tensor(self.encoder.numeric_index())

    # --- forward process ----------------------------------------------------------------------------
    def _steps_onehot(self, batch: int, device) -> torch.Tensor:
        T = self.config.diffusion_steps
        return torch.eye(T, device=device).expand(batch, T, T)

    def noised(self, x0: torch.Tensor, eps: torch.Tensor) -> torch.Tensor:
        """x0 (B, d) and eps (B, T, d) -> x_t for every t, (B, T, d)."""
        b = self.betas.to(x0.device).view(1, -1, 1)
        return torch.sqrt(1 - b) * x0.unsqueeze(1) + torch.sqrt(b) * eps

    def x0_from_eps(self, xt: torch.Tensor, eps_hat: torch.Tensor, t: int) -> torch.Tensor:
        """Invert the forward step t (1-based) with the predicted noise: the same √β_t the noise was
        drawn with."""
        b = float(self.betas[t - 1])
        return (xt - math.sqrt(b) * eps_hat) / math.sqrt(1 - b)

    def loss_fn(self, module: nn.Module, rows: torch.Tensor) -> torch.Tensor:
        """Per-row loss averaged over the T steps: one clipped gradient per row per DP step."""
        x0 = rows * self.scale.to(rows.device) + self.shift.to(rows.device)
        B = x0.shape[0]
        eps = torch.randn(B, self.config.diffusion_steps, x0.shape[1], device=rows.device)
        xt = self.noised(x0, eps)
        out = module(torch.cat([xt, self._steps_onehot(B, rows.device)], dim=-1))
        return self.step_losses(out, x0, eps).mean(dim=1)

    def step_losses(self, out: torch.Tensor, x0: torch.Tensor, eps: torch.Tensor) -> torch.Tensor:
        """(B, T) losses: MSE between predicted and true noise."""
        return ((out - eps) ** 2).mean(dim=-1)

    def predict_x0(self, out: torch.Tensor, xt: torch.Tensor, t: int) -> torch.Tensor:
        """x̂_0 from the predicted noise, made a valid clean row: values clipped to their range,
        each one-hot block turned into a probability vector. At large t, x̂_0 = (x_t − √β_t·ε̂)/√(1
        − β_t) multiplies the network's error by 1/√(1 − β_t); without the projection a block comes
        out with several slots 'on' and misleads the next step."""
        lim = self.limit.to(out.device)
        x0 = torch.maximum(torch.minimum(self.x0_from_eps(xt, out, t), lim), -lim)
        return self._project_blocks(x0)

    def _draw_blocks(self, x0: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        out = x0.clone()
        for a, b in self.spans:
            p = ((x0[:, a:b] + 1) / 2).clamp(min=0) + 1e-8
            pick = torch.multinomial(p / p.sum(dim=1, keepdim=True), 1, generator=generator).squeeze(1)
            out[:, a:b] = -1.0
            out[torch.arange(len(x0), device=x0.device), a + pick] = 1.0
        return out

    def _project_blocks(self, x0: torch.Tensor) -> torch.Tensor:
        parts, pos = [], 0
        for a, b in self.spans:
            parts.append(x0[..., pos:a])
            p = (x0[..., a:b] + 1) / 2 + 1e-6
            parts.append(2 * p / p.sum(dim=-1, keepdim=True) - 1)
            pos = b
        parts.append(x0[..., pos:])
        return torch.cat(parts, dim=-1)

    # --- sampling -----------------------------------------------------------------------------------
    @torch.no_grad()
    def generate_vectors(self, n: int, native: dict, generator: torch.Generator) -> np.ndarray:
        T, device = self.config.diffusion_steps, self.device
        betas = self.betas.tolist()
        onehot = torch.eye(T, device=device)
        x = torch.randn(n, self.encoder.dim, generator=generator, device=device)
        x0 = x
        for t in range(T, 0, -1):
            out = self.net(torch.cat([x, onehot[t - 1].expand(n, T)], dim=-1))
            x0 = self.predict_x0(out, x, t)
            if t == 1:
                break
            # commit every one-hot block to one category drawn from x̂_0's probabilities before
            # stepping: the reverse step is a mixture over the clean rows x_t may come from, and
            # stepping towards the block's average would give x_{t-1} soft categories the forward
            # process never produces
            x0 = self._draw_blocks(x0, generator)
            # posterior q(x_{t-1} | x_t, x̂_0) of the forward process above (ᾱ_t = 1 − β_t)
            a_t, a_prev = 1 - betas[t - 1], 1 - betas[t - 2]
            alpha = a_t / a_prev
            coef0 = math.sqrt(a_prev) * (1 - alpha) / (1 - a_t)
            coeft = math.sqrt(alpha) * (1 - a_prev) / (1 - a_t)
            var = (1 - a_prev) / (1 - a_t) * (1 - alpha)
            x = coef0 * x0 + coeft * x + math.sqrt(var) * torch.randn(x.shape, generator=generator, device=device)
        vec = (x0 - self.shift.to(device)) / self.scale.to(device)
        return vec.cpu().numpy()


@register("tablediffusion-denoiser")
class TableDiffusionDenoiser(TableDiffusion):
    """TableDiffusion predicting the clean row instead of the noise (Truda 2023's denoising
    variant)."""

    label = "Denoising model (fast)"
    description = ("Diffusion model that learns to turn random noise back into a clean row; numbers are cut into "
                   "bins between the public bounds. Fast and stable to train. (Technically: it predicts the clean "
                   "row, scored per column by KL divergence.)")
    when_to_pick = ("Mixed numeric and categorical tables when you want a fast model; the stronger of the two "
                    "diffusion variants in our benchmarks.")
    presets = DENOISER_PRESETS
    predicts = "x0"

    def step_losses(self, out: torch.Tensor, x0: torch.Tensor, eps: torch.Tensor) -> torch.Tensor:
        losses = []
        if len(self.numeric):
            idx = self.numeric.to(out.device)
            losses.append(((out[..., idx] - x0[..., idx].unsqueeze(1)) ** 2).mean(dim=-1))
        for a, b in self.spans:
            target = (x0[:, a:b] > 0).float().unsqueeze(1)   # back from ±1 to the one-hot
            # KL(one-hot ‖ softmax) is the cross-entropy; log(size) puts every block on the same
            # scale
            kl = -(target * F.log_softmax(out[..., a:b], dim=-1)).sum(dim=-1)
            losses.append(kl / math.log(max(b - a, 2)))
        return torch.stack(losses, dim=-1).mean(dim=-1)

    def predict_x0(self, out: torch.Tensor, xt: torch.Tensor, t: int) -> torch.Tensor:
        lim = self.limit.to(out.device)
        x0 = torch.maximum(torch.minimum(out, lim), -lim)
        parts = []
        pos = 0
        for a, b in self.spans:
            parts.append(x0[..., pos:a])
            parts.append(2 * torch.softmax(out[..., a:b], dim=-1) - 1)
            pos = b
        parts.append(x0[..., pos:])
        return torch.cat(parts, dim=-1)
