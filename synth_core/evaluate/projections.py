"""2-D projections of real and synthetic rows, as data the app and the report plot.

Rows are encoded with the public schema (`evaluate.features.PublicEncoder`: numbers scaled by public
bounds, categories one-hot over the public lists, missing as its own indicator). The projection is
FITTED ON THE REAL ROWS ONLY and the synthetic rows are mapped with the same fit, so every run is
drawn on the same axes: synthetic points where no real point lies are rows unlike the real data.
Each table is sampled to at most `max_rows` rows (stated in `sample_sizes`).
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from sklearn.decomposition import PCA

from ..schema import Schema
from .features import PublicEncoder
from .inputs import check_comparable, sample_rows


@dataclass
class Projection:
    """points: columns x, y, source ("real" or the synthetic label); one row per sampled row."""

    points: pd.DataFrame
    method: str
    explained_variance: tuple[float, float] | None
    sample_sizes: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {"method": self.method, "explained_variance": self.explained_variance,
                "sample_sizes": self.sample_sizes,
                "points": {c: self.points[c].tolist() for c in self.points.columns}}


def _encoded_samples(real: pd.DataFrame, synthetic: Any, schema: Schema, max_rows: int, seed: int):
    """Each table's sampled rows, encoded on the same public axes. The rows are sampled before the
    tables are checked and put in canonical form (which keeps every row, so the same rows are
    drawn): at a million rows that form took seconds a table, for the 3,000 rows plotted."""
    if isinstance(synthetic, pd.DataFrame):
        synthetic = sample_rows(synthetic, max_rows, seed + 1)
    elif isinstance(synthetic, dict):
        synthetic = {k: sample_rows(v, max_rows, seed + 1 + i) if isinstance(v, pd.DataFrame) else v
                     for i, (k, v) in enumerate(synthetic.items())}
    if isinstance(real, pd.DataFrame):
        real = sample_rows(real, max_rows, seed)
    real_c, synths = check_comparable(real, synthetic, schema)
    enc = PublicEncoder(schema).fit(real_c)
    parts = {"real": enc.transform(real_c)}
    for label, df in synths.items():
        parts[label] = enc.transform(df)
    return parts


def _points(parts: dict[str, np.ndarray], coords: dict[str, np.ndarray]) -> pd.DataFrame:
    frames = [pd.DataFrame({"x": coords[k][:, 0], "y": coords[k][:, 1], "source": k}) for k in parts]
    return pd.concat(frames, ignore_index=True)


def pca_projection(real: pd.DataFrame, synthetic: Any, schema: Schema, max_rows: int = 3000,
                   seed: int = 0) -> Projection:
    """The first two principal components of the real rows; synthetic rows projected on the same
    axes.

    explained_variance: the share of the real rows' variance each axis carries."""
    parts = _encoded_samples(real, synthetic, schema, max_rows, seed)
    pca = PCA(n_components=2, random_state=seed).fit(parts["real"])
    coords = {k: pca.transform(v) for k, v in parts.items()}
    ev = tuple(float(x) for x in pca.explained_variance_ratio_[:2])
    return Projection(points=_points(parts, coords), method="pca", explained_variance=ev,
                      sample_sizes={k: len(v) for k, v in parts.items()})


def umap_projection(real: pd.DataFrame, synthetic: Any, schema: Schema, max_rows: int = 2000,
                    seed: int = 0, n_neighbors: int = 15) -> Projection:
    """UMAP (McInnes et al. 2018) fitted on the real rows; synthetic rows placed with `transform`.

    UMAP keeps neighbourhoods, not distances: clusters and their overlap are meaningful, axis values
    and gaps between clusters are not. umap-learn is imported here because its import is slow."""
    parts = _encoded_samples(real, synthetic, schema, max_rows, seed)
    with warnings.catch_warnings():
        # numba/umap chatter (n_jobs overridden by random_state, ...)
        warnings.simplefilter("ignore")
        import umap  # noqa: PLC0415

        reducer = umap.UMAP(n_components=2, n_neighbors=min(n_neighbors, max(2, len(parts["real"]) - 1)),
                            random_state=seed, n_jobs=1, n_epochs=200)
        real_xy = reducer.fit_transform(parts["real"])
        coords = {"real": real_xy}
        for k, v in parts.items():
            if k != "real":
                coords[k] = reducer.transform(v)
    return Projection(points=_points(parts, coords), method="umap", explained_variance=None,
                      sample_sizes={k: len(v) for k, v in parts.items()})
