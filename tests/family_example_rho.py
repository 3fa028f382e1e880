"""A whole family without DP-SGD, the second example ARCHITECTURE.md's "Adding a family" walks
through: every column's counts measured once with Gaussian noise, paid from the run's budget ρ
(zero-concentrated DP), and every column drawn on its own from its noisy counts. It implements what
any family with its own mechanism does (`uses_dp_sgd = False`, `dp_mechanism`, `train_private`;
the base plans ρ, makes the budget, charges it and describes the plan); `tests/test_families.py`
registers it for one test and walks it through the user's path. Every σ and ρ is the privacy
layer's (`RhoBudget`)."""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn as nn

from synth_core.models.token import TokenModel


@dataclass
class MarginalsConfig:  # the options a run may set (checked: whole numbers ≥ 1)
    n_bins: int = 10                  # TokenModel: bins per numeric column, from the public schema
    numeric_decoding: str = "uniform"
    random_order: bool = False


def _preset(n_bins: int) -> dict:
    return {"model": {"n_bins": n_bins}}  # no "train": that is DP-SGD's


class NoisyMarginals(TokenModel):
    label = "Noisy column counts"
    description = "Every column drawn on its own from its counts measured with noise. An example."
    config_class = MarginalsConfig
    presets = {"tiny": _preset(10), "quick": _preset(20), "cpu": _preset(32)}
    uses_dp_sgd = False           # its own mechanism: ρ planned, made and charged by the base
    measures_marginals = True     # its training is measuring them: a calibration would repeat it
    trains_distributed = False
    dp_mechanism = "Each column's counts measured (Gaussian mechanism, zero-concentrated DP)"

    def build(self) -> None:  # from the public schema only: the columns and their cells
        self.build_encoder()
        # the noisy counts, zero before training (a module: the base saves, loads and moves it)
        self.net = nn.ParameterList(nn.Parameter(torch.zeros(c.size, dtype=torch.float64),
                                                 requires_grad=False) for c in self.encoder.codecs)

    def train_private(self, data, plan, on_event, should_stop, steps):
        """One round: every column's counts plus N(0, σ²) per cell, the columns sharing ρ evenly."""
        start, events = time.perf_counter(), []
        cells = data.numpy() - self.offsets.numpy()
        sigma = self.budget.sigma_for(len(self.net))
        steps.started += 1
        for c, counts in enumerate(self.net):
            name = self.encoder.codecs[c].spec.name
            true = np.bincount(cells[:, c], minlength=len(counts))
            noisy = self.budget.measure(true, sigma, what=f"counts of {name}")
            counts.copy_(torch.from_numpy(noisy))
        events.append(self.round_event(1, 1, None, start))
        if on_event is not None:
            on_event(events[-1])
        return self.rounds_result(1, 1, False, events, start, len(cells))

    @torch.no_grad()
    def generate_tokens(self, n: int, fixed: dict[int, int], exact_columns: list[int],
                        generator: torch.Generator, temperature: float = 1.0) -> np.ndarray:
        out = torch.empty(n, len(self.net), dtype=torch.long)
        for c, counts in enumerate(self.net):
            weights = counts.clamp(min=0) + 1e-6  # a negative noisy count: (almost) no rows
            drawn = torch.multinomial(weights, n, replacement=True, generator=generator)
            out[:, c] = drawn.cpu() + int(self.offsets[c])
            if c in exact_columns:
                out[:, c] = fixed[c]
        return out.numpy()

    def exact_prefix(self, fixed_columns: list[int]) -> list[int]:
        return sorted(fixed_columns)  # columns are independent: any of them is fixed exactly
