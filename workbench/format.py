"""Numbers as the pages write them for a person."""
from __future__ import annotations


def duration(seconds: float | None) -> str:
    """'45 s', '3 min 05 s', '1 h 02 min'; '…' while unknown."""
    if seconds is None:
        return "…"
    s = int(round(seconds))
    if s >= 3600:
        return f"{s // 3600} h {s % 3600 // 60:02d} min"
    return f"{s // 60} min {s % 60:02d} s" if s >= 60 else f"{s} s"
