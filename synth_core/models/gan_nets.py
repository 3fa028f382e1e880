"""The networks and the critic's loss the GANs of `models.gan` share: a residual-MLP generator
ending each one-hot block with a (Gumbel-)softmax and each scaled number with tanh, an MLP critic,
DTGAN's spherical interpolation and the gradient penalty, differentiable for the DP step's double
backward."""
from __future__ import annotations

from typing import TYPE_CHECKING

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.func import grad as func_grad

from .diffusion import ResidualMLP

if TYPE_CHECKING:
    from .gan import GANConfig


class Generator(nn.Module):
    """noise ⊕ condition -> a row: tanh for numbers, one (Gumbel-)softmax per categorical block."""

    def __init__(self, cfg: GANConfig, cond_dim: int, dim: int, spans: list[tuple[int, int]]):
        super().__init__()
        self.noise_dim, self.spans = cfg.noise_dim, spans
        self.body = ResidualMLP(cfg.noise_dim + cond_dim, dim, cfg.width, cfg.n_blocks, cfg.groups)
        numeric = torch.ones(dim, dtype=torch.bool)
        for a, b in spans:
            numeric[a:b] = False
        self.register_buffer("numeric", numeric, persistent=False)

    def forward(self, z: torch.Tensor, cond: torch.Tensor, tau: float | None = None,
                generator: torch.Generator | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """(row, raw logits). tau: Gumbel-softmax temperature (training); None: a hard one-hot draw
        from each block's softmax (sampling)."""
        raw = self.body(torch.cat([z, cond], dim=1))
        out = torch.where(self.numeric, torch.tanh(raw), raw)
        parts, pos = [], 0
        for a, b in self.spans:
            parts.append(out[:, pos:a])
            logits = raw[:, a:b]
            u = torch.rand(logits.shape, device=logits.device, generator=generator).clamp(1e-10, 1 - 1e-10)
            gumbel = -torch.log(-torch.log(u))
            if tau is None:
                parts.append(F.one_hot((logits + gumbel).argmax(dim=1), b - a).to(out.dtype))
            else:
                parts.append(torch.softmax((logits + gumbel) / tau, dim=1))
            pos = b
        parts.append(out[:, pos:])
        return torch.cat(parts, dim=1), raw


class Critic(nn.Module):
    def __init__(self, cfg: GANConfig, dim: int, cond_dim: int):
        super().__init__()
        layers, d = [], dim + cond_dim
        for _ in range(cfg.critic_layers):
            layers += [nn.Linear(d, cfg.critic_width), nn.LeakyReLU(0.2)]
            d = cfg.critic_width
        layers.append(nn.Linear(d, 1))
        self.net = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor, cond: torch.Tensor) -> torch.Tensor:
        return self.net(torch.cat([x, cond], dim=1)).squeeze(1)


def slerp(x: torch.Tensor, y: torch.Tensor, alpha: torch.Tensor) -> torch.Tensor:
    """Spherical interpolation between rows x and y (DTGAN's gradient-penalty points): along the
    great circle for the direction, linearly for the length; straight-line when the rows are
    (nearly) parallel."""
    nx, ny = x.norm(dim=1, keepdim=True).clamp(min=1e-8), y.norm(dim=1, keepdim=True).clamp(min=1e-8)
    cos = ((x / nx) * (y / ny)).sum(dim=1, keepdim=True).clamp(-1 + 1e-6, 1 - 1e-6)
    omega = torch.acos(cos)
    so = torch.sin(omega)
    a = alpha.view(-1, 1)
    straight = so < 1e-4
    so = torch.where(straight, torch.ones_like(so), so)
    wx = torch.where(straight, 1 - a, torch.sin((1 - a) * omega) / so)
    wy = torch.where(straight, a, torch.sin(a * omega) / so)
    return wx * x + wy * y


def gradient_penalty(critic_fn, point: torch.Tensor, cond: torch.Tensor, weight: float) -> torch.Tensor:
    """weight · (‖∇ₓ critic(x)‖ − 1)² per row, differentiable (for the DP step's double
    backward)."""
    g = func_grad(lambda p: critic_fn(p, cond).sum())(point)
    return weight * (torch.sqrt((g ** 2).sum(dim=1) + 1e-12) - 1) ** 2


def critic_pair_loss(critic_fn, real, fake, cond, alpha, weight: float, spherical: bool) -> torch.Tensor:
    """A real row's whole critic loss: the row, its paired fake, and the penalty at a point between
    them."""
    point = slerp(real, fake, alpha) if spherical else real + alpha.view(-1, 1) * (fake - real)
    return (critic_fn(fake, cond) - critic_fn(real, cond) + gradient_penalty(critic_fn, point, cond, weight)).sum()
