"""The privacy report that travels with an exported synthetic table: JSON for machines, markdown for
people.

It says which model made the table, the budget (ε, δ) and the accountant, every entry of the privacy
ledger, the public schema and whether it was drafted from the data, and how the rows were sampled.
It holds nothing computed from the private table beyond what the ledger paid for: the run's
validation counts (clipped or missing values) and the private rows stay in the run directory.
"""
from __future__ import annotations

import datetime as _dt
import json
from dataclasses import asdict

from ..benchmark_model import FIGURES
from ..format import markdown_text, runs
from ..models import get_model_class
from ..privacy.table_budget import TableBudgets
from ..runs import RunDir
from ..schema.derived import describe
from ..schema.panel import panel_words

def privacy_report(run: RunDir, sampling: dict | None = None, synthetic_rows: int | None = None,
                   budgets: TableBudgets | None = None) -> dict:
    """Everything a recipient of the synthetic table may know about how it was made; with the book
    of table budgets, also the ε spent on the same table by every run (cumulative: several releases
    add up)."""
    run.require()
    config = run.public_config()
    ledger = run.ledger()
    schema = run.schema()
    provenance = ledger.schema_provenance or schema.provenance
    status = run.status()
    family = config.get("model")
    try:
        klass = get_model_class(family)
        description = klass.description
    except ValueError:
        description = ""
    plan = config.get("plan") or {}
    report = {
        "report_version": 1,
        "generated": _dt.date.today().isoformat(),  # a date: times would tell how long the run took
        "run": run.path.name,
        "run_state": status.get("state"),
        "model": {"family": family, "description": description, "preset": config.get("preset"),
                  "size": config.get("size") or config.get("preset"),
                  "options": config.get("options", {})},
        "privacy": {
            "epsilon_target": ledger.target_epsilon,
            "epsilon_spent": ledger.spent_epsilon,
            "composition": ledger.composition,
            "delta": ledger.target_delta,
            "accountant": "zCDP (Rényi)" if plan.get("kind") == "zcdp" else plan.get("accountant", config.get("accountant")),
            "mechanism": "rounds" if plan.get("kind") == "zcdp" else "dp-sgd",
            "rho": plan.get("rho"),
            "rounds_taken": _rounds_taken(ledger),
            # the family's own words for its mechanism, as its ledger entry holds them
            "training_mechanism": getattr(ledger.training_entry(), "mechanism", None),
            "noise_multiplier": plan.get("noise_multiplier"),
            "sample_rate": plan.get("sample_rate"),
            "steps_planned": plan.get("steps"),
            "max_grad_norm": plan.get("max_grad_norm"),
            "training_rows": ledger.n_rows,
            "training_rows_public": ledger.rows_public,
            "ledger": [{**asdict(e), "time": _day(e.time)} for e in ledger.entries],
        },
        # the public facts only: which columns a draft left out, and why, was read from the data
        "schema": _public_facts(schema.to_dict()),
        "schema_provenance": provenance,
        "notice": DRAFT_NOTICE if provenance.get("drafted_from_data") and not provenance.get("confirmed") else None,
        "warnings": ledger.warnings(),
        "sampling": dict(sampling or {}),
        # what the run was expected to reach, from public facts before training (forecast.py)
        "forecast": config.get("forecast") or {},
        "synthetic_rows": synthetic_rows,
        "table": None,
    }
    table_id = budgets.table_of_run(run.charge()) if budgets is not None else None
    if table_id is not None:
        account = budgets.account(table_id)
        report["table"] = {"epsilon_spent": account.spent_epsilon, "delta_spent": account.spent_delta,
                           "epsilon_total": account.total_epsilon, "runs": len(account.charges)}
    return report


def _public_facts(schema: dict) -> dict:
    """A schema's dict without what a draft read from the data about the columns it left out (of
    both tables of a linked schema); a linked schema's unit of privacy is a person."""
    if "linked" in schema:
        return {**schema, "parent": _public_facts(schema["parent"]), "child": _public_facts(schema["child"])}
    return {k: v for k, v in schema.items() if k != "excluded"}


def _forecast_lines(kept: dict) -> list[str]:
    """The forecast made before training (public facts only), to set beside the review's measured
    figures."""
    figures = [(FIGURES[w], kept[w]) for w in FIGURES if w in kept]
    if not figures:
        return []
    return ["", "## Forecast before training", "",
            "From public facts only (the schema, the released row count, ε, the family), by a model of the project's "
            "benchmark results; each figure with its 80% interval, as the review measures it"
            + (f" ({kept['compares']})" if kept.get("compares") else "") + ":", "",
            *(f"- {name}: {v['expected']:.3f} ({v['low']:.3f} to {v['high']:.3f})" for name, v in figures)]


def _schema_lines(schema: dict, prov: dict) -> list[str]:
    """The public schema's section: every column's public facts, then the declared rules (of both
    tables, for linked ones)."""
    if "linked" in schema:
        link = schema["linked"]
        panel = panel_words(link.get("order"), link.get("time_index"), link.get("changes", {}))
        time = [f"Declared public and obeyed by every synthetic person: {panel}."] if panel else []
        return (["", "## Linked tables", "",
                 f"A parents' table (one row a person) and a children's table linked by `{link['key']}` (keys are never "
                 f"modelled: the synthetic ones are fresh). The privacy guarantee covers a whole person: every person "
                 f"contributed at most {link['max_children']} child rows (a random subset of them where they had "
                 "more), and one step of training read a person's row and all their child rows as one sample."]
                + ([""] + time if time else [])
                + [line.replace("## Public schema", "## Public schema: the parents' table") for line in
                   _schema_lines(schema["parent"], prov)]
                + [line.replace("## Public schema", "## Public schema: the children's table") for line in
                   _schema_lines(schema["child"], prov)])
    lines = [
        "",
        "## Public schema",
        "",
        "Drafted from the data: **" + ("yes" if prov.get("drafted_from_data") else "no") + "**; confirmed by the "
        "data steward as public facts: **" + ("yes" if prov.get("confirmed") else "no") + "**.",
        "",
        "| column | kind | public bounds / categories | nullable | role |",
        "| --- | --- | --- | --- | --- |",
    ]
    for c in schema["columns"]:
        if c["kind"] == "categorical":
            cats = c.get("categories") or []
            facts = ", ".join(map(_md, cats[:12])) + (f", … ({len(cats)} in all)" if len(cats) > 12 else "")
        else:
            facts = f"{_fmt(c.get('lower'))} to {_fmt(c.get('upper'))}"
        if c.get("derived"):
            facts += f"; derived, never modelled: {_md(describe(c['derived']))}"
        lines.append(f"| {_md(c['name'])} | {c['kind']} | {facts} | {'yes' if c.get('nullable') else 'no'} | "
                     f"{_md(c.get('role') or '')} |")
    if schema.get("rules"):
        lines += ["", "## Declared rules", "",
                  "Public facts declared by the data steward (no ε): every synthetic row obeys each of them; rows of "
                  "the private table that broke one were left out of training.", ""]
        # double backticks: a rule's names hold single ones
        lines += [f"- `` {' '.join(rule.split())} ``" for rule in schema["rules"]]
    return lines


def _rounds_taken(ledger) -> int | None:
    """The rounds an adaptive mechanism took (its selections, and the first measurement of every
    column)."""
    entry = ledger.training_entry()
    if entry is None or entry.kind != "selected-marginals":
        return None
    selections = entry.details.get("selections")
    return None if selections is None else int(selections) + 1


def _day(when) -> str:
    """A ledger entry's date (entries written before dates were kept hold a time in seconds)."""
    if isinstance(when, (int, float)):
        return _dt.datetime.fromtimestamp(when, _dt.UTC).date().isoformat()
    return str(when)[:10]


DRAFT_NOTICE = ("The schema of this table was read from the private data and never confirmed as public by the data "
                "steward, who accepted training on it: its bounds and category lists may disclose facts about the "
                "private table beyond what the privacy budget accounts for.")


def report_json(report: dict) -> str:
    return json.dumps(report, indent=2, default=str)


_md = markdown_text  # text the report quotes: the steward's, or a file's


def _fmt(value, digits: int = 4) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:.{digits}g}"
    return _md(value)


def report_markdown(report: dict) -> str:
    """The same report, for a person."""
    p, m = report["privacy"], report["model"]
    prov = report["schema_provenance"]
    lines = [f"**{report['notice']}**", ""] if report.get("notice") else []
    lines += [
        "# Privacy report for a synthetic table",
        "",
        f"Generated {report['generated']} from run {_md(report['run'])} ({report['run_state']}).",
        "",
    ]
    if report["warnings"]:
        lines += ["## Warnings", ""] + [f"- **{w}**" for w in report["warnings"]] + [""]
    t = report.get("table")
    cumulative = ([f"All releases from the same private table together: **ε = {_fmt(t['epsilon_spent'])}**, "
                   f"δ = {_fmt(t['delta_spent'])} over {runs(t['runs'])} (basic composition), of a total of "
                   f"{_fmt(t['epsilon_total'])} the data steward allows for it.", ""] if t else [])
    lines += [
        "## Guarantee",
        "",
        f"The synthetic table was produced by a model trained with differential privacy at "
        f"**ε = {_fmt(p['epsilon_spent'])}** (budget {_fmt(p['epsilon_target'])}), **δ = {_fmt(p['delta'])}**, "
        f"measured with the {p['accountant']} accountant. Sampling more rows from the model costs no further privacy.",
        "",
        *cumulative,
        "## Model",
        "",
        f"- Family: `{m['family']}`, size {_md(m.get('size') or m['preset'])}",
        f"- What it is: {m['description'] or '—'}",
        *([f"- Its own mechanism, no DP-SGD: {_md(p.get('training_mechanism') or 'rounds')}; it spends "
           f"ρ = {_fmt(p['rho'])} of zero-concentrated DP"
           + (f" in {_fmt(p['rounds_taken'])} rounds" if p.get("rounds_taken") is not None else "")]
          if p.get("mechanism") == "rounds" else
          [f"- DP-SGD: noise multiplier σ = {_fmt(p['noise_multiplier'])}, sampling rate q = "
           f"{_fmt(p['sample_rate'])}, {_fmt(p['steps_planned'])} planned steps, clipping norm "
           f"{_fmt(p['max_grad_norm'])}"]),
        f"- Training rows: {_fmt(p['training_rows'])}" + (" (declared public by the data steward)"
                                                           if p.get("training_rows_public", True) else
                                                           " (a noisy count, paid from the budget: see the ledger)"),
        "",
        "## Privacy ledger (every use of the private table)",
        "",
        f"Each entry's ε is what its mechanism would cost alone; the run's total is {p.get('composition') or 'their sum'}.",
        "",
        "| mechanism | ε | δ | details |",
        "| --- | --- | --- | --- |",
    ]
    for e in p["ledger"]:
        details = ", ".join(f"{k}={_fmt(v)}" for k, v in e.get("details", {}).items()
                            if not isinstance(v, (dict, list)))
        lines.append(f"| {e['mechanism']} | {_fmt(e['epsilon'])} | {_fmt(e['delta'])} | {details} |")
    lines += _schema_lines(report["schema"], prov)
    lines += _forecast_lines(report.get("forecast") or {})
    s = report.get("sampling") or {}
    if s or report.get("synthetic_rows"):
        lines += ["", "## Sampling", ""]
        if report.get("synthetic_rows"):
            unit = "Persons (each with their child rows)" if "linked" in report["schema"] else "Rows"
            lines.append(f"- {unit}: {report['synthetic_rows']}")
        for k, v in s.items():
            shown = _md(json.dumps(v, default=str, ensure_ascii=False)) if isinstance(v, (dict, list)) else _fmt(v)
            lines.append(f"- {k.replace('_', ' ')}: {shown}")
    return "\n".join(lines) + "\n"
