"""A synthetic table as a CSV file that is safe to open in a spreadsheet.

A cell whose text begins with `=`, `+`, `-`, `@`, a tab or a carriage return is read by Excel, LibreOffice and
Google Sheets as a formula (CSV injection: `=HYPERLINK(…)`, `+cmd|' /C calc'!A0`). As OWASP recommends, such a
text cell is written with a leading `'`, which spreadsheets take as "this is text" and do not show. Numeric
columns are written as they are (a negative number is a number, not a formula). Every CSV that leaves the
machine (`sample --out`, the app's download) is written by `to_csv`; the run's own samples, which the workbench
reads back, are not.
"""
from __future__ import annotations

import pandas as pd

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def _neutralise(value):
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


def spreadsheet_safe(table: pd.DataFrame) -> pd.DataFrame:
    """The table with every text cell that a spreadsheet would run as a formula prefixed with `'`."""
    out = table.copy()
    for name in out.columns:
        column = out[name]
        if pd.api.types.is_numeric_dtype(column) or pd.api.types.is_bool_dtype(column):
            continue
        out[name] = column.astype(object).map(_neutralise, na_action="ignore")
    return out


def to_csv(table: pd.DataFrame, target=None) -> str | None:
    """The table as spreadsheet-safe CSV: written to `target` (a path or an open text file), or returned."""
    return spreadsheet_safe(table).to_csv(target, index=False)
