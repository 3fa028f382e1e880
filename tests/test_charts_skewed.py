"""The review's numeric marginals on skewed columns: bins from the public scale
(ColumnSpec.chart_bins), a bar of its own for the spike at zero or the lower bound, whole numbers
per bin, and no bar cut off."""
from __future__ import annotations

from collections import defaultdict

import numpy as np
import pandas as pd
import pytest

from synth_core.demo import demo_schema, demo_table
from synth_core.evaluate.charts import marginal_chart
from synth_core.schema import ColumnSpec


def zero_inflated(n: int, seed: int) -> pd.Series:
    """92% zeros, the rest lognormal up to 1e5 (the demo's capital-gain, more extreme)."""
    rng = np.random.default_rng(seed)
    tail = np.clip(np.round(np.exp(rng.normal(8.0, 1.5, n))), 1, 99999)
    return pd.Series(np.where(rng.random(n) < 0.92, 0, tail).astype(int))


def shares_by_series(fig) -> dict[str, dict[str, float]]:
    """{series: {bar label: share}} over all of a figure's panels."""
    out = defaultdict(dict)
    for trace in fig.data:
        out[trace.name].update(zip(trace.x, (float(y) for y in trace.y)))
    return dict(out)


def assert_no_bar_cut_off(fig) -> None:
    layout = fig.to_plotly_json()["layout"]
    for trace in fig.data:
        axis = layout.get("yaxis" + (trace.yaxis or "y")[1:], {})
        assert axis.get("autorange", True) is not False
        if axis.get("range") is not None:
            assert axis["range"][1] >= max(trace.y)


def test_a_zero_inflated_column_shows_its_tail_beside_the_zero_bar():
    spec = demo_schema()["capital-gain"]  # integer, 0..99999, log scale
    real, synthetic = zero_inflated(5000, seed=0), zero_inflated(5000, seed=1)
    fig = marginal_chart(spec, real, {"synthetic": synthetic})
    shares = shares_by_series(fig)
    for label, values in (("real", real), ("synthetic", synthetic)):
        got = shares[label]
        assert sum(got.values()) == pytest.approx(1.0)
        assert got["= 0"] == pytest.approx((values == 0).mean())
        tail = {x: y for x, y in got.items() if x != "= 0"}
        assert sum(tail.values()) == pytest.approx((values > 0).mean())
        assert sum(y > 0 for y in tail.values()) >= 6  # the tail spreads over many bars, not one
    # the zero bar has a panel (and y-axis) of its own, so the tail's bars are not flattened by it
    zero_axes = {t.yaxis for t in fig.data if "= 0" in t.x}
    tail_axes = {t.yaxis for t in fig.data if "= 0" not in t.x}
    assert zero_axes.isdisjoint(tail_axes)
    # log-spaced whole-number bins: each wider than the one before it, from 1 up to the upper bound
    point, edges = spec.chart_bins(bounds=(spec.lower, spec.upper))
    assert point == 0 and edges[0] == 0.5 and edges[-1] == spec.upper + 0.5
    widths = np.diff(edges)
    assert (widths >= 1).all() and widths[-1] > 100 * widths[0]
    assert_no_bar_cut_off(fig)


def test_a_count_column_gets_whole_numbers_per_bar():
    spec = ColumnSpec("children", "integer", lower=0, upper=20)
    rng = np.random.default_rng(0)
    fig = marginal_chart(spec, pd.Series(rng.poisson(2.0, 2000)), {"synthetic": pd.Series(rng.poisson(2.5, 2000))})
    labels = [x for t in fig.data if t.name == "real" for x in t.x]
    assert labels == ["= 0"] + [str(k) for k in range(1, 21)]  # one bar per count, at most 21
    for lower, upper in ((0, 20), (0, 500), (17, 90), (-5, 70)):
        point, edges = ColumnSpec("c", "integer", lower=lower, upper=upper).chart_bins()
        assert len(edges) - 1 <= 20 and (np.diff(edges) >= 1).all()
        # edges between whole numbers: every bin holds whole integers
        assert np.allclose(edges % 1, 0.5)
        assert edges[0] == (lower + 0.5 if point is not None else lower - 0.5) and edges[-1] == upper + 0.5
    assert_no_bar_cut_off(fig)


def test_missing_values_get_their_own_bar():
    spec = ColumnSpec("hours", "integer", lower=1, upper=99, nullable=True)
    real = pd.Series([40.0, 38.0, np.nan, 50.0, np.nan, 99.0, 1.0, 20.0])
    shares = shares_by_series(marginal_chart(spec, real, {"synthetic": pd.Series([40, 41, 42, 43])}))
    assert shares["real"]["(missing)"] == pytest.approx(0.25)
    assert shares["synthetic"]["(missing)"] == 0
    assert all(sum(s.values()) == pytest.approx(1.0) for s in shares.values())


def test_bins_come_from_the_public_schema_not_the_real_table():
    schema = demo_schema()
    one, other = demo_table(1500, seed=0), demo_table(800, seed=7)
    other["capital-gain"] = other["capital-gain"] // 10  # a different spread inside the same bounds
    other["age"] = other["age"].clip(30, 50)
    for spec in schema.columns:
        if not spec.is_numeric:
            continue
        figs = [marginal_chart(spec, t[spec.name], {"synthetic": one[spec.name]}) for t in (one, other)]
        assert [list(t.x) for t in figs[0].data] == [list(t.x) for t in figs[1].data], spec.name
        for fig in figs:
            assert all(sum(s.values()) == pytest.approx(1.0) for s in shares_by_series(fig).values())
            assert_no_bar_cut_off(fig)


def test_a_continuous_log_column_has_a_bar_at_its_lower_bound():
    spec = ColumnSpec("wage", "continuous", lower=0.0, upper=20000.0, binning="log")
    point, edges = spec.chart_bins(n_bins=20)
    assert point == 0 and len(edges) == 21 and edges[0] == 0 and edges[-1] == pytest.approx(20000)
    # even steps of log1p: the schema's own scale
    assert (np.diff(np.diff(np.log1p(edges))) < 1e-9).all()
    uniform = ColumnSpec("share", "continuous", lower=0.1, upper=3.0)
    point, edges = uniform.chart_bins(n_bins=10)
    assert point is None and np.allclose(edges, np.linspace(0.1, 3.0, 11))


def test_a_date_column_charts_its_real_years_with_years_on_the_axis():
    """Issue 61 item 4: the review charted a date column with no real bars (the rows as uploaded,
    dates as text) and an axis of '2.01k, 2.011k'. The real rows as the schema reads them, and years
    written whole."""
    from synth_core.evaluate.inputs import canonical
    from synth_core.schema import Schema
    schema = Schema(columns=[ColumnSpec("opened", "integer", lower=2005, upper=2015, date="year"),
                             ColumnSpec("kind", "categorical", categories=["a", "b"])])
    raw = pd.DataFrame({"opened": ["2011-03-04", "04/05/2012", "2013-01-31", "2011-07-01"] * 25,
                        "kind": ["a", "b"] * 50})
    shown = canonical(raw, schema)
    fig = marginal_chart(schema["opened"], shown["opened"], {"synthetic": pd.Series([2011, 2012] * 50)})
    shares = shares_by_series(fig)
    assert sum(shares["real"].values()) == pytest.approx(1.0)  # every real row has its bar
    assert shares["real"]["2011"] == pytest.approx(0.5) and "2.01k" not in "".join(shares["real"])
    assert "(year)" in fig.layout.xaxis.title.text


def test_a_value_set_charts_a_bar_a_value_labelled_as_written():
    spec = ColumnSpec("rate", "continuous", values=[0, 1.2, 2, 3.26, 4.56])
    real = pd.Series([0, 0, 1.2, 3.26, 4.56, 2] * 20)
    shares = shares_by_series(marginal_chart(spec, real, {"synthetic": real.sample(frac=1, random_state=1)}))
    assert set(shares["real"]) == {"0", "1.2", "2", "3.26", "4.56"}
    assert shares["real"]["0"] == pytest.approx(1 / 3)
