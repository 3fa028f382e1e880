"""The rules of ARCHITECTURE.md, checked on the source: one home per concept stays one home."""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CORE = ROOT / "synth_core"
APP = [ROOT / "app.py", *sorted((ROOT / "app_pages").glob("*.py")), *sorted((ROOT / "workbench").glob("*.py"))]


def modules(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*.py") if "__pycache__" not in p.parts)


def imported(path: Path) -> set[str]:
    """Every module a file imports (absolute names; relative imports resolved against the file's package)."""
    package = ".".join(path.relative_to(ROOT).with_suffix("").parts[:-1])
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parts = parts[: len(parts) - (node.level - 1)]
                base = ".".join(parts + ([node.module] if node.module else []))
            out.add(base)
            out |= {f"{base}.{a.name}" for a in node.names}
    return out


def names_used(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} | \
           {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}


def strings(path: Path) -> set[str]:
    return {n.value for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.Constant)
            and isinstance(n.value, str)}


def test_the_core_never_imports_streamlit():
    offenders = [str(p.relative_to(ROOT)) for p in modules(CORE) if any(m.split(".")[0] == "streamlit"
                                                                         for m in imported(p))]
    assert offenders == []


def test_every_epsilon_is_computed_in_the_privacy_layer():
    """Opacus' accountants, the calibration and the ε arithmetic are reached only from synth_core/privacy."""
    privacy_only = {"epsilon_after", "plan_noise", "group_privacy", "member_budget", "get_noise_multiplier", "gaussian_for",
                    "calibrate_noise", "compose", "rho_for", "create_accountant", "RDPAccountant"}
    offenders = {}
    for p in modules(CORE) + APP:
        if CORE / "privacy" in p.parents:
            continue
        used = (names_used(p) & privacy_only) | {m for m in imported(p) if m.startswith("opacus.accountants")}
        if used:
            offenders[str(p.relative_to(ROOT))] = sorted(used)
    assert offenders == {}


def test_a_path_inside_a_run_folder_is_spelled_in_runs_rundir_only():
    layout = {"status.json", "events.jsonl", "ledger.json", "request.json", "worker.json", "worker.log",
              "training.json", "review.csv", "synthetic.csv", "train.parquet", "holdout.parquet", "samples",
              "private", "reports", "cancel", "charge.json"}
    offenders = {}
    for p in modules(CORE) + APP:
        if p == CORE / "runs" / "rundir.py":
            continue
        spelled = strings(p) & layout
        if spelled:
            offenders[str(p.relative_to(ROOT))] = sorted(spelled)
    assert offenders == {}


def test_no_module_outgrows_its_concept():
    too_long = {str(p.relative_to(ROOT)): n for p in modules(CORE) + APP
                if (n := len(p.read_text().splitlines())) > 600}
    assert too_long == {}
