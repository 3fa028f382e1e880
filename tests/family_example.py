"""A whole model family in a few lines, the example ARCHITECTURE.md's "Adding a family" walks
through: every column drawn on its own from learned frequencies, trained by DP-SGD through the
shared engine. It is what a newcomer writes; `tests/test_families.py` registers it for one test and
walks it through the user's path."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from synth_core.models.token import TokenModel


@dataclass
# the options a run may set (checked: whole numbers ≥ 1, numbers finite and ≥ 0)
class ColumnsConfig:
    n_bins: int = 10                  # TokenModel: bins per numeric column, from the public schema
    numeric_decoding: str = "uniform"
    random_order: bool = False
    min_noise_multiplier: float = 0.0


def _preset(epochs: float, batch: int) -> dict:
    return {"model": {}, "train": {"epochs": epochs, "batch_size": batch, "lr": 0.05, "max_grad_norm": 1.0}}


class ColumnLogits(nn.Module):
    """One vector of logits per column: its values' learned frequencies (nn.Linear: per-sample
    gradients)."""

    def __init__(self, sizes: list[int]):
        super().__init__()
        self.heads = nn.ModuleList(nn.Linear(1, size) for size in sizes)

    def forward(self, rows: torch.Tensor) -> list[torch.Tensor]:
        ones = torch.ones(rows.shape[0], 1, device=rows.device)
        return [head(ones) for head in self.heads]


class IndependentColumns(TokenModel):
    label = "Independent columns"
    description = "Every column drawn on its own from its learned frequencies. An example, not for release."
    config_class = ColumnsConfig
    presets = {"tiny": _preset(2, 64), "quick": _preset(3, 512), "cpu": _preset(5, 1024)}

    # from the public schema only: the encoder's columns and their vocabularies
    def build(self) -> None:
        self.build_encoder()
        self.net = ColumnLogits([c.size for c in self.encoder.codecs])

    def loss_fn(self, module: nn.Module, rows: torch.Tensor) -> torch.Tensor:  # one loss per row
        local = rows - self.offsets.to(rows.device)
        losses = [F.cross_entropy(logits, local[:, c], reduction="none") for c, logits in enumerate(module(rows))]
        return torch.stack(losses, dim=1).mean(dim=1)

    @torch.no_grad()
    def generate_tokens(self, n: int, fixed: dict[int, int], exact_columns: list[int], generator: torch.Generator,
                        temperature: float = 1.0) -> np.ndarray:
        out = torch.empty(n, self.encoder.n_columns, dtype=torch.long)
        for c, logits in enumerate(self.net(torch.zeros(n, 1, device=self.device))):
            probs = torch.softmax(logits.float() / max(temperature, 1e-6), dim=-1)
            out[:, c] = torch.multinomial(probs, 1, generator=generator).squeeze(1).cpu() + int(self.offsets[c])
            if c in exact_columns:
                out[:, c] = fixed[c]
        return out.numpy()

    def exact_prefix(self, fixed_columns: list[int]) -> list[int]:
        return sorted(fixed_columns)  # columns are independent: any of them is fixed exactly
