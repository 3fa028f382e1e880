"""A run's worker imports the heavy libraries afresh; the app's process times its own first import
of each, for a time estimate to count (synth_core.import_clock)."""
from __future__ import annotations

import sys

from synth_core import import_clock


def test_a_first_import_is_timed_once_and_one_loaded_before_is_not(monkeypatch):
    monkeypatch.setattr(import_clock, "_SECONDS", {})
    monkeypatch.delitem(sys.modules, "colorsys", raising=False)
    with import_clock.timed("opacus", "colorsys"):
        import colorsys  # noqa: F401
    first = import_clock.seconds("opacus")
    assert 0 < first < import_clock.MEASURED_S["opacus"]
    with import_clock.timed("opacus", "colorsys"):  # asked again: the first import's seconds
        pass
    assert import_clock.seconds("opacus") == first
    # loaded before anything timed it: a fresh worker's measured seconds stand in
    with import_clock.timed("mbi", "sys"):
        pass
    assert import_clock.seconds("mbi") == import_clock.MEASURED_S["mbi"]
