"""Every chart the app draws, as plotly figures built from plain data (no Streamlit here)."""
from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from synth_core.schema import ColumnSpec

REAL_COLOR = "#4C78A8"
SYNTH_COLORS = ["#F58518", "#54A24B", "#B279A2", "#E45756"]


def _layout(fig: go.Figure, title: str, height: int = 320) -> go.Figure:
    fig.update_layout(title=title, height=height, margin=dict(l=40, r=20, t=60, b=40),
                      legend=dict(orientation="h", yanchor="bottom", y=1.0, xanchor="right", x=1.0))
    return fig


def loss_chart(events_by_run: dict[str, list[dict]]) -> go.Figure:
    fig = go.Figure()
    for i, (label, events) in enumerate(events_by_run.items()):
        steps = [e["step"] for e in events if e.get("loss") is not None]
        losses = [e["loss"] for e in events if e.get("loss") is not None]
        fig.add_trace(go.Scatter(x=steps, y=losses, mode="lines", name=label,
                                 line=dict(color=SYNTH_COLORS[i % len(SYNTH_COLORS)])))
    fig.update_xaxes(title="step")
    fig.update_yaxes(title="training loss")
    return _layout(fig, "Loss per step")


def epsilon_chart(events: list[dict], target: float, steps_planned: int | None, label: str = "ε spent") -> go.Figure:
    fig = go.Figure()
    steps = [0] + [e["step"] for e in events if e.get("epsilon") is not None]
    eps = [0.0] + [e["epsilon"] for e in events if e.get("epsilon") is not None]
    fig.add_trace(go.Scatter(x=steps, y=eps, mode="lines", name=label, line=dict(color=SYNTH_COLORS[0])))
    end = steps_planned or (steps[-1] if steps else 1)
    fig.add_trace(go.Scatter(x=[0, end], y=[target, target], mode="lines", name=f"budget ε = {target:g}",
                             line=dict(color="#E45756", dash="dash")))
    fig.update_xaxes(title="step", range=[0, end])
    fig.update_yaxes(title="ε", rangemode="tozero")
    return _layout(fig, "Privacy spent per step")


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
    return _layout(fig, spec.name, height=300)


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
    return _layout(fig, title, height=360)


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
    return _layout(fig, "Distance to closest record")


def group_rates_chart(before: dict[str, float], after: dict[str, float], positive: str, sensitive: str) -> go.Figure:
    groups = sorted(set(before) | set(after))
    fig = go.Figure([
        go.Bar(x=groups, y=[before.get(g, 0) for g in groups], name="unconditioned", marker_color=REAL_COLOR),
        go.Bar(x=groups, y=[after.get(g, 0) for g in groups], name="with fairness control",
               marker_color=SYNTH_COLORS[0]),
    ])
    fig.update_layout(barmode="group")
    fig.update_xaxes(title=sensitive)
    fig.update_yaxes(title=f"share with {positive}", range=[0, 1])
    return _layout(fig, f"Rate of {positive} per group")
