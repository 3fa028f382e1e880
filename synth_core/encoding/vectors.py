"""Table <-> real vectors, from the public schema only, for the vector models (diffusion, GANs).

A categorical column becomes a one-hot block over its public vocabulary (plus a "missing" slot when
nullable). A numeric column is encoded one of two ways:

    "scalar"  one value in [-1, 1]: the public bounds map to -1 and 1 (after log1p of the distance to the lower
              bound for log binning, so a heavy-tailed amount keeps resolution near the bound); a nullable
              column also gets a two-slot block, present / missing (the value slot holds 0 when missing).
    "bins"    a one-hot block over bins of the public range (ColumnSpec.edges: the token models' bins; an
              integer column whose range has at most `integer_bins` values gets one bin per integer, others
              `n_bins` bins), decoded like the token models' "uniform" decoding: a
              value drawn uniformly inside the bin (integers: among the integers inside it); a nullable column
              gets a "missing" slot in its bin block. (A position-in-bin coordinate was tried: a diffusion
              model predicts its mean, which piles every bin's values on one point.) A generator then produces a column's
              spikes (47% of Adult's hours-per-week are exactly 40) as a category, not as a value it must hit
              to within half an hour: the way CTGAN's mode-specific normalisation helps, without fitting
              anything on the private table.

Nothing here reads a statistic of the private table: no min/max, no frequencies, no fitted quantile
transformer. Scaling a table whose values sit far inside the bounds still uses the bounds.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..schema import ColumnSpec, Schema, SchemaError

NUMERIC_ENCODINGS = ("scalar", "bins")


@dataclass
class Block:
    """One column's slice of the vector."""

    spec: ColumnSpec
    start: int            # first index of the slice
    size: int             # scalar numeric: 1; one-hot: number of slots
    # one-hot: what each slot means (a category, a bin index; None = missing)
    labels: list | None = None
    null_block: "Block | None" = None  # nullable scalar numeric: its present/missing block
    # scalar numeric whose values a rule names: another value, or each of them
    point_block: "Block | None" = None
    edges: np.ndarray | None = None    # binned numeric: bin edges

    @property
    def stop(self) -> int:
        return self.start + self.size

    @property
    def is_numeric(self) -> bool:
        return self.spec.is_numeric

    @property
    def is_scalar(self) -> bool:
        return self.labels is None


class VectorEncoder:
    """Encode a validated table (see schema.validate_table) to float32 vectors, and back."""

    def __init__(self, schema: Schema, numeric: str = "scalar", n_bins: int = 100, integer_bins: int = 100):
        schema.require_bounds()
        if numeric not in NUMERIC_ENCODINGS:
            raise ValueError(f"numeric encoding must be one of {', '.join(NUMERIC_ENCODINGS)}, not {numeric!r}")
        self.schema = schema
        self.numeric = numeric
        self.columns: list[Block] = []      # one per schema column, in schema order
        # every one-hot block: categories, bins, missing indicators
        self.categorical: list[Block] = []
        # every real-valued coordinate: scalar numbers, positions in bins
        self.values: list[int] = []
        pos = 0
        for spec in schema.columns:
            if spec.is_numeric and numeric == "bins":
                per_integer = spec.kind == "integer" and spec.n_values() <= integer_bins
                edges = spec.edges(integer_bins if per_integer else n_bins)
                labels = list(range(len(edges) - 1)) + ([None] if spec.nullable else [])
                block = Block(spec, pos, len(labels), labels=labels, edges=edges)
                self.categorical.append(block)
                pos += len(labels)
            elif spec.is_numeric:
                block = Block(spec, pos, 1)
                self.values.append(pos)
                pos += 1
                if spec.nullable:
                    block.null_block = Block(spec, pos, 2, labels=["present", None])
                    self.categorical.append(block.null_block)
                    pos += 2
                # drawn exactly, not as a number that lands near them (schema.scale)
                if spec.exact_values():
                    points = spec.exact_values()
                    block.point_block = Block(spec, pos, 1 + len(points), labels=["other", *points])
                    self.categorical.append(block.point_block)
                    pos += block.point_block.size
            else:
                labels = list(spec.vocabulary()) + ([None] if spec.nullable else [])
                block = Block(spec, pos, len(labels), labels=labels)
                self.categorical.append(block)
                pos += len(labels)
            self.columns.append(block)
        self.dim = pos

    # --- layout, for the models -------------------------------------------------------------------
    def numeric_index(self) -> np.ndarray:
        """The real-valued coordinates (scalar numbers)."""
        return np.array(self.values, dtype=np.int64)

    def categorical_spans(self) -> list[tuple[int, int]]:
        return [(b.start, b.stop) for b in self.categorical]

    def block(self, name: str) -> Block:
        for b in self.columns:
            if b.spec.name == name:
                return b
        raise SchemaError(f"no column {name!r} in the schema")

    # --- numeric scaling by the PUBLIC bounds ------------------------------------------------------
    @staticmethod
    def scale(spec: ColumnSpec, x: np.ndarray) -> np.ndarray:
        return 2.0 * spec.to_unit(x) - 1.0

    @staticmethod
    def unscale(spec: ColumnSpec, v: np.ndarray) -> np.ndarray:
        return spec.from_unit((np.clip(np.asarray(v, dtype=float), -1.0, 1.0) + 1.0) / 2.0)

    # --- encode -----------------------------------------------------------------------------------
    def encode(self, table: pd.DataFrame) -> np.ndarray:
        out = np.zeros((len(table), self.dim), dtype=np.float32)
        for b in self.columns:
            values = table[b.spec.name]
            if b.is_numeric and not b.is_scalar:
                self._encode_binned(b, pd.to_numeric(values, errors="coerce").to_numpy(dtype=float), out)
            elif b.is_numeric:
                x = pd.to_numeric(values, errors="coerce").to_numpy(dtype=float)
                missing = np.isnan(x)
                if missing.any() and b.null_block is None:
                    raise SchemaError(f"column {b.spec.name!r} has missing values but is not nullable")
                out[:, b.start] = np.where(missing, 0.0, self.scale(b.spec, np.where(missing, b.spec.lower, x)))
                if b.null_block is not None:
                    out[np.arange(len(x)), b.null_block.start + missing.astype(np.int64)] = 1.0
                if b.point_block is not None:
                    out[np.arange(len(x)), b.point_block.start + self._point_of(b.point_block, x)] = 1.0
            else:
                idx = self._slots(b, values)
                out[np.arange(len(idx)), b.start + idx] = 1.0
        return out

    def _encode_binned(self, b: Block, x: np.ndarray, out: np.ndarray) -> None:
        missing = np.isnan(x)
        if missing.any() and b.labels[-1] is not None:
            raise SchemaError(f"column {b.spec.name!r} has missing values but is not nullable")
        n_bins = len(b.edges) - 1
        xc = np.clip(np.where(missing, b.edges[0], x), b.edges[0], b.edges[-1])
        idx = np.clip(np.searchsorted(b.edges, xc, side="right") - 1, 0, n_bins - 1)
        out[np.arange(len(x)), b.start + np.where(missing, n_bins, idx)] = 1.0

    @staticmethod
    def _point_of(block: Block, x: np.ndarray) -> np.ndarray:
        """The slot of each value in a point block: 1 + the index of the named value it equals, 0
        for any other."""
        named = np.asarray(block.labels[1:], dtype=float)
        hits = np.isclose(x[:, None], named[None, :], rtol=0.0, atol=1e-9)
        return np.where(hits.any(axis=1), hits.argmax(axis=1) + 1, 0).astype(np.int64)

    def _slots(self, b: Block, values) -> np.ndarray:
        lookup = {label: i for i, label in enumerate(b.labels) if label is not None}
        vals = pd.Series(values, dtype=object)
        missing = vals.isna().to_numpy()
        idx = vals.map(lookup).to_numpy()
        if (pd.isna(idx) & ~missing).any():
            raise SchemaError(f"column {b.spec.name!r}: values outside the public categories reached the encoder; "
                              "validate the table against the schema first")
        if missing.any():
            if b.labels[-1] is not None:
                raise SchemaError(f"column {b.spec.name!r} has missing values but is not nullable")
            idx = np.where(missing, len(b.labels) - 1, idx)
        return idx.astype(np.int64)

    # --- decode -----------------------------------------------------------------------------------
    def decode(self, vectors: np.ndarray, rng: np.random.Generator | None = None,
               sample_blocks: bool = False) -> pd.DataFrame:
        """Vectors back to a table in canonical form. One-hot blocks: argmax, or (sample_blocks) a
        draw proportional to the (non-negative) block values; values inside a numeric bin drawn with
        `rng`; numbers clipped to the public bounds, integers rounded, `decimals` applied."""
        rng = rng if rng is not None else np.random.default_rng(0)
        pick_rng = rng if sample_blocks else None
        v = np.asarray(vectors, dtype=float)
        if v.ndim != 2 or v.shape[1] != self.dim:
            raise ValueError(f"expected vectors of width {self.dim}, not {v.shape}")
        cols = {}
        for b in self.columns:
            spec = b.spec
            if not b.is_numeric:
                idx = self._pick(v[:, b.start:b.stop], pick_rng)
                labels = np.array(b.labels, dtype=object)
                cols[spec.name] = labels[idx]
                continue
            missing = np.zeros(len(v), bool)
            if b.is_scalar:
                x = self.unscale(spec, v[:, b.start])
                if b.null_block is not None:
                    missing = self._pick(v[:, b.null_block.start:b.null_block.stop], pick_rng) == 1
                if b.point_block is not None:
                    k = self._pick(v[:, b.point_block.start:b.point_block.stop], pick_rng)
                    x = np.where(k > 0, np.asarray([np.nan, *b.point_block.labels[1:]], dtype=float)[k], x)
            else:
                idx = self._pick(v[:, b.start:b.stop], pick_rng)
                missing = idx >= len(b.edges) - 1
                x = spec.decode_bins(b.edges, np.minimum(idx, len(b.edges) - 2), rng)
            x = spec.snap(x)  # a declared value set: the nearest of its values
            if spec.kind == "integer":
                x = np.clip(np.round(x), np.ceil(spec.lower), np.floor(spec.upper))
            elif spec.decimals is not None:
                x = np.clip(np.round(x, spec.decimals), spec.lower, spec.upper)
            # the same canonical types as the token models
            cols[spec.name] = spec.as_written(x, missing)
        return pd.DataFrame(cols, columns=self.schema.names)

    @staticmethod
    def _pick(block: np.ndarray, rng: np.random.Generator | None) -> np.ndarray:
        if rng is None:
            return block.argmax(axis=1)
        p = np.clip(block, 0.0, None) + 1e-12
        p = p / p.sum(axis=1, keepdims=True)
        u = rng.random((len(p), 1))
        return np.minimum((p.cumsum(axis=1) < u).sum(axis=1), p.shape[1] - 1)
