"""A synthetic table as a CSV file that is safe to open in a spreadsheet.

A cell whose text begins with `=`, `+`, `-`, `@`, a tab or a carriage return is read by Excel,
LibreOffice and Google Sheets as a formula (CSV injection: `=HYPERLINK(…)`, `+cmd|' /C calc'!A0`).
As OWASP recommends, such a text cell is written with a leading `'`, which spreadsheets take as
"this is text" and do not show; so is a column's name, which a spreadsheet reads as a cell like any
other. Numeric columns are written as they are (a negative number is a number, not a formula). Rows
end in CR LF (RFC 4180, as spreadsheets write CSV), so that a cell or a name holding a carriage
return is quoted, not read as the end of its row. Every CSV that leaves the
machine (`sample --out`, the app's download) is written by `to_csv`; the run's own samples, which
the workbench reads back, are not.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from ..files import OutputError, atomic_output, check_output_folder
from ..shape import PERSONS

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def _neutralise(value):
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


def spreadsheet_safe(table: pd.DataFrame) -> pd.DataFrame:
    """The table with every text cell and column name that a spreadsheet would run as a formula
    prefixed with `'`."""
    out = table.copy()
    for name in out.columns:
        column = out[name]
        if pd.api.types.is_numeric_dtype(column) or pd.api.types.is_bool_dtype(column):
            continue
        out[name] = column.astype(object).map(_neutralise, na_action="ignore")
    out.columns = [_neutralise(name) for name in out.columns]
    return out


def to_csv(table: pd.DataFrame, target=None, header: bool = True) -> str | None:
    """The table as spreadsheet-safe CSV: written to `target` (a path or an open text file), or
    returned; `header` False: its rows alone (a part after the first, written to the same file)."""
    return spreadsheet_safe(table).to_csv(target, index=False, lineterminator="\r\n",
                                          header=header)


# the files a linked sample (schema.linked) is written as, in the folder the steward names
LINKED_FILES = dict(PERSONS.part_files)


def write_linked(tables, folder) -> dict[str, str]:
    """Linked synthetic tables (schema.linked.LinkedTables) as parents.csv and children.csv in
    `folder` (made if it is missing; its parent must exist), each written atomically by `to_csv`.
    Returns {which: path}."""
    folder = check_output_folder(folder, "folder for the two tables")
    if not folder.parent.is_dir():
        raise OutputError(f"the folder {folder.parent} does not exist; create it or write elsewhere")
    folder.mkdir(exist_ok=True)
    written = {}
    for which, name in LINKED_FILES.items():
        path = Path(folder) / name
        with atomic_output(path, make_parent=False) as f:
            to_csv(getattr(tables, which), f)
        written[which] = str(path)
    return written
