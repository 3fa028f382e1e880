"""Layers with fast per-sample gradient norms for Opacus' ghost clipping.

GhostLinear: Opacus' ghost norm of a Linear layer on sequences computes the (B, T, T) gram g·gᵀ
twice, once for the weight and once for the bias; this computes it once (a tenth of a DP-TBART
step).

Opacus' generic ghost-clipping norm for nn.Embedding de-duplicates (sample, token) pairs with a
Python-level `unique` that dominated DP training time here (a third of a DP-TBART step on 2 CPU
cores). For an embedding looked up at T positions of each sample the squared norm of sample n's
gradient is

    ||Σ_t onehot(id_nt) ⊗ g_nt||² = Σ_{t,t'} [id_nt = id_nt'] · <g_nt, g_nt'>,

a (B, T, T) computation. `TokenEmbedding` is an nn.Embedding whose ghost-clipping norm is computed
that way; its per-sample gradients (for Opacus' "hooks" mode) are Opacus' own.
tests/test_privacy_engine.py checks the norms against per-sample gradients computed one sample at a
time.

Opacus learns of these layers when something trains (`register_samplers`, which the engine calls
before it wraps a network): importing Opacus takes 2 s, which a process that only loads a model and
draws rows from it never needs.
"""
from __future__ import annotations

import torch
import torch.nn as nn


class TokenEmbedding(nn.Embedding):
    def __init__(self, num_embeddings: int, embedding_dim: int):
        # no padding_idx, max_norm: the norm below assumes none
        super().__init__(num_embeddings, embedding_dim)


def token_embedding_norm_sample(layer: TokenEmbedding, activations: list[torch.Tensor],
                                backprops: torch.Tensor) -> dict[nn.Parameter, torch.Tensor]:
    ids, g = activations[0], backprops
    if ids.dim() == 1:  # one lookup per sample
        return {layer.weight: g.norm(dim=-1)}
    ids = ids.reshape(ids.shape[0], -1)
    g = g.reshape(g.shape[0], -1, g.shape[-1])
    same = (ids.unsqueeze(2) == ids.unsqueeze(1)).to(g.dtype)
    gram = torch.bmm(g, g.transpose(1, 2))
    return {layer.weight: (gram * same).sum(dim=(1, 2)).clamp(min=0).sqrt()}


class GhostLinear(nn.Linear):
    pass


def ghost_linear_norm_sample(layer: GhostLinear, activations: list[torch.Tensor],
                             backprops: torch.Tensor) -> dict[nn.Parameter, torch.Tensor]:
    g = backprops
    if g.dim() != 3:
        from opacus.grad_sample.linear import compute_linear_norm_sample
        return compute_linear_norm_sample(layer, activations, backprops)
    a = activations[0].to(g.dtype)
    ggT = torch.bmm(g, g.transpose(1, 2))
    out = {}
    if layer.weight.requires_grad:
        aaT = torch.bmm(a, a.transpose(1, 2))
        out[layer.weight] = (ggT * aaT).sum(dim=(1, 2)).clamp(min=0).sqrt()
    if layer.bias is not None and layer.bias.requires_grad:
        out[layer.bias] = ggT.sum(dim=(1, 2)).clamp(min=0).sqrt()
    return out


def register_samplers() -> None:
    """Tell Opacus how to take these layers' per-sample gradients (Opacus' own) and norms (the ones
    above); idempotent. Before wrapping a network that holds them for DP-SGD."""
    from opacus.grad_sample.embedding import compute_embedding_grad_sample
    from opacus.grad_sample.linear import compute_linear_grad_sample
    from opacus.grad_sample.utils import register_grad_sampler, register_norm_sampler
    register_grad_sampler(TokenEmbedding)(compute_embedding_grad_sample)
    register_norm_sampler(TokenEmbedding)(token_embedding_norm_sample)
    register_grad_sampler(GhostLinear)(compute_linear_grad_sample)
    register_norm_sampler(GhostLinear)(ghost_linear_norm_sample)
