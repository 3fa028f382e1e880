"""Table <-> tokens, from the public schema only.

Every column gets its own disjoint slice of one vocabulary: a categorical column one token per
public category (plus the reserved unknown category), a numeric column one token per bin of its
public range, and a nullable column one extra token for "missing". Bin edges come from the public
schema (`ColumnSpec.edges`); nothing here reads the private table except to map its values to
tokens.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..schema import ColumnSpec, Schema, SchemaError

NULL_LABEL = "<missing>"


@dataclass
class ColumnCodec:
    """One column's slice of the vocabulary."""

    spec: ColumnSpec
    offset: int            # first global token id of this column
    labels: list           # what each local token means: a category, a bin index, or NULL_LABEL
    edges: np.ndarray | None = None  # numeric bin edges, len = n_bins + 1

    @property
    def size(self) -> int:
        return len(self.labels)

    @property
    def null_local(self) -> int | None:
        return self.size - 1 if self.spec.nullable else None


class TokenEncoder:
    """Encode a validated table to an (n_rows, n_columns) array of global token ids, and back.

    Token 0 is BOS (begin of row); columns follow in schema order.
    """

    BOS = 0

    def __init__(self, schema: Schema, n_bins: int = 100):
        schema.require_bounds()
        if n_bins < 2:
            raise SchemaError("a numeric column needs at least 2 bins")
        self.schema = schema
        self.n_bins = n_bins
        self.codecs: list[ColumnCodec] = []
        offset = 1
        for spec in schema.columns:
            edges = None
            if spec.is_numeric:
                edges = spec.edges(n_bins)
                labels: list = list(range(len(edges) - 1))
            else:
                labels = spec.vocabulary()
            if spec.nullable:
                labels = labels + [NULL_LABEL]
            self.codecs.append(ColumnCodec(spec=spec, offset=offset, labels=labels, edges=edges))
            offset += len(labels)
        self.vocab_size = offset

    @property
    def n_columns(self) -> int:
        return len(self.codecs)

    def column_index(self, name: str) -> int:
        for i, c in enumerate(self.codecs):
            if c.spec.name == name:
                return i
        raise SchemaError(f"no column {name!r} in the schema")

    def vocab_mask(self) -> np.ndarray:
        """(n_columns, vocab_size) booleans: which token ids belong to which column."""
        mask = np.zeros((self.n_columns, self.vocab_size), dtype=bool)
        for i, c in enumerate(self.codecs):
            mask[i, c.offset:c.offset + c.size] = True
        return mask

    # --- one value -> token ---------------------------------------------------------------------
    def _local_tokens(self, codec: ColumnCodec, values: pd.Series | np.ndarray) -> np.ndarray:
        spec = codec.spec
        if spec.is_numeric:
            x = np.asarray(values, dtype=float)
            missing = np.isnan(x)
            idx = np.searchsorted(codec.edges, np.where(missing, codec.edges[0], x), side="right") - 1
            idx = np.clip(idx, 0, len(codec.edges) - 2)
        else:
            lookup = {label: i for i, label in enumerate(codec.labels[: len(spec.vocabulary())])}
            vals = pd.Series(values, dtype=object)
            missing = vals.isna().to_numpy()
            idx = vals.map(lookup).to_numpy()
            unmapped = pd.isna(idx) & ~missing
            if unmapped.any():
                raise SchemaError(f"column {spec.name!r}: values outside the public categories reached the encoder; "
                                  "validate the table against the schema first")
            idx = np.where(missing, 0, idx).astype(np.int64)
        if missing.any():
            if codec.null_local is None:
                raise SchemaError(f"column {spec.name!r} has missing values but is not nullable")
            idx = np.where(missing, codec.null_local, idx)
        return idx.astype(np.int64)

    def encode(self, table: pd.DataFrame) -> np.ndarray:
        """A validated table (see schema.validate_table) to global token ids, shape (n,
        n_columns)."""
        out = np.empty((len(table), self.n_columns), dtype=np.int64)
        for j, codec in enumerate(self.codecs):
            out[:, j] = codec.offset + self._local_tokens(codec, table[codec.spec.name].to_numpy())
        return out

    def cells(self, table: pd.DataFrame, columns) -> tuple[np.ndarray, tuple[int, ...]]:
        """Each row's cell in the joint discretisation of `columns` (a flat index, C order) and the
        cells' shape: public bins of numbers, public categories, a cell for missing values where
        allowed."""
        flat = np.zeros(len(table), dtype=np.int64)
        shape = []
        for name in columns:
            codec = self.codecs[self.column_index(name)]
            values = table[name]
            if codec.spec.is_numeric:
                values = pd.to_numeric(values, errors="coerce").to_numpy(dtype=float, na_value=np.nan)
            else:
                values = values.to_numpy()
            flat = flat * codec.size + self._local_tokens(codec, values)
            shape.append(codec.size)
        return flat, tuple(shape)

    def encode_value(self, name: str, value) -> int:
        """The token of one value (a sampling condition), checked against the public facts first."""
        codec = self.codecs[self.column_index(name)]
        value = codec.spec.check_value(value)
        if value is None:
            return codec.offset + codec.null_local
        if codec.spec.is_numeric:
            return codec.offset + int(self._local_tokens(codec, np.array([value]))[0])
        return codec.offset + codec.spec.vocabulary().index(value)

    # --- tokens -> table ------------------------------------------------------------------------
    def decode(self, tokens: np.ndarray, rng: np.random.Generator, numeric_decoding: str = "uniform") -> pd.DataFrame:
        """Global token ids (n, n_columns) back to a table in canonical form.

        numeric_decoding: "uniform" draws a value uniformly inside the bin (integers: uniformly
        among the integers inside it), "midpoint" returns the bin's centre (DP-TBART's original
        choice).
        """
        if numeric_decoding not in ("uniform", "midpoint"):
            raise ValueError(f"numeric_decoding must be 'uniform' or 'midpoint', not {numeric_decoding!r}")
        tokens = np.asarray(tokens)
        cols = {}
        for j, codec in enumerate(self.codecs):
            local = tokens[:, j] - codec.offset
            if ((local < 0) | (local >= codec.size)).any():
                raise ValueError(f"token outside column {codec.spec.name!r}'s vocabulary")
            cols[codec.spec.name] = self._decode_column(codec, local, rng, numeric_decoding)
        return pd.DataFrame(cols, columns=[c.spec.name for c in self.codecs])

    def _decode_column(self, codec: ColumnCodec, local: np.ndarray, rng: np.random.Generator, how: str):
        spec = codec.spec
        missing = local == codec.null_local if codec.null_local is not None else np.zeros(len(local), bool)
        if not spec.is_numeric:
            vocab = np.array(spec.vocabulary(), dtype=object)
            out = vocab[np.where(missing, 0, local)]
            out[missing] = None
            return out
        b = np.where(missing, 0, local)
        # a value the column takes, inside its bin
        value = spec.decode_bins(codec.edges, b, rng, how)
        return spec.as_written(np.clip(value, spec.lower, spec.upper), missing)
