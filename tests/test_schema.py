import json

import numpy as np
import pandas as pd
import pytest

from synth_core.schema import ColumnSpec, Schema, SchemaError, draft_schema, read_table, read_table_bytes, validate_table


def small_schema(**kw) -> Schema:
    return Schema(columns=[
        ColumnSpec("age", "integer", lower=18, upper=90),
        ColumnSpec("income", "continuous", lower=0.0, upper=1000.0, nullable=True),
        ColumnSpec("sex", "categorical", categories=["Female", "Male"]),
        ColumnSpec("job", "categorical", categories=["a", "b"], nullable=True, **kw),
    ])


def small_table() -> pd.DataFrame:
    return pd.DataFrame({
        "age": [25, 40, 17, 95],
        "income": [10.5, None, 2000.0, 3.0],
        "sex": ["Male", "Female", "Male", "Female"],
        "job": ["a", None, "b", "a"],
    })


def test_json_round_trip_keeps_every_fact(tmp_path):
    schema = small_schema(unknown="other")
    schema.columns[1].binning = "log"
    schema.columns[1].decimals = 2
    schema.columns[2].role = "sensitive"
    path = tmp_path / "s.json"
    schema.save(path)
    loaded = Schema.load(path)
    assert loaded.to_dict() == schema.to_dict()
    assert json.loads(path.read_text())["version"] == 1


def test_schema_without_version_or_with_unknown_fields_is_rejected():
    d = small_schema().to_dict()
    del d["version"]
    with pytest.raises(SchemaError, match="version"):
        Schema.from_dict(d)
    d = small_schema().to_dict()
    d["columns"][0]["colour"] = "red"
    with pytest.raises(SchemaError, match="colour"):
        Schema.from_dict(d)
    with pytest.raises(SchemaError, match="not valid JSON"):
        Schema.from_json("{nope")


@pytest.mark.parametrize("col, message", [
    (ColumnSpec("x", "integer", lower=5, upper=1), "below upper"),
    (ColumnSpec("x", "categorical", categories=[]), "non-empty public category list"),
    (ColumnSpec("x", "categorical", categories=["a", "a"]), "twice"),
    (ColumnSpec("x", "number"), "kind must be"),
    (ColumnSpec("x", "integer", lower=float("nan"), upper=3), "finite"),
])
def test_contradictory_column_facts_are_rejected(col, message):
    with pytest.raises(SchemaError, match=message):
        Schema(columns=[col])


def test_duplicate_schema_columns_are_rejected():
    with pytest.raises(SchemaError, match="twice"):
        Schema(columns=[ColumnSpec("a", "integer", 0, 1), ColumnSpec("a", "integer", 0, 1)])


def test_validation_clips_out_of_bounds_values_and_counts_them():
    clean, report = validate_table(small_table(), small_schema())
    assert len(clean) == 4  # nothing dropped
    assert clean["age"].tolist() == [25, 40, 18, 90]
    assert report.columns["age"].clipped_low == 1 and report.columns["age"].clipped_high == 1
    assert clean["income"].iloc[2] == 1000.0 and report.columns["income"].clipped_high == 1
    assert np.isnan(clean["income"].iloc[1]) and report.columns["income"].missing == 1
    assert pd.isna(clean["job"].iloc[1])
    assert any("clipped" in line for line in report.summary())


def test_unknown_category_is_an_error_naming_column_and_values():
    table = small_table()
    table["sex"] = ["Male", "F", "X", "Y"]
    with pytest.raises(SchemaError) as e:
        validate_table(table, small_schema())
    assert "'sex'" in str(e.value) and "'F'" in str(e.value) and "'X'" in str(e.value)


def test_unknown_category_error_shows_at_most_five_values():
    schema = Schema(columns=[ColumnSpec("c", "categorical", categories=["a"])])
    table = pd.DataFrame({"c": [f"v{i}" for i in range(9)]})
    with pytest.raises(SchemaError) as e:
        validate_table(table, schema)
    assert str(e.value).count("'v") == 5 and "4 more" in str(e.value)


def test_unknown_category_maps_to_reserved_value_when_declared():
    table = small_table()
    table["job"] = ["a", "zzz", "b", "a"]
    clean, report = validate_table(table, small_schema(unknown="other"))
    assert clean["job"].tolist() == ["a", "other", "b", "a"]
    assert report.columns["job"].mapped_unknown == 1


def test_missing_value_in_non_nullable_column_is_an_error():
    table = small_table()
    table.loc[0, "sex"] = None
    with pytest.raises(SchemaError, match="'sex'.*not nullable"):
        validate_table(table, small_schema())


def test_missing_markers_become_missing():
    schema = small_schema()
    schema.missing_markers = ["?"]
    table = small_table()
    table["job"] = ["a", "?", "b", " ?"]
    clean, report = validate_table(table, schema)
    assert clean["job"].isna().sum() == 2 and report.columns["job"].missing == 2


def test_missing_column_duplicate_column_empty_table_and_non_numeric_are_clear_errors():
    schema = small_schema()
    with pytest.raises(SchemaError, match="lacks columns.*'job'"):
        validate_table(small_table().drop(columns=["job"]), schema)
    dup = small_table()
    dup.columns = ["age", "age", "sex", "job"]
    with pytest.raises(SchemaError, match="duplicated column names.*'age'"):
        validate_table(dup, schema)
    with pytest.raises(SchemaError, match="empty"):
        validate_table(small_table().iloc[:0], schema)
    bad = small_table()
    bad["age"] = ["25", "forty", "17", "95"]
    with pytest.raises(SchemaError, match="'age'.*non-numeric.*'forty'"):
        validate_table(bad, schema)


def test_extra_columns_are_reported_not_used():
    table = small_table()
    table["secret"] = 1
    clean, report = validate_table(table, small_schema())
    assert "secret" not in clean.columns and report.ignored_columns == ["secret"]


def test_read_table_reports_duplicate_headers_empty_and_malformed_files(tmp_path):
    p = tmp_path / "dup.csv"
    p.write_text("a,b,a\n1,2,3\n")
    with pytest.raises(SchemaError, match="duplicated column names"):
        read_table(p)
    p = tmp_path / "empty.csv"
    p.write_text("")
    with pytest.raises(SchemaError, match="empty"):
        read_table(p)
    p = tmp_path / "header.csv"
    p.write_text("a,b\n")
    with pytest.raises(SchemaError, match="no rows"):
        read_table(p)
    p = tmp_path / "ragged.csv"
    p.write_text("a,b\n1,2\n1,2,3,4\n")
    with pytest.raises(SchemaError, match="cannot read"):
        read_table(p)
    with pytest.raises(SchemaError, match="no such file"):
        read_table(tmp_path / "nope.csv")


def test_read_table_keeps_categorical_codes_as_strings(tmp_path):
    schema = Schema(columns=[ColumnSpec("zip", "categorical", categories=["01234", "98101"]),
                             ColumnSpec("n", "integer", lower=0, upper=9)])
    p = tmp_path / "t.csv"
    p.write_text("zip,n\n01234,1\n98101,2\n")
    clean, _ = validate_table(read_table(p, schema), schema)
    assert clean["zip"].tolist() == ["01234", "98101"]


def test_draft_schema_is_marked_as_read_from_data_until_confirmed():
    # 60 rows: "a" 30, "b" 15, the ages 15 each
    table = pd.concat([small_table()] * 15, ignore_index=True)
    schema = draft_schema(table)
    assert schema.drafted_from_data and not schema.confirmed
    assert schema.provenance["warning"] and "drafted" in schema.provenance["warning"]
    # bounds rounded outward (the exact extremes 17 and 95 are not proposed)
    assert schema["age"].kind == "integer" and (schema["age"].lower, schema["age"].upper) == (10, 100)
    assert schema["income"].nullable and schema["job"].categories == ["a", "b"]
    schema.confirm()
    assert schema.provenance["warning"] is None
    # the mark survives a JSON round trip
    assert Schema.from_json(draft_schema(table).to_json()).provenance["warning"]


def test_a_draft_protects_by_default():
    """Identifiers and empty columns are left out with the reason, rare categories are never
    proposed, a date becomes its year, roles are suggested by name: a draft discloses as little as
    it can."""
    rng = np.random.default_rng(0)
    n = 300
    table = pd.DataFrame({
        "person_id": rng.permutation(100000)[:n], "rownames": np.arange(1, n + 1),
        "PID": 526_000_000 + rng.permutation(900_000)[:n],  # a parcel number (ames): 9 digits, never repeated
        "name": [f"person {i}" for i in range(n)], "empty": [None] * n,
        "sex": rng.choice(["Female", "Male"], n),
        "city": np.where(rng.random(n) < 0.97, rng.choice(["Leeds", "York"], n), [f"village {i}" for i in range(n)]),
        "visit": pd.date_range("2019-03-02", periods=n, freq="D").strftime("%Y-%m-%d"),
        "income": rng.choice(["<=50K", ">50K"], n), "amount": rng.uniform(3.7, 981.2, n).round(2),
    })
    schema = draft_schema(table)
    assert set(schema.excluded) == {"person_id", "rownames", "PID", "name", "empty"}
    assert "identifier" in schema.excluded["person_id"] and "identifier" in schema.excluded["PID"] and "row number" in schema.excluded["rownames"]
    assert "no values" in schema.excluded["empty"]
    assert schema["city"].categories == ["Leeds", "York"] and schema["city"].unknown == "(other)"
    assert schema["visit"].date == "year" and (schema["visit"].lower, schema["visit"].upper) == (2010, 2020)
    assert schema["sex"].role == "sensitive" and schema["income"].role == "target"
    assert (schema["amount"].lower, schema["amount"].upper) == (0.0, 1000.0)
    clean, report = validate_table(table, schema)
    assert set(clean["visit"]) == {2019.0} and report.ignored_columns == sorted(schema.excluded, key=list(table).index)
    assert clean["city"].isin(["Leeds", "York", "(other)"]).all()
    assert Schema.from_json(schema.to_json()).excluded == schema.excluded
    # yes/no values stored as objects beside a missing value (openintro's ucla_textbooks_f18) are
    # categories the table is then read with, not the numbers 0 and 1
    flags = pd.DataFrame({"seminar": [False] * 40 + [True] * 20 + [None]}, dtype=object)
    flag = draft_schema(flags)["seminar"]
    assert flag.kind == "categorical" and flag.categories == ["False", "True"] and flag.nullable
    assert set(validate_table(flags, draft_schema(flags))[0]["seminar"].dropna()) == {"False", "True"}


def test_a_drafted_bound_is_not_stretched_by_a_few_outliers():
    """One diamond 59 mm wide among thousands of 4-10 mm would stretch drafted bounds (and every bin
    between them) over a range no other row lies in: the draft leaves out the 10 most extreme values
    at each end (1 % of a small table), the table is clipped to the bounds, and the clipping is
    counted for the steward."""
    rng = np.random.default_rng(0)
    width = np.r_[rng.uniform(4.0, 10.0, 2000), [58.9, 31.8, 0.0]]
    schema = draft_schema(pd.DataFrame({"width": width.round(2)}))
    assert (schema["width"].lower, schema["width"].upper) == (4.0, 10.0)
    _, report = validate_table(pd.DataFrame({"width": width.round(2)}), schema)
    assert (report.columns["width"].clipped_low, report.columns["width"].clipped_high) == (1, 2)
    assert "clipped" in "\n".join(report.summary())
    # a long tail still picks the log scale, decided on the whole range of values
    amount = pd.DataFrame({"amount": np.r_[rng.exponential(100.0, 2000), [90000.0] * 5]})
    assert draft_schema(amount)["amount"].binning == "log"
    # beside an x, a y is a size or a coordinate, not the target; alone it is the usual name of one
    sizes = draft_schema(pd.DataFrame({"x": width, "y": width, "price": np.arange(len(width)) % 7}))
    assert sizes["y"].role is None and draft_schema(pd.DataFrame({"y": width}))["y"].role == "target"
    # a column nearly always one value keeps its whole range: without its few other values it would
    # be no range
    gain = draft_schema(pd.DataFrame({"gain": np.r_[np.zeros(2000, int), [5, 700, 99999]]}))["gain"]
    assert (gain.lower, gain.upper) == (0, 100000)
    # a table of 60 rows keeps its extremes inside: 1 % of it is less than one value
    few = pd.DataFrame({"age": np.r_[[17] * 15, [30] * 15, [50] * 15, [95] * 15]})
    assert (draft_schema(few)["age"].lower, draft_schema(few)["age"].upper) == (10, 100)


def test_a_draft_proposes_the_precision_values_are_written_at():
    """A rate written at one decimal (and stored in single precision, as tables from R often are:
    1.7999999523 for 1.8) is drafted with decimals 1, read back at exactly that precision without
    counting a value as rounded, and a model decodes its rows at it; a measurement with many digits
    gets no precision."""
    from synth_core.encoding import TokenEncoder

    rng = np.random.default_rng(0)
    rate = rng.choice(np.round(np.linspace(1.0, 12.0, 111), 1), 600).astype(np.float32).astype(float)
    price = rng.uniform(0.0, 500.0, 600).round(2)
    ratio = rng.uniform(0.0, 1.0, 600)
    code = rng.choice([1.8, 3.2, 3.9, 4.3, 10.6], 600).astype(np.float32).astype(float)
    table = pd.DataFrame({"rate": rate, "price": price, "ratio": ratio, "rooms": rng.integers(1, 9, 600),
                          "code": code})
    schema = draft_schema(table)
    assert [schema[c].decimals for c in ("rate", "price", "ratio", "rooms")] == [1, 2, None, None]
    # five values: a value set, written as the steward wrote them (not 1.7999999523)
    assert schema["code"].values == [1.8, 3.2, 3.9, 4.3, 10.6] and schema["code"].decimals is None
    clean, report = validate_table(table, schema)
    assert set(np.unique(clean["code"])) == {1.8, 3.2, 3.9, 4.3, 10.6} and report.columns["code"].snapped == 0
    assert np.allclose(clean["rate"], clean["rate"].round(1), rtol=0, atol=1e-12)
    assert report.columns["rate"].rounded == 0
    encoder = TokenEncoder(schema.confirm(), 32)
    decoded = encoder.decode(encoder.encode(clean), np.random.default_rng(1))
    assert np.allclose(decoded["rate"], decoded["rate"].round(1), rtol=0, atol=1e-12)
    # values beyond the declared precision are rounded to it and counted for the steward
    rate_only = Schema(columns=[schema["rate"]])
    _, report = validate_table(pd.DataFrame({"rate": [1.25, 3.2, 4.31]}), rate_only)
    assert report.columns["rate"].rounded == 2 and "declared precision" in "\n".join(report.summary())


def test_random_table_uses_only_the_public_schema(toy_schema):
    from synth_core.schema import random_table, validate_table
    table = random_table(toy_schema, 500, seed=0)
    assert list(table.columns) == toy_schema.names and len(table) == 500
    clean, report = validate_table(table, toy_schema)  # every value is inside the public facts
    assert all(r.clipped_low == r.clipped_high == r.rounded == 0 for r in report.columns.values())
    for spec in toy_schema.columns:
        col = table[spec.name].dropna()
        if spec.is_numeric:
            assert col.min() >= spec.lower and col.max() <= spec.upper
        else:
            assert set(col) <= set(spec.vocabulary())
    assert random_table(toy_schema, 50, seed=1).equals(random_table(toy_schema, 50, seed=1))


def test_the_column_owns_its_public_scale():
    """One log rule: to_unit / from_unit invert each other, edges are even on the column's scale,
    and the encoders, the evaluation's encoder and random rows all go through the column."""
    from synth_core.encoding import VectorEncoder
    from synth_core.evaluate.features import PublicEncoder
    from synth_core.schema import random_table
    gain = ColumnSpec("gain", "continuous", lower=0.0, upper=99999.0, binning="log")
    age = ColumnSpec("age", "integer", lower=17, upper=90)
    x = np.array([0.0, 1.0, 10.0, 5000.0, 99999.0, 2e6])
    u = gain.to_unit(x)
    # fine near the bound
    assert u[0] == 0 and u[-1] == 1 and np.all(np.diff(u) >= 0) and u[1] > 0.05
    assert np.allclose(gain.from_unit(u[:-1]), x[:-1])
    assert np.allclose(gain.to_unit(gain.edges(10)), np.linspace(0, 1, 11))
    assert np.array_equal(age.edges(100), np.arange(16.5, 91.0, 1.0))
    assert np.allclose(age.to_unit([17, 53.5, 90]), [0, 0.5, 1])
    schema = Schema(columns=[gain, age])
    vec = VectorEncoder(schema, numeric="scalar")
    assert np.allclose(vec.scale(gain, x), 2 * gain.to_unit(x) - 1)
    table = random_table(schema, 4000, seed=0)
    # uniform on the log scale
    assert abs(float(np.median(gain.to_unit(table["gain"]))) - 0.5) < 0.05
    enc = PublicEncoder(schema).fit(table)
    assert np.allclose(enc.scale_numeric("gain", x), u)


def test_files_holding_statistics_of_the_private_table_are_owner_only(tmp_path, toy_schema, toy_table):
    import os
    import stat

    from synth_core import api
    from synth_core.evaluate import build_report
    drafted = tmp_path / "draft.json"
    draft_schema(pd.concat([toy_table] * 2, ignore_index=True)).save(drafted)
    assert stat.S_IMODE(os.stat(drafted).st_mode) == 0o600
    declared = tmp_path / "declared.json"
    toy_schema.save(declared)  # declared public: shareable
    assert stat.S_IMODE(os.stat(declared).st_mode) & 0o044
    html, js = build_report(toy_table, toy_table.sample(frac=1, random_state=0), toy_schema,
                            out_dir=tmp_path / "review", include_umap=False)
    assert stat.S_IMODE(os.stat(tmp_path / "review").st_mode) == 0o700
    assert {stat.S_IMODE(os.stat(f).st_mode) for f in (html, js)} == {0o600}
    run = api.fit(toy_table, toy_schema, epsilon=2.0, preset="tiny", accountant="rdp", run_dir=tmp_path / "run").run
    for f in run.path.rglob("*"):
        if f.is_file():
            assert stat.S_IMODE(os.stat(f).st_mode) & 0o077 == 0, f


@pytest.mark.parametrize("content,encoding,detected", [
    ("name;city;n\nJosé;Zürich;1\nAnna;Köln;2\n", "utf-8", "UTF-8 text, columns separated by semicolons"),
    ("name,city,n\nJosé,Zürich,1\nAnna,Köln,2\n", "cp1252", "Windows-1252 (Excel) text, columns separated by commas"),
    ("name\tcity\tn\nJosé\tZürich\t1\nAnna\tKöln\t2\n", "utf-16", "UTF-16 text, columns separated by tabs"),
    ("name,city,n\nJosé,Zürich,1\nAnna,Köln,2\n", "utf-8-sig", "UTF-8 text, columns separated by commas"),
    ("name|city|n\nJosé|Zürich|1\nAnna|Köln|2\n", "latin-1", "Windows-1252 (Excel) text, columns separated by vertical bars"),
])
def test_common_csv_dialects_and_encodings_are_read_and_said(content, encoding, detected):
    """Excel's semicolons and Windows-1252, UTF-16 and byte-order marks: read right, and the steward
    is told how."""
    table = read_table_bytes(content.encode(encoding), "people.csv")
    assert list(table.columns) == ["name", "city", "n"]
    assert table["city"].tolist() == ["Zürich", "Köln"] and table["n"].tolist() == [1, 2]
    assert table.attrs["read_as"] == detected


def test_dates_written_with_and_without_a_time_zone_are_read_as_their_years():
    """A column of dates some of which carry a time zone (an export from two systems) once stopped
    the draft and the validation with pandas' "Mixed timezones detected"; they are read in UTC."""
    when = [f"2013-0{i % 9 + 1}-01 10:00:00+01:00" if i % 2 else f"2014-0{i % 9 + 1}-02 09:30:00" for i in range(60)]
    table = pd.DataFrame({"when": when, "x": np.arange(60) % 3})
    schema = draft_schema(table).confirm()
    assert schema["when"].kind == "integer" and schema["when"].date == "year"
    rows, _ = validate_table(table, schema)
    assert rows["when"].value_counts().to_dict() == {2013: 30, 2014: 30}


def test_a_column_the_steward_leaves_out_takes_the_drafts_path_and_comes_back_as_it_was():
    """Issue 61 item 3: a column left out joins `excluded` ("left out by you"), as the draft's own
    exclusions do: validation ignores it, the exported schema does not model it, an import of that
    export fits the table; a confirmed schema stays so (no fact is added); brought back, the column
    has its facts and place again, and the draft needs confirming again. A rule or a derived column
    that reads it, or the last column, keeps it in."""
    from synth_core.privacy.table_budget import identity_key
    from workbench.schema_table import LEFT_OUT_BY_YOU, bring_back, fitted_to, leave_out
    table = small_table()
    schema = small_schema()
    schema.drafted_from_data = True
    schema.confirm()
    left = leave_out(schema, "income")
    assert left.names == ["age", "sex", "job"] and left.excluded == {"income": LEFT_OUT_BY_YOU}
    assert left.confirmed and "income" in schema  # the schema it came from is unchanged
    clean, report = validate_table(table, left)
    assert "income" not in clean and report.ignored_columns == ["income"]
    exported = json.loads(left.to_json())
    assert [c["name"] for c in exported["columns"]] == ["age", "sex", "job"]
    assert fitted_to(table, Schema.from_json(left.to_json())).names == left.names
    assert identity_key(table, left) != identity_key(table, schema)
    back = bring_back(left, schema["income"], 1)
    assert back.names == schema.names and back["income"] == schema["income"] and not back.excluded
    assert not back.confirmed  # a fact came back: confirmed again, as after any edit
    assert identity_key(table, back) == identity_key(table, schema)
    with pytest.raises(SchemaError, match="'age' cannot be left out"):
        leave_out(Schema(columns=schema.columns, rules=["age >= 18"]), "age")
    with pytest.raises(SchemaError, match="only column"):
        leave_out(Schema(columns=[ColumnSpec("age", "integer", lower=18, upper=90)]), "age")


def test_a_drafted_column_of_dates_reads_the_few_values_that_are_no_date_as_missing():
    """A column of dates 4% of whose values are words ("in 2019 or so") is drafted as years and
    nullable, and its own table validates against the draft: the words read as missing and
    counted; a column declared not nullable still refuses them, saying how to accept them."""
    from synth_core.schema import draft_schema, validate_table
    days = pd.date_range("1990-01-01", periods=500, freq="7D")
    text = [d.strftime("%d.%m.%Y") if i % 25 else "in 2019 or so" for i, d in enumerate(days)]
    table = pd.DataFrame({"when": text, "group": ["a", "b"] * 250})
    schema = draft_schema(table)
    assert schema["when"].date == "year" and schema["when"].nullable
    rows, report = validate_table(table, schema)
    assert len(rows) == 500 and int(rows["when"].isna().sum()) == 20
    assert report.columns["when"].not_dates == 20
    assert any("20 values that are not dates were read as missing" in line
               for line in report.summary())
    strict = schema.to_dict()
    strict["columns"][0]["nullable"] = False
    with pytest.raises(SchemaError, match="mark it nullable"):
        validate_table(table, Schema.from_dict(strict))
