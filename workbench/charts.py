"""The training and model pages' charts: loss and ε per step, the forecast against ε (the review's
charts are synth_core.evaluate.charts)."""
from __future__ import annotations

import math

import plotly.graph_objects as go

from synth_core.evaluate.charts import SYNTH_COLORS, layout


def loss_chart(events_by_run: dict[str, list[dict]], unit: str = "steps") -> go.Figure:
    fig = go.Figure()
    for i, (label, events) in enumerate(events_by_run.items()):
        steps = [e["step"] for e in events if e.get("loss") is not None]
        losses = [e["loss"] for e in events if e.get("loss") is not None]
        fig.add_trace(go.Scatter(x=steps, y=losses, mode="lines", name=label,
                                 line=dict(color=SYNTH_COLORS[i % len(SYNTH_COLORS)])))
    fig.update_xaxes(title=unit.rstrip("s"))
    # AIM's rounds report how far the model was from the marginal each chose (a share of rows)
    fig.update_yaxes(title="training loss" if unit == "steps" else "error of the chosen statistic")
    several = len(events_by_run) > 1
    fig = layout(fig, f"Loss per {unit.rstrip('s')}", height=320 + (22 * len(events_by_run) if several else 0))
    if not several:
        fig.update_layout(showlegend=False)  # one run: the page says which
    else:  # runs' names are long: one per line under the chart, never over its title
        fig.update_layout(legend=dict(orientation="v", yanchor="top", y=-0.25, xanchor="left", x=0),
                          margin=dict(b=40 + 22 * len(events_by_run)))
    return fig


def epsilon_chart(events: list[dict], target: float, steps_planned: int | None, label: str = "ε spent",
                  unit: str = "steps") -> go.Figure:
    fig = go.Figure()
    steps = [0] + [e["step"] for e in events if e.get("epsilon") is not None]
    eps = [0.0] + [e["epsilon"] for e in events if e.get("epsilon") is not None]
    fig.add_trace(go.Scatter(x=steps, y=eps, mode="lines", name=label, line=dict(color=SYNTH_COLORS[0])))
    end = steps_planned or (steps[-1] if steps else 1)
    fig.add_trace(go.Scatter(x=[0, end], y=[target, target], mode="lines", name=f"budget ε = {target:g}",
                             line=dict(color="#E45756", dash="dash")))
    fig.update_xaxes(title=unit.rstrip("s"), range=[0, end])
    fig.update_yaxes(title="ε", rangemode="tozero")
    return layout(fig, f"Privacy spent per {unit.rstrip('s')}")


def forecast_chart(points: list, floor, chosen: float | None) -> go.Figure:
    """The expected 2-way TVD against ε (synth_core.forecast.curve) with its 80% band, the table's
    own floor, and the ε chosen."""
    eps = [p[0] for p in points]
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=eps + eps[::-1], y=[p[2].high for p in points] + [p[2].low for p in points][::-1],
                             fill="toself", fillcolor="rgba(31,119,180,0.15)", line={"width": 0}, hoverinfo="skip",
                             name="80% of tables like this"))
    fig.add_trace(go.Scatter(x=eps, y=[p[2].expected for p in points], mode="lines", name="expected",
                             line={"color": "#1f77b4"}, customdata=[p[1] for p in points],
                             hovertemplate="ε = %{x:.3g}: %{y:.3f} (%{customdata})<extra></extra>"))
    if floor is not None:
        fig.add_hline(y=floor.expected, line={"dash": "dot", "color": "#7f7f7f"},
                      annotation_text="the table's own rows against unseen ones", annotation_position="top right")
    if chosen:
        fig.add_vline(x=chosen, line={"dash": "dash", "color": "#d62728"})
        # on a log axis an annotation's x is the exponent (a line's is the value): written apart, it
        # sits on the line
        fig.add_annotation(x=math.log10(chosen), y=1, xref="x", yref="paper", text=f"ε = {chosen:g}",
                           showarrow=False, xanchor="left", yanchor="bottom", font={"color": "#d62728"})
    ticks = [t for t in (0.05, 0.1, 0.25, 0.5, 1, 2, 4, 10) if min(eps) <= t <= max(eps)]
    fig.update_layout(xaxis={"type": "log", "title": "ε", "tickvals": ticks, "ticktext": [f"{t:g}" for t in ticks]},
                      yaxis={"title": "pairs of columns: mismatch (2-way TVD)", "rangemode": "tozero"},
                      height=320, margin={"l": 10, "r": 10, "t": 30, "b": 10}, legend={"orientation": "h"})
    return fig
