"""Tables as the pages show them (workbench.display): a missing value is an empty cell, never 'None'
or 'nan'."""
from __future__ import annotations

import math

import pandas as pd

from workbench.display import readable


def test_a_missing_value_shows_as_an_empty_cell_and_other_columns_keep_their_type():
    frame = pd.DataFrame({"age": [31.0, math.nan, 47.5], "job": ["nurse", None, "pilot"], "n": [1, 2, 3],
                          "δ": [1e-6, None, 0.0]})
    shown = readable(frame)
    assert list(shown["age"]) == ["31", "", "47.5"] and list(shown["job"]) == ["nurse", "", "pilot"]
    assert list(shown["δ"]) == ["1e-06", "", "0"]
    assert shown["n"].dtype == frame["n"].dtype  # nothing missing: a number column stays one
    assert "None" not in shown.to_string() and "nan" not in shown.to_string().lower()
    assert frame["age"].isna().sum() == 1  # the page's own table is not changed
