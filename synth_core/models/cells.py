"""The rows' counts a family that learns from marginals asks for (AIM), on the public cells of its
encoder, from rows in memory or from a table an engine holds (encoding/engine.py: a table too large
to hold). Both give the same counts: a marginal of the engine is counted on the public cells, then
summed into the model's cells (a compressed column's merged cells) as the in-memory rows are
mapped first and counted after."""
from __future__ import annotations

import math
from typing import Callable

import numpy as np
import pandas as pd

from ..encoding import TokenEncoder
from ..encoding.engine import Counting

# public cells of one column to the model's (a compressed column's rare cells: one)
ToModel = Callable[[str, np.ndarray], np.ndarray]


def counts_on(cells: dict[str, np.ndarray], clique: tuple[str, ...], sizes: dict[str, int]
              ) -> np.ndarray:
    """The rows' counts on a clique's cells, flat in the clique's column order (C order), as mbi's
    Dataset.project(clique).datavector() gives them: in numpy, since mbi's JAX compiles a program
    for each clique's shape (on Ames' 79 columns, 293 programs and 3.7 s before the first round)."""
    shape = tuple(sizes[name] for name in clique)
    flat = np.ravel_multi_index(tuple(cells[name] for name in clique), shape)
    return np.bincount(flat, minlength=math.prod(shape)).astype(np.float64)


class RowCells:
    """Rows in memory: each row's public cell of every column, (n, columns) local indices."""

    def __init__(self, table: pd.DataFrame, encoder: TokenEncoder, names: list[str]):
        self.names = names
        self.data = np.stack([encoder.cells(table, [name])[0] for name in names], axis=1)

    def __len__(self) -> int:
        return len(self.data)

    def one_way(self, name: str, size: int) -> np.ndarray:
        """A column's counts on its public cells."""
        return np.bincount(self.data[:, self.names.index(name)], minlength=size)

    def answers(self, cliques, to_model: ToModel, model_sizes: dict[str, int]) -> dict:
        """Each clique's counts on the model's cells."""
        cells = {name: to_model(name, self.data[:, j]) for j, name in enumerate(self.names)}
        return {cl: counts_on(cells, cl, model_sizes) for cl in cliques}


class EngineCells:
    """A table an engine holds (`encoding.engine.Counting`), counted there on the same public
    cells."""

    def __init__(self, table: Counting, encoder: TokenEncoder, names: list[str]):
        self.table, self.encoder, self.names = table, encoder, names
        self.rows = len(table)

    def __len__(self) -> int:
        return self.rows

    def one_way(self, name: str, size: int) -> np.ndarray:
        counts, _ = self.table.counts(self.encoder, (name,))
        return counts.astype(np.int64)

    def answers(self, cliques, to_model: ToModel, model_sizes: dict[str, int]) -> dict:
        out = {}
        for cl, (counts, shape) in self.table.counts_of(self.encoder, list(cliques)).items():
            where = np.indices(shape).reshape(len(cl), -1)
            model = tuple(to_model(name, where[i]) for i, name in enumerate(cl))
            size = tuple(model_sizes[name] for name in cl)
            out[cl] = np.bincount(np.ravel_multi_index(model, size), weights=counts,
                                  minlength=math.prod(size)).astype(np.float64)
        return out


def cells_of(table, encoder: TokenEncoder, names: list[str]) -> RowCells | EngineCells:
    """The rows' cells, where they are."""
    if isinstance(table, Counting):
        return EngineCells(table, encoder, names)
    return RowCells(table, encoder, names)
