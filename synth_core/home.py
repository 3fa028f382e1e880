"""Where the steward's work lives on this machine: $SYNTH_WORKBENCH_HOME, or ~/.synth-workbench
(owner-only).

    runs/          one folder per run (runs.rundir)
    budgets.json   the privacy budget of each table across its runs (privacy.table_budget), with its key
                   (.budgets.key), its journal (budgets.journal: every change, a line each) and the sketches
                   that tell a new export of a known table (.budgets.sketches), privacy.book_file
    timings.json   what past runs' phases cost on this machine, for the next time estimate (runs.timing)
    backbones/     packaged language models converted once to model directories (models.llm.backbone)
    schema-work/   the steward's schema work on each table, by its keyed fingerprint, owner-only:
                   the schema as edited, the columns left out, its confirmation; never a row
                   (schema_work)
    last-table/    the last table loaded in the app, for a reload to find it: an upload's files as
                   uploaded, owner-only, never exported; replaced by the next table (schema_work)
    cache/         what can be made again and only saves time: JAX's compiled programs (models.aim_config.mbi);
                   safe to delete at any time

The app, the CLI and the background worker all use this one home.
"""
from __future__ import annotations

import os
from pathlib import Path


def home() -> Path:
    root = Path(os.environ.get("SYNTH_WORKBENCH_HOME") or Path.home() / ".synth-workbench")
    root.mkdir(parents=True, exist_ok=True)
    try:
        os.chmod(root, 0o700)
    except OSError:
        pass
    return root


def runs_root() -> Path:
    return home() / "runs"


def budgets_path() -> Path:
    return home() / "budgets.json"


def timings_path() -> Path:
    return home() / "timings.json"


def backbones_root() -> Path:
    return home() / "backbones"


def cache_root() -> Path:
    return home() / "cache"


def schema_work_root() -> Path:
    return home() / "schema-work"


def last_table_root() -> Path:
    return home() / "last-table"
