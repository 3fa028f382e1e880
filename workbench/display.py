"""Tables as a person reads them: an empty cell where a value is missing, never 'None' or 'nan'."""
from __future__ import annotations

import pandas as pd


def _cell(value) -> str:
    if value is None or (not isinstance(value, str) and pd.isna(value)):
        return ""
    if isinstance(value, float):
        return f"{int(value)}" if value.is_integer() and abs(value) < 1e15 else f"{value:.6g}"
    return str(value)


def readable(frame: pd.DataFrame) -> pd.DataFrame:
    """`frame` for st.dataframe: a column holding a missing value becomes text, blank where the value is missing
    (Streamlit writes 'None' there); a column without one keeps its type, and its sorting."""
    out = frame.copy()
    for name in out.columns:
        column = out[name]
        if column.isna().any():
            out[name] = column.map(_cell).astype(object)
    return out
