"""Issue 59 items 1-2: numbers as stewards write them. A numeric column's declared value set (codes,
brackets written as their midpoints, a Likert scale, rates from a short list) and its point masses
(the 0 most amounts hold) are public facts of the schema: drafted from the table with a category's
protection, round-tripped through JSON, edited in the schema grid, and every family writes only
declared values and a point exactly, on single and linked tables."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from synth_core import api
from synth_core.models import MODELS
from synth_core.schema import ColumnSpec, Schema, SchemaError, draft_schema, validate_table
from synth_core.schema.linked import LinkedSchema, LinkedTables

RATES = [0, 1.2, 2.0, 3.26, 4.56]
BRACKETS = [17.5, 22, 27, 32, 37]
FEE = 6.109248  # a point mass inside the range, with more digits than a draft once kept


def coded_table(n: int = 600, seed: int = 0) -> pd.DataFrame:
    """Rates from a short list (0 on more than half the rows), ages in brackets written as
    midpoints, a 1-7 item, an amount that is 0 on three rows in five and a fee on one, and a
    category."""
    rng = np.random.default_rng(seed)
    sex = rng.choice(["f", "m"], n)
    u = rng.random(n)
    return pd.DataFrame({
        "rate": rng.choice(RATES, n, p=[0.55, 0.15, 0.1, 0.1, 0.1]),
        "age": rng.choice(BRACKETS, n),
        "item": np.where(sex == "f", rng.integers(4, 8, n), rng.integers(1, 5, n)),
        # 0 on three rows in five, a fee of 6.109248 (stored at single precision) on one in five
        "amount": np.select([u < 0.6, u < 0.8], [0.0, float(np.float32(FEE))],
                            np.round(rng.gamma(2, 300, n), 2)),
        "sex": sex,
    })


def coded_schema() -> Schema:
    return Schema(columns=[
        ColumnSpec("rate", "continuous", values=RATES),
        ColumnSpec("age", "continuous", lower=15, upper=40, values=BRACKETS),
        ColumnSpec("item", "integer", values=list(range(1, 8))),
        ColumnSpec("amount", "continuous", lower=0, upper=3000, points=[0, FEE]),
        ColumnSpec("sex", "categorical", categories=["f", "m"]),
    ])


def _options(family: str) -> dict:
    if family == "aim":
        return {}
    options = {"epochs": 2, "batch_size": 64}
    if family == "dp-llmtgen":  # the slowest family: one epoch of each stage
        options.update(epochs=1, stage1_rows=64, stage1_epochs=1)
    return options


def _written_as_declared(table: pd.DataFrame) -> None:
    assert set(table["rate"].dropna()) <= set(RATES), sorted(set(table["rate"]) - set(RATES))[:5]
    assert set(table["age"].dropna()) <= set(BRACKETS)
    assert set(table["item"].dropna()) <= set(range(1, 8))
    amount = table["amount"].to_numpy(dtype=float)
    assert not ((amount > 0) & (amount < 1e-6)).any()  # a 0 is written 0, never 5e-324


@pytest.mark.parametrize("family", sorted(MODELS))
def test_every_family_writes_only_declared_values_and_points_exactly(family, tmp_path):
    api.fit(coded_table(300), coded_schema(), model=family, epsilon=4.0, preset="tiny", accountant="rdp",
            options=_options(family), run_dir=tmp_path / "run", review_rows=0)
    table, _ = api.sample(tmp_path / "run", 200, seed=1, out=tmp_path / "out.csv")
    _written_as_declared(table)
    _written_as_declared(api.load_model(tmp_path / "run").sample(100, seed=2, calibrate=False))
    text = (tmp_path / "out.csv").read_text()
    assert "3.2600000" not in text and "17.500000" not in text  # as the steward wrote them
    if family != "dp-llmtgen":  # a language model of one epoch writes few rows of a point
        assert (table["amount"] == 0).any()
        # the inner point exactly, not 6.1092 nor 6.1093
        assert (table["amount"] == FEE).mean() > 0.05


def test_linked_tables_write_only_declared_values(tmp_path):
    rng = np.random.default_rng(3)
    n = 150
    parents = pd.DataFrame({"pid": [f"P{i}" for i in range(n)], "age": rng.choice(BRACKETS, n)})
    person = np.repeat(np.arange(n), rng.integers(1, 4, n))
    children = pd.DataFrame({"pid": parents["pid"].to_numpy()[person],
                             "rate": rng.choice(RATES, len(person)),
                             "amount": np.where(rng.random(len(person)) < 0.7, 0.0, 250.5)})
    schema = LinkedSchema(parent=Schema([ColumnSpec("age", "continuous", values=BRACKETS)]),
                          child=Schema([ColumnSpec("rate", "continuous", values=RATES),
                                        ColumnSpec("amount", "continuous", lower=0, upper=500, points=[0])]),
                          key="pid", max_children=3)
    api.fit(LinkedTables(parents, children), schema, "dp-tbart", epsilon=4.0, preset="tiny",
            run_dir=tmp_path / "run", options={"epochs": 2}, review_rows=0)
    sampled, _ = api.sample(tmp_path / "run", 60, seed=1)
    assert set(sampled.parents["age"]) <= set(BRACKETS)
    assert set(sampled.children["rate"]) <= set(RATES)
    amount = sampled.children["amount"].to_numpy(dtype=float)
    assert (amount == 0).any() and not ((amount > 0) & (amount < 1e-6)).any()


def test_a_draft_proposes_value_sets_and_point_masses_with_a_categorys_protection():
    table = coded_table(2000)
    table.loc[:4, "rate"] = 9.99  # a value five rows hold: never proposed
    schema = draft_schema(table)
    assert schema["rate"].values == RATES and schema["rate"].upper >= 4.56
    assert schema["age"].values == BRACKETS and schema["item"].values == list(range(1, 8))
    # the fee as the data hold it (6.109248, not 6.10925), the single precision it was stored at
    # dropped
    assert schema["amount"].values is None and schema["amount"].points == [0, FEE]
    assert schema.drafted_from_data and not schema.confirmed
    rows, report = validate_table(table, schema)
    # validated rows sit on the point exactly: its bin holds them
    assert (rows["amount"] == FEE).mean() > 0.15
    assert set(rows["rate"]) <= set(RATES) and report.columns["rate"].snapped == 5
    assert any("put on the nearest" in line for line in report.summary())


def test_value_sets_and_points_round_trip_through_json_and_bad_ones_are_refused():
    schema = coded_schema()
    again = Schema.from_json(schema.to_json())
    assert again == schema and again["age"].values == BRACKETS and again["amount"].points == [0, FEE]
    # a value set sets the bounds it lacks
    assert again["rate"].lower == 0 and again["rate"].upper == 4.56
    bad = {
        "a single value": ({"values": [1]}, "declare from 2"),
        "a value twice": ({"values": [1, 1]}, "twice"),
        "text": ({"values": "1,2"}, "list of numbers"),
        "a value of 1e400": ({"values": [1, 10 ** 400]}, "list of numbers"),
        "a fraction in an integer column": ({"kind": "integer", "values": [1.5, 2]}, "whole numbers"),
        "a point outside the bounds": ({"points": [500]}, "outside its bounds"),
        "a point that is no value": ({"values": [1, 2], "points": [3]}, "one of the column's values"),
        "values on a category": ({"kind": "categorical", "categories": ["a"], "values": [1, 2]},
                                 "numeric column"),
        "eleven points": ({"points": list(range(11))}, "declare from 1 to 10"),
    }
    for what, (change, words) in bad.items():
        column = {"name": "x", "kind": "continuous", "lower": 0, "upper": 100, **change}
        data = {"version": 1, "columns": [column]}
        with pytest.raises(SchemaError, match=words):
            Schema.from_json(json.dumps(data))


def test_bins_hold_whole_values_and_decode_to_them():
    spec = coded_schema()["rate"]
    edges = spec.edges(100)
    assert len(edges) == len(RATES) + 1  # a bin a value
    rng = np.random.default_rng(0)
    assert list(spec.decode_bins(edges, np.arange(len(RATES)), rng)) == RATES
    few = spec.edges(2)  # fewer bins than values: no value is split
    decoded = spec.decode_bins(few, np.array([0, 1] * 50), rng)
    assert set(decoded) <= set(RATES) and len(set(decoded)) > 2
    assert list(spec.snap([3.21, -1.0, 99.0])) == [3.26, 0.0, 4.56]


def test_the_schema_grid_shows_and_edits_value_sets_and_points():
    from workbench.schema_table import frame_to_schema, schema_to_frame
    schema = coded_schema()
    frame = schema_to_frame(schema)
    row = frame.set_index("column")
    assert row.loc["rate", "values"] == "0, 1.2, 2, 3.26, 4.56" and row.loc["amount", "points"] == "0, 6.109248"
    assert frame_to_schema(frame, schema) == schema
    frame.loc[frame["column"] == "item", "values"] = "1, 2, 3, 4, 5"
    frame.loc[frame["column"] == "amount", "points"] = "0, 100"
    edited = frame_to_schema(frame, schema)
    assert edited["item"].values == [1, 2, 3, 4, 5] and edited["amount"].points == [0, 100]
    frame.loc[frame["column"] == "rate", "values"] = "0, a lot"
    with pytest.raises(SchemaError, match="rate"):
        frame_to_schema(frame, schema)


# --- value sets the schema lacks, found with DP (privacy.value_sets) --------------------------------------
def _undeclared() -> Schema:
    """The coded table's columns with their precision but none of their values declared."""
    return Schema(columns=[
        ColumnSpec("rate", "continuous", lower=0, upper=5, decimals=2),
        ColumnSpec("age", "continuous", lower=15, upper=40, decimals=1),
        ColumnSpec("item", "integer", lower=1, upper=7),
        ColumnSpec("amount", "continuous", lower=0, upper=3000, decimals=0),
        ColumnSpec("sex", "categorical", categories=["f", "m"]),
    ])


def test_dp_finds_the_value_sets_and_points_a_schema_lacks_and_the_ledger_pays_for_them():
    from synth_core.privacy import PrivacyLedger
    from synth_core.privacy.value_sets import find_value_sets
    table = coded_table(5000)
    ledger = PrivacyLedger(target_epsilon=2.0, target_delta=1e-6, n_rows=5000)
    found = find_value_sets(table, _undeclared(), 1.0, ledger, 5000)
    assert found["rate"].values == RATES and found["age"].values == BRACKETS
    assert found["item"].values == list(range(1, 8))
    # the fee is written whole (decimals=0): a point at 6
    assert found["amount"].values is None and found["amount"].points == [0.0, 6.0]
    (entry,) = ledger.entries
    assert entry.kind == "value-sets" and entry.epsilon == 1.0 and entry.delta == 0.0
    assert entry.details["columns"] == ["rate", "age", "item", "amount"]
    assert ledger.spent_epsilon == 1.0


def test_a_value_a_few_rows_hold_is_never_found():
    from synth_core.privacy import PrivacyLedger
    from synth_core.privacy.value_sets import find_value_sets
    table = coded_table(3000)
    table.loc[:2, "rate"] = 4.99  # three rows: far below the threshold at ε = 0.25 a column
    ledger = PrivacyLedger(target_epsilon=2.0, target_delta=1e-6, n_rows=3000)
    for _ in range(5):
        found = find_value_sets(table, _undeclared(), 1.0, ledger, 3000)
        assert 4.99 not in (found["rate"].values or [])


def test_found_value_sets_are_not_replayable_from_the_seed():
    """A value about as many rows hold as the threshold is found or not by its secret noise,
    whatever seeds."""
    import torch
    from synth_core.privacy import PrivacyLedger
    from synth_core.privacy.value_sets import find_value_sets
    schema = Schema(columns=[ColumnSpec("x", "integer", lower=0, upper=9)])
    table = pd.DataFrame({"x": [1] * 500 + [2] * 400 + [7] * 9})  # τ = ln(10 / 0.002) / 1 ≈ 8.5
    outcomes = set()
    for _ in range(20):
        torch.manual_seed(0)
        np.random.seed(0)
        ledger = PrivacyLedger(target_epsilon=2.0, target_delta=1e-6, n_rows=len(table))
        outcomes.add(tuple(find_value_sets(table, schema, 1.0, ledger, len(table))["x"].values or ()))
    assert len(outcomes) > 1


def test_a_fit_finds_value_sets_within_its_budget_and_every_row_is_written_at_them(tmp_path):
    fitted = api.fit(coded_table(2000), _undeclared(), model="dp-tbart", epsilon=2.0, values_epsilon=0.5,
                     preset="tiny", accountant="rdp", options={"epochs": 2}, run_dir=tmp_path / "run",
                     review_rows=0)
    ledger = fitted.ledger
    assert [e.kind for e in ledger.entries].count("value-sets") == 1
    assert ledger.spent_epsilon <= 2.0 + 1e-9
    assert fitted.schema["rate"].values == RATES and fitted.run.schema()["rate"].values == RATES
    table, _ = api.sample(tmp_path / "run", 100, seed=1)
    assert set(table["rate"]) <= set(RATES) and set(table["age"]) <= set(BRACKETS)


def test_finding_values_is_refused_in_one_line_where_it_cannot_be():
    from synth_core.privacy import BudgetError
    no_precision = Schema(columns=[ColumnSpec("x", "continuous", lower=0, upper=1),
                                   ColumnSpec("s", "categorical", categories=["a", "b"])])
    table = pd.DataFrame({"x": np.linspace(0, 1, 50), "s": ["a", "b"] * 25})
    with pytest.raises(SchemaError, match="no number column can have its values found"):
        api.fit(table, no_precision, epsilon=1.0, values_epsilon=0.2, preset="tiny")
    for bad, words in [(-0.1, "finding value sets"), (1.0, "finding value sets"), (0.99, "leaves nothing"),
                       (float("nan"), "finding value sets")]:
        with pytest.raises(BudgetError, match=words):
            api.fit(coded_table(), _undeclared(), epsilon=1.0, values_epsilon=bad, preset="tiny")
