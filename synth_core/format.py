"""Numbers as the CLI, the pages and the reports write them for a person (the core decides the
figures; this only writes them)."""
from __future__ import annotations


def duration(seconds: float | None) -> str:
    """'45 s', '3 min 05 s', '1 h 02 min'; '…' while unknown."""
    if seconds is None:
        return "…"
    s = int(round(seconds))
    if s >= 3600:
        return f"{s // 3600} h {s % 3600 // 60:02d} min"
    return f"{s // 60} min {s % 60:02d} s" if s >= 60 else f"{s} s"


def epsilon(value: float) -> str:
    """An amount of ε to three significant digits: '0.25', '1', '0.123', '12.3'; what is left below
    0.0001 (a run that spent 0.9999998 of 1 leaves 2e-07) is '0'."""
    value = float(value)
    return f"{value:.3g}" if abs(value) >= 1e-4 else "0"


def runs(count: int) -> str:
    """'1 run', '3 runs'."""
    return f"{count} run" if count == 1 else f"{count} runs"


_MARKDOWN = str.maketrans({**{c: f"\\{c}" for c in "\\`*_[]{}()#+-!|~"}, "<": "&lt;", ">": "&gt;",
                           "&": "&amp;", "\n": " ", "\r": " ", "\t": " "})


def markdown_text(value) -> str:
    """Text quoted in markdown (column names, categories, run names: a steward's, or a file's) so
    that it shows as written: no HTML, no links or emphasis, no line break or `|` that breaks a
    table."""
    return str(value).translate(_MARKDOWN)
