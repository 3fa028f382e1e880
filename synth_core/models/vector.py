"""What the vector model families (TableDiffusion, the GANs) share on top of SynthModel: the vector
encoding of the public schema, and sampling with conditions.

A vector model generates whole rows as vectors (see encoding.vectors.VectorEncoder) and decodes
them. A family may take some conditions natively (a conditional GAN fixes one categorical column
through its condition vector, see `native_conditions`); every other condition is met by rejection
sampling, with the acceptance rate reported in `last_sample_info` exactly as for the token models. A
numeric condition is met by a row whose value lies within half an integer (integer columns) or
within 0.5% of the public range (continuous columns) of the value asked, and the row then reports
the value asked, as DP-TBART reports the value asked inside its bin.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import torch

from ..encoding import VectorEncoder
from ..encoding.engine import DiskRows, TableStore
from .base import SamplingError, SynthModel, draw_with_rejection


class VectorModel(SynthModel):
    """A family implements `build_net` (sets self.net, the module that is saved) and
    `generate_vectors`. Its rows are read by index only (`data[indices]`), so a table the engine
    holds trains from the engine's disk (`from_engine`).

    sample_blocks: whether `generate_vectors` gives each one-hot block as probabilities to draw from
    (a diffusion model's final estimate E[one-hot | x_1]); otherwise the block is decoded by its
    argmax.
    """

    sample_blocks = False
    from_engine = "rows"

    def build(self) -> None:
        self.encoder = VectorEncoder(self.schema, self.config.numeric_encoding, self.config.n_bins,
                                     self.config.integer_bins)
        self.build_net()

    def build_net(self) -> None:
        raise NotImplementedError

    def encode(self, table: pd.DataFrame | TableStore) -> torch.Tensor | DiskRows:
        """The rows as vectors; of a table the engine holds, on its disk (`engine.DiskRows`:
        DP-SGD reads each Poisson batch from there)."""
        if isinstance(table, TableStore):
            return table.encoded_rows(self.encoder.encode, self.encoder.dim, np.float32, "vectors")
        return torch.from_numpy(self.encoder.encode(table))

    def generate_vectors(self, n: int, native: dict, generator: torch.Generator) -> np.ndarray:
        """n rows as vectors (numpy, width encoder.dim); `native` holds the conditions the family
        takes natively."""
        raise NotImplementedError

    def native_conditions(self, conditions: dict) -> dict:
        """The conditions this family meets by construction; the rest go to rejection sampling."""
        return {}

    # --- conditions ---------------------------------------------------------------------------------
    def _matches(self, table: pd.DataFrame, conditions: dict) -> np.ndarray:
        ok = np.ones(len(table), dtype=bool)
        for name, value in conditions.items():
            spec, col = self.schema[name], table[name]
            if value is None:
                ok &= col.isna().to_numpy()
            elif spec.is_numeric:
                tol = 0.5 if spec.kind == "integer" else 0.005 * (spec.upper - spec.lower)
                x = pd.to_numeric(col, errors="coerce").to_numpy(dtype=float, na_value=np.nan)
                ok &= np.abs(x - value) <= tol
            else:
                ok &= (col == value).fillna(False).to_numpy(dtype=bool)
        return ok

    # --- sampling -------------------------------------------------------------------------------------
    @torch.no_grad()
    def draw(self, n: int, conditions: dict | None = None, seed: int | None = None, temperature: float = 1.0,
               max_tries_factor: int = 200, chunk_size: int = 8192) -> pd.DataFrame:
        """n synthetic rows; `conditions` fixes chosen columns' values, e.g. {"sex": "Female"}.

        Conditions the family takes natively are met by construction; the others by rejection
        sampling, bounded at `max_tries_factor`·n rows tried. `last_sample_info` reports the method
        and the acceptance rate. (`temperature` is accepted for the common interface; vector models
        decode each categorical block by argmax.)"""
        self._check_rows(n)
        conditions = self.schema.check_conditions(conditions)
        native = self.native_conditions(conditions)
        rejected_on = {k: v for k, v in conditions.items() if k not in native}
        generator, rng = self._sampling_randomness(seed)
        self.net.eval()

        def draw(m: int) -> pd.DataFrame:
            table = self.encoder.decode(self.generate_vectors(m, native, generator), rng, self.sample_blocks)
            return table[self._matches(table, rejected_on)] if rejected_on else table

        kept, accepted, tried = draw_with_rejection(n, draw, bool(rejected_on), max_tries_factor, chunk_size)
        acceptance = accepted / tried if tried else 0.0
        self.last_sample_info = {
            "rows": min(accepted, n),
            "method": "rejection" if rejected_on else ("exact" if native else "unconditional"),
            "exact_columns": list(native), "rejection_columns": list(rejected_on),
            "acceptance_rate": acceptance, "rows_tried": tried,
        }
        if accepted < n:
            raise SamplingError(
                f"only {accepted} of {n} rows met the conditions on {', '.join(rejected_on)} after trying {tried} "
                f"(acceptance rate {acceptance:.2%}). The model rarely produces that combination; ask for fewer rows "
                "or relax the conditions")
        table = pd.concat(kept, ignore_index=True).iloc[:n].reset_index(drop=True)
        for name, value in conditions.items():
            if value is None:
                continue
            if self.schema[name].is_numeric:
                table[name] = int(round(value)) if self.schema[name].kind == "integer" else float(value)
            else:
                table[name] = value
        return table
