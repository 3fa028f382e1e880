"""The review's charts, as plotly figures built from plain data: the review page and the HTML report
draw the same ones (no Streamlit here)."""
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


def _color(i: int, label: str) -> str:
    return REAL_COLOR if label == "real" else SYNTH_COLORS[(i - 1) % len(SYNTH_COLORS)]


def _shows_missing(spec: ColumnSpec, series: dict[str, pd.Series]) -> bool:
    return spec.nullable or any(values.isna().any() for values in series.values())


def marginal_chart(spec: ColumnSpec, real: pd.Series, synthetic: dict[str, pd.Series]) -> go.Figure:
    """Real vs synthetic shares for one column: bars over the public categories or the public
    numeric bins."""
    series = {"real": real, **synthetic}
    if spec.is_numeric:
        return _numeric_chart(spec, series)
    fig = go.Figure()
    cats = spec.vocabulary()
    missing = _shows_missing(spec, series)
    for i, (label, values) in enumerate(series.items()):
        counts = values.astype("string").value_counts()
        total = max(len(values), 1)
        y = [counts.get(c, 0) / total for c in cats] + ([values.isna().sum() / total] if missing else [])
        fig.add_trace(go.Bar(x=cats + (["(missing)"] if missing else []), y=y, name=label,
                             marker_color=_color(i, label)))
    fig.update_layout(barmode="group")
    fig.update_xaxes(title=spec.name, type="category")
    fig.update_yaxes(title="share of rows", rangemode="tozero", autorange=True)
    return layout(fig, spec.name, height=300)


# --- numeric columns: the public bins (ColumnSpec.chart_bins) as categories, so that log-spaced and
# whole-number bins are all wide enough to see; the point at zero (or the lower bound) and the
# missing values, which can hold most rows, get bars of their own in a side panel with its own
# y-axis, so they never flatten the rest.
def _bounds(spec: ColumnSpec, series: dict[str, pd.Series]) -> tuple[float, float]:
    """The public bounds; a bound the schema lacks is read from what is shown (the steward's own
    screen)."""
    lo, hi = spec.lower, spec.upper
    if lo is None or hi is None:
        shown = pd.concat([pd.to_numeric(v, errors="coerce") for v in series.values()]).dropna()
        lo = lo if lo is not None else (float(shown.min()) if len(shown) else 0.0)
        hi = hi if hi is not None else (float(shown.max()) if len(shown) else lo + 1.0)
    return float(lo), max(float(hi), float(lo) + 1.0)


def _num(x: float, digits: int, plain: bool = False) -> str:
    """A number for an axis label: `digits` significant digits, thousands as k and millions as M
    (`plain`: a year, written whole, 2011 and not 2.01k)."""
    if plain:
        return f"{round(x):d}"
    x = float(f"{x:.{digits}g}")
    for scale, suffix in ((1e6, "M"), (1e3, "k")):
        if abs(x) >= scale:
            return f"{x / scale:.{digits}g}{suffix}"
    return f"{x:.{digits}g}"


def _bin_labels(edges: np.ndarray, integer: bool, plain: bool = False) -> list[str]:
    """"5", "5–9" (whole numbers, both ends included) or "0.5–1.2"; more digits where 3 would repeat
    a label."""
    lows, highs = (edges[:-1] + 0.5, edges[1:] - 0.5) if integer else (edges[:-1], edges[1:])
    dash = " to " if lows[0] < 0 else "–"
    for digits in (3, 6, 12):
        labels = [_num(a, digits, plain) if integer and a == b
                  else f"{_num(a, digits, plain)}{dash}{_num(b, digits, plain)}"
                  for a, b in zip(lows, highs)]
        if len(set(labels)) == len(labels):
            break
    return labels


def _value_labels(spec: ColumnSpec, edges: np.ndarray) -> list[str]:
    """A value set's bins by the values each holds, as the steward wrote them ("3.26"; "1.2–2" for a
    bin of several)."""
    values = np.asarray(spec.values, dtype=float)
    labels = []
    for a, b in zip(edges[:-1], edges[1:]):
        inside = values[(values >= a) & (values < b)] if b < edges[-1] else values[values >= a]
        shown = [f"{v:.12g}" for v in inside]
        labels.append(shown[0] if len(shown) == 1 else f"{shown[0]}–{shown[-1]}" if shown else "")
    return labels if len(set(labels)) == len(labels) else _bin_labels(edges, spec.kind == "integer")


def _numeric_chart(spec: ColumnSpec, series: dict[str, pd.Series]) -> go.Figure:
    lo, hi = _bounds(spec, series)
    point, edges = spec.chart_bins(bounds=(lo, hi))
    bins = (_value_labels(spec, edges) if spec.values is not None
            else _bin_labels(edges, spec.kind == "integer", plain=spec.date is not None))
    missing = _shows_missing(spec, series)
    side = ([f"= {_num(point, 6)}" + ("" if point == 0 else " (lower bound)")] if point is not None else []) + (
        ["(missing)"] if missing else [])
    if side:
        fig = make_subplots(rows=1, cols=2, column_widths=[0.12 * len(side), 1 - 0.12 * len(side)],
                            horizontal_spacing=0.1)
    else:
        fig = go.Figure()
    for i, (label, values) in enumerate(series.items()):
        v = pd.to_numeric(values, errors="coerce")
        total = max(len(v), 1)
        x = np.clip(v.dropna().to_numpy(dtype=float), lo, hi)
        at_point = x == point if point is not None else np.zeros(len(x), dtype=bool)
        counts, _ = np.histogram(np.clip(x[~at_point], edges[0], edges[-1]), bins=edges)
        style = dict(name=label, legendgroup=label, marker_color=_color(i, label),
                     hovertemplate="%{x}: %{y:.2%} of rows")
        bars = go.Bar(x=bins, y=counts / total, **style)
        if not side:
            fig.add_trace(bars)
            continue
        side_y = ([at_point.sum() / total] if point is not None else []) + ([v.isna().sum() / total] if missing else [])
        fig.add_trace(go.Bar(x=side, y=side_y, showlegend=False, **style), row=1, col=1)
        fig.add_trace(bars, row=1, col=2)
    fig.update_layout(barmode="group")
    fig.update_xaxes(type="category", automargin=True)
    # never a fixed range: the tallest bar shows whole
    fig.update_yaxes(rangemode="tozero", autorange=True)
    left, main = (dict(row=1, col=1), dict(row=1, col=2)) if side else ({}, {})
    fig.update_yaxes(title="share of rows", **left)
    fig.update_xaxes(title=spec.name + (" (bins on a log scale)" if spec.binning == "log" else "")
                     + (" (year)" if spec.date is not None else ""), **main)
    return layout(fig, spec.name, height=320)


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
    """The rate of `positive` per group of `sensitive`, for each labelled series ({label: {group:
    rate}})."""
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


def children_chart(shares: dict[str, list[float]]) -> go.Figure:
    """The share of persons with 0, 1, … child rows, real and synthetic ({label: shares, "real"
    first})."""
    fig = go.Figure([go.Bar(x=list(range(len(values))), y=values, name=label, marker_color=_color(i, label))
                     for i, (label, values) in enumerate(shares.items())])
    fig.update_layout(barmode="group")
    fig.update_xaxes(title="child rows of a person", dtick=1)
    fig.update_yaxes(title="share of persons")
    return layout(fig, "Child rows per person")


def level_columns_chart(series: dict[str, dict[str, float]]) -> go.Figure:
    """Each column's 1-way TVD at both levels of linked tables ({label: {"parents: age": TVD,
    …}})."""
    fig = go.Figure([go.Bar(x=list(tvd), y=list(tvd.values()), name=label, marker_color=_color(i + 1, label))
                     for i, (label, tvd) in enumerate(series.items())])
    fig.update_layout(barmode="group")
    # "parents: age", "children: day": whole, not cut
    fig.update_xaxes(tickangle=-45, automargin=True)
    fig.update_yaxes(title="1-way TVD (0: the same shares)")
    return layout(fig, "Each column alone (lower is better)", height=420)
