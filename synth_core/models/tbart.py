"""DP-TBART (Castellon et al. 2023): a decoder-only transformer over one token per column.

Each column has a disjoint slice of the vocabulary (see encoding.TokenEncoder); at each position the
logits are masked to the slice of the column predicted there, in the loss and in sampling, so the
model can only emit valid tokens. Columns come in a fixed order by default; with `random_order` each
training row is presented in a fresh random column order (SynLM, Sablayrolles et al. 2023) and the
model is told which column comes next, so that any subset of columns can be conditioned on exactly.

The module is a small nanoGPT-style transformer built from nn.Linear, nn.Embedding and nn.LayerNorm
only, the layers Opacus computes per-sample gradients for with its fast hooks.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from ..encoding import TokenEncoder
from ..training.layers import GhostLinear, TokenEmbedding
from .base import register
from .options import check_choices
from .token import TokenModel


@dataclass
class TBARTConfig:
    n_layer: int = 2
    n_head: int = 4
    n_embd: int = 64
    mlp_ratio: int = 4
    dropout: float = 0.0
    n_bins: int = 100
    random_order: bool = False
    numeric_decoding: str = "uniform"   # or "midpoint" (the paper's choice)
    # AugMult (SynLM; De et al. 2022): each row is seen in `augmult` random column orders within one
    # sample, so its per-sample gradient is the average over the copies before clipping. Needs
    # random_order.
    augmult: int = 1
    # TAN batch rule (Sander et al. 2023): grow the batch until the calibrated noise multiplier is
    # at least this (0: off). Below ~2 more noise per step buys little privacy; a larger batch
    # averages it away.
    min_noise_multiplier: float = 0.0

    def check(self) -> None:
        """What base.check_model_options leaves: choices, and sizes that must agree."""
        if self.n_embd % self.n_head:
            raise ValueError(f"n_embd ({self.n_embd}) must be a multiple of n_head ({self.n_head})")
        if not self.dropout < 1:
            raise ValueError(f"dropout must be below 1, not {self.dropout!r}")
        if self.n_bins < 2:
            raise ValueError(f"n_bins must be at least 2 bins, not {self.n_bins!r}")
        check_choices(self, numeric_decoding=("uniform", "midpoint"))


PRESETS: dict[str, dict] = {
    # a first look in about a minute on 2 CPU cores for a table the size of Adult
    "quick": dict(model=dict(n_layer=2, n_head=4, n_embd=64),
                  train=dict(epochs=3, batch_size=2048, lr=1e-2, max_grad_norm=1.0)),
    # trains Adult (39k rows) at ε=1 in a few minutes on 2 CPU cores
    "cpu": dict(model=dict(n_layer=2, n_head=4, n_embd=64),
                train=dict(epochs=10, batch_size=2048, lr=1e-2, max_grad_norm=1.0)),
    # the paper's size, for a GPU
    "paper": dict(model=dict(n_layer=3, n_head=12, n_embd=768),
                  train=dict(epochs=20, batch_size=4096, lr=5e-4, max_grad_norm=1.0)),
    # seconds, for tests and demos on tiny tables
    "tiny": dict(model=dict(n_layer=1, n_head=2, n_embd=16, n_bins=10),
                 train=dict(epochs=2, batch_size=64, lr=1e-2, max_grad_norm=1.0)),
}


class CausalSelfAttention(nn.Module):
    def __init__(self, cfg: TBARTConfig):
        super().__init__()
        assert cfg.n_embd % cfg.n_head == 0, "n_embd must be a multiple of n_head"
        self.n_head = cfg.n_head
        self.qkv = GhostLinear(cfg.n_embd, 3 * cfg.n_embd)
        self.proj = GhostLinear(cfg.n_embd, cfg.n_embd)
        self.dropout = cfg.dropout

    def forward(self, x: torch.Tensor, cache: dict | None = None, mask: torch.Tensor | None = None) -> torch.Tensor:
        """cache: keys and values of earlier positions, for sampling one position at a time (with
        "capacity", the positions a sequence will have, they are kept in buffers of that size,
        written in place); mask: (T, T) boolean attention mask used instead of the causal one
        (AugMult's block-diagonal causal mask)."""
        B, T, D = x.shape
        q, k, v = self.qkv(x).split(D, dim=2)
        q, k, v = (t.view(B, T, self.n_head, D // self.n_head).transpose(1, 2) for t in (q, k, v))
        causal = True
        if cache is not None:
            start = cache.get("n", 0)
            # written in place: no copy of the earlier positions
            if start + T <= cache.get("capacity", 0):
                if "k" not in cache:
                    shape = (B, self.n_head, cache["capacity"], D // self.n_head)
                    cache["k"], cache["v"] = k.new_empty(shape), v.new_empty(shape)
                cache["k"][:, :, start:start + T], cache["v"][:, :, start:start + T] = k, v
                k, v = cache["k"][:, :, :start + T], cache["v"][:, :, :start + T]
            else:
                if "k" in cache:
                    k, v = torch.cat([cache["k"], k], dim=2), torch.cat([cache["v"], v], dim=2)
                cache["k"], cache["v"] = k, v
            causal = T > 1 or start == 0
            cache["n"] = start + T
        if mask is not None:
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask,
                                               dropout_p=self.dropout if self.training else 0.0)
        else:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=causal,
                                               dropout_p=self.dropout if self.training else 0.0)
        return self.proj(y.transpose(1, 2).reshape(B, T, D))


class Block(nn.Module):
    def __init__(self, cfg: TBARTConfig):
        super().__init__()
        self.ln1 = nn.LayerNorm(cfg.n_embd)
        self.attn = CausalSelfAttention(cfg)
        self.ln2 = nn.LayerNorm(cfg.n_embd)
        self.fc = GhostLinear(cfg.n_embd, cfg.mlp_ratio * cfg.n_embd)
        self.out = GhostLinear(cfg.mlp_ratio * cfg.n_embd, cfg.n_embd)

    def forward(self, x: torch.Tensor, cache: dict | None = None, mask: torch.Tensor | None = None) -> torch.Tensor:
        x = x + self.attn(self.ln1(x), cache, mask)
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


class TabularTransformer(nn.Module):
    """Input at position t: the previous token, its position, and which column is to be predicted (a
    person's sequence, models.persons: `n_positions` positions of `n_columns` kinds).

    Each column has its own output head over its own vocabulary slice: the same distribution as one
    shared head masked to the slice, at a fifteenth of the cost on a 15-column table.
    """

    def __init__(self, cfg: TBARTConfig, vocab_size: int, n_columns: int, column_sizes: list[int],
                 n_positions: int | None = None):
        super().__init__()
        self.cfg = cfg
        self.tok_emb = TokenEmbedding(vocab_size, cfg.n_embd)
        self.pos_emb = TokenEmbedding(n_positions or n_columns, cfg.n_embd)
        self.col_emb = TokenEmbedding(n_columns, cfg.n_embd)
        self.blocks = nn.ModuleList([Block(cfg) for _ in range(cfg.n_layer)])
        self.ln_f = nn.LayerNorm(cfg.n_embd)
        self.heads = nn.ModuleList([nn.Linear(cfg.n_embd, size) for size in column_sizes])
        self.apply(self._init)
        for name, p in self.named_parameters():
            if name.endswith("proj.weight") or name.endswith("out.weight"):
                nn.init.normal_(p, std=0.02 / math.sqrt(2 * cfg.n_layer))

    @staticmethod
    def _init(m: nn.Module) -> None:
        if isinstance(m, (nn.Linear, nn.Embedding)):  # GhostLinear and TokenEmbedding included
            nn.init.normal_(m.weight, std=0.02)
        if isinstance(m, nn.Linear) and m.bias is not None:
            nn.init.zeros_(m.bias)

    def hidden(self, tokens_in: torch.Tensor, target_cols: torch.Tensor, caches: list[dict] | None = None,
               start: int = 0, copies: int = 1) -> torch.Tensor:
        """Hidden states of positions start..start+T-1; with `caches`, earlier positions come from
        them. copies > 1: the T positions are `copies` independent rows of T / copies positions each
        (AugMult), every one attending only to earlier positions of its own copy."""
        B, T = tokens_in.shape
        # positions expanded to the batch: Opacus needs every layer's input batch-first
        pos = torch.arange(start, start + T, device=tokens_in.device)
        mask = None
        if copies > 1:
            C = T // copies
            pos = pos % C
            block = torch.arange(T, device=tokens_in.device) // C
            mask = (block.unsqueeze(1) == block.unsqueeze(0)) & torch.ones(T, T, dtype=torch.bool,
                                                                           device=tokens_in.device).tril()
        pos = pos.expand(B, T).contiguous()
        x = self.tok_emb(tokens_in) + self.pos_emb(pos) + self.col_emb(target_cols.contiguous())
        for i, block_ in enumerate(self.blocks):
            x = block_(x, None if caches is None else caches[i], mask)
        return self.ln_f(x)

    def forward(self, tokens_in: torch.Tensor, order: torch.Tensor) -> list[torch.Tensor]:
        """Logits for every column, in schema order: list of (B, vocab of column c); with AugMult
        (`order` of shape (B, k, C), tokens_in (B, k·C)) list of (B, k, vocab of column c). The k
        copies of a row stay inside one sample, so its per-sample gradient sums over them before
        clipping."""
        if order.dim() == 3:
            B, k, C = order.shape
            h = self.hidden(tokens_in, order.reshape(B, k * C), copies=k)
            D = h.shape[-1]
            h = h.view(B, k, C, D)
            position_of = torch.argsort(order, dim=2)
            h_by_col = torch.gather(h, 2, position_of.unsqueeze(-1).expand(B, k, C, D))
            return [head(h_by_col[:, :, c]) for c, head in enumerate(self.heads)]
        h = self.hidden(tokens_in, order)
        B, C, D = h.shape
        position_of = torch.argsort(order, dim=1)  # where each column sits in each row's order
        h_by_col = torch.gather(h, 1, position_of.unsqueeze(-1).expand(B, C, D))
        return [head(h_by_col[:, c]) for c, head in enumerate(self.heads)]


@register("dp-tbart")
class DPTBART(TokenModel):
    """Autoregressive transformer over discretised columns, trained with DP-Adam."""

    label = "Column-by-column writer"
    description = ("Transformer that writes a row one column at a time. Strong on categorical structure "
                   "and column dependencies; numbers are cut into bins between the public bounds.")
    when_to_pick = ("Tables with many rows for their ε (census, survey, registry extracts) that hold a number "
                    "of many values (an amount, a price, a measurement), and such medium tables whose target is a "
                    "number; what auto picks for them.")
    config_class = TBARTConfig
    presets = PRESETS
    size_presets = {"quick": "quick", "standard": "cpu", "best": "paper"}

    # --- building ---------------------------------------------------------------------------------
    def build(self) -> None:
        self.build_encoder()
        self.net = TabularTransformer(self.config, self.encoder.vocab_size, self.encoder.n_columns,
                                      [c.size for c in self.encoder.codecs])

    def _orders(self, batch: int, device, generator=None) -> torch.Tensor:
        C = self.encoder.n_columns
        if self.config.random_order:
            return torch.argsort(torch.rand(batch, C, device=device, generator=generator), dim=1)
        return torch.arange(C, device=device).expand(batch, C)

    def loss_fn(self, module: nn.Module, rows: torch.Tensor) -> torch.Tensor:
        """Per-row mean cross-entropy of the tokens, each over its own column's vocabulary; with
        AugMult, averaged over the row's k copies in k random column orders."""
        k = self.config.augmult
        if k > 1:
            if not self.config.random_order:
                raise ValueError("augmult needs random_order: copies in the same order are the same row")
            B, C = rows.shape
            order = torch.argsort(torch.rand(B, k, C, device=rows.device), dim=2)
            in_order = torch.gather(rows.unsqueeze(1).expand(B, k, C), 2, order)
            bos = torch.full((B, k, 1), TokenEncoder.BOS, dtype=rows.dtype, device=rows.device)
            tokens_in = torch.cat([bos, in_order[:, :, :-1]], dim=2).reshape(B, k * C)
            logits = module(tokens_in, order)
            local = (rows - self.offsets.to(rows.device)).unsqueeze(1).expand(B, k, C)
            nll = torch.stack([F.cross_entropy(lg.reshape(B * k, -1), local[:, :, c].reshape(-1),
                                               reduction="none").view(B, k) for c, lg in enumerate(logits)], dim=2)
            return nll.mean(dim=(1, 2))
        order = self._orders(rows.shape[0], rows.device)
        in_order = torch.gather(rows, 1, order)
        bos = torch.full((rows.shape[0], 1), TokenEncoder.BOS, dtype=rows.dtype, device=rows.device)
        tokens_in = torch.cat([bos, in_order[:, :-1]], dim=1)
        logits = module(tokens_in, order)
        local = rows - self.offsets.to(rows.device)
        nll = torch.stack([F.cross_entropy(lg, local[:, c], reduction="none") for c, lg in enumerate(logits)], dim=1)
        return nll.mean(dim=1)

    # --- sampling ---------------------------------------------------------------------------------
    @torch.no_grad()
    def generate_tokens(self, n: int, fixed: dict[int, int], exact_columns: list[int],
                        generator: torch.Generator, temperature: float = 1.0) -> np.ndarray:
        """n rows of global tokens. Columns in `exact_columns` are placed first in the order and
        fixed to `fixed`; they must form a prefix the model can condition on (any set with
        random_order, the leading columns of the fixed order otherwise)."""
        net, device = self.net, self.device
        net.eval()
        C = self.encoder.n_columns
        offsets = self.offsets.to(device)
        if self.config.random_order:
            rest = [c for c in range(C) if c not in exact_columns]
            perm = torch.argsort(torch.rand(n, len(rest), generator=generator, device=device), dim=1)
            order = torch.cat([torch.tensor(exact_columns, dtype=torch.long, device=device).expand(n, -1),
                               torch.tensor(rest, dtype=torch.long, device=device)[perm]], dim=1)
        else:
            order = torch.arange(C, device=device).expand(n, C)
        seq = torch.full((n, C + 1), TokenEncoder.BOS, dtype=torch.long, device=device)
        caches = [dict() for _ in net.blocks]
        for t in range(C):
            col = order[:, t]
            # feed position t (the previous token) once; keys and values of earlier positions are
            # cached
            h = net.hidden(seq[:, t:t + 1], order[:, t:t + 1], caches, start=t)[:, -1, :]
            if t < len(exact_columns):
                seq[:, t + 1] = fixed[exact_columns[t]]
                continue
            # one column for all rows unless the order is random
            for c in torch.unique(col).tolist():
                rows = (col == c).nonzero().squeeze(1)
                logits = net.heads[c](h[rows]) / max(temperature, 1e-6)
                local = torch.multinomial(torch.softmax(logits.float(), dim=-1), 1, generator=generator).squeeze(1)
                seq[rows, t + 1] = local + offsets[c]
        # back to schema order
        out = torch.empty((n, C), dtype=torch.long, device=device)
        out.scatter_(1, order, seq[:, 1:])
        return out.cpu().numpy()

    def exact_prefix(self, fixed_columns: list[int]) -> list[int]:
        """Which fixed columns the model conditions on exactly; the rest go to rejection
        sampling."""
        if self.config.random_order:
            return sorted(fixed_columns)
        prefix = []
        for c in range(self.encoder.n_columns):
            if c in fixed_columns:
                prefix.append(c)
            else:
                break
        return prefix
