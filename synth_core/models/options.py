"""What a family's options and a sampling request may be, checked before anything is spent: each
option of a family's config (`check_model_options`), the shared checks a config's own `check` calls,
and the rows one request draws."""
from __future__ import annotations

import dataclasses
import math

import numpy as np


def check_model_options(config) -> None:
    """ValueError naming the first model option a family cannot be built with, before anything is
    spent: a field whose default is a whole number takes a whole number of at least 1 (0 where the
    config's ZERO_OK names it), a number a finite one ≥ 0, a flag true or false, a word text; then
    the config's own `check` (a width its groups divide, heads that divide the embedding, shares
    below 1)."""
    zero_ok = getattr(config, "ZERO_OK", frozenset())
    for f in dataclasses.fields(config):
        value, default = getattr(config, f.name), f.default
        if default is dataclasses.MISSING or (value is None and default is None):
            continue
        # a default of None: the field's declared types
        declared = str(f.type).replace(" ", "").split("|")
        if isinstance(default, bool) or (default is None and declared[0] == "bool"):
            if not isinstance(value, bool):
                raise ValueError(f"{f.name} must be true or false, not {value!r}")
        elif isinstance(default, int) or (default is None and declared[0] == "int"):
            least = 0 if f.name in zero_ok else 1
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                raise ValueError(f"{f.name} must be a whole number of at least {least}, not {value!r}")
        elif isinstance(default, float):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
                    or value < 0:
                raise ValueError(f"{f.name} must be a finite number ≥ 0, not {value!r}")
        elif isinstance(default, str) and not isinstance(value, str):
            raise ValueError(f"{f.name} must be text, not {value!r}")
    if hasattr(config, "check"):
        config.check()


def check_groups(width: int, groups: int) -> None:
    """GroupNorm's groups must divide the width they normalise."""
    if width % groups:
        raise ValueError(f"groups ({groups}) must divide width ({width})")


def check_choices(config, **choices: tuple) -> None:
    """Each named option one of its allowed words."""
    for name, allowed in choices.items():
        if getattr(config, name) not in allowed:
            raise ValueError(f"{name} must be one of {', '.join(allowed)}, not {getattr(config, name)!r}")


def check_bins(config) -> None:
    """A numeric column's bins (n_bins, integer_bins): at least two."""
    for name in ("n_bins", "integer_bins"):
        if getattr(config, name) < 2:
            raise ValueError(f"{name} must be at least 2 bins, not {getattr(config, name)!r}")


# the most rows one request draws: more would take hours on a CPU and tens of GB; draw several files
# instead
MAX_SAMPLE_ROWS = 5_000_000
# the most rows a draw written to a file a part at a time takes (api.PART_ROWS: memory holds a
# part): hours on a CPU for the slowest families, minutes for AIM
MAX_FILE_ROWS = 100_000_000


def check_sample_rows(n, most: int = MAX_SAMPLE_ROWS) -> None:
    """ValueError unless `n` rows can be drawn in one request: a whole number from 1 to `most`
    (MAX_SAMPLE_ROWS; MAX_FILE_ROWS for a draw written to a file a part at a time)."""
    if not isinstance(n, (int, np.integer)) or isinstance(n, bool) or n < 1:
        raise ValueError(f"the number of rows must be a positive integer, not {n!r}")
    if n > most:
        raise ValueError(f"{n:,} rows is more than one request draws (at most {most:,}); ask "
                         "for fewer, or draw several files")
