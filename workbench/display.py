"""What a page shows as a person reads it: tables with an empty cell where a value is missing (never
'None' or 'nan'), the progress bar's words while a review sample is drawn."""
from __future__ import annotations

import pandas as pd

from synth_core.format import duration


def _cell(value) -> str:
    if value is None or (not isinstance(value, str) and pd.isna(value)):
        return ""
    if isinstance(value, float):
        return f"{int(value)}" if value.is_integer() and abs(value) < 1e15 else f"{value:.6g}"
    return str(value)


def readable(frame: pd.DataFrame) -> pd.DataFrame:
    """`frame` for st.dataframe: a column holding a missing value becomes text, blank where the
    value is missing (Streamlit writes 'None' there); a column without one keeps its type, and its
    sorting."""
    out = frame.copy()
    for name in out.columns:
        column = out[name]
        if column.isna().any():
            out[name] = column.map(_cell).astype(object)
    return out


def drawing_text(prog: dict) -> str:
    """What the progress bar says while the review sample is drawn after training."""
    if prog["sampling_s"] is None:
        return "Training done; drawing the synthetic rows for the review…"
    if prog["remaining_s"] is None:
        return ("Training done; drawing the synthetic rows for the review: "
                f"{past_estimate(prog['drawing_s'], prog['sampling_s'])}…")
    return f"Training done; drawing the synthetic rows for the review, about {duration(prog['remaining_s'])} left"


def past_estimate(elapsed: float, expected: float) -> str:
    """A draw that has outlasted its estimate, and why that happens."""
    return (f"{duration(elapsed)} so far, longer than the {duration(expected)} estimated (a calibrated sample draws "
            "more candidates while few of them fit the measured marginals)")
