"""A person as one token sequence, from the public linked schema only: their row, how many child
rows they have, then each child row.

    p_1 … p_P  N  c_1 … c_C  c_1 … c_C  …  (padding)

Every person's sequence has the same length, P + 1 + K·C for K = max_children, and position t always
holds the same kind of token (`kinds[t]`): a parent column, the count N (0 … K), or a child column;
the N·C child tokens are followed by padding that no loss reads. The count is one decision, drawn
like a column (a mark after each child row that said whether another follows compounded its error:
persons with 8 rows each came out with 3 to 8). The parents' and the children's columns keep their
own vocabularies (encoding.TokenEncoder), side by side in one; the count's K + 1 tokens come last.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..schema.linked import LinkedRows, LinkedSchema
from .tokens import TokenEncoder


class PersonEncoder:
    def __init__(self, schema: LinkedSchema, n_bins: int = 100):
        self.schema = schema
        self.parent = TokenEncoder(schema.parent, n_bins)
        self.child = TokenEncoder(schema.child, n_bins)
        self.child_shift = self.parent.vocab_size - 1   # the child encoder's ids start at 1 too
        self.count_offset = self.parent.vocab_size + self.child.vocab_size - 1
        K = schema.max_children
        self.vocab_size = self.count_offset + K + 1
        P, C = self.parent.n_columns, self.child.n_columns
        # a kind per column: the parents' columns, the count, the children's columns; one per
        # position
        self.count_kind = P
        self.sizes = [c.size for c in self.parent.codecs] + [K + 1] + [c.size for c in self.child.codecs]
        self.kind_offsets = np.array([c.offset for c in self.parent.codecs] + [self.count_offset]
                                     + [c.offset + self.child_shift for c in self.child.codecs])
        self.kinds = np.array(list(range(P + 1)) + list(range(P + 1, P + 1 + C)) * K)
        self.length = len(self.kinds)

    @property
    def n_kinds(self) -> int:
        return len(self.sizes)

    def child_start(self, slot):
        """The position of child row `slot`'s first token (0-based slots; a number, or an array or
        tensor of them): also a person's length when `slot` is their count of child rows."""
        return self.parent.n_columns + 1 + slot * self.child.n_columns

    def encode(self, rows: LinkedRows) -> np.ndarray:
        """(persons, length) global token ids; positions after a person's child rows hold
        TokenEncoder.BOS."""
        P, C = self.parent.n_columns, self.child.n_columns
        out = np.full((len(rows), self.length), TokenEncoder.BOS, dtype=np.int64)
        out[:, :P] = self.parent.encode(rows.parents)
        counts = rows.children_per_person()
        if counts.max(initial=0) > self.schema.max_children:
            raise ValueError("a person has more child rows than max_children: bound them first (privacy.contribution)")
        out[:, P] = self.count_offset + counts
        slot = np.arange(len(rows.person)) - np.concatenate([[0], np.cumsum(counts)[:-1]])[rows.person]
        cols = self.child_start(slot)[:, None] + np.arange(C)[None, :]
        out[rows.person[:, None], cols] = self.child.encode(rows.children) + self.child_shift
        return out

    def decode(self, tokens: np.ndarray, rng: np.random.Generator, numeric_decoding: str = "uniform"
               ) -> tuple[pd.DataFrame, pd.DataFrame, np.ndarray]:
        """(parents, children, each child row's person) from sequences."""
        P, C = self.parent.n_columns, self.child.n_columns
        parents = self.parent.decode(tokens[:, :P], rng, numeric_decoding)
        counts = tokens[:, P] - self.count_offset
        person = np.repeat(np.arange(len(tokens)), counts)
        slot = np.concatenate([np.arange(c) for c in counts]) if len(person) else np.zeros(0, dtype=np.int64)
        cols = self.child_start(slot)[:, None] + np.arange(C)[None, :]
        children = self.child.decode(tokens[person[:, None], cols] - self.child_shift, rng, numeric_decoding)
        return parents, children, person
