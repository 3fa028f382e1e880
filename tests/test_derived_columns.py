"""Derived columns (a public rule computes them after sampling, never modelled) and the steward's
category order."""
import numpy as np
import pandas as pd
import pytest

from synth_core import api
from synth_core.demo import EDUCATION, demo_schema, demo_table
from synth_core.encoding import TokenEncoder
from synth_core.schema import ColumnSpec, Schema, SchemaError, draft_schema, random_table, validate_table
from synth_core.schema.derived import apply, describe
from synth_core.schema.draft import natural_order

AGE_GROUPS = ["17-24", "25-44", "45-64", "65+"]
AGE_RULE = {"from": "age", "bins": [17, 25, 45, 65, 90], "labels": AGE_GROUPS}
DEGREE_RULE = {"from": "education", "map": {"HS-grad": "no", "Some-college": "no", "Bachelors": "yes",
                                            "Masters": "yes", "Doctorate": "yes"}}


def derived_schema() -> Schema:
    """The demo schema with an age group cut from age and a degree looked up from education."""
    d = demo_schema().to_dict()
    d["columns"] += [{"name": "age group", "kind": "categorical", "categories": AGE_GROUPS, "derived": AGE_RULE},
                     {"name": "degree", "kind": "categorical", "categories": ["no", "yes"], "derived": DEGREE_RULE}]
    return Schema.from_dict(d)


def consistent(table: pd.DataFrame) -> np.ndarray:
    return ((table["age group"].to_numpy(dtype=object) == apply(AGE_RULE, table["age"]))
            & (table["degree"].to_numpy(dtype=object) == apply(DEGREE_RULE, table["education"])))


def test_the_schema_round_trips_with_its_rules_and_order():
    schema = derived_schema()
    again = Schema.from_json(schema.to_json())
    assert again.to_dict() == schema.to_dict()
    assert again["age group"].derived == AGE_RULE and again["age group"].categories == AGE_GROUPS
    assert [c.name for c in again.derived_columns] == ["age group", "degree"]
    assert again.modelled().names == demo_schema().names
    # nothing derived: the schema itself
    assert demo_schema().modelled().names == demo_schema().names


def test_bins_are_right_open_and_the_last_one_closed():
    assert list(apply(AGE_RULE, pd.Series([17, 24, 25, 44.9, 45, 65, 90, None]))) == \
        ["17-24", "17-24", "25-44", "25-44", "45-64", "65+", "65+", None]
    assert describe(AGE_RULE) == "bins of age: [17, 25) → 17-24, [25, 45) → 25-44, [45, 65) → 45-64, [65, 90] → 65+"


@pytest.mark.parametrize("column, message", [
    ({"derived": {"from": "age", "bins": [17, 45, 90], "labels": AGE_GROUPS}}, "3 edges make 2 bins"),
    ({"derived": {"from": "age", "bins": [17, 45, 45, 65, 90], "labels": AGE_GROUPS}}, "must increase"),
    ({"derived": {"from": "age", "bins": [20, 25, 45, 65, 90], "labels": AGE_GROUPS}}, "must cover the public bounds"),
    ({"derived": {"from": "height", "bins": [17, 25, 45, 65, 90], "labels": AGE_GROUPS}}, "not a column"),
    ({"derived": {"from": "sex", "bins": [17, 25, 45, 65, 90], "labels": AGE_GROUPS}}, "numeric source"),
    ({"derived": {"from": "age group", "bins": [17, 25, 45, 65, 90], "labels": AGE_GROUPS}}, "from itself"),
    ({"derived": {"from": "degree", "map": {"no": "17-24", "yes": "65+"}}}, "derived itself"),
    ({"derived": {"from": "education", "map": {"HS-grad": "17-24"}}}, "no value for these categories"),
    ({"derived": {"from": "job", "map": {j: "17-24" for j in ["Clerical", "Sales", "Craft", "Professional",
                                                                "Managerial", "Service"]}}}, "nullable too"),
    ({"derived": {"from": "age", "bins": [17, 90], "labels": ["old"]}}, "not among its public categories"),
    ({"derived": {"from": "age", "bins": [17, 90], "labels": ["17-24"], "map": {}}}, "not both"),
    ({"derived": {"from": "age", "cut": [17, 90]}}, "unknown fields"),
    ({"kind": "integer", "categories": None, "lower": 0, "upper": 3}, "is categorical"),
])
def test_bad_rules_are_refused_in_one_line(column, message):
    d = derived_schema().to_dict()
    d["columns"][-2].update(column)
    with pytest.raises(SchemaError, match=message) as e:
        Schema.from_dict(d)
    assert "\n" not in str(e.value) and "'age group'" in str(e.value)


def test_validation_computes_a_missing_derived_column_and_counts_disagreeing_rows():
    schema, table = derived_schema(), demo_table(200, seed=1)
    clean, report = validate_table(table, schema)  # the table has neither derived column: computed
    assert list(clean.columns) == schema.names and consistent(clean).all()
    assert not report.summary()
    from synth_core.evaluate.inputs import canonical
    assert canonical(table, schema, "real").equals(clean)  # the review computes them too
    table["age group"] = clean["age group"]
    # seven rows of the real table disagree with the rule: kept, counted
    table.loc[:6, "age group"] = "65+"
    wrong = int((clean.loc[:6, "age group"] != "65+").sum())
    clean2, report2 = validate_table(table, schema)
    assert report2.columns["age group"].inconsistent == wrong and (clean2.loc[:6, "age group"] == "65+").all()
    assert any("disagree with the rule" in line for line in report2.summary())
    assert consistent(random_table(schema, 50, seed=0)).all()


def test_derived_columns_are_computed_after_sampling_never_modelled(tmp_path):
    schema, table = derived_schema(), demo_table(300, seed=2)
    clean, _ = validate_table(table, schema)
    table = clean.copy()
    table.loc[table.index[:5], "age group"] = "65+"  # the real table may disagree with the rule
    result = api.fit(table, schema, model="dp-tbart", epsilon=1.0, preset="tiny", accountant="rdp", seed=0,
                     calibration_share=0.2, options={"epochs": 2}, run_dir=tmp_path / "run")
    model = result.model
    names = [c.spec.name for c in model.encoder.codecs]
    assert "age group" not in names and "degree" not in names and names == schema.modelled().names
    assert not {"age group", "degree"} & {c for m in model.calibration.marginals for c in m.columns}

    synthetic, _ = api.sample(tmp_path / "run", 400, seed=1)
    assert list(synthetic.columns) == schema.names
    assert consistent(synthetic).all()  # 100% of the synthetic rows follow the rules
    conditioned, _ = api.sample(tmp_path / "run", 20, conditions={"sex": "Female"}, seed=1)
    assert consistent(conditioned).all() and (conditioned["sex"] == "Female").all()
    with pytest.raises(SchemaError, match="computed from 'age' after sampling; condition on 'age'"):
        api.sample(tmp_path / "run", 10, conditions={"age group": "65+"})


def test_the_stewards_category_order_is_kept_and_drafts_order_numbers_by_value():
    order = ["Doctorate", "HS-grad", "Masters", "Bachelors", "Some-college"]
    schema = Schema(columns=[ColumnSpec("education", "categorical", categories=order)])
    assert Schema.from_json(schema.to_json())["education"].categories == order
    assert TokenEncoder(schema).codecs[0].labels == order
    from workbench.schema_table import categories_to_text, lines_to_categories, text_to_categories
    # the editor's text keeps both
    assert text_to_categories(categories_to_text(["b,c", *order])) == ["b,c", *order]
    assert lines_to_categories("\n".join(order) + "\n\n") == order
    assert natural_order(["10-20", "1-5", "6-10"]) == ["1-5", "6-10", "10-20"]
    assert natural_order(["b", "65+", "a", "18-24"]) == ["18-24", "65+", "a", "b"]
    rows = pd.DataFrame({"hours": ["10-20"] * 20 + ["1-5"] * 20 + ["6-10"] * 20,
                         "education": list(np.resize(EDUCATION, 60))})
    draft = draft_schema(rows)
    assert draft["hours"].categories == ["1-5", "6-10", "10-20"]
    # a draft proposes no rule
    assert not draft.derived_columns and draft.drafted_from_data and not draft.confirmed


def test_the_schema_page_declares_a_derived_column_and_shows_its_rule(tmp_path, monkeypatch):
    from pathlib import Path

    from streamlit.testing.v1 import AppTest
    monkeypatch.setenv("SYNTH_WORKBENCH_HOME", str(tmp_path / "home"))
    table = demo_table(200, seed=4)
    table["age group"] = apply(AGE_RULE, table["age"])
    at = AppTest.from_file(str(Path(__file__).resolve().parents[1] / "app.py"), default_timeout=600).run()
    at.switch_page("app_pages/data.py").run()
    at.file_uploader(key="upload").set_value(("people.csv", table.to_csv(index=False).encode(), "text/csv")).run()
    at.switch_page("app_pages/schema.py").run()
    at.selectbox(key="detail_column").set_value("age group").run()
    form = at.get("form")[1]  # the column form, then the derived-column form
    form.selectbox[0].set_value("age")
    form.text_input[0].set_value("0, 25, 45, 65, 120")  # covering the draft's bounds of age
    form.text_area[0].set_value("\n".join(AGE_GROUPS))
    form.button[0].click()
    at.run()
    assert not at.exception and not at.error, [e.value for e in [*at.exception, *at.error]]
    schema = at.session_state["schema"]
    assert schema["age group"].derived == {**AGE_RULE, "bins": [0, 25, 45, 65, 120]}
    assert schema["age group"].categories == AGE_GROUPS
    assert not schema.confirmed  # still a draft: the steward confirms the rule with the other facts
    assert "bins of age" in " ".join(str(i.value) for i in at.info)


def test_a_rating_in_words_is_drafted_in_its_order_not_alphabetically():
    """Issue 61 item 4: a rating's categories read fair, good, poor, very good, very poor."""
    assert natural_order(["fair", "good", "poor", "very good", "very poor"]) == \
        ["very poor", "poor", "fair", "good", "very good"]
    assert natural_order(["Agree", "Disagree", "Neutral", "Strongly agree"]) == \
        ["Disagree", "Neutral", "Agree", "Strongly agree"]  # as written, in the scale's order
    assert natural_order(["good", "bad", "poor"]) == ["bad", "good", "poor"]  # not all on one scale
    assert natural_order(["low", "high"]) == ["high", "low"]  # two words say too little of a scale
