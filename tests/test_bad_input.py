"""Bad and edge input across the CLI, the API and the app: one line naming the problem (never a
traceback), no silent wrong result, and nothing written outside the command's own target.

The CLI cases run `synth_core.cli.main` in-process (a subprocess per case would spend minutes
importing torch); an exception escaping `main` fails the case, as a traceback would. Each case runs
in its own working folder and compares every path under it before and after: only the case's target
may appear.
"""
from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import stat
from pathlib import Path

import pandas as pd
import pytest

from synth_core import api
from synth_core.cli import main
from synth_core.demo import demo_schema, demo_table
from synth_core.privacy import BudgetError
from synth_core.runs import RunError
from synth_core.schema import Schema, SchemaError


# --- fixtures: good inputs and damaged ones, made once ------------------------------------------------
@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("inputs")
    demo_table(300, seed=1).to_csv(d / "good.csv", index=False)
    demo_schema().save(d / "schema.json")
    (d / "empty.csv").write_text("")
    (d / "header.csv").write_text("age,sex\n")
    (d / "dupes.csv").write_text("age,age\n1,2\n")
    (d / "binary.csv").write_bytes(bytes(range(256)) * 8)
    (d / "ragged.csv").write_text("a,b\n1,2,3,4\n5\n\"unclosed\n")
    (d / "folder").mkdir()
    (d / "not-json.json").write_text("{ this is not json")
    (d / "list.json").write_text("[1, 2, 3]")
    good = demo_schema().to_dict()

    def variant(name: str, change) -> None:
        data = json.loads(json.dumps(good))
        change(data)
        (d / f"{name}.json").write_text(json.dumps(data))

    variant("no-version", lambda s: s.pop("version"))
    variant("version-2", lambda s: s.update(version=2))
    variant("unknown-field", lambda s: s["columns"][0].update(colour="red"))
    variant("bad-kind", lambda s: s["columns"][0].update(kind="banana"))
    variant("lower-above-upper", lambda s: s["columns"][0].update(lower=90, upper=17))
    variant("no-categories", lambda s: s["columns"][1].update(categories=[]))
    variant("twice", lambda s: s["columns"].append(dict(s["columns"][0])))
    variant("text-bound", lambda s: s["columns"][0].update(lower="abc"))
    variant("huge-bound", lambda s: s["columns"][0].update(upper=1e300))
    variant("bad-role", lambda s: s["columns"][0].update(role="villain"))
    variant("bad-binning", lambda s: s["columns"][0].update(binning="cubic"))
    variant("no-columns", lambda s: s.update(columns=[]))
    variant("column-not-object", lambda s: s["columns"].append(5))
    variant("nameless", lambda s: s["columns"][0].pop("name"))
    variant("bad-date", lambda s: s["columns"][0].update(date="century"))
    variant("unbounded-age", lambda s: s["columns"][0].update(lower=None, upper=None))
    variant("confirmed-no", lambda s: s.update(drafted_from_data=True, confirmed="no"))
    variant("drafted-yes", lambda s: s.update(drafted_from_data="yes"))
    variant("nullable-yes", lambda s: s["columns"][1].update(nullable="yes"))
    variant("decimals-negative", lambda s: s["columns"][4].update(decimals=-1))
    variant("decimals-on-integer", lambda s: s["columns"][0].update(decimals=2))
    variant("fractional-integer-bound", lambda s: s["columns"][0].update(lower=17.5))
    variant("two-targets", lambda s: [c.update(role="target") for c in s["columns"][:2]])
    variant("null-category", lambda s: s["columns"][1]["categories"].append(None))
    variant("list-category", lambda s: s["columns"][1]["categories"].append(["a"]))
    variant("unknown-top-field", lambda s: s.update(colour="red"))
    variant("markers-not-list", lambda s: s.update(missing_markers="NA"))
    variant("excluded-list", lambda s: s.update(excluded=["id"]))
    variant("columns-object", lambda s: s.update(columns={"age": {}}))
    variant("categories-string", lambda s: s["columns"][1].update(categories="Female,Male"))
    variant("rows-zero", lambda s: s.update(rows=0))
    variant("rows-text", lambda s: s.update(rows="300"))
    variant("rows-true", lambda s: s.update(rows=True))
    variant("rows-fraction", lambda s: s.update(rows=300.5))
    variant("version-text", lambda s: s.update(version="1"))
    variant("name-empty", lambda s: s["columns"][0].update(name=""))
    variant("name-number", lambda s: s["columns"][0].update(name=5))
    variant("kind-missing", lambda s: s["columns"][0].pop("kind"))
    variant("lower-true", lambda s: s["columns"][0].update(lower=True))
    variant("upper-nan", lambda s: s["columns"][0].update(upper=float("nan")))
    variant("quantiles-unsorted", lambda s: s["columns"][0].update(quantiles=[50, 20, 30]))
    variant("quantiles-outside", lambda s: s["columns"][0].update(quantiles=[5, 20, 300]))
    variant("derived-text", lambda s: s["columns"][1].update(derived="from age"))
    variant("unknown-not-text", lambda s: s["columns"][1].update(unknown=7))
    variant("date-on-category", lambda s: s["columns"][1].update(date="year"))
    variant("categories-numbers-twice", lambda s: s["columns"][1].update(categories=[1, "1"]))
    variant("excluded-is-modelled", lambda s: s.update(excluded="all"))
    os.mkfifo(d / "fifo")
    table = demo_table(300, seed=1)
    table.drop(columns=["income"]).to_csv(d / "no-income.csv", index=False)
    table.assign(sex=["Robot"] * len(table)).to_csv(d / "robot.csv", index=False)
    table.assign(age=["forty"] * len(table)).to_csv(d / "text-age.csv", index=False)
    table.assign(sex=[None] * len(table)).to_csv(d / "missing-sex.csv", index=False)
    table.assign(age=[float("inf")] * len(table)).to_csv(d / "inf-age.csv", index=False)
    table.iloc[:1].to_csv(d / "one-row.csv", index=False)
    return d


@pytest.fixture(scope="module")
def runs(inputs, tmp_path_factory) -> Path:
    """A trained run, a failed one, and trained runs whose files were damaged afterwards."""
    d = tmp_path_factory.mktemp("runs")
    table, schema = demo_table(300, seed=2), demo_schema()
    api.fit(table, schema, epsilon=2.0, preset="tiny", accountant="rdp", run_dir=d / "good", public_table=True)
    with pytest.raises(RuntimeError):
        api.fit(table, schema, epsilon=2.0, preset="tiny", accountant="rdp", run_dir=d / "failed",
                on_event=lambda e: (_ for _ in ()).throw(RuntimeError("disk on fire")), public_table=True)
    for name, damage in (("corrupt-weights", lambda m: (m / "model.pt").write_bytes(b"not a torch file")),
                         ("truncated-weights", lambda m: (m / "model.pt").write_bytes((m / "model.pt").read_bytes()[:100])),
                         ("corrupt-description", lambda m: (m / "model.json").write_text("{ broken")),
                         ("description-missing-keys", lambda m: (m / "model.json").write_text('{"family": "dp-tbart"}')),
                         ("no-weights", lambda m: (m / "model.pt").unlink())):
        shutil.copytree(d / "good", d / name)
        damage(d / name / "model")
    (d / "not-a-run").mkdir()
    (d / "not-a-run" / "notes.txt").write_text("mine")
    shutil.copytree(d / "good", d / "broken-ledger")
    (d / "broken-ledger" / "ledger.json").write_text("{")
    ledger = json.loads((d / "good" / "ledger.json").read_text())
    for name, change in LEDGER_DAMAGE.items():
        shutil.copytree(d / "good", d / name)
        damaged = json.loads(json.dumps(ledger))
        change(damaged)
        (d / name / "ledger.json").write_text(json.dumps(damaged))
    return d


LEDGER_DAMAGE = {  # hand edits of a run's ledger.json: each read gives one line, never a traceback
    "ledger-emptied": lambda l: l.clear(),
    "ledger-no-rows": lambda l: l.pop("n_rows"),
    "ledger-unknown-entry-key": lambda l: l["entries"][0].update(refund=1.0),
    "ledger-negative-entry": lambda l: l["entries"][0].update(epsilon=-5.0),
    "ledger-text-epsilon": lambda l: l["entries"][0].update(epsilon="0.1"),
    "ledger-entry-number": lambda l: l["entries"].append(3),
    "ledger-entries-object": lambda l: l.update(entries={"a": 1}),
    "ledger-target-text": lambda l: l.update(target_epsilon="one"),
    "ledger-rows-text": lambda l: l.update(n_rows="300"),
}


def snapshot(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*")}


def cli(argv: list[str], cwd: Path, monkeypatch) -> tuple[int, str]:
    """Run the CLI in-process in `cwd`; (exit code, stdout + stderr). An exception escaping it fails
    the test."""
    monkeypatch.chdir(cwd)
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        try:
            code = main(argv)
        except SystemExit as e:  # argparse: usage and one error line
            code = e.code
    return code, out.getvalue()


# --- the CLI -------------------------------------------------------------------------------------------
# (arguments with {in} for the inputs folder and {runs} for the trained runs, expected words in the
# message,
#  the target a case may create, relative to its working folder)
CLI_CASES = [
    # schema draft
    (["schema", "draft", "--data", "{in}/missing.csv", "--out", "s.json"], "no such file", None),
    (["schema", "draft", "--data", "{in}/empty.csv", "--out", "s.json"], "empty", None),
    (["schema", "draft", "--data", "{in}/header.csv", "--out", "s.json"], "no rows", None),
    (["schema", "draft", "--data", "{in}/dupes.csv", "--out", "s.json"], "duplicated column", None),
    (["schema", "draft", "--data", "{in}/binary.csv", "--out", "s.json"], "not text", None),
    (["schema", "draft", "--data", "{in}/ragged.csv", "--out", "s.json"], "cannot read", None),
    (["schema", "draft", "--data", "{in}/folder", "--out", "s.json"], "folder", None),
    (["schema", "draft", "--data", "{in}/good.csv", "--out", "s.json", "--max-categories", "0"], "max_categories", None),
    (["schema", "draft", "--data", "{in}/good.csv", "--out", "s.json", "--max-categories", "-3"], "max_categories", None),
    (["schema", "draft", "--data", "{in}/good.csv", "--out", "{in}/folder"], "folder", None),
    (["schema", "draft", "--data", "{in}/one-row.csv", "--out", "s.json"], "no column", None),
    (["schema", "draft"], "required", None),
    # schema confirm and check
    (["schema", "confirm", "{in}/missing.json"], "cannot read the schema", None),
    (["schema", "confirm", "{in}/not-json.json"], "not valid JSON", None),
    (["schema", "confirm", "{in}/list.json"], "JSON object", None),
    (["schema", "confirm", "{in}/no-version.json"], "version", None),
    (["schema", "confirm", "{in}/version-2.json"], "version 2", None),
    (["schema", "confirm", "{in}/unknown-field.json"], "colour", None),
    (["schema", "confirm", "{in}/bad-kind.json"], "banana", None),
    (["schema", "confirm", "{in}/lower-above-upper.json"], "must be below", None),
    (["schema", "confirm", "{in}/no-categories.json"], "category list", None),
    (["schema", "confirm", "{in}/twice.json"], "twice", None),
    (["schema", "confirm", "{in}/text-bound.json"], "finite number", None),
    (["schema", "confirm", "{in}/huge-bound.json"], "beyond", None),
    (["schema", "confirm", "{in}/bad-role.json"], "villain", None),
    (["schema", "confirm", "{in}/bad-binning.json"], "cubic", None),
    (["schema", "confirm", "{in}/no-columns.json"], "no columns", None),
    (["schema", "confirm", "{in}/column-not-object.json"], "not an object", None),
    (["schema", "confirm", "{in}/nameless.json"], "needs a 'name'", None),
    (["schema", "confirm", "{in}/bad-date.json"], "century", None),
    (["schema", "confirm", "{in}/folder"], "cannot read the schema", None),
    (["schema", "check", "--data", "{in}/no-income.csv", "--schema", "{in}/schema.json"], "lacks columns", None),
    (["schema", "check", "--data", "{in}/robot.csv", "--schema", "{in}/schema.json"], "outside its public category", None),
    (["schema", "check", "--data", "{in}/text-age.csv", "--schema", "{in}/schema.json"], "non-numeric", None),
    (["schema", "check", "--data", "{in}/missing-sex.csv", "--schema", "{in}/schema.json"], "not nullable", None),
    (["schema", "check", "--data", "{in}/inf-age.csv", "--schema", "{in}/schema.json"], "infinite", None),
    (["schema", "check", "--data", "{in}/empty.csv", "--schema", "{in}/schema.json"], "empty", None),
    # fit: budget and training settings, refused before anything is written
    *[(["fit", "--data", "{in}/good.csv", "--schema", "{in}/schema.json", "--out", "run", *extra], words, None)
      for extra, words in [
          (["--epsilon", "0"], "positive finite"), (["--epsilon", "-1"], "positive finite"),
          (["--epsilon", "nan"], "positive finite"), (["--epsilon", "inf"], "positive finite"),
          (["--epsilon", "1e6"], "above 100"), (["--epsilon", "abc"], "invalid float"),
          (["--epsilon", "1", "--delta", "0"], "δ must lie"), (["--epsilon", "1", "--delta", "1"], "δ must lie"),
          (["--epsilon", "1", "--delta", "2"], "δ must lie"), (["--epsilon", "1", "--delta=-1e-5"], "δ must lie"),
          (["--epsilon", "1", "--batch-size", "0"], "batch_size"), (["--epsilon", "1", "--batch-size", "-5"], "batch_size"),
          (["--epsilon", "1", "--max-grad-norm", "-1"], "max_grad_norm"),
          (["--epsilon", "1", "--max-grad-norm", "0"], "max_grad_norm"),
          (["--epsilon", "1", "--max-grad-norm", "nan"], "max_grad_norm"),
          (["--epsilon", "1", "--epochs", "0"], "epochs"), (["--epsilon", "1", "--epochs", "-2"], "epochs"),
          (["--epsilon", "1", "--lr", "0"], "lr"), (["--epsilon", "1", "--lr", "inf"], "lr"),
          (["--epsilon", "1", "--preset", "gigantic"], "unknown preset"),
          (["--epsilon", "1", "--model", "gpt-9"], "invalid choice"),
          (["--epsilon", "1", "--option", "colour=red"], "unknown options"),
          (["--epsilon", "1", "--option", "epochs=abc"], "epochs"),
          (["--epsilon", "1", "--option", "noequals"], "KEY=VALUE"),
          (["--epsilon", "1", "--option", "grad_sample_mode=magic"], "grad_sample_mode"),
          (["--epsilon", "1", "--accountant", "moments"], "invalid choice"),
          (["--epsilon", "1", "--bounds-epsilon", "2"], "bound estimation"),
          (["--epsilon", "1", "--bounds-epsilon", "-0.1"], "bound estimation"),
          (["--epsilon", "1", "--seed", "-1"], "seed"),
          (["--epsilon", "1", "--device", "banana"], "unknown device"),
          (["--epsilon", "1", "--device", "cuda:7"], "device"),
          (["--epsilon", "1", "--calibration-share", "2"], "calibration share"),
          (["--epsilon", "1", "--calibration-share", "-0.1"], "calibration share"),
          (["--epsilon", "1", "--calibration-share", "nan"], "calibration share"),
          (["--epsilon", "1", "--model", "auto", "--epochs", "3"], "name a family"),
          (["--epsilon", "1", "--model", "auto", "--preset", "gigantic"], "unknown preset"),
      ]],
    (["fit", "--data", "{in}/good.csv", "--schema", "{in}/schema.json", "--epsilon", "1"], "required", None),
    (["fit", "--data", "{in}/missing.csv", "--schema", "{in}/schema.json", "--epsilon", "1", "--out", "run"], "no such file", None),
    (["fit", "--data", "{in}/good.csv", "--schema", "{in}/missing.json", "--epsilon", "1", "--out", "run"], "cannot read", None),
    (["fit", "--data", "{in}/robot.csv", "--schema", "{in}/schema.json", "--epsilon", "1", "--out", "run"], "outside", None),
    (["fit", "--data", "{in}/one-row.csv", "--schema", "{in}/schema.json", "--epsilon", "1", "--out", "run"],
     "at least 10 rows", None),
    (["fit", "--data", "{in}/good.csv", "--schema", "{in}/unbounded-age.json", "--epsilon", "1", "--out", "run"],
     "without public bounds", None),
    (["fit", "--data", "{in}/good.csv", "--schema", "{in}/schema.json", "--epsilon", "1", "--out", "{in}/good.csv"],
     "is a file", None),
    (["fit", "--data", "{in}/good.csv", "--schema", "{in}/schema.json", "--epsilon", "1", "--out", "{runs}/good"],
     "already holds a run", None),
    (["fit", "--data", "{in}/good.csv", "--schema", "{in}/schema.json", "--epsilon", "1", "--out", "{runs}/not-a-run",
      "--overwrite"], "not a run", None),
    (["fit", "--data", "{in}/good.csv", "--schema", "{in}/schema.json", "--epsilon", "1", "--out", "run",
      "--bins", "1", "--preset", "tiny"], "2 bins", "run"),
    # sample
    (["sample", "--run", "{runs}/nowhere", "--rows", "5", "--out", "x.csv"], "no run", None),
    (["sample", "--run", "{runs}/not-a-run", "--rows", "5", "--out", "x.csv"], "no run", None),
    (["sample", "--run", "{runs}/failed", "--rows", "5", "--out", "x.csv"], "failed, not completed", None),
    (["sample", "--run", "{runs}/good", "--rows", "0", "--out", "x.csv"], "positive integer", None),
    (["sample", "--run", "{runs}/good", "--rows", "-3", "--out", "x.csv"], "positive integer", None),
    (["sample", "--run", "{runs}/good", "--rows", "2.5", "--out", "x.csv"], "invalid int", None),
    (["sample", "--run", "{runs}/good", "--rows", "5", "--out", "{in}/folder"], "is a folder", None),
    (["sample", "--run", "{runs}/good", "--rows", "5", "--out", "nowhere/x.csv"], "does not exist", None),
    (["sample", "--run", "{runs}/good", "--rows", "5", "--out", "x.csv", "--condition", "shoe=42"], "no such column", None),
    (["sample", "--run", "{runs}/good", "--rows", "5", "--out", "x.csv", "--condition", "age=abc"], "not a number", None),
    (["sample", "--run", "{runs}/good", "--rows", "5", "--out", "x.csv", "--condition", "age=1000"], "outside the public bounds", None),
    (["sample", "--run", "{runs}/good", "--rows", "5", "--out", "x.csv", "--condition", "sex=Robot"], "no public category", None),
    (["sample", "--run", "{runs}/good", "--rows", "5", "--out", "x.csv", "--condition", "noequals"], "column=value", None),
    (["sample", "--run", "{runs}/good", "--rows", "5", "--out", "x.csv", "--device", "banana"], "unknown device", None),
    (["sample", "--run", "{runs}/corrupt-weights", "--rows", "5", "--out", "x.csv"], "damaged", None),
    (["sample", "--run", "{runs}/truncated-weights", "--rows", "5", "--out", "x.csv"], "damaged", None),
    (["sample", "--run", "{runs}/corrupt-description", "--rows", "5", "--out", "x.csv"], "no saved model", None),
    (["sample", "--run", "{runs}/description-missing-keys", "--rows", "5", "--out", "x.csv"], "damaged", None),
    (["sample", "--run", "{runs}/no-weights", "--rows", "5", "--out", "x.csv"], "no trained model", None),
    # evaluate
    (["evaluate", "--real", "{in}/missing.csv", "--run", "{runs}/good", "--out", "rep"], "no such file", None),
    (["evaluate", "--real", "{in}/good.csv", "--out", "rep"], "at least one", None),
    (["evaluate", "--real", "{in}/good.csv", "--synthetic", "{in}/missing.csv", "--schema", "{in}/schema.json",
      "--out", "rep"], "no such file", None),
    (["evaluate", "--real", "{in}/good.csv", "--run", "{runs}/good", "--out", "rep"], "sample --run", None),
    (["evaluate", "--real", "{in}/good.csv", "--synthetic", "{in}/good.csv", "--out", "rep"], "--schema", None),
    (["evaluate", "--real", "{in}/good.csv", "--synthetic", "{in}/no-income.csv", "--schema", "{in}/schema.json",
      "--out", "rep"], "lacks column", None),
    (["evaluate", "--real", "{in}/good.csv", "--synthetic", "{in}/good.csv", "--schema", "{in}/schema.json",
      "--target", "shoe", "--quick", "--out", "rep"], "shoe", None),
    # audit
    (["audit", "--data", "{in}/good.csv"], "go together", None),
    (["audit", "--epsilon", "0"], "positive", None),
    (["audit", "--delta", "2"], "δ must lie", None),
    (["audit", "--canaries", "0"], "canaries", None),
    (["audit", "--canaries", "-1"], "canaries", None),
    # runs and demo
    (["runs", "{runs}/nowhere"], "no run", None),
    (["runs", "{runs}/broken-ledger"], "not valid JSON", None),
    (["demo", "--epsilon", "0"], "positive finite", None),
    (["demo", "--rows", "0", "--preset", "tiny", "--out", "demo"], "rows", None),
    (["demo", "--preset", "bogus", "--out", "demo"], "unknown preset", None),
    (["demo", "--out", "{in}/good.csv"], "is a file", None),
    (["nonsense"], "invalid choice", None),
    # schema files with fields of the wrong type: refused when read, never coerced (a string is
    # truthy)
    *[(["fit", "--data", "{in}/good.csv", "--schema", f"{{in}}/{name}.json", "--epsilon", "1", "--out", "run"],
       words, None) for name, words in [
          ("confirmed-no", "confirmed must be true or false"), ("drafted-yes", "drafted_from_data must be true"),
          ("nullable-yes", "nullable must be true or false"), ("decimals-negative", "decimals must be a whole number"),
          ("decimals-on-integer", "decimals is for a continuous column"),
          ("fractional-integer-bound", "must be a whole number"), ("two-targets", "columns as the target"),
          ("null-category", "declared with nullable"), ("list-category", "text or a number"),
          ("unknown-top-field", "unknown fields"), ("markers-not-list", "missing_markers"),
          ("excluded-list", "excluded must be an object"), ("columns-object", "'columns' list")]],
    # outputs that are not ordinary files are never replaced; an empty path is refused
    *[(argv, words, None) for argv, words in [
        (["schema", "draft", "--data", "{in}/good.csv", "--out", "/dev/full"], "not a regular file"),
        (["schema", "draft", "--data", "{in}/good.csv", "--out", "/dev/null"], "not a regular file"),
        (["schema", "draft", "--data", "{in}/good.csv", "--out", "{in}/fifo"], "not a regular file"),
        (["schema", "draft", "--data", "{in}/good.csv", "--out", ""], "path is empty"),
        (["sample", "--run", "{runs}/good", "--rows", "5", "--out", "/dev/full"], "not a regular file"),
        (["sample", "--run", "{runs}/good", "--rows", "5", "--out", "/dev/null"], "not a regular file"),
        (["sample", "--run", "{runs}/good", "--rows", "5", "--out", "{in}/fifo"], "not a regular file"),
        (["sample", "--run", "{runs}/good", "--rows", "5", "--out", ""], "path is empty"),
        (["fit", "--data", "{in}/good.csv", "--schema", "{in}/schema.json", "--epsilon", "1", "--out", ""],
         "path is empty"),
        (["fit", "--data", "{in}/good.csv", "--schema", "{in}/schema.json", "--epsilon", "1", "--out", "/dev/null"],
         "is a file, not a folder"),
        (["demo", "--csv", "/dev/full"], "not a regular file"), (["demo", "--csv", ""], "path is empty"),
        (["demo", "--out", ""], "path is empty"),
        (["audit", "--json", "/dev/full"], "not a regular file"),
        (["evaluate", "--real", "{in}/good.csv", "--run", "{runs}/good", "--out", "/dev/null"], "is a file"),
        (["evaluate", "--real", "{in}/good.csv", "--run", "{runs}/good", "--out", ""], "path is empty"),
    ]],
    # more schema files that are not what a schema may say
    *[(["fit", "--data", "{in}/good.csv", "--schema", f"{{in}}/{name}.json", "--epsilon", "1", "--out", "run"],
       words, None) for name, words in [
          ("categories-string", "category list"), ("rows-zero", "number of rows"), ("rows-text", "number of rows"),
          ("rows-true", "number of rows"), ("rows-fraction", "number of rows"), ("version-text", "version"),
          ("name-empty", "non-empty name"), ("name-number", "non-empty name"), ("kind-missing", "'kind'"),
          ("lower-true", "finite number"), ("upper-nan", "finite number"), ("quantiles-unsorted", "quantiles"),
          ("quantiles-outside", "quantiles"), ("derived-text", "derived must be an object"),
          ("unknown-not-text", "unknown category must be text"), ("date-on-category", "integer column"),
          ("categories-numbers-twice", "listed twice"), ("excluded-is-modelled", "excluded must be an object")]],
    # model options a family cannot be built with: refused before anything is spent
    *[(["fit", "--data", "{in}/good.csv", "--schema", "{in}/schema.json", "--epsilon", "1", "--out", "run",
        "--model", model, *sum((["--option", o] for o in options), [])], words, None)
      for model, options, words in [
          ("dp-tbart", ["n_embd=0"], "n_embd"), ("dp-tbart", ["n_head=3"], "multiple of n_head"),
          ("dp-tbart", ["n_layer=-1"], "n_layer"), ("dp-tbart", ["n_layer=2.5"], "n_layer"),
          ("dp-tbart", ["dropout=1.5"], "dropout"), ("dp-tbart", ["dropout=-0.1"], "dropout"),
          ("dp-tbart", ["random_order=\"yes\""], "random_order"), ("dp-tbart", ["augmult=0"], "augmult"),
          ("dp-tbart", ["numeric_decoding=\"round\""], "numeric_decoding"), ("dp-tbart", ["n_bins=1"], "n_bins"),
          ("dp-tbart", ["mlp_ratio=0"], "mlp_ratio"), ("dp-tbart", ["min_noise_multiplier=-1"], "min_noise"),
          ("tablediffusion", ["width=0"], "width"), ("tablediffusion", ["groups=7"], "divide width"),
          ("tablediffusion", ["max_beta=1.5"], "max_beta"), ("tablediffusion", ["diffusion_steps=0"], "diffusion_steps"),
          ("tablediffusion", ["numeric_encoding=\"words\""], "numeric_encoding"),
          ("tablediffusion", ["block_decoding=\"vote\""], "block_decoding"),
          ("tablediffusion-masked", ["network=\"rnn\""], "network"),
          ("tablediffusion-masked", ["reveal_schedule=\"random\""], "reveal_schedule"),
          ("tablediffusion-masked", ["copies=0"], "copies"), ("tablediffusion-masked", ["diffusion_steps=-1"], "diffusion_steps"),
          ("dtgan-d", ["cond_null_prob=2"], "cond_null_prob"), ("dtgan-d", ["n_critic=0"], "n_critic"),
          ("dtgan-d", ["gumbel_tau=0"], "gumbel_tau"), ("dtgan-d", ["noise_dim=0"], "noise_dim"),
          ("dtgan-g", ["critics_per_step=0"], "critics_per_step"), ("dtgan-g", ["n_critics=0"], "n_critics"),
          ("aim", ["degree=0"], "degree"), ("aim", ["rounds=-1"], "rounds"), ("aim", ["one_way_share=1"], "one_way_share"),
          ("aim", ["max_model_size=0"], "max_model_size"), ("aim", ["n_bins=1"], "n_bins"), ("aim", ["iters=0"], "iters"),
          ("dp-llmtgen", ["lora_r=0"], "lora_r"), ("dp-llmtgen", ["n_head=5"], "multiple of n_head"),
          ("dp-llmtgen", ["alpha=2"], "alpha"), ("dp-llmtgen", ["row_format=\"xml\""], "row_format"),
          ("dp-llmtgen", ["stage1_full=\"yes\""], "stage1_full"), ("dp-llmtgen", ["lora_last_layers=0"], "lora_last_layers"),
          ("dp-llmtgen", ["output_tokens=\"some\""], "output_tokens"), ("dp-tbart", ["epochs=1e7"], "epochs"),
          ("dp-tbart", ["epochs=5000"], "epochs"), ("dp-tbart", ["batch_size=2.5"], "batch_size"),
          ("dp-tbart", ["lr=\"fast\""], "lr")]],
    # sizes that would never end: refused with a message, nothing hangs
    # (a file is written a part at a time: up to 100M rows; api.PART_ROWS)
    (["sample", "--run", "{runs}/good", "--rows", "200000000", "--out", "x.csv"],
     "at most 100,000,000", None),
    (["demo", "--rows", "10000000", "--out", "demo"], "at most 5,000,000", None),
    (["audit", "--canaries", "1000000"], "canaries", None),
    (["audit", "--canaries", "1"], "canaries", None),
    # a review of a column the schema does not have
    (["evaluate", "--real", "{in}/good.csv", "--synthetic", "{in}/good.csv", "--schema", "{in}/schema.json",
      "--sensitive", "shoe", "--quick", "--out", "rep"], "sensitive column 'shoe'", None),
    (["evaluate", "--real", "{in}/good.csv", "--synthetic", "{in}/good.csv", "--schema", "{in}/schema.json",
      "--sensitive", "shoe", "--out", "rep"], "sensitive column 'shoe'", None),
    (["evaluate", "--real", "{in}/good.csv", "--synthetic", "{in}/good.csv", "--schema", "{in}/schema.json",
      "--target", "shoe", "--out", "rep"], "target 'shoe'", None),
    # ledgers edited by hand: one line, never a traceback
    *[(["runs", f"{{runs}}/{name}"], "not a ledger", None) for name in LEDGER_DAMAGE],
    *[(["runs", f"{{runs}}/{name}", "--json"], "not a ledger", None) for name in list(LEDGER_DAMAGE)[:3]],
    (["runs", "{runs}/broken-ledger"], "not valid JSON", None),
    # conditions a row cannot meet, or that the column cannot hold
    *[(["sample", "--run", "{runs}/good", "--rows", "5", "--out", "x.csv", *conditions], words, None)
      for conditions, words in [
          (["--condition", "sex=Female", "--condition", "sex=Male"], "fixed twice"),
          (["--condition", "sex=Female", "--condition", "sex=Female"], "fixed twice"),
          (["--condition", "age=40.5"], "whole numbers"), (["--condition", "age=inf"], "finite"),
          (["--condition", "age=nan"], "missing value")]],
]


@pytest.mark.parametrize("argv, words, target", CLI_CASES,
                         ids=[f"{i:03d}-{' '.join(c[0][:2])}" for i, c in enumerate(CLI_CASES)])
def test_the_cli_answers_bad_input_in_one_line(argv, words, target, inputs, runs, tmp_path, monkeypatch):
    argv = [a.replace("{in}", str(inputs)).replace("{runs}", str(runs)) for a in argv]
    before_in, before_runs, before_here = snapshot(inputs), snapshot(runs), snapshot(tmp_path)
    code, out = cli(argv, tmp_path, monkeypatch)
    assert code == 2, out
    assert "Traceback" not in out and words.lower() in out.lower(), out
    message = [line for line in out.splitlines() if line.startswith(("error:", "usage:", "python -m"))]
    assert message, out  # one line that names the problem (argparse adds its usage line)
    assert snapshot(inputs) == before_in and snapshot(runs) == before_runs
    created = snapshot(tmp_path) - before_here
    assert all(p == target or p.startswith(f"{target}/") for p in created) if target else not created, created
    assert _charged() == 0.0  # refused before training: nothing drawn from any table's budget


def _charged() -> float:
    """What the workbench home's book charges all its tables together."""
    from synth_core.home import budgets_path
    from synth_core.privacy.table_budget import TableBudgets
    book = TableBudgets(budgets_path())
    return sum(a.spent_epsilon for a in book.accounts().values())


def test_devices_and_pipes_named_as_outputs_are_left_as_they_were(inputs, runs, tmp_path, monkeypatch):
    """The atomic write renames over its target: before, `--out /dev/full` turned the device into a
    file."""
    for argv in (["schema", "draft", "--data", f"{inputs}/good.csv", "--out", "/dev/full"],
                 ["sample", "--run", f"{runs}/good", "--rows", "5", "--out", "/dev/full"],
                 ["sample", "--run", f"{runs}/good", "--rows", "5", "--out", f"{inputs}/fifo"]):
        assert cli(argv, tmp_path, monkeypatch)[0] == 2
    assert stat.S_ISCHR(os.stat("/dev/full").st_mode) and stat.S_ISFIFO(os.stat(inputs / "fifo").st_mode)
    assert not [p for p in tmp_path.rglob("*.tmp")]


def test_exported_csv_cells_that_a_spreadsheet_would_run_are_written_as_text(tmp_path, monkeypatch):
    """OWASP's CSV-injection rule: a text cell starting with = + - @ tab or CR gets a leading ';
    numbers do not."""
    from synth_core.release.export import spreadsheet_safe
    from synth_core.schema import ColumnSpec
    nasty = ["=HYPERLINK(\"http://x\",\"y\")", "+cmd|' /C calc'!A0", "@SUM(1)", "-2+3", "=1+1", "-x", "plain"]
    schema = Schema(columns=[ColumnSpec("c", "categorical", categories=nasty),
                             ColumnSpec("n", "integer", lower=-50, upper=50)])
    table = pd.DataFrame({"c": nasty * 40, "n": [-5, 3, -7, 0, 1, 2, -1] * 40})
    api.fit(table, schema, epsilon=4.0, preset="tiny", accountant="rdp", run_dir=tmp_path / "run", public_table=True)
    code, out = cli(["sample", "--run", str(tmp_path / "run"), "--rows", "300", "--out", "x.csv", "--seed", "0"],
                    tmp_path, monkeypatch)
    assert code == 0, out
    written = pd.read_csv(tmp_path / "x.csv", keep_default_na=False)
    risky = written["c"].str.startswith(("=", "+", "-", "@", "\t", "\r"))
    assert not risky.any() and written["c"].str.startswith("'").sum() > 100
    # numbers as they were
    assert pd.api.types.is_integer_dtype(written["n"]) and (written["n"] < 0).any()
    cells = nasty + ["\tx", "\rx", None]
    safe = spreadsheet_safe(pd.DataFrame({"c": cells, "n": [-1.5] * len(cells)}))
    assert safe["c"].tolist()[:-1] == [v if v == "plain" else "'" + v for v in cells[:-1]]
    assert pd.isna(safe["c"].iloc[-1])
    assert (safe["n"] == -1.5).all()


def test_the_markdown_report_shows_what_it_quotes_as_text(tmp_path):
    from synth_core.release.privacy_report import privacy_report, report_markdown
    from synth_core.runs import RunDir
    from synth_core.schema import ColumnSpec
    odd = ["<script>alert(1)</script>", "a|b", "line\nbreak", "[link](http://x)"]
    schema = Schema(columns=[ColumnSpec("name | <b>", "categorical", categories=odd),
                             ColumnSpec("n", "integer", lower=0, upper=9)])
    table = pd.DataFrame({"name | <b>": odd * 50, "n": list(range(8)) * 25})
    api.fit(table, schema, epsilon=2.0, preset="tiny", accountant="rdp", run_dir=tmp_path / "run", public_table=True)
    text = report_markdown(privacy_report(RunDir(tmp_path / "run"), sampling={"conditions": {"name | <b>": "a|b"}}))
    assert "<script>" not in text and "<b>" not in text and "](http" not in text
    rows = [line for line in text.splitlines() if line.startswith("| name")]
    # one row of five cells: nothing broke the table
    assert len(rows) == 1 and rows[0].count(" | ") == 4


# --- edge input that must work, and work right -----------------------------------------------------------
def test_odd_but_valid_tables_are_drafted_and_validated_right(tmp_path):
    from synth_core.schema import draft_schema, read_table_bytes, validate_table
    table = pd.DataFrame({"naïve, “quoted” name": ["x", "y"] * 50, "n": range(100), "one": ["same"] * 100,
                          "blank": [None] * 100, "mostly": [1.5] * 99 + [None], "big": [1e300, 2e300, 3e300, 4e300] * 25})
    csv = table.to_csv(index=False).encode()
    back = read_table_bytes(csv, "odd.csv")
    schema = draft_schema(back)
    # nothing invented, nothing overflowing, no row number
    assert set(schema.excluded) == {"blank", "big", "n"}
    assert schema["naïve, “quoted” name"].categories == ["x", "y"] and schema["one"].categories == ["same"]
    clean, report = validate_table(back, schema)
    assert clean["mostly"].isna().sum() == 1 and report.ignored_columns == ["n", "blank", "big"]


def test_a_draft_accepts_the_table_it_was_drafted_from():
    """Issue 41: a numeric column holding one value and blanks, read as text because of a missing
    marker ("0.0" and "?"), was drafted as the category "0" and then refused: "has values outside
    its public category list: '0.0'". The same for integers written "12.0", booleans, mixed markers,
    dates in two formats, NA strings."""
    from synth_core.schema import draft_schema, read_table_bytes, validate_table
    import numpy as np
    rng, n = np.random.default_rng(0), 200
    table = pd.DataFrame({
        "one_value_and_marker": ["0.0" if i % 5 else "?" for i in range(n)],
        "one_value_and_blank": ["0.0" if i % 5 else "" for i in range(n)],
        "two_decimals_and_marker": [("1.50", "2")[i % 2] if i % 7 else "?" for i in range(n)],
        "ints_as_float": [f"{v}.0" for v in rng.integers(0, 50, n)],
        "bools": rng.choice(["TRUE", "FALSE"], n),
        "mixed": [str(v) if i % 3 else "n/a" for i, v in enumerate(rng.integers(0, 5, n))],
        "dates_iso": pd.date_range("2001-01-01", periods=n, freq="7D").strftime("%Y-%m-%d"),
        "dates_us": pd.date_range("2001-01-01", periods=n, freq="7D").strftime("%m/%d/%Y"),
        "na_strings": [("NA" if i % 4 == 0 else str(v)) for i, v in enumerate(rng.normal(50, 10, n).round(2))],
        "constant": ["same"] * n,
    })
    back = read_table_bytes(table.to_csv(index=False).encode(), "messy.csv")
    schema = draft_schema(back, missing_markers=["?", "NA", "n/a"])
    assert schema["one_value_and_marker"].categories == ["0"]
    clean, report = validate_table(back, schema)  # no refusal
    assert clean["one_value_and_marker"].value_counts().to_dict() == {"0": 160}
    assert clean["two_decimals_and_marker"].dropna().isin(["1.5", "2"]).all()
    assert report.rows == n


def test_a_single_category_and_a_constant_number_train_and_sample(tmp_path):
    from synth_core.schema import ColumnSpec
    schema = Schema(columns=[ColumnSpec("k", "categorical", categories=["only"]),
                             ColumnSpec("c", "integer", lower=5, upper=6)])
    table = pd.DataFrame({"k": ["only"] * 200, "c": [5] * 200})
    result = api.fit(table, schema, epsilon=1.0, preset="tiny", accountant="rdp", public_table=True)
    synth = result.model.sample(50, seed=0)
    assert (synth["k"] == "only").all() and synth["c"].between(5, 6).all()


# --- the API ---------------------------------------------------------------------------------------------
def _wide(columns: int) -> tuple[pd.DataFrame, Schema]:
    """A table of `columns` two-category columns (and its schema), 50 rows."""
    from synth_core.schema import ColumnSpec
    schema = Schema(columns=[ColumnSpec(f"c{i}", "categorical", categories=["a", "b"]) for i in range(columns)])
    return pd.DataFrame({f"c{i}": ["a", "b"] * 25 for i in range(columns)}), schema


API_CASES = [
    ("fit a list", lambda: api.fit([[1, 2]], demo_schema(), epsilon=1.0), SchemaError, "DataFrame"),
    ("fit no schema", lambda: api.fit(demo_table(50), None, epsilon=1.0), SchemaError, "Schema"),
    ("fit unknown model", lambda: api.fit(demo_table(50), demo_schema(), model="gpt", epsilon=1.0), ValueError, "unknown model"),
    ("fit ε as text", lambda: api.fit(demo_table(50), demo_schema(), epsilon="1"), BudgetError, "positive finite"),
    ("fit ε True", lambda: api.fit(demo_table(50), demo_schema(), epsilon=True), BudgetError, "positive finite"),
    ("fit options not a dict", lambda: api.fit(demo_table(50), demo_schema(), epsilon=1.0, options=[1]), ValueError,
     "KEY=VALUE"),
    ("fit empty table", lambda: api.fit(demo_table(50).iloc[:0], demo_schema(), epsilon=1.0), SchemaError, "no rows"),
    ("conditions garbage", lambda: api.parse_conditions(demo_schema(), ["=5"]), SchemaError, "no such column"),
    ("schema from garbage", lambda: Schema.from_dict({"columns": "abc", "version": 1}), SchemaError, None),
    ("schema from None", lambda: Schema.from_dict(None), SchemaError, "JSON object"),
    ("plan one row", lambda: __import__("synth_core.privacy", fromlist=["plan_noise"]).plan_noise(1, 1, 1, 1.0, 1e-5),
     BudgetError, "two rows"),
    ("accountant unknown", lambda: __import__("synth_core.privacy", fromlist=["plan_noise"]).plan_noise(
        100, 10, 1, 1.0, 1e-5, "moments"), BudgetError, "accountant"),
    ("coarse range reversed", lambda: __import__("synth_core.privacy.bounds", fromlist=["x"]).bound_candidates(
        (10.0, -10.0)), ValueError, None),
    ("fair sample both", lambda: __import__("synth_core.release.fair_sampling", fromlist=["x"]).fair_sample(
        None, 10, "sex", "income", ">50K", target_gap=0.1, share=0.2), ValueError, "either"),
    ("fair sample share 2", lambda: __import__("synth_core.release.fair_sampling", fromlist=["x"]).fair_sample(
        None, 10, "sex", "income", ">50K", share=2.0), ValueError, "share"),
    ("read garbage bytes", lambda: __import__("synth_core.schema", fromlist=["x"]).read_table_bytes(
        b"\x00\xff\xfe", "x.csv"), SchemaError, "not text"),
    ("read broken parquet", lambda: __import__("synth_core.schema", fromlist=["x"]).read_table_bytes(
        b"PAR1 not really", "x.parquet"), SchemaError, "cannot read"),
    ("check_budget ε 1e9", lambda: __import__("synth_core.privacy", fromlist=["x"]).check_budget(1e9, 1e-5),
     BudgetError, "above 100"),
    ("column value nan", lambda: demo_schema()["age"].check_value(float("nan")), SchemaError, "not nullable"),
    # api.fit settings refused before anything is spent (each case also checks the book stayed
    # empty)
    *[(f"fit {name}", (lambda kw: lambda: api.fit(demo_table(60), demo_schema(), **{"epsilon": 1.0,
                                                                                      "preset": "tiny", **kw}))(kwargs),
       error, words)
      for name, kwargs, error, words in [
          ("review_rows -5", {"review_rows": -5}, ValueError, "positive integer"),
          ("review_rows 2.5", {"review_rows": 2.5}, ValueError, "positive integer"),
          ("review_rows True", {"review_rows": True}, ValueError, "positive integer"),
          ("review_rows text", {"review_rows": "many"}, ValueError, "positive integer"),
          ("review_rows 10**10", {"review_rows": 10 ** 10}, ValueError, "at most"),
          ("table_epsilon -1", {"table_epsilon": -1.0}, BudgetError, "positive finite"),
          ("table_epsilon inf", {"table_epsilon": float("inf")}, BudgetError, "positive finite"),
          ("table_epsilon text", {"table_epsilon": "2"}, BudgetError, "positive finite"),
          ("public and a charge", {"public_table": True, "table_charge": object()}, ValueError, "public_table"),
          ("bounds_epsilon text", {"bounds_epsilon": "0.1"}, BudgetError, "bound estimation"),
          ("delta 2", {"delta": 2.0}, BudgetError, "δ must lie"),
          ("accountant moments", {"accountant": "moments"}, BudgetError, "accountant"),
          ("preset gigantic", {"preset": "gigantic"}, ValueError, "unknown preset"),
          ("calibration_share 2", {"calibration_share": 2.0}, BudgetError, "calibration share"),
          ("quantile_share 0.95", {"quantile_share": 0.95}, BudgetError, "quantile share"),
          ("run_dir empty", {"run_dir": ""}, ValueError, "path is empty"),
          ("run_dir device", {"run_dir": "/dev/null"}, ValueError, "not a folder"),
          ("options n_embd 0", {"options": {"n_embd": 0}}, ValueError, "n_embd"),
          ("options epochs huge", {"options": {"epochs": 1e7}}, ValueError, "epochs"),
          ("model None", {"model": None}, ValueError, "model"),
      ]],
    ("aim on 500 columns", lambda: api.fit(*_wide(500), model="aim", epsilon=1.0, preset="quick"), ValueError,
     "would take hours"),
    ("aim job on 500 columns", lambda: __import__("synth_core.runs.jobs", fromlist=["x"]).start_fit_job(
        "runs", *_wide(500), {"model": "aim", "epsilon": 1.0}), ValueError, "would take hours"),
    # sampling and conditions
    ("conditions twice", lambda: api.parse_conditions(demo_schema(), ["sex=Female", "sex=Male"]), SchemaError,
     "fixed twice"),
    ("condition fraction", lambda: api.parse_conditions(demo_schema(), ["age=40.5"]), SchemaError, "whole numbers"),
    ("check_value inf", lambda: demo_schema()["age"].check_value(float("inf")), SchemaError, "finite"),
    ("check_value list", lambda: demo_schema()["sex"].check_value(["Female"]), SchemaError, "no public category"),
    ("sample to an empty path", lambda: api.sample("nowhere", 5, out=""), ValueError, "path is empty"),
    ("sample to a device", lambda: api.sample("nowhere", 5, out="/dev/full"), ValueError, "not a regular file"),
    # background jobs: a request refused before a run is made or anything reserved
    *[(f"job {name}", (lambda req: lambda: __import__("synth_core.runs.jobs", fromlist=["x"]).start_fit_job(
        "runs", demo_table(60), demo_schema(), {"model": "dp-tbart", "preset": "tiny", "epsilon": 1.0, **req}))(req),
       error, words) for name, req, error, words in [
          ("processes 0", {"processes": 0}, ValueError, "processes"),
          ("processes text", {"processes": "2"}, ValueError, "processes"),
          ("holdout 0.6", {"holdout_share": 0.6}, ValueError, "kept aside"),
          ("epsilon text", {"epsilon": "1"}, BudgetError, "positive finite"),
          ("unknown option", {"options": {"colour": "red"}}, ValueError, "unknown options"),
          ("option out of range", {"options": {"n_embd": 0}}, ValueError, "n_embd"),
          ("calibration share 5", {"calibration_share": 5.0}, BudgetError, "calibration share"),
          ("preset unknown", {"preset": "huge"}, ValueError, "unknown preset"),
      ]],
]


@pytest.mark.parametrize("name, call, error, words", API_CASES, ids=[c[0] for c in API_CASES])
def test_the_api_raises_a_domain_error_naming_the_problem(name, call, error, words, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(error) as caught:
        call()
    if words:
        assert words in str(caught.value)
    assert "\n" not in str(caught.value)  # one line
    assert not snapshot(tmp_path)
    assert _charged() == 0.0


def test_sampling_refuses_odd_row_counts(runs):
    model = api.load_model(runs / "good")
    for rows in (0, -1, 2.5, "10", True, None):
        with pytest.raises(ValueError, match="positive integer"):
            model.sample(rows)
    with pytest.raises(ValueError, match="is a folder"):
        api.sample(runs / "good", 3, out=runs)


# --- the app -----------------------------------------------------------------------------------------------
def _app(tmp_path, monkeypatch):
    from streamlit.testing.v1 import AppTest
    monkeypatch.setenv("SYNTH_WORKBENCH_HOME", str(tmp_path / "home"))
    return AppTest.from_file(str(Path(__file__).resolve().parent.parent / "app.py"), default_timeout=600).run()


UPLOADS = [
    ("empty.csv", b"", "empty"),
    ("header.csv", b"age,sex\n", "no rows"),
    ("dupes.csv", b"a,a\n1,2\n", "duplicated column"),
    ("binary.csv", bytes(range(256)) * 4, "not text"),
    ("broken.parquet", b"PAR1 nothing", "cannot read"),
    ("one-row.csv", b"age,sex\n40,Female\n", "at least"),
]


@pytest.mark.parametrize("name, content, words", UPLOADS, ids=[u[0] for u in UPLOADS])
def test_the_app_answers_a_bad_upload_in_one_line(name, content, words, tmp_path, monkeypatch):
    at = _app(tmp_path, monkeypatch)
    at.switch_page("app_pages/data.py").run()
    at.file_uploader(key="upload").set_value((name, content, "text/csv")).run()
    assert not at.exception, [e.value for e in at.exception]
    shown = " | ".join(str(e.value) for e in at.error)
    assert words.lower() in shown.lower(), shown
    assert not (tmp_path / "home").exists() or not any((tmp_path / "home").rglob("*.parquet"))


EPSILON_TEXTS = [("0", "above 0"), ("1e6", "above 100"), ("-1", "above 0"), ("abc", "not 'abc'"),
                 ("", "type ε"), ("nan", "not 'nan'"), ("1.5.2", "not '1.5.2'"), ("inf", "not 'inf'")]


@pytest.mark.parametrize("epsilon, words", EPSILON_TEXTS)
def test_the_model_page_refuses_an_unusable_epsilon_in_one_message(epsilon, words, tmp_path, monkeypatch):
    """Issue 41 item 8: text that is not an ε is refused and kept as typed (it became 1.000
    silently), and every unusable ε gets one message (−1 got two that contradicted each other)."""
    at = _app(tmp_path, monkeypatch)
    at.switch_page("app_pages/data.py").run()
    at.button(key="use_demo").click().run()
    at.switch_page("app_pages/model.py").run()
    at.radio(key="harm").set_value(next(k for k in at.radio(key="harm").options if "own" in k)).run()
    at.text_input(key="epsilon_custom").set_value(epsilon).run()
    assert not at.exception, [e.value for e in at.exception]
    errors = [str(e.value) for e in at.error]
    assert len(errors) == 1 and words in errors[0], errors
    assert at.text_input(key="epsilon_custom").value == epsilon  # kept as typed, not reset
    assert at.button(key="start_training").disabled
    assert "Auto's choice" not in " | ".join(str(i.value) for i in at.info)


def test_the_model_page_reads_a_decimal_comma_and_refuses_a_bad_total(tmp_path, monkeypatch):
    at = _app(tmp_path, monkeypatch)
    at.switch_page("app_pages/data.py").run()
    at.button(key="use_demo").click().run()
    at.switch_page("app_pages/model.py").run()
    at.radio(key="harm").set_value(next(k for k in at.radio(key="harm").options if "own" in k)).run()
    at.text_input(key="epsilon_custom").set_value("0,5").run()
    at.radio(key="table_total_choice").set_value(next(k for k in at.radio(key="table_total_choice").options
                                                      if "own" in k)).run()
    # no total typed yet: asked, not refused
    assert not at.error and at.button(key="start_training").disabled
    at.text_input(key="table_total").set_value("three").run()
    assert [str(e.value) for e in at.error] == ["the total must be a number such as 0.5 or 2, not 'three'"]
    at.text_input(key="table_total").set_value("2").run()
    assert not at.error and not at.button(key="start_training").disabled
    alone = next(float(m.value) for m in at.metric if m.label in ("Its ε alone", "Training's ε alone"))
    assert 0 < alone <= 0.5  # "0,5" read as 0.5


def test_there_are_at_least_three_hundred_cases():
    """Issue 40 item 6: at least 300 distinct bad inputs across the CLI, the API, schema files,
    budget books and ledgers, and the app, each answered in one line with nothing written or
    charged."""
    from test_table_budget import BAD_BOOKS
    cases = len(CLI_CASES) + len(API_CASES) + len(UPLOADS) + len(EPSILON_TEXTS) + 2 * len(BAD_BOOKS)
    assert cases >= 300, cases
