"""Issue 61 item 3: the draft leaves free text out (schema/draft.py, `free_text_reason`), with a
reason in words, and never proposes notes as public categories; columns of a few values, short or
long, stay categories. The thresholds: more than 32 distinct non-blank values and more than half of
them distinct, or a median length over 40 characters with more than a fifth of them distinct."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from synth_core.schema import draft_schema, read_table_bytes, validate_table
from synth_core.schema.draft import (FREE_TEXT_DISTINCT, FREE_TEXT_LENGTH, FREE_TEXT_SHARE,
                                     FREE_TEXT_VARIED, free_text_reason)

N = 1000
rng = np.random.default_rng(61)
NOTES = [f"called on day {i}, {rng.choice(['left a message', 'spoke to the carer', 'no answer'])}"
         for i in range(N)]


def comments(n: int = N, blank: float = 0.53) -> list:
    """A steward's comment column: blank on `blank` of the rows (empty cells and spaces), otherwise
    mostly unique notes, with two stock phrases that repeat (each in far more than 10 rows)."""
    out = []
    for i in range(n):
        u = rng.random()
        if u < blank:
            out.append(None if i % 3 else "  ")
        elif u < blank + 0.06:
            out.append("see file")
        elif u < blank + 0.10:
            out.append("no change")
        else:
            out.append(NOTES[i])
    return out


def shapes(n: int = N) -> pd.DataFrame:
    return pd.DataFrame({
        "reference": [f"R-{i:06d}" for i in rng.permutation(900_000)[:n]],  # ID-like: unique codes
        "comment": comments(n),
        "region": rng.choice(["North", "South", "East", "West", "Centre"], n),  # short categories
        "answer": rng.choice(["agree", "disagree", "neither agree nor disagree"], n),  # Likert text
        "occupation": rng.choice([  # long labels, each held by many rows
            "Management, business, science, and arts occupations",
            "Natural resources, construction, and maintenance occupations",
            "Production, transportation, and material moving occupations"], n),
        "age": rng.integers(18, 90, n),
    })


def test_the_draft_leaves_free_text_out_and_keeps_the_categories():
    table = shapes()
    schema = draft_schema(table)
    assert "reference" in schema.excluded and "comment" in schema.excluded
    assert "reference" not in schema and "comment" not in schema
    why = schema.excluded["comment"]
    assert why.startswith("free text:") and "category list is public" in why
    # the stock phrases are held by 40-60 rows each: drafted as categories they would be public
    assert not any({"see file", "no change"} & set(c.categories or []) for c in schema.columns)
    assert schema["region"].kind == "categorical" and len(schema["region"].categories) == 5
    # in order
    assert schema["answer"].categories == ["disagree", "neither agree nor disagree", "agree"]
    assert schema["occupation"].kind == "categorical" and len(schema["occupation"].categories) == 3
    assert schema["age"].kind == "integer"
    clean, report = validate_table(table, schema)  # left out as the draft's identifiers are
    assert "comment" not in clean and "comment" in report.ignored_columns


def test_a_comment_column_read_from_a_csv_is_left_out_too():
    """As an upload reads it: blanks are missing values, the notes what remains (47 % of rows)."""
    table = read_table_bytes(shapes().to_csv(index=False).encode(), "visits.csv")
    schema = draft_schema(table)
    assert schema.excluded["comment"].startswith("free text:")
    assert {"region", "answer", "occupation", "age"} <= set(schema.names)


def text(values) -> pd.Series:
    return pd.Series(list(values), dtype=object)


@pytest.mark.parametrize("values, free", [
    # mostly unique: more than 32 distinct and more than half of the non-blank values
    ([f"note {i}" for i in range(FREE_TEXT_DISTINCT + 1)], True),
    ([f"n{i}" for i in range(FREE_TEXT_DISTINCT)], False),               # 32: not more than 32
    ([f"n{i}" for i in range(60)] + ["ok"] * 59, True),                  # 61 of 119 distinct
    ([f"n{i}" for i in range(59)] + ["ok"] * 61, False),                 # 60 of 120: half, not more
    ([f"n{i}" for i in range(60)] + [""] * 500 + [" "] * 100, True),     # blanks are not values
    # long (median over 40 characters) and varied (more than a fifth distinct)
    ([f"the carer called on day {i} and left a long message" for i in range(20)], True),
    (["x" * 41] * 45 + [f"{'y' * 41}{i}" for i in range(12)], True),     # 13 of 57 distinct
    (["x" * 41] * 50 + [f"{'y' * 41}{i}" for i in range(9)], False),     # 10 of 59 distinct
    (["x" * 40] * 5 + [f"{'y' * 39}{i}" for i in range(10)], False),     # a median of 40: not over
    # a few values, short or long, each held by many rows: categories
    (["agree", "disagree"] * 300, False),
    (["Strongly agree with the proposal as it was written", "Disagree"] * 300, False),
    ([None, "   "] * 20, False),                                          # nothing but blanks
])
def test_the_thresholds(values, free):
    assert (free_text_reason(text(values)) is not None) == free
    thresholds = (FREE_TEXT_DISTINCT, FREE_TEXT_SHARE, FREE_TEXT_LENGTH, FREE_TEXT_VARIED)
    assert thresholds == (32, 0.5, 40, 0.2)  # as the cases above and the docstring say


def test_small_and_short_text_columns_are_not_free_text():
    """Job titles where most repeat (under half distinct) stay a category column, whose categories
    are only the titles 10 rows or more hold; numbers, dates and yes/no are never read as text."""
    titles = [f"title {i}" for i in range(400)] + ["nurse", "teacher"] * 300 + ["clerk"] * 200
    table = pd.DataFrame({"job": titles, "score": rng.normal(size=1200).round(3),
                          "day": pd.date_range("2020-01-01", periods=1200).strftime("%Y-%m-%d"),
                          "smoker": rng.choice([True, False], 1200)})
    schema = draft_schema(table)
    assert not schema.excluded
    assert schema["job"].categories == ["clerk", "nurse", "teacher"]
    assert schema["job"].unknown == "(other)"
    assert schema["day"].date == "year" and schema["smoker"].kind == "categorical"
