"""Masked TableDiffusion: discrete diffusion with an absorbing [MASK] state over one token per
column (Austin et al. 2021, D3PM "absorbing"; Sahoo et al. 2024, MDLM), trained with DP-SGD as
TableDiffusion is.

Why a third diffusion variant. Truda's TableDiffusion noises the whole row at one shared level and
predicts every column of x̂_0 at once, each column on its own given the noisy row. With its few
steps (T = 3-5) the columns' links come only from what the middle step's noisy row still shows, and
on Adult the paper's network stops at 2-way TVD 0.10 even without privacy, worse than exact
marginals with no links at all (0.078; see benchmarks/history/2026-11-27.md). Here every column has
its own noise level, in the absorbing form: a column is either clean or masked. The network learns
the distribution of every masked column given the clean ones, so sampling can reveal the columns a
few at a time and each column is drawn knowing the ones already revealed.

Forward process: at noise level t ∈ (0, 1], each column is masked with probability t. As in MDLM, t
is drawn as m/C for a number m of masked columns uniform in 1..C, and exactly m columns are masked.
Loss per row: the cross-entropy of each masked column given the visible ones, summed and divided by
C ("flat"; every masked column counts the same). The ELBO's own weighting (`loss_weighting="elbo"`,
their mean: 1/m each) gives most weight to copies with few masked columns, the easy conditionals,
and little to the heavily masked copies from which the marginals are learned; under DP-SGD on Adult
at ε = 1 (seed 0, transformer network) that cost 1-way TVD 0.027 -> 0.033 and 2-way 0.074 -> 0.082
(benchmarks/history/2026-11-27.md). As in Algorithm 1 of TableDiffusion, each row may be noised
`copies` times in the same sample, the losses averaged before the per-row clipping: more
computation, no ε.

Sampling: all columns masked (those fixed by the conditions revealed from the start, so any subset
of columns conditions exactly); in each of `diffusion_steps` steps, a share of the still-masked
columns, in a random order per row, is revealed by a draw from the network's distribution for it.
With as many steps as columns this is exact ancestral sampling from the learned conditionals; fewer
steps draw the columns of a step independently given the earlier ones (faster, slightly less
faithful).

Encoding: TokenEncoder from the PUBLIC schema only (categories as listed, numbers in bins between
the public bounds), the same tokens as DP-TBART.

Network (`network`): by default TableDiffusion's residual MLP (Linear → GroupNorm → ReLU, input
concatenated), fed the concatenated embeddings of the row's column tokens, [MASK] included, with one
logit block per column; or a bidirectional transformer built from DP-TBART's blocks. Both are made
of nn.Linear and nn.Embedding layers, whose per-row gradient norms Opacus' ghost clipping computes.
On Adult the MLP learned as much in a fifth of the time.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from ..training.layers import TokenEmbedding
from .base import register
from .options import check_choices, check_groups
from .diffusion import ResidualMLP
from .tbart import Block, TBARTConfig
from .token import TokenModel


@dataclass
class MaskedDiffusionConfig(TBARTConfig):
    # sampling steps: each reveals about 1/steps of the masked columns; 0 = one column per step
    # (exact)
    diffusion_steps: int = 5
    # how many columns each step reveals: "cosine" (MaskGIT's schedule: the share still masked after
    # step s of S is cos(π/2 · s/S), so the first steps reveal one or two columns and the last ones
    # several) or "uniform" (the same number every step)
    reveal_schedule: str = "cosine"
    # a copy's loss: "flat" the masked columns' cross-entropies summed and divided by the number of
    # columns (every masked column counts the same), or "elbo" their mean (the bound's weighting:
    # 1/m for m masked)
    loss_weighting: str = "flat"
    # noised copies of each row in one per-row loss (averaged before clipping: computation, not ε)
    copies: int = 1
    # any subset of columns can be fixed exactly (every conditional is learned)
    random_order: bool = True
    # the network: "transformer" (bidirectional, over the column tokens) or "mlp" (TableDiffusion's
    # residual MLP over the concatenated column embeddings, each n_embd wide)
    network: str = "mlp"
    width: int = 256        # mlp: width of each residual block
    n_blocks: int = 2       # mlp: residual blocks
    groups: int = 8         # mlp: GroupNorm groups

    ZERO_OK = frozenset({"diffusion_steps"})  # 0: one column a step

    def check(self) -> None:
        super().check()
        check_choices(self, network=("mlp", "transformer"), reveal_schedule=("cosine", "uniform"),
                      loss_weighting=("flat", "elbo"))
        check_groups(self.width, self.groups)


# The residual MLP is the default network: on Adult at ε = 1 it matched the transformer's figures in
# a fifth of the time (fit 33 s vs ~170 s, 2-way TVD 0.071 vs 0.074, seed 0), which buys two noised
# copies per row and clipping at C = 2.5 (2-way 0.061; benchmarks/history/2026-11-27.md). C = 2.5 as
# for the denoiser (diffusion.py): below the typical per-row gradient norm, clipping under-weights
# the rows of rare values.
PRESETS: dict[str, dict] = {
    "quick": dict(model=dict(network="mlp", n_embd=16, width=256, n_blocks=2, copies=2),
                  train=dict(epochs=3, batch_size=2048, lr=1e-2, max_grad_norm=2.5)),
    "cpu": dict(model=dict(network="mlp", n_embd=16, width=256, n_blocks=2, copies=2),
                train=dict(epochs=10, batch_size=2048, lr=1e-2, max_grad_norm=2.5)),
    "large": dict(model=dict(network="mlp", n_embd=32, width=512, n_blocks=3, copies=4, diffusion_steps=0),
                  train=dict(epochs=20, batch_size=4096, lr=5e-3, max_grad_norm=2.5)),
    # the transformer of the first version of this model, for comparison
    "transformer": dict(model=dict(network="transformer", n_layer=2, n_head=4, n_embd=64),
                        train=dict(epochs=10, batch_size=2048, lr=1e-2, max_grad_norm=1.0)),
    "tiny": dict(model=dict(network="mlp", n_embd=8, width=32, n_blocks=1, groups=4, n_bins=10, diffusion_steps=0),
                 train=dict(epochs=2, batch_size=64, lr=1e-2, max_grad_norm=1.0)),
}


def reveal_steps(columns: int, steps: int, schedule: str = "cosine") -> list[int]:
    """The step (0-based) at which each position of a row's reveal order is drawn; every step
    reveals at least one column and the last step reveals the rest."""
    if schedule == "uniform":
        return [r * steps // columns for r in range(columns)]
    done, out = 0, []
    for s in range(steps):
        target = columns if s == steps - 1 else round(columns * (1 - math.cos(math.pi / 2 * (s + 1) / steps)))
        # at least one now and one per later step
        target = min(max(target, done + 1), columns - (steps - 1 - s))
        out += [s] * (target - done)
        done = target
    return out


class MaskedTransformer(nn.Module):
    """Bidirectional transformer: position c holds column c's token or [MASK] (id `vocab_size`); one
    output head per column over its own vocabulary slice. Input (B, k·C): k noised copies of a row,
    side by side, each attending only to itself."""

    def __init__(self, cfg: TBARTConfig, vocab_size: int, n_columns: int, column_sizes: list[int]):
        super().__init__()
        self.n_columns = n_columns
        self.mask_id = vocab_size
        self.tok_emb = TokenEmbedding(vocab_size + 1, cfg.n_embd)
        self.pos_emb = TokenEmbedding(n_columns, cfg.n_embd)
        self.blocks = nn.ModuleList([Block(cfg) for _ in range(cfg.n_layer)])
        self.ln_f = nn.LayerNorm(cfg.n_embd)
        self.heads = nn.ModuleList([nn.Linear(cfg.n_embd, size) for size in column_sizes])
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, std=0.02)
            if isinstance(m, nn.Linear) and m.bias is not None:
                nn.init.zeros_(m.bias)
        for name, p in self.named_parameters():
            if name.endswith("proj.weight") or name.endswith("out.weight"):
                nn.init.normal_(p, std=0.02 / math.sqrt(2 * cfg.n_layer))

    def forward(self, tokens: torch.Tensor) -> list[torch.Tensor]:
        """tokens (B, k·C) -> per column c, logits (B, k, size of c)."""
        B, T = tokens.shape
        C = self.n_columns
        k = T // C
        pos = (torch.arange(T, device=tokens.device) % C).expand(B, T).contiguous()
        copy = torch.arange(T, device=tokens.device) // C
        mask = copy.unsqueeze(1) == copy.unsqueeze(0)  # (T, T): within a copy, both directions
        x = self.tok_emb(tokens) + self.pos_emb(pos)
        for block in self.blocks:
            x = block(x, None, mask)
        h = self.ln_f(x).view(B, k, C, -1)
        return [head(h[:, :, c]) for c, head in enumerate(self.heads)]


class MaskedMLP(nn.Module):
    """TableDiffusion's residual MLP as the denoiser: each column's token (or [MASK], id
    `vocab_size`) is embedded, the C embeddings of a copy are concatenated (so the position says
    which column a [MASK] stands for), and the output is split into one logit block per column.
    Input (B, k·C): k noised copies of a row, each its own input vector."""

    def __init__(self, cfg: MaskedDiffusionConfig, vocab_size: int, n_columns: int, column_sizes: list[int]):
        super().__init__()
        self.n_columns = n_columns
        self.mask_id = vocab_size
        self.column_sizes = list(column_sizes)
        self.tok_emb = TokenEmbedding(vocab_size + 1, cfg.n_embd)
        self.mlp = ResidualMLP(n_columns * cfg.n_embd, sum(column_sizes), cfg.width, cfg.n_blocks, cfg.groups)

    def forward(self, tokens: torch.Tensor) -> list[torch.Tensor]:
        """tokens (B, k·C) -> per column c, logits (B, k, size of c)."""
        B, T = tokens.shape
        k = T // self.n_columns
        x = self.tok_emb(tokens).view(B, k, -1)
        return list(torch.split(self.mlp(x), self.column_sizes, dim=-1))


@register("tablediffusion-masked")
class MaskedTableDiffusion(TokenModel):
    """Absorbing-state (masked) diffusion over column tokens, trained with DP-Adam."""

    label = "Fill-in-the-blanks model"
    description = ("Diffusion model that masks columns and learns to fill them in from the others (each column "
                   "has its own noise level), then generates a row by revealing its columns a few at a time. "
                   "Numbers are cut into bins between the public bounds.")
    when_to_pick = ("The diffusion model to pick for fidelity: it learns how columns depend on each other, which "
                    "the paper's whole-row variants do not; any set of columns can be fixed exactly.")
    config_class = MaskedDiffusionConfig
    presets = PRESETS
    size_presets = {"quick": "quick", "standard": "cpu", "best": "large"}

    @classmethod
    def upgrade_state(cls, state: dict) -> dict:
        # saves from before `network` existed used the transformer (the default is the MLP now)
        if "network" not in state["config"]:
            state = {**state, "config": {**state["config"], "network": "transformer"}}
        return state

    def build(self) -> None:
        self.build_encoder()  # the token encoder (public schema only) and the offsets
        if self.config.copies < 1:
            raise ValueError("copies must be at least 1")
        if self.config.diffusion_steps < 0:
            raise ValueError("diffusion_steps must be 0 (one column per step) or more")
        if self.config.loss_weighting not in ("flat", "elbo"):
            raise ValueError(f"loss_weighting must be 'flat' or 'elbo', not {self.config.loss_weighting!r}")
        if self.config.reveal_schedule not in ("cosine", "uniform"):
            raise ValueError(f"reveal_schedule must be 'cosine' or 'uniform', not {self.config.reveal_schedule!r}")
        if self.config.network not in ("transformer", "mlp"):
            raise ValueError(f"network must be 'transformer' or 'mlp', not {self.config.network!r}")
        network = MaskedTransformer if self.config.network == "transformer" else MaskedMLP
        self.net = network(self.config, self.encoder.vocab_size, self.encoder.n_columns,
                           [c.size for c in self.encoder.codecs])

    def loss_fn(self, module: nn.Module, rows: torch.Tensor) -> torch.Tensor:
        """Per row: the mean over its `copies` noised copies of the masked columns' cross-entropy
        (see `loss_weighting`)."""
        B, C = rows.shape
        k, dev = self.config.copies, rows.device
        masked_count = torch.randint(1, C + 1, (B, k, 1), device=dev)
        rank = torch.rand(B, k, C, device=dev).argsort(-1).argsort(-1)
        # (B, k, C), m columns each
        masked = rank < masked_count
        tokens = rows.unsqueeze(1).expand(B, k, C).masked_fill(masked, self.net.mask_id)
        logits = module(tokens.reshape(B, k * C))
        local = rows - self.offsets.to(dev)
        nll = torch.stack([F.cross_entropy(lg.reshape(B * k, -1), local[:, c].repeat_interleave(k),
                                           reduction="none").view(B, k) for c, lg in enumerate(logits)], dim=2)
        if self.config.loss_weighting == "flat":
            per_copy = (nll * masked).sum(-1) / C
        else:
            per_copy = (nll * masked).sum(-1) / masked_count.squeeze(-1)
        return per_copy.mean(dim=1)

    @torch.no_grad()
    def generate_tokens(self, n: int, fixed: dict[int, int], exact_columns: list[int],
                        generator: torch.Generator, temperature: float = 1.0) -> np.ndarray:
        """n rows of global tokens; the columns in `fixed` are revealed from the start (exact
        conditions)."""
        net, device = self.net, self.device
        net.eval()
        C = self.encoder.n_columns
        offsets = self.offsets.to(device)
        tokens = torch.full((n, C), net.mask_id, dtype=torch.long, device=device)
        for c in exact_columns:
            tokens[:, c] = fixed[c]
        rest = [c for c in range(C) if c not in exact_columns]
        if not rest:
            return tokens.cpu().numpy()
        # each row reveals its masked columns in its own random order, the first few alone: a column
        # drawn with little context is drawn from (nearly) its marginal, and two such drawn in the
        # same step are drawn independently of each other
        steps = len(rest) if self.config.diffusion_steps == 0 else min(self.config.diffusion_steps, len(rest))
        perm = torch.argsort(torch.rand(n, len(rest), generator=generator, device=device), dim=1)
        # (n, len(rest))
        order = torch.tensor(rest, dtype=torch.long, device=device)[perm]
        step_of_position = reveal_steps(len(rest), steps, self.config.reveal_schedule)
        for s in range(steps):
            logits = net(tokens)
            for r in (r for r in range(len(rest)) if step_of_position[r] == s):
                for c in torch.unique(order[:, r]).tolist():
                    rows = (order[:, r] == c).nonzero().squeeze(1)
                    p = torch.softmax(logits[c][rows, 0].float() / max(temperature, 1e-6), dim=-1)
                    tokens[rows, c] = torch.multinomial(p, 1, generator=generator).squeeze(1) + offsets[c]
        return tokens.cpu().numpy()

    def exact_prefix(self, fixed_columns: list[int]) -> list[int]:
        """Every fixed column is met exactly: the network has learned each column given any
        others."""
        return sorted(fixed_columns)
