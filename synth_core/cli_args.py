"""The command line's words: `build_parser` (every command and option of `python -m synth_core`,
with its help) and `parse_options` (the repeatable KEY=VALUE options); cli.py carries the commands
out."""
from __future__ import annotations

import argparse
import json

from .models.recommend import AUTO
from .privacy.accounting import ACCOUNTANTS
from .privacy.budget import DEFAULT_CALIBRATION_SHARE

# the commands whose options name the model families: only they import the families (and so torch)
FAMILY_COMMANDS = ("fit", "audit")


def build_parser(families: bool = True) -> argparse.ArgumentParser:
    """The whole parser. families=False: `fit` and `audit` take any --model word (their own parsers,
    built with families=True, check it): for a command that trains nothing, nothing imports
    torch."""
    if families:
        from .models import MODELS
    else:
        MODELS = {}
    p = argparse.ArgumentParser(prog="python -m synth_core", description="Differentially private synthetic tables.")
    sub = p.add_subparsers(dest="command", required=True)
    _schema_command(sub)
    _fit_command(sub, MODELS, families)
    _sample_and_demo_commands(sub)
    _review_commands(sub, MODELS, families)
    return p


def _schema_command(sub) -> None:
    sch = sub.add_parser("schema", help="work with public schemas")
    sch_sub = sch.add_subparsers(dest="schema_command", required=True)
    d = sch_sub.add_parser("draft", help="draft a schema by READING THE DATA (marked unconfirmed until you confirm it)")
    d.add_argument("--data", required=True, help="CSV or Parquet file (linked tables: the parents', one row a person)")
    d.add_argument("--out", required=True, help="where to write the schema JSON")
    d.add_argument("--missing", action="append", default=[], help="a string that marks a missing value (repeatable)")
    d.add_argument("--max-categories", type=int, default=50)
    _linked_arguments(d)
    d.add_argument("--max-children", type=int, default=None,
                   help="linked tables: the most child rows one person contributes (public; default 10)")
    d.add_argument("--order", default=None, help="linked tables: a numeric child column the rows of a person follow")
    c = sch_sub.add_parser("confirm", help="state that every fact in a schema is public")
    c.add_argument("schema")
    v = sch_sub.add_parser("check", help="check a table against a schema")
    v.add_argument("--data", required=True)
    v.add_argument("--schema", required=True)
    _linked_arguments(v)


def _linked_arguments(parser) -> None:
    parser.add_argument("--child", default=None, help="linked tables: the children's table (CSV or Parquet), whose "
                        "rows belong to a person of --data through --key")
    parser.add_argument("--key", default=None, help="linked tables: the key column both tables share")


def _fit_command(sub, MODELS: dict, families: bool) -> None:
    f = sub.add_parser("fit", help="train a DP model and save it as a run")
    f.add_argument("--data", required=True, help="the private table (CSV or Parquet)")
    f.add_argument("--schema", required=True, help="the public schema (JSON)")
    _linked_arguments(f)
    f.add_argument("--model", default="dp-tbart", choices=[AUTO, *sorted(MODELS)] if families else None,
                   help="a model family, or auto: chosen from the public schema and the row count (it says why)")
    f.add_argument("--engine", action="store_true",
                   help="count the table in an embedded engine instead of reading it whole (a "
                        "table too large for memory; every family but dp-llmtgen); automatic "
                        "for a file that would take over 1.6 GB read whole (a 200 MB CSV)")
    f.add_argument("--epsilon", type=float, required=True, help="total privacy budget ε")
    f.add_argument("--delta", type=float, default=None, help="δ (default: a power of ten below 1/rows)")
    f.add_argument("--accountant", default="prv", choices=ACCOUNTANTS)
    f.add_argument("--preset", default=None,
                   help="model size preset (default cpu; with --model auto, auto's): "
                        + "; ".join(f"{name}: {', '.join(cls.presets)}" for name, cls in sorted(MODELS.items())))
    f.add_argument("--epochs", type=float)
    f.add_argument("--batch-size", type=int, help="expected Poisson batch size")
    f.add_argument("--lr", type=float)
    f.add_argument("--max-grad-norm", type=float)
    f.add_argument("--random-order", action="store_true", help="random column order per row (exact conditioning on any column)")
    f.add_argument("--bins", type=int, help="bins per numeric column (default 100)")
    f.add_argument("--midpoint", action="store_true", help="decode a numeric bin to its midpoint instead of a uniform draw")
    f.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                   help="any other model or training option, repeatable; VALUE is JSON when it parses "
                        "(e.g. --option backbone=/models/gpt2 --option lora_rank=16)")
    f.add_argument("--bounds-epsilon", type=float, default=0.0,
                   help="part of ε to spend estimating numeric bounds the schema lacks (a DP histogram)")
    f.add_argument("--values-epsilon", type=float, default=0.0,
                   help="part of ε to find, with DP, the value sets and point masses of numeric columns that "
                        "declare none (codes, brackets, the 0 of amounts; a noisy count of each value of the "
                        "column's public grid: whole numbers, or declared decimals)")
    f.add_argument("--calibration-share", type=float, default=None,
                   help="share of ε for measuring the table's marginals, composed with training by the accountant; "
                        f"samples are then calibrated to them (0 to 0.9, 0 for none; default {DEFAULT_CALIBRATION_SHARE:g}, "
                        "with --model auto auto's)")
    f.add_argument("--quantile-share", type=float, default=None,
                   help="share of ε for the numeric columns' quantiles (a DP histogram each): every model's bins "
                        "then follow them; for large tables (on tables of 2-6k rows it made results worse); "
                        "default 0")
    f.add_argument("--seed", type=int, default=0,
                   help="initial weights and splits; the DP noise and batches are always secret")
    f.add_argument("--device", default=None, help="cpu, cuda, cuda:1 (default: cuda when available)")
    f.add_argument("--out", required=True, help="run directory to create")
    f.add_argument("--overwrite", action="store_true")
    f.add_argument("--accept-draft", action="store_true",
                   help="train on a schema drafted from the data and never confirmed (every report says so)")
    f.add_argument("--table-epsilon", type=float, default=None,
                   help="the total ε this table may spend across all its runs (default for a new table: this "
                        "run's ε); a run beyond it is refused")
    f.add_argument("--table", dest="book_table", default=None, metavar="NAME",
                   help="the name of this table in the budget book: a new export of a table you named counts on "
                        "its budget; a name no table has yet names this one")
    f.add_argument("--new-table", action="store_true",
                   help="this file resembles a table in the budget book but is another table: open its own budget")
    f.add_argument("--public-table", action="store_true",
                   help="the table is public or invented: this run draws from no table's budget (by default every "
                        "run draws from its table's, in the workbench home)")


def _sample_and_demo_commands(sub) -> None:
    s = sub.add_parser("sample", help="sample synthetic rows from a run")
    s.add_argument("--run", required=True)
    s.add_argument("--rows", type=int, required=True)
    s.add_argument("--out", required=True, help="CSV to write (linked tables: a folder for parents.csv and "
                   "children.csv)")
    s.add_argument("--condition", action="append", default=[], help="column=value to fix (repeatable)")
    s.add_argument("--seed", type=int, default=None)
    s.add_argument("--device", default=None)

    dm = sub.add_parser("demo", help="train and sample on a built-in demo table (invented rows, no files)")
    dm.add_argument("--epsilon", type=float, default=1.0)
    dm.add_argument("--out", default="runs/demo", help="run directory (default runs/demo)")
    dm.add_argument("--rows", type=int, default=1000, help="synthetic rows to write to <out>/samples/synthetic.csv")
    dm.add_argument("--preset", default="cpu")
    dm.add_argument("--csv", metavar="PATH", help="only write the demo table to PATH and its public schema beside it "
                                                  "(PATH with .schema.json), for trying `schema` and `fit` on files")
    dm.add_argument("--epochs", type=float)
    dm.add_argument("--device", default=None)


def _review_commands(sub, MODELS: dict, families: bool) -> None:
    ev = sub.add_parser("evaluate", aliases=["report"],
                        help="review synthetic tables against the real one: HTML report + JSON of every figure")
    ev.add_argument("--real", required=True, help="the real table the model was trained on (CSV or Parquet)")
    ev.add_argument("--real-child", default=None, help="linked tables: the real children's table (--real: the "
                    "parents'); --synthetic is then a folder holding parents.csv and children.csv")
    ev.add_argument("--holdout", help="real rows the model never saw (needed for utility and the privacy attacks)")
    ev.add_argument("--holdout-child", default=None, help="linked tables: the held-out persons' child rows "
                    "(--holdout: their rows), for train-on-synthetic with --target, a column of the parents'")
    ev.add_argument("--synthetic", action="append", default=[], metavar="[LABEL=]FILE",
                    help="a synthetic table (repeatable, to compare runs)")
    ev.add_argument("--run", action="append", default=[], metavar="[LABEL=]DIR",
                    help="a run directory: its samples/synthetic.csv and its ledger (repeatable)")
    ev.add_argument("--schema", help="the public schema (default: the first run's schema.json)")
    ev.add_argument("--target")
    ev.add_argument("--sensitive")
    ev.add_argument("--out", required=True, help="directory for report.html and report.json")
    ev.add_argument("--no-umap", action="store_true", help="skip the UMAP projection (about 20-40 s)")
    ev.add_argument("--quick", action="store_true", help="only the fast figures, printed (no report)")
    ev.add_argument("--threads", type=int, default=None, help="threads for the learners (default: all)")
    ev.add_argument("--seed", type=int, default=0)

    au = sub.add_parser("audit", help="empirical ε lower bound for a model family (one-run canary audit)")
    au.add_argument("--model", default="dp-tbart",
                    choices=sorted(n for n, c in MODELS.items() if c.uses_dp_sgd) if families else None,
                    help="a family trained by DP-SGD")
    au.add_argument("--epsilon", type=float, default=1.0, help="the ε the training claims")
    au.add_argument("--delta", type=float, default=1e-5)
    au.add_argument("--broken", choices=["noise-off", "epsilon-x1000", "clip-off"],
                    help="break the training on purpose, to see the audit catch it")
    au.add_argument("--canaries", type=int, default=1000)
    au.add_argument("--data", help="base rows to hide the canaries among (default: 300 demo rows)")
    au.add_argument("--schema", help="the public schema of --data")
    au.add_argument("--epochs", type=float, help="override the audit's 60 epochs")
    au.add_argument("--seed", type=int, default=0)
    au.add_argument("--json", help="write the result as JSON here")

    fc = sub.add_parser("forecast", help="what a run would buy, before anything is spent: each column's shares "
                                         "(public facts only, no ε)")
    fc.add_argument("--schema", required=True, help="the public schema (confirmed)")
    fc.add_argument("--epsilon", type=float, required=True)
    fc.add_argument("--rows", type=int, help="the number of rows, or an upper bound you can state publicly "
                                             "(default: the schema's declared count)")
    fc.add_argument("--model", default="auto", help="a family, or auto (default)")
    fc.add_argument("--delta", type=float, default=None)
    fc.add_argument("--calibration-share", type=float, default=None)
    fc.add_argument("--json", action="store_true", help="print it as JSON")

    r = sub.add_parser("runs", help="show a run's status and ledger, or the budget book")
    r.add_argument("run", nargs="?", default=None)
    r.add_argument("--json", action="store_true", help="print it as JSON")
    r.add_argument("--book", action="store_true",
                   help="show every table's budget in the workbench home's book: each charge with the run that "
                        "made it, and the journal of changes")
    r.add_argument("--rebuild-book", action="store_true",
                   help="make the book again from its journal (the book was lost, emptied or damaged); the "
                        "damaged file is kept beside it")


def parse_options(pairs: list[str]) -> dict:
    """KEY=VALUE pairs to a dict; VALUE read as JSON when it parses (numbers, true/false), else as
    text."""
    options = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--option wants KEY=VALUE, not {pair!r}")
        try:
            options[key.strip()] = json.loads(value)
        except json.JSONDecodeError:
            options[key.strip()] = value
    return options
