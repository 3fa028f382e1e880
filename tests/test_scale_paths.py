"""Issue 62: reading, drafting and counting a table of a million rows ask each distinct value once
(not each row), parse a UTF-8 file from its bytes, and place each column once for all the
marginals that hold it. These tests hold that the quick paths give what the per-row ones gave:
the same table read, the same draft, the same counts; and that `schema draft` and `fit` take a
Parquet file."""
from __future__ import annotations

import codecs
import io
import json
import warnings

import numpy as np
import pandas as pd
import pytest

from synth_core.schema import draft, reading
from synth_core.schema import draft_schema, read_table, read_table_bytes, validate_table
from synth_core.schema.tables import _number_text, _parse_dates, _short_date_years


# --- the per-row forms, as the code read before issue 62 ------------------------------------------
def _dates_per_row(present: pd.Series) -> pd.Series | None:
    if len(present) == 0 or pd.api.types.is_numeric_dtype(present):
        return None
    text = present.astype(str).str.strip()
    shows_year = text.str.contains(r"\d{4}", regex=True) | _short_date_years(text).notna()
    if not shows_year.all() or not text.str.contains(r"[-/:T .]", regex=True).mean() > 0.95:
        return None
    parsed = _parse_dates(text)
    return parsed if parsed.notna().mean() >= 0.95 else None


PER_ROW = {
    (draft, "_dates"): _dates_per_row,
    (draft, "_all_numbers"): lambda present: bool(
        pd.to_numeric(present, errors="coerce").notna().all()),
    (draft, "_number_texts"): lambda numbers: numbers.map(_number_text),
    (reading, "_csv_source"): lambda data, text, encoding: io.StringIO(text),
    (reading, "_each_once"): lambda values: values,
}


def _messy(n: int = 600, seed: int = 62) -> pd.DataFrame:
    """A table with what a steward's file holds: dates in several formats (some rows not dates),
    ranges that are not dates, numbers with thousands separators and percentages, codes, whole
    numbers written 1.0, yes/no, free text, a row number, rare categories and missing values."""
    rng = np.random.default_rng(seed)
    days = pd.Timestamp("1990-01-01") + pd.to_timedelta(rng.integers(0, 12_000, n), unit="D")
    some = rng.random(n)
    pairs = list(zip(days, some))
    return pd.DataFrame({
        "id": np.arange(1, n + 1),
        "when": [d.strftime("%Y-%m-%d") if s > 0.3 else f"{d.month}/{d.day}/{d.year % 100:02d}"
                 for d, s in pairs],
        # every value shows a year; 4 %, 8 % are no dates; 3 % written without a separator
        "mostly_dates": [d.strftime("%d.%m.%Y") if s > 0.04 else "in 2019 or so" for d, s in pairs],
        "nearly_dates": [d.strftime("%b %d, %Y") if s > 0.08 else "in 2019 or so"
                         for d, s in pairs],
        "compact": [d.strftime("%Y-%m-%d") if s < 0.97 else d.strftime("%Y%m%d") for d, s in pairs],
        "range": rng.choice(["1-5", "6-10", "10-20", "65+"], n),
        "amount": [f"{x:,}" for x in rng.integers(100, 3_000_000, n)],
        "share": [f"{x:.1f}%" if s > 0.1 else "" for x, s in zip(rng.uniform(0, 100, n), some)],
        "almost_share": [f"{x:.0f}%" if s > 0.01 else "n/a"
                         for x, s in zip(rng.uniform(0, 9, n), some)],
        "code": [str(v) if s > 0.05 else "NA" for v, s in zip(rng.integers(0, 9, n), some)],
        "whole": [f"{v}.0" for v in rng.integers(0, 2, n)],
        "mixed": [str(v) if s > 0.5 else w for v, s, w in zip(rng.integers(0, 5, n), some,
                                                               rng.choice(["low", "high"], n))],
        "smoker": rng.choice(["yes", "no", " yes"], n),
        "note": [f"called on day {i} about {w}"
                 for i, w in enumerate(rng.choice(["a", "b", "c"], n))],
        "grade": rng.choice(list("ABCDEFGHIJKLMNOPQRSTUVWXYZ"), n,
                            p=np.r_[[0.5, 0.3], [0.2 / 24] * 24]),
        "amount_f": np.round(rng.lognormal(3, 1, n), 2),
    })


def _drafts(monkeypatch, table: pd.DataFrame | None = None, data: bytes | None = None) -> list:
    """The table read (from `data`) and drafted, the quick way and the per-row way."""
    out = []
    for per_row in (False, True):
        with monkeypatch.context() as m:
            if per_row:
                for (module, name), form in PER_ROW.items():
                    m.setattr(module, name, form)
            read = (read_table_bytes(data, "messy.csv", missing_markers=["NA", "n/a"]) if data
                    else table)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                schema = draft_schema(read, missing_markers=["NA", "n/a"])
            drafted = json.dumps(schema.to_dict(), sort_keys=True)
            out.append((read, read.attrs.get("read_as"), drafted))
    return out


def _same(quick, per_row) -> None:
    assert quick[1] == per_row[1] and quick[2] == per_row[2]
    pd.testing.assert_frame_equal(quick[0], per_row[0])


@pytest.mark.parametrize("how", ["utf-8", "utf-8 with a mark, CRLF", "semicolons", "windows-1252",
                                 "utf-16"])
def test_a_messy_file_reads_and_drafts_as_it_did_row_by_row(monkeypatch, how):
    table = _messy()
    table.loc[3, "note"] = "naïve café"  # not ASCII
    sep = ";" if how == "semicolons" else ","
    text = table.to_csv(index=False, sep=sep)
    if "CRLF" in how:
        text = text.replace("\n", "\r\n")
    encoding = {"windows-1252": "cp1252", "utf-16": "utf-16"}.get(how, "utf-8")
    data = ((codecs.BOM_UTF8 if "mark" in how else b"") + text.encode(encoding))
    quick, per_row = _drafts(monkeypatch, data=data)
    _same(quick, per_row)
    schema = json.loads(quick[2])
    dates = {c["name"]: c.get("date") for c in schema["columns"]}
    assert dates["when"] == dates["mostly_dates"] == dates["compact"] == "year"
    assert dates.get("nearly_dates") is None
    assert "amount (thousands separators), share (percentages)" in quick[1]


def test_a_frame_of_objects_drafts_as_it_did_row_by_row(monkeypatch):
    """A frame handed over as it is (the app's demo, a script): columns of Python objects,
    booleans beside a missing value, numbers and text mixed, 1 beside True, lists."""
    n = 300
    rng = np.random.default_rng(1)
    table = _messy(n)
    table["flag"] = pd.Series([bool(v) if i % 7 else None
                               for i, v in enumerate(rng.integers(0, 2, n))], dtype=object)
    table["one_or_true"] = pd.Series([True if i % 2 else 1 for i in range(n)], dtype=object)
    table["objects"] = pd.Series([int(v) if i % 3 else str(v)
                                  for i, v in enumerate(rng.integers(0, 4, n))], dtype=object)
    table["lists"] = pd.Series([[int(v)] for v in rng.integers(0, 3, n)], dtype=object)
    table["category"] = pd.Categorical(rng.choice(["x", "y", "z"], n))
    quick, per_row = _drafts(monkeypatch, table=table)
    _same(quick, per_row)


def test_the_marginals_count_as_each_marginal_placed_alone():
    """Each column placed once for all its marginals gives the counts of each marginal's own
    cells (missing values, fine bins, pairs)."""
    from synth_core.demo import demo_schema, demo_table
    from synth_core.encoding.tokens import TokenEncoder
    from synth_core.privacy.measurements import measured_marginals, public_marginals
    schema = demo_schema()
    rows, _ = validate_table(demo_table(1500, seed=3), schema)  # its job missing in some rows
    counted = public_marginals(rows, schema)
    chosen = measured_marginals(schema.modelled())
    assert len(counted.marginals) == len(chosen) and any(len(c) == 2 for c, _ in chosen)
    for marginal, (columns, bins) in zip(counted.marginals, chosen):
        cells, shape = TokenEncoder(schema.modelled(), bins).cells(rows, columns)
        assert marginal.columns == columns and marginal.shape == shape
        assert np.array_equal(marginal.counts, np.bincount(cells, minlength=int(np.prod(shape))))


def test_schema_draft_and_fit_take_a_parquet_file(tmp_path, monkeypatch, capsys):
    """Issue 62 item 4: a table given as Parquet is drafted and fitted by the CLI as its CSV is;
    the Parquet file's nulls are its missing values."""
    from synth_core.cli import main
    from synth_core.demo import demo_schema, demo_table
    monkeypatch.chdir(tmp_path)
    table = demo_table(400, seed=5)  # its job is missing in some rows
    table.to_parquet("t.parquet", index=False)
    table.to_csv("t.csv", index=False)
    assert main(["schema", "draft", "--data", "t.parquet", "--out", "pq.json"]) == 0
    assert main(["schema", "draft", "--data", "t.csv", "--out", "csv.json"]) == 0
    assert json.loads(open("pq.json").read()) == json.loads(open("csv.json").read())
    assert len(read_table("t.parquet")) == 400
    demo_schema().save("s.json")
    assert main(["fit", "--data", "t.parquet", "--schema", "s.json", "--model", "aim",
                 "--preset", "tiny", "--epsilon", "1", "--accountant", "rdp", "--out", "run",
                 "--public-table"]) == 0
    assert "completed" in capsys.readouterr().out


def test_the_reviews_column_table_and_projection_read_a_sample_of_a_large_table(monkeypatch):
    """Issue 62: at a million rows the review's per-column table took 19 s and the projection 8.6 s,
    most of it putting whole tables in canonical form for a sample; both now sample first."""
    from synth_core.demo import demo_schema, demo_table
    from synth_core.evaluate import figures, inputs, projections
    table, schema = demo_table(2000, seed=1), demo_schema()
    seen, canonical = [], inputs.canonical

    def spy(df, schema, name="table"):
        seen.append(len(df))
        return canonical(df, schema, name)
    monkeypatch.setattr(figures, "canonical", spy)
    monkeypatch.setattr(inputs, "canonical", spy)
    whole = figures.column_figures(table, table.copy(), schema)
    assert seen == [2000, 2000] and (whole["score"] == 1.0).all()  # under the cap: every row
    sampled = figures.column_figures(table, table.copy(), schema, max_rows=500, seed=3)
    assert seen[2:] == [500, 500] and list(sampled["column"]) == list(whole["column"])
    assert (sampled["score"] > 0.8).all()  # two samples of one table: close, not equal
    projection = projections.pca_projection(table, table, schema, max_rows=300)
    assert seen[4:] == [300, 300] and projection.sample_sizes == {"real": 300, "synthetic": 300}


def test_validation_maps_each_distinct_text_once_with_the_table_row_by_row_gives(monkeypatch):
    """Issue 62: text columns are stripped and checked once per distinct value (tables._per_value),
    not once per row; the canonical table, the report and the refusals are what row-by-row mapping
    gives, on values as stewards write them (padding, markers, numbers written as text, mixed
    types, unknown values)."""
    import pandas as pd
    from synth_core.schema import ColumnSpec, Schema, SchemaError, validate_table
    from synth_core.schema import tables
    n = 3000
    table = pd.DataFrame({
        "grade": pd.Series(["A ", " B", "A", "N/A", "", None, "C", "1", "1.0", "b"] * (n // 10),
                           dtype=object),
        "mixed": pd.Series([1, 1.0, True, "1", " 2 ", None, "x", 2, "2.0", "N/A"] * (n // 10),
                           dtype=object),
        "arrow": pd.Series(["no", "yes ", "N/A", " no", None] * (n // 5), dtype="string"),
    })
    schema = Schema(columns=[
        ColumnSpec("grade", "categorical", categories=["A", "B", "C", "1"], unknown="C",
                   nullable=True),
        ColumnSpec("mixed", "categorical", categories=["1", "2", "True", "x"], nullable=True),
        ColumnSpec("arrow", "categorical", categories=["no", "yes"], nullable=True)],
        missing_markers=["N/A", ""])
    fast, fast_report = validate_table(table, schema)
    with pytest.raises(SchemaError) as fast_refusal:
        validate_table(table.assign(arrow=table["arrow"].fillna("maybe")), schema)
    monkeypatch.setattr(tables, "_per_value", lambda series, fn: series.map(fn))
    slow, slow_report = validate_table(table, schema)
    with pytest.raises(SchemaError) as slow_refusal:
        validate_table(table.assign(arrow=table["arrow"].fillna("maybe")), schema)
    pd.testing.assert_frame_equal(fast, slow)
    assert repr(fast_report) == repr(slow_report) and fast_report.columns["grade"].mapped_unknown
    assert str(fast_refusal.value) == str(slow_refusal.value) and "maybe" in str(fast_refusal.value)
