"""A person as one token sequence, from the public linked schema only: their row, then each of their child rows
behind a mark that says another follows, then the mark that says none does.

    p_1 … p_P  MORE c_1 … c_C  MORE c_1 … c_C  …  END  (padding)

Every person's sequence has the same length, P + K·(C + 1) + 1 for K = max_children, and position t always holds
the same kind of token (`kinds[t]`): a parent column, a mark, or a child column; the tokens after END are padding
that no loss reads. The parents' and the children's columns keep their own vocabularies (encoding.TokenEncoder),
side by side in one; the two marks come last.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..schema.linked import LinkedRows, LinkedSchema
from .tokens import TokenEncoder

MORE, END = 0, 1  # a mark's local token: another child row follows, or none


class PersonEncoder:
    def __init__(self, schema: LinkedSchema, n_bins: int = 100):
        self.schema = schema
        self.parent = TokenEncoder(schema.parent, n_bins)
        self.child = TokenEncoder(schema.child, n_bins)
        self.child_shift = self.parent.vocab_size - 1   # the child encoder's ids start at 1 too
        self.mark_offset = self.parent.vocab_size + self.child.vocab_size - 1
        self.vocab_size = self.mark_offset + 2
        P, C, K = self.parent.n_columns, self.child.n_columns, schema.max_children
        # a kind per column: the parents' columns, the mark, the children's columns; one per position
        self.sizes = [c.size for c in self.parent.codecs] + [2] + [c.size for c in self.child.codecs]
        self.kind_offsets = np.array([c.offset for c in self.parent.codecs] + [self.mark_offset]
                                     + [c.offset + self.child_shift for c in self.child.codecs])
        kinds = list(range(P))
        for _ in range(K):
            kinds += [P] + list(range(P + 1, P + 1 + C))
        self.kinds = np.array(kinds + [P])
        self.length = len(self.kinds)
        self.marks = np.flatnonzero(self.kinds == P)  # K + 1 of them

    @property
    def n_kinds(self) -> int:
        return len(self.sizes)

    def encode(self, rows: LinkedRows) -> np.ndarray:
        """(persons, length) global token ids; positions after a person's END hold TokenEncoder.BOS (padding)."""
        P, C = self.parent.n_columns, self.child.n_columns
        out = np.full((len(rows), self.length), TokenEncoder.BOS, dtype=np.int64)
        out[:, :P] = self.parent.encode(rows.parents)
        counts = rows.children_per_person()
        if counts.max(initial=0) > self.schema.max_children:
            raise ValueError("a person has more child rows than max_children: bound them first (privacy.contribution)")
        child_tokens = self.child.encode(rows.children) + self.child_shift
        slot = np.arange(len(rows.person)) - np.concatenate([[0], np.cumsum(counts)[:-1]])[rows.person]
        start = P + slot * (C + 1)
        out[rows.person, start] = self.mark_offset + MORE
        cols = start[:, None] + 1 + np.arange(C)[None, :]
        out[rows.person[:, None], cols] = child_tokens
        out[np.arange(len(rows)), self.marks[counts]] = self.mark_offset + END
        return out

    def lengths(self, tokens: np.ndarray) -> np.ndarray:
        """Each sequence's length up to and including its END mark."""
        ends = tokens[:, self.marks] == self.mark_offset + END
        first = np.where(ends.any(axis=1), ends.argmax(axis=1), len(self.marks) - 1)
        return self.marks[first] + 1

    def decode(self, tokens: np.ndarray, rng: np.random.Generator, numeric_decoding: str = "uniform"
               ) -> tuple[pd.DataFrame, pd.DataFrame, np.ndarray]:
        """(parents, children, each child row's person) from sequences; a person's rows end at their first END."""
        P, C = self.parent.n_columns, self.child.n_columns
        parents = self.parent.decode(tokens[:, :P], rng, numeric_decoding)
        ended = tokens[:, self.marks] == self.mark_offset + END
        counts = np.where(ended.any(axis=1), ended.argmax(axis=1), self.schema.max_children)
        person = np.repeat(np.arange(len(tokens)), counts)
        slot = np.concatenate([np.arange(c) for c in counts]) if len(person) else np.zeros(0, dtype=np.int64)
        cols = (P + slot * (C + 1) + 1)[:, None] + np.arange(C)[None, :]
        children = self.child.decode(tokens[person[:, None], cols] - self.child_shift, rng, numeric_decoding)
        return parents, children, person
