"""The review's charts, as plotly figures built from plain data: the review page and the HTML report draw the
same ones (no Streamlit here)."""
from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..schema import ColumnSpec

REAL_COLOR = "#4C78A8"
SYNTH_COLORS = ["#F58518", "#54A24B", "#B279A2", "#E45756"]


def layout(fig: go.Figure, title: str, height: int = 320) -> go.Figure:
    fig.update_layout(title=title, height=height, margin=dict(l=40, r=20, t=60, b=40),
                      legend=dict(orientation="h", yanchor="bottom", y=1.0, xanchor="right", x=1.0))
    return fig


def _numeric_edges(spec: ColumnSpec, values: list[pd.Series], bins: int = 30) -> np.ndarray:
    lo, hi = spec.lower, spec.upper
    if lo is None or hi is None:  # no public bounds: use what is shown (the steward's own screen)
        both = pd.concat([pd.to_numeric(v, errors="coerce") for v in values]).dropna()
        lo, hi = (float(both.min()), float(both.max())) if len(both) else (0.0, 1.0)
    if spec.kind == "integer" and spec.binning != "log":
        # whole numbers per bin, edges between integers: no bin catches one more value than its neighbour
        width = max(1, int(np.ceil((hi - lo + 1) / bins)))
        return np.arange(lo - 0.5, hi + width + 0.5, width)
    return spec.edges(bins, bounds=(lo, hi), per_integer=False)


def marginal_chart(spec: ColumnSpec, real: pd.Series, synthetic: dict[str, pd.Series]) -> go.Figure:
    """Real vs synthetic shares for one column: bars over the public categories or the same numeric bins."""
    fig = go.Figure()
    series = {"real": real, **synthetic}
    if spec.kind == "categorical":
        cats = spec.vocabulary()
        for i, (label, values) in enumerate(series.items()):
            counts = values.astype("string").value_counts(dropna=False)
            total = max(len(values), 1)
            shares = [counts.get(c, 0) / total for c in cats]
            missing = int(values.isna().sum())
            x = cats + (["(missing)"] if spec.nullable else [])
            y = shares + ([missing / total] if spec.nullable else [])
            fig.add_trace(go.Bar(x=x, y=y, name=label,
                                 marker_color=REAL_COLOR if label == "real" else SYNTH_COLORS[(i - 1) % 4]))
        fig.update_layout(barmode="group")
        fig.update_yaxes(title="share of rows")
    else:
        edges = _numeric_edges(spec, list(series.values()))
        for i, (label, values) in enumerate(series.items()):
            v = pd.to_numeric(values, errors="coerce").dropna().to_numpy(dtype=float)
            counts, _ = np.histogram(np.clip(v, edges[0], edges[-1]), bins=edges)
            shares = counts / max(len(values), 1)
            centers = (edges[:-1] + edges[1:]) / 2
            fig.add_trace(go.Bar(x=centers, y=shares, width=np.diff(edges), name=label, opacity=0.6,
                                 marker_color=REAL_COLOR if label == "real" else SYNTH_COLORS[(i - 1) % 4]))
        fig.update_layout(barmode="overlay")
        fig.update_yaxes(title="share of rows")
        if spec.binning == "log":
            fig.update_xaxes(type="log" if (spec.lower or 0) > 0 else "linear")
    fig.update_xaxes(title=spec.name)
    return layout(fig, spec.name, height=300)


def projection_chart(points: pd.DataFrame, title: str, bins: int = 40) -> go.Figure:
    """Density heatmaps of real and synthetic rows side by side, on shared axes."""
    sources = list(dict.fromkeys(points["source"]))
    fig = make_subplots(rows=1, cols=len(sources), subplot_titles=sources, shared_xaxes=True, shared_yaxes=True)
    x_edges = np.linspace(points["x"].min(), points["x"].max(), bins + 1)
    y_edges = np.linspace(points["y"].min(), points["y"].max(), bins + 1)
    for i, source in enumerate(sources, start=1):
        part = points[points["source"] == source]
        h, _, _ = np.histogram2d(part["x"], part["y"], bins=[x_edges, y_edges])
        h = h / max(len(part), 1)
        fig.add_trace(go.Heatmap(z=h.T, x=(x_edges[:-1] + x_edges[1:]) / 2, y=(y_edges[:-1] + y_edges[1:]) / 2,
                                 colorscale="Viridis", showscale=i == len(sources), name=source), row=1, col=i)
    return layout(fig, title, height=360)


def dcr_chart(synthetic_to_train: np.ndarray, holdout_to_train: np.ndarray | None) -> go.Figure:
    fig = go.Figure()
    both = np.concatenate([synthetic_to_train] + ([holdout_to_train] if holdout_to_train is not None else []))
    edges = np.linspace(0, float(np.quantile(both, 0.99)) if len(both) else 1.0, 41)
    for label, values, color in (("synthetic → training", synthetic_to_train, SYNTH_COLORS[0]),
                                 ("held-out real → training", holdout_to_train, REAL_COLOR)):
        if values is None:
            continue
        counts, _ = np.histogram(np.clip(values, edges[0], edges[-1]), bins=edges)
        fig.add_trace(go.Bar(x=(edges[:-1] + edges[1:]) / 2, y=counts / max(len(values), 1), width=np.diff(edges),
                             name=label, opacity=0.6, marker_color=color))
    fig.update_layout(barmode="overlay")
    fig.update_xaxes(title="distance to the closest training row")
    fig.update_yaxes(title="share of rows")
    return layout(fig, "Distance to closest record")


def group_rates_chart(series: dict[str, dict[str, float]], positive: str, sensitive: str) -> go.Figure:
    """The rate of `positive` per group of `sensitive`, for each labelled series ({label: {group: rate}})."""
    groups = sorted({g for rates in series.values() for g in rates})
    fig = go.Figure([go.Bar(x=groups, y=[rates.get(g, 0) for g in groups], name=label,
                            marker_color=REAL_COLOR if i == 0 else SYNTH_COLORS[(i - 1) % len(SYNTH_COLORS)])
                     for i, (label, rates) in enumerate(series.items())])
    fig.update_layout(barmode="group")
    fig.update_xaxes(title=sensitive)
    fig.update_yaxes(title=f"share with {positive}", range=[0, 1])
    return layout(fig, f"Rate of {positive} per group")


def tvd_chart(series: dict[str, dict[int, float]]) -> go.Figure:
    """Mean k-way total variation distance by k, for each labelled table ({label: {k: TVD}})."""
    fig = go.Figure([go.Bar(x=list(tvd), y=list(tvd.values()), name=label) for label, tvd in series.items()])
    fig.update_layout(barmode="group")
    fig.update_xaxes(title="k")
    fig.update_yaxes(title="TVD")
    return layout(fig, "Mean k-way total variation distance (lower is better)")


def column_scores_chart(series: dict[str, pd.DataFrame]) -> go.Figure:
    """Per column, 1 = the same marginal ({label: frame with "column" and "score"})."""
    fig = go.Figure([go.Bar(x=cols["column"], y=cols["score"], name=label) for label, cols in series.items()])
    fig.update_layout(barmode="group", yaxis_range=[0, 1.02])
    return layout(fig, "Per column: KS complement (numeric) / TV complement (categorical), 1 = same")


def association_chart(difference: pd.DataFrame, label: str) -> go.Figure:
    """|association real − synthetic| per pair of columns (0 = the link is kept)."""
    fig = go.Figure(go.Heatmap(z=difference.to_numpy(), x=list(difference.columns), y=list(difference.index),
                               zmin=0, zmax=0.5, colorscale="Reds"))
    return layout(fig, f"{label}: |association real − synthetic| per pair (0 = link kept)", height=420)
