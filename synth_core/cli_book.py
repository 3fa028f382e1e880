"""`python -m synth_core runs --book | --rebuild-book`: the budget book of the workbench home read
back, each table's charges with the runs that made them and the journal of its changes; the book
made again from its journal when it was lost or emptied. Imports neither torch nor Opacus."""
from __future__ import annotations

import json
import time
from pathlib import Path

from .format import epsilon as amount
from .format import runs as runs_text
from .home import budgets_path
from .privacy.table_budget import TableBudgets, folder_identity
from .runs.rundir import RunDir


def _where(charge: dict) -> str:
    """Where a charge's run is, and whether that folder is still the one the charge was made for."""
    run = charge.get("run") or ""
    if not run:
        return "a run without a folder (the API)"
    path = Path(run)
    if not RunDir(path).exists():
        return f"{run} (the folder is gone)"
    if charge.get("folder") and folder_identity(path) != charge["folder"]:
        return f"{run} (another folder is there now)"
    return run


def book_summary(book: TableBudgets) -> list[dict]:
    """Each table's account, its charges oldest first, and how many journal lines name it."""
    journal = book.journal()
    out = []
    for table_id, account in book.accounts().items():
        charges = sorted(account.charges.items(), key=lambda kv: kv[1].get("time", 0.0))
        out.append({
            "table": table_id, "name": account.label, "files": 1 + len(account.aliases),
            "epsilon_total": account.total_epsilon, "epsilon_spent": account.spent_epsilon,
            "epsilon_remaining": account.remaining_epsilon,
            "charges": [{"epsilon": c["epsilon"], "delta": c.get("delta", 0.0),
                         "settled": bool(c.get("settled")), "date": _date(c.get("time")),
                         "run": c.get("run", ""), "where": _where(c)} for _, c in charges],
            "journal_lines": sum(1 for line in journal if table_id in (line.get("table"), line.get("to"))),
        })
    return out


def _date(stamp) -> str:
    return time.strftime("%Y-%m-%d", time.localtime(stamp)) if stamp else ""


def book_command(args) -> int:
    """Show the book (--book) or rebuild it from its journal (--rebuild-book)."""
    book = TableBudgets(budgets_path())
    if args.rebuild_book:
        tables = book.rebuild()
        print(f"rebuilt {book.path} from {book.file.journal_path.name}: {len(tables)} table(s), "
              f"{sum(len(t.get('charges', {})) for t in tables.values())} charge(s)")
    tables = book_summary(book)
    if args.json:
        print(json.dumps({"book": str(book.path), "tables": tables}, indent=2))
        return 0
    print(f"budget book {book.path} (journal: {book.file.journal_path.name}, "
          f"{len(book.journal())} changes)")
    if not tables:
        print("no table has a budget yet")
    for t in tables:
        name = t["name"] or f"table {t['table'][:8]}"
        files = f", {t['files']} files" if t["files"] > 1 else ""
        print(f"{name}: ε {amount(t['epsilon_spent'])} spent of {amount(t['epsilon_total'])}, "
              f"{amount(t['epsilon_remaining'])} left, {runs_text(len(t['charges']))}{files}")
        for c in t["charges"]:
            state = "spent" if c["settled"] else "reserved"
            print(f"  {c['date']}  ε {amount(c['epsilon']):<7} {state:<8}  {c['where']}")
    return 0
