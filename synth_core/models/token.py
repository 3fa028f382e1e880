"""What the token model families share (DP-TBART, masked TableDiffusion): one token per column from
the public schema (encoding.TokenEncoder), the TAN batch rule, and sampling with conditions.

A token family implements `generate_tokens` (n rows of global token ids, with the columns it
conditions on exactly fixed) and `exact_prefix` (which fixed columns it can condition on exactly);
every other condition is met by rejection sampling, with the acceptance rate reported in
`last_sample_info`.
"""
from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import torch

from ..encoding import TokenEncoder
from ..encoding.engine import DiskRows, TableStore
from ..privacy.planning import SamplingShape
from .base import SamplingError, SynthModel, draw_with_rejection


class TokenModel(SynthModel):
    """A family's config has `n_bins`, `numeric_decoding`, `random_order` and
    `min_noise_multiplier`. Its rows are read by index only (`data[indices]`), so a table the
    engine holds trains from the engine's disk (`from_engine`)."""

    from_engine = "rows"

    def build_encoder(self) -> None:
        self.encoder = TokenEncoder(self.schema, n_bins=self.config.n_bins)
        self.offsets = torch.tensor([c.offset for c in self.encoder.codecs], dtype=torch.long)

    def encode(self, table: pd.DataFrame | TableStore) -> torch.Tensor | DiskRows:
        """The rows' tokens; of a table the engine holds, on its disk (`engine.DiskRows`: DP-SGD
        reads each Poisson batch from there)."""
        if isinstance(table, TableStore):
            return table.token_rows(self.encoder)
        return torch.from_numpy(self.encoder.encode(table))

    def sampling_shape(self, n_rows: int) -> SamplingShape:
        """The base shape; with min_noise_multiplier, the TAN rule (the batch doubles until σ
        reaches it)."""
        return dataclasses.replace(super().sampling_shape(n_rows), min_noise_multiplier=self.config.min_noise_multiplier)

    # --- a token family implements these ----------------------------------------------------------------
    def generate_tokens(self, n: int, fixed: dict[int, int], exact_columns: list[int], generator: torch.Generator,
                        temperature: float = 1.0) -> np.ndarray:
        raise NotImplementedError

    def exact_prefix(self, fixed_columns: list[int]) -> list[int]:
        raise NotImplementedError

    # --- sampling -----------------------------------------------------------------------------------
    def draw(self, n: int, conditions: dict | None = None, seed: int | None = None, temperature: float = 1.0,
               max_tries_factor: int = 200, chunk_size: int = 8192) -> pd.DataFrame:
        """n synthetic rows; `conditions` fixes chosen columns' values, e.g. {"sex": "Female"}.

        Conditions the model can take exactly (see `exact_prefix`) are placed first; any others are
        met by rejection sampling, bounded at `max_tries_factor`·n rows tried. `last_sample_info`
        reports the method and the acceptance rate."""
        self._check_rows(n)
        conditions = self.schema.check_conditions(conditions)
        fixed = {self.encoder.column_index(name): self.encoder.encode_value(name, value)
                 for name, value in conditions.items()}
        exact = self.exact_prefix(list(fixed))
        rejected_on = {c: t for c, t in fixed.items() if c not in exact}
        generator, rng = self._sampling_randomness(seed)

        def draw(m: int) -> np.ndarray:
            tokens = self.generate_tokens(m, fixed, exact, generator, temperature)
            if rejected_on:
                tokens = tokens[np.all([tokens[:, c] == t for c, t in rejected_on.items()], axis=0)]
            return tokens

        kept, accepted, tried = draw_with_rejection(n, draw, bool(rejected_on), max_tries_factor, chunk_size)
        acceptance = accepted / tried if tried else 0.0
        self.last_sample_info = {
            "rows": min(accepted, n), "method": "rejection" if rejected_on else ("exact" if fixed else "unconditional"),
            "exact_columns": [self.encoder.codecs[c].spec.name for c in exact],
            "rejection_columns": [self.encoder.codecs[c].spec.name for c in rejected_on],
            "acceptance_rate": acceptance, "rows_tried": tried,
        }
        if accepted < n:
            raise SamplingError(
                f"only {accepted} of {n} rows met the conditions on {', '.join(self.last_sample_info['rejection_columns'])} "
                f"after trying {tried} (acceptance rate {acceptance:.2%}). The model rarely produces that combination; "
                "ask for fewer rows, relax the conditions"
                + ("" if self.config.random_order else ", or train with random column order for exact conditioning")
            )
        tokens = np.concatenate(kept)[:n]
        table = self.encoder.decode(tokens, rng, self.config.numeric_decoding)
        for name, value in conditions.items():
            if self.schema[name].is_numeric and value is not None:
                table[name] = float(value)  # the bin holds the value; report the value asked for
        return table
