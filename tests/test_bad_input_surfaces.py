"""Bad input on the newer surfaces (issue 58, items 5 and 6): rules and computed columns, the
forecast, linked tables' drafts, exports, NumPy numbers, and inputs that are devices, pipes,
folders, links or endless. Each case is answered by one line naming the problem (the entry points'
errors: SchemaError, BudgetError, ValueError) or by a correct result, and nothing is written.

As in test_bad_input.py, the CLI cases run `synth_core.cli.main` in-process; an exception escaping
it fails the case, as a traceback would. Nothing here trains a model: the file runs in seconds.
"""
from __future__ import annotations

import contextlib
import csv
import io
import json
import math
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from synth_core.cli import main
from synth_core.demo import demo_schema, demo_table, pbcseq_schema, pbcseq_tables
from synth_core.files import FILE_LIMIT, SCHEMA_LIMIT, read_input
from synth_core.forecast import check_forecast_rows, forecast, run_forecast
from synth_core.privacy import BudgetError
from synth_core.privacy.budget import check_budget, check_run_budget
from synth_core.release.export import to_csv, write_linked
from synth_core.request import FitRequest
from synth_core.schema import ColumnSpec, Schema, SchemaError, read_table, validate_table
from synth_core.schema.linked import LinkedTables, load_schema, schema_from_json
from synth_core.schema.rules import preview

BIG = "1" + "0" * 400  # a number no float holds: 1 followed by 400 zeros


# --- inputs, made once ----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> Path:
    """Good files, files that are not files (a FIFO, links to devices, a folder), files too large to
    read (sparse: nothing is written) and schemas whose numbers no float holds."""
    d = tmp_path_factory.mktemp("surfaces")
    demo_table(300, seed=1).to_csv(d / "good.csv", index=False)
    demo_schema().save(d / "schema.json")
    tables = pbcseq_tables()
    tables.parents.to_csv(d / "parents.csv", index=False)
    tables.children.to_csv(d / "children.csv", index=False)
    pbcseq_schema().save(d / "linked.json")
    os.mkfifo(d / "fifo")
    (d / "folder").mkdir()
    os.symlink("/dev/zero", d / "zero-link.csv")
    os.symlink(d / "fifo", d / "fifo-link.json")
    os.symlink(d / "loop-b", d / "loop-a")
    os.symlink(d / "loop-a", d / "loop-b")
    with open(d / "huge.csv", "wb") as f:  # sparse: it claims 2,049 MB and holds nothing on disk
        f.truncate(FILE_LIMIT + 1024 * 1024)
    with open(d / "huge.json", "wb") as f:
        f.truncate(SCHEMA_LIMIT + 1)
    (d / "latin1.json").write_bytes(b'{"version": 1, "columns": [], "x": "\xe9\xff"}')
    good = demo_schema().to_dict()

    def variant(name: str, change, big: bool = False) -> None:
        data = json.loads(json.dumps(good))
        change(data)
        text = json.dumps(data)
        (d / f"{name}.json").write_text(text.replace('"BIG"', BIG) if big else text)

    variant("upper-big", lambda s: s["columns"][0].update(upper="BIG"), big=True)
    variant("lower-big", lambda s: s["columns"][0].update(lower="-BIG"), big=True)
    variant("quantiles-big", lambda s: s["columns"][0].update(quantiles=[20, "BIG"]), big=True)
    variant("rows-big", lambda s: s.update(rows="BIG"), big=True)
    variant("rows-2-70", lambda s: s.update(rows=2 ** 70))
    variant("rule-big", lambda s: s.update(rules=[f"age < {BIG}"]))
    variant("rule-1e400", lambda s: s.update(rules=["age < 1e400"]))
    variant("bins-big", lambda s: s["columns"].append(
        {"name": "band", "kind": "categorical", "categories": ["a", "b"],
         "derived": {"from": "age", "bins": [0, 50, "BIG"], "labels": ["a", "b"]}}), big=True)
    variant("expr-big", lambda s: s["columns"].append(
        {"name": "x", "kind": "continuous", "derived": {"expr": f"age * {BIG}"}}))
    variant("expr-overflow", lambda s: s["columns"].append(
        {"name": "x", "kind": "integer", "derived": {"expr": "age * 1e300 * 1e300"}}))
    variant("three-rules", lambda s: s.update(
        rules=["age >= 30", "`hours-per-week` >= 40", "sex == 'Male'"]))  # 22%, 44%, 47%: 74%
    variant("two-rules", lambda s: s.update(rules=["age >= 30", "sex == 'Male'"]))  # 22%, 47%: 57%
    variant("unbounded", lambda s: s["columns"][0].update(lower=None, upper=None))
    return d


def snapshot(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*")}


def cli(argv: list[str], cwd: Path, monkeypatch) -> tuple[int, str]:
    """Run the CLI in-process in `cwd`: (exit code, stdout + stderr)."""
    monkeypatch.chdir(cwd)
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        try:
            code = main(argv)
        except SystemExit as e:  # argparse: its usage and one error line
            code = e.code
    return code, out.getvalue()


def one_line(message: str) -> None:
    assert "\n" not in message.strip() and "Traceback" not in message, message


# --- rules: the rule language, as a schema file, the API and the app's editor take it -------------
# (rule, words of the one line that refuses it)
RULE_CASES = [
    (f"age < {BIG}", "a number of 401 digits is too large"),
    (f"age > -{BIG}", "a number of 401 digits is too large"),
    (f"{BIG} > age", "too large for a rule"),
    (f"age in [17, {BIG}]", "too large for a rule"),
    (f"age * {BIG} > 1", "too large for a rule"),
    (f"abs(age) < {BIG}", "too large for a rule"),
    (f"min(age, {BIG}) < 3", "too large for a rule"),
    (f"round(age) == {BIG}", "too large for a rule"),
    ("age < 0x" + "f" * 300, "a number of 362 digits"),
    ("age < 1e400", "reads as infinity"),
    ("age > -1e400", "reads as infinity"),
    (f"age == {BIG}.5", "reads as infinity"),
    ("age < 10**400", "the operator is not one of"),
    ("age < 1j", "only numbers, texts in quotes"),
    ("âge < 30", "'âge' is not a column"),
    ("age < ٣", "does not parse"),
    ("年齢 > 3", "'年齢' is not a column"),
    ("`shoe size` > 3", "'shoe size' is not a column"),
    ("shoe > 3", "'shoe' is not a column"),
    ("", "non-empty text"),
    ("   \n\t ", "non-empty text"),
    ("age < 30 and", "does not parse"),
    ("`age < 30", "no backtick closes"),
    ("``", "names no column"),
    ("sex == 'Male", "never closed"),
    ("sex == 'Robot'", "not a category of 'sex'"),
    ("sex < 3", "is a text; an order comparison"),
    ("age == 'forty'", "compares a number with a text"),
    ("age < True", "takes a number"),
    ("age is None", "use == / !="),
    ("age.real > 3", "attributes are not part of a rule"),
    ("age[0] > 3", "subscripts"),
    ("(lambda: 1)() > 0", "the only calls here"),
    ("__import__('os').system('x') == 0", "the only methods here"),
    ("open('/etc/passwd') == 0", "the only calls here"),
    ("max(age) > 3", "two or more numbers"),
    ("abs(age, 2) > 3", "takes one number"),
    ("age", "it must be true or false"),
    ("age + 1", "it must be true or false"),
    ("age in []", "takes a list of values"),
    ("age < 9" * 300, "characters long"),
    (" or ".join(["age > 1"] * 120), "parts; at most"),
]


@pytest.mark.parametrize("rule, words", RULE_CASES,
                         ids=[f"rule-{i:02d}" for i in range(len(RULE_CASES))])
def test_a_rule_that_is_not_one_is_refused_in_one_line(rule, words):
    """The schema refuses it (naming the rule), and so does the rules editor's preview (the app's
    rules editor shows that line): never an OverflowError or another traceback."""
    data = demo_schema().to_dict()
    data["rules"] = [rule]
    with pytest.raises(SchemaError) as caught:
        Schema.from_dict(data)
    assert words in str(caught.value), caught.value
    one_line(str(caught.value))
    with pytest.raises(SchemaError) as shown:
        preview(rule, demo_schema())
    assert words in str(shown.value)
    one_line(str(shown.value))


# rules held against the private table: (rules, the share of rows they drop between them, or the
# words of the refusal)
RULE_TABLE_CASES = [
    (["age >= 30", "`hours-per-week` >= 40", "sex == 'Male'"], "the rules together drop 223 of"),
    (["age >= 30", "sex == 'Male'"], "the rules together drop 172 of the table's 300 rows (57%)"),
    (["`hours-per-week` >= 40", "`hours-per-week` <= 45"], "the rules together drop"),
    (["age >= 40", "age < 40"], "is broken by 154 of the table's 300 rows"),
    (["age < 2 and age > 5"], "is broken by 300 of the table's 300 rows"),
    (["age >= 30", "age < 50"], 115),  # 22% and 16%: 38% together, under half: dropped and counted
    (["age < 1e15"], 0),
    (["age != 1e300 or isna(age)"], 0),
    (["age * 1e300 * 1e300 > 0"], "is broken by 300"),  # inf is missing: a comparison is false
]


@pytest.mark.parametrize("rules, expected", RULE_TABLE_CASES,
                         ids=[f"held-{i}" for i in range(len(RULE_TABLE_CASES))])
def test_rules_that_drop_most_rows_together_are_refused_as_one_rule_would_be(rules, expected):
    """Issue 58 item 6d: three rules that each drop under half of the rows dropped 74% together with
    only a note; the limit one rule is held to (rules.MOSTLY_BROKEN) holds for them together."""
    schema = Schema.from_dict({**demo_schema().to_dict(), "rules": rules})
    table = demo_table(300, seed=1)
    if isinstance(expected, str):
        with pytest.raises(SchemaError) as caught:
            validate_table(table, schema)
        assert expected in str(caught.value), caught.value
        one_line(str(caught.value))
    else:
        held, report = validate_table(table, schema)
        assert report.dropped_for_rules == expected and len(held) == 300 - expected


# computed and binned columns: (the column's declaration, the words of the one line)
DERIVED_CASES = [
    ({"name": "x", "kind": "continuous", "derived": {"expr": f"age * {BIG}"}},
     "too large for a rule"),
    ({"name": "x", "kind": "integer", "derived": {"expr": f"age + {BIG}"}}, "too large for a rule"),
    ({"name": "x", "kind": "continuous", "derived": {"expr": "age + 1e400"}}, "reads as infinity"),
    ({"name": "x", "kind": "integer", "derived": {"expr": "age * 1e300 * 1e300"}},
     "would reach inf by its sources' public bounds"),
    ({"name": "x", "kind": "continuous", "derived": {"expr": "age * 1e300 * 1e300"}},
     "would reach inf"),
    ({"name": "x", "kind": "continuous", "derived": {"expr": "age * 1e20"}}, "would reach 9e+21"),
    ({"name": "x", "kind": "integer", "derived": {"expr": "age * 1e20"}}, "beyond ±1e+15"),
    ({"name": "x", "kind": "continuous", "derived": {"expr": "age / 1e-300"}},
     "would reach 9e+301"),
    ({"name": "x", "kind": "continuous", "derived": {"expr": "-age * 1e20"}}, "would reach -9e+21"),
    ({"name": "x", "kind": "continuous", "derived": {"expr": "age > 3"}}, "must be a number"),
    ({"name": "x", "kind": "continuous", "derived": {"expr": "'abc'"}}, "must be a number"),
    ({"name": "x", "kind": "continuous", "derived": {"expr": ""}}, "'expr' is the arithmetic"),
    ({"name": "x", "kind": "continuous", "derived": {"expr": 5}}, "'expr' is the arithmetic"),
    ({"name": "x", "kind": "continuous", "derived": {"expr": "x + 1"}}, "cannot be derived from"),
    ({"name": "x", "kind": "continuous", "derived": {"expr": "shoe + 1"}},
     "'shoe' is not a column"),
    ({"name": "x", "kind": "continuous", "derived": {"expr": "âge + 1"}}, "'âge' is not a column"),
    ({"name": "x", "kind": "continuous", "derived": {"expr": "age % 0"}}, "mark 'x' nullable"),
    ({"name": "x", "kind": "categorical", "categories": ["a"], "derived": {"expr": "age + 1"}},
     "is a number (integer or continuous)"),
    ({"name": "b", "kind": "categorical", "categories": ["a", "b"],
      "derived": {"from": "age", "bins": [0, 50, int(BIG)], "labels": ["a", "b"]}},
     "at least 2 finite numbers"),
    ({"name": "b", "kind": "categorical", "categories": ["a", "b"],
      "derived": {"from": "age", "bins": [-int(BIG), 50, 100], "labels": ["a", "b"]}},
     "at least 2 finite numbers"),
    ({"name": "b", "kind": "categorical", "categories": ["a", "b"],
      "derived": {"from": "age", "bins": [0, float("nan"), 100], "labels": ["a", "b"]}},
     "at least 2 finite numbers"),
    ({"name": "b", "kind": "categorical", "categories": ["a", "b"],
      "derived": {"from": "age", "bins": [100, 50, 0], "labels": ["a", "b"]}}, "must increase"),
    ({"name": "b", "kind": "categorical", "categories": ["a", "b"],
      "derived": {"from": "age", "bins": [0, 50, 100], "labels": ["a"]}}, "needs 2 labels"),
    ({"name": "b", "kind": "categorical", "categories": ["a", "b"],
      "derived": {"from": "age", "bins": [20, 50, 100], "labels": ["a", "b"]}},
     "must cover the public bounds"),
    ({"name": "b", "kind": "categorical", "categories": ["a"],
      "derived": {"from": "sex", "map": {"Female": "a", "Male": int(BIG)}}},
     "not among its public categories"),
    ({"name": "b", "kind": "categorical", "categories": ["a"],
      "derived": {"from": "sex", "map": {"Female": "a"}}}, "gives no value for these categories"),
    ({"name": "b", "kind": "categorical", "categories": ["a"],
      "derived": {"from": "émploi", "map": {"x": "a"}}}, "'émploi', which is not a column"),
]


@pytest.mark.parametrize("column, words", DERIVED_CASES,
                         ids=[f"derived-{i:02d}" for i in range(len(DERIVED_CASES))])
def test_a_computed_column_that_cannot_be_is_refused_in_one_line(column, words):
    data = demo_schema().to_dict()
    data["columns"].append(column)
    with pytest.raises(SchemaError) as caught:
        Schema.from_dict(data)
    assert words in str(caught.value), caught.value
    one_line(str(caught.value))


def test_a_computed_column_within_the_bounds_is_computed_exactly():
    """The correct result beside the refusals: a product within ±1e15 is filled in and computed."""
    data = demo_schema().to_dict()
    data["columns"].append({"name": "x", "kind": "continuous", "derived": {"expr": "age * 1e12"}})
    schema = Schema.from_dict(data)
    assert (schema["x"].lower, schema["x"].upper) == (17e12, 90e12)
    table, _ = validate_table(demo_table(20, seed=3), schema)
    assert np.allclose(table["x"], table["age"] * 1e12)


# --- the CLI on the same surfaces: one line, nothing written --------------------------------------
S = "{in}/schema.json"
CLI_CASES = [
    # schema files whose numbers no float holds
    *[(["schema", "confirm", f"{{in}}/{name}.json"], words) for name, words in [
        ("upper-big", "upper bound must be a finite number"),
        ("lower-big", "lower bound must be a finite number"),
        ("quantiles-big", "quantiles must be"),
        ("rows-big", "whole number from 1 to 1,000,000,000"),
        ("rows-2-70", "not 1180591620717411303424"), ("rule-big", "too large for a rule"),
        ("rule-1e400", "reads as infinity"), ("bins-big", "finite numbers (the edges)"),
        ("expr-big", "too large for a rule"), ("expr-overflow", "would reach inf")]],
    (["schema", "check", "--data", "{in}/good.csv", "--schema", "{in}/three-rules.json"],
     "the rules together drop 223 of the table's 300 rows (74%)"),
    (["schema", "check", "--data", "{in}/good.csv", "--schema", "{in}/two-rules.json"],
     "the rules together drop 172"),
    (["fit", "--data", "{in}/good.csv", "--schema", "{in}/three-rules.json", "--epsilon", "1",
      "--out", "run", "--public-table"], "the rules together drop"),
    # linked drafts: the most child rows a person contributes, refused rather than replaced
    *[(["schema", "draft", "--data", "{in}/parents.csv", "--child", "{in}/children.csv", "--key",
        "id", "--out", "s.json", "--max-children", k], words) for k, words in [
        ("0", "max_children (the most child rows one person contributes) must be a whole number "
              "from 1 to 200, not 0"),
        ("-1", "not -1"), ("201", "not 201"), (str(2 ** 70), "whole number from 1 to 200"),
        ("2.5", "invalid int value"), ("ten", "invalid int value")]],
    (["schema", "draft", "--data", "{in}/good.csv", "--out", "s.json", "--max-children", "0"],
     "--child and --key together"),
    # the forecast: bad numbers, bad schemas, linked schemas
    *[(["forecast", "--schema", S, "--epsilon", "1", "--rows", rows], words) for rows, words in [
        (str(2 ** 70), "whole number from 2 to 1,000,000,000, not 1180591620717411303424"),
        (str(10 ** 9 + 1), "not 1000000001"), ("1", "whole number from 2"), ("0", "not 0"),
        ("-5", "not -5"), ("2.5", "invalid int value"), ("1e9", "invalid int value"),
        (BIG, "not 10000000000000000000… (401 characters)")]],
    *[(["forecast", "--schema", S, "--rows", "1000", "--epsilon", eps], words) for eps, words in [
        ("0", "positive finite"), ("-1", "positive finite"), ("nan", "positive finite"),
        ("inf", "positive finite"), ("1e6", "above 100"), ("abc", "invalid float"),
        ("1e-400", "positive finite")]],
    (["forecast", "--schema", S, "--rows", "1000", "--epsilon", "1", "--delta", "2"], "δ must lie"),
    (["forecast", "--schema", S, "--rows", "1000", "--epsilon", "1", "--calibration-share", "5"],
     "calibration share"),
    (["forecast", "--schema", S, "--epsilon", "1"], "give --rows N"),
    (["forecast", "--schema", "{in}/linked.json", "--epsilon", "1", "--rows", "300"],
     "the forecast covers single tables, not linked ones"),
    (["forecast", "--schema", "{in}/linked.json", "--epsilon", "1"], "covers single tables"),
    (["forecast", "--schema", "{in}/unbounded.json", "--epsilon", "1", "--rows", "300"],
     "needs every number's public bounds"),
    (["forecast", "--schema", "{in}/rows-big.json", "--epsilon", "1"], "whole number from 1 to"),
    (["forecast", "--schema", "{in}/rule-big.json", "--epsilon", "1", "--rows", "300"],
     "too large for a rule"),
]


def _cli_case(argv, words: str | tuple, inputs, tmp_path, monkeypatch) -> None:
    """One CLI case: exit code 2, the words in its one line, nothing written anywhere."""
    argv = [a.replace("{in}", str(inputs)) for a in argv]
    before_in, before_here = snapshot(inputs), snapshot(tmp_path)
    code, out = cli(argv, tmp_path, monkeypatch)
    assert code == 2, out
    assert "Traceback" not in out, out
    for said in (words,) if isinstance(words, str) else words:
        assert said.lower() in out.lower(), out
    said = [line for line in out.splitlines() if line.startswith("error:")
            or line.startswith("python -m") and "error:" in line]
    assert len(said) == 1, out
    assert snapshot(inputs) == before_in and snapshot(tmp_path) == before_here


@pytest.mark.parametrize("argv, words", CLI_CASES,
                         ids=[f"cli-{i:02d}-{c[0][0]}" for i, c in enumerate(CLI_CASES)])
def test_the_cli_answers_the_new_surfaces_in_one_line(argv, words, inputs, tmp_path, monkeypatch):
    _cli_case(argv, words, inputs, tmp_path, monkeypatch)


# --- files that are not files, or too large to read -----------------------------------------------
NOT_FILES = [  # (a path, the words of the refusal whatever reads it)
    ("/dev/zero", "not a regular file"), ("/dev/null", "not a regular file"),
    ("/dev/urandom", "not a regular file"), ("{in}/fifo", "not a regular file"),
    ("{in}/zero-link.csv", "not a regular file"), ("{in}/fifo-link.json", "not a regular file"),
    ("{in}/folder", "is a folder, not a file"),
    ("{in}/loop-a", "too many levels of symbolic links"),
]
READERS = [  # (the command with {x} where the path goes, what the message calls the file)
    (["schema", "draft", "--data", "{x}", "--out", "s.json"], "data file"),
    (["schema", "draft", "--data", "{in}/parents.csv", "--child", "{x}", "--key", "id", "--out",
      "s.json"], "data file"),
    (["schema", "confirm", "{x}"], "schema file"),
    (["schema", "check", "--data", "{x}", "--schema", S], "data file"),
    (["schema", "check", "--data", "{in}/good.csv", "--schema", "{x}"], "schema file"),
    (["fit", "--data", "{x}", "--schema", S, "--epsilon", "1", "--out", "run"], "data file"),
    (["fit", "--data", "{in}/good.csv", "--schema", "{x}", "--epsilon", "1", "--out", "run"],
     "schema file"),
    (["evaluate", "--real", "{x}", "--synthetic", "{in}/good.csv", "--schema", S, "--quick",
      "--out", "rep"], "data file"),
    (["evaluate", "--real", "{in}/good.csv", "--synthetic", "{x}", "--schema", S, "--quick",
      "--out", "rep"], "data file"),
    (["audit", "--data", "{x}", "--schema", S], "data file"),
    (["forecast", "--schema", "{x}", "--epsilon", "1", "--rows", "100"], "schema file"),
]
def _in_batches(reader: list[str]) -> bool:
    """Whether the command reads the file at {x}, too large to read whole, a batch at a time
    (issue 62): fit's and the draft's table, the review's real and synthetic tables."""
    flag = reader[reader.index("{x}") - 1]
    command = reader[0] in ("fit", "evaluate") or reader[:2] == ["schema", "draft"]
    return command and flag in ("--data", "--real", "--synthetic")


DEVICE_CASES = [
    # every reader: a folder, a loop of links, /dev/zero
    *[(reader, path, what, words) for reader, what in READERS
      for path, words in NOT_FILES[6:] + NOT_FILES[:1]],
    # the readers of a schema and the linked draft's: every other device, pipe and link to them
    *[(reader, path, what, words) for reader, what in READERS[1:3] + READERS[4:5] + READERS[10:]
      for path, words in NOT_FILES[1:6]],
    # files too large to read, which claim their size (fit and draft read them a batch at a time:
    # ENGINE_CASES)
    *[(reader, "{in}/huge.csv", what, "more than the 2,048 MB")
      for reader, what in READERS if what == "data file" and not _in_batches(reader)],
    *[(reader, "{in}/huge.json", what, "more than the 10 MB")
      for reader, what in READERS if what == "schema file"],
]


@pytest.mark.parametrize("reader, path, what, words", DEVICE_CASES,
                         ids=[f"device-{i:02d}-{c[0][0]}-{Path(c[1]).name}"
                              for i, c in enumerate(DEVICE_CASES)])
def test_a_device_a_pipe_a_folder_or_a_huge_file_is_refused_before_it_is_read(
        reader, path, what, words, inputs, tmp_path, monkeypatch):
    """Issue 58 item 6e: /dev/zero as a schema or a data file was read without limit (6.5 GB in
    75 s); a FIFO would block for ever. Every read of a steward's file goes through
    files.read_input: a regular file of a stated size (2,048 MB of data, 10 MB of schema), or one
    line."""
    argv = [a.replace("{x}", path) for a in reader]
    shown = path.replace("{in}", str(inputs))
    said = (f"error: cannot read the {what} {shown}: ", words)
    _cli_case(argv, said, inputs, tmp_path, monkeypatch)


ENGINE_CASES = [reader for reader, what in READERS if _in_batches(reader)]


@pytest.mark.parametrize("reader", ENGINE_CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(ENGINE_CASES)])
def test_a_file_too_large_to_read_whole_is_read_a_batch_at_a_time_and_refused_in_one_line(
        reader, inputs, tmp_path, monkeypatch):
    """Issue 62: `fit`, `schema draft` and `evaluate` read a file too large to read whole (2,049
    MB, which would take some 16 GB in pandas) a batch at a time, not whole; this one holds only
    NUL bytes, which they refuse in one line, having read only its head."""
    argv = [a.replace("{x}", "{in}/huge.csv") for a in reader]
    _cli_case(argv, "cannot read huge.csv as a table: it is not text", inputs, tmp_path,
              monkeypatch)


# the same through the API: (a call on the inputs folder, the error, the words)
API_FILE_CASES = [
    ("read_table /dev/zero", lambda d: read_table("/dev/zero"), SchemaError,
     "cannot read the data file /dev/zero: it is not a regular file"),
    ("read_table fifo", lambda d: read_table(d / "fifo"), SchemaError, "not a regular file"),
    ("read_table folder", lambda d: read_table(d / "folder"), SchemaError, "is a folder"),
    ("read_table missing", lambda d: read_table(d / "nowhere.csv"), SchemaError, "no such file"),
    ("read_table empty path", lambda d: read_table(""), SchemaError, "the path is empty"),
    ("read_table huge", lambda d: read_table(d / "huge.csv"), SchemaError,
     "it holds 2,049 MB, more than the 2,048 MB the workbench reads"),
    ("Schema.load /dev/zero", lambda d: Schema.load("/dev/zero"), SchemaError,
     "not a regular file"),
    ("Schema.load fifo link", lambda d: Schema.load(d / "fifo-link.json"), SchemaError,
     "not a regular file"),
    ("Schema.load huge", lambda d: Schema.load(d / "huge.json"), SchemaError,
     "more than the 10 MB"),
    ("Schema.load latin-1", lambda d: Schema.load(d / "latin1.json"), SchemaError,
     "not UTF-8 text"),
    ("load_schema /dev/urandom", lambda d: load_schema("/dev/urandom"), SchemaError,
     "not a regular file"),
    ("load_schema loop", lambda d: load_schema(d / "loop-a"), SchemaError, "symbolic links"),
    ("load_schema /proc", lambda d: load_schema("/proc/self/status"), SchemaError,
     "not valid JSON"),  # a regular file that says it holds 0 bytes: read, bounded, and not JSON
    ("schema_from_json 11 MB", lambda d: schema_from_json(" " * (SCHEMA_LIMIT + 1)), SchemaError,
     "more than the 10 MB a schema may be"),
    ("schema_from_json nested", lambda d: schema_from_json("[" * 200000), SchemaError,
     "not valid JSON"),
    ("read_input a socket-like device", lambda d: read_input("/dev/tty", "data file", 10),
     ValueError, "cannot read the data file /dev/tty"),
    ("read_input a limit of 10 bytes", lambda d: read_input(d / "good.csv", "data file", 10),
     ValueError, "more than the 10 bytes"),
]


@pytest.mark.parametrize("name, call, error, words", API_FILE_CASES,
                         ids=[c[0] for c in API_FILE_CASES])
def test_the_api_reads_only_regular_files_of_a_stated_size(name, call, error, words, inputs):
    with pytest.raises(error) as caught:
        call(inputs)
    assert words in str(caught.value), caught.value
    one_line(str(caught.value))


# --- the forecast ---------------------------------------------------------------------------------
def _wide(columns: int) -> Schema:
    return Schema(columns=[ColumnSpec(f"c{i}", "categorical", categories=["a", "b"])
                           for i in range(columns)])


# (a call, the error, the words)
FORECAST_CASES = [
    ("rows 2**70", lambda: forecast(demo_schema(), 1.0, 2 ** 70), ValueError,
     "a whole number from 2 to 1,000,000,000"),
    ("rows 10**9 + 1", lambda: forecast(demo_schema(), 1.0, 10 ** 9 + 1), ValueError,
     "not 1000000001"),
    ("rows 1", lambda: forecast(demo_schema(), 1.0, 1), ValueError, "not 1"),
    ("rows -3", lambda: forecast(demo_schema(), 1.0, -3), ValueError, "not -3"),
    ("rows 2.5", lambda: forecast(demo_schema(), 1.0, 2.5), ValueError, "not 2.5"),
    ("rows text", lambda: forecast(demo_schema(), 1.0, "100"), ValueError, "not '100'"),
    ("rows True", lambda: forecast(demo_schema(), 1.0, True), ValueError, "not True"),
    ("rows None", lambda: forecast(demo_schema(), 1.0, None), ValueError, "not None"),
    ("rows nan", lambda: forecast(demo_schema(), 1.0, float("nan")), ValueError, "not nan"),
    ("rows np.float64", lambda: forecast(demo_schema(), 1.0, np.float64(100.5)), ValueError,
     "not 100.5"),
    ("eps 0", lambda: forecast(demo_schema(), 0.0, 1000), BudgetError, "positive finite"),
    ("eps -1", lambda: forecast(demo_schema(), -1.0, 1000), BudgetError, "positive finite"),
    ("eps nan", lambda: forecast(demo_schema(), float("nan"), 1000), BudgetError,
     "positive finite"),
    ("eps inf", lambda: forecast(demo_schema(), float("inf"), 1000), BudgetError,
     "positive finite"),
    ("eps text", lambda: forecast(demo_schema(), "1", 1000), BudgetError, "positive finite"),
    ("eps True", lambda: forecast(demo_schema(), True, 1000), BudgetError, "positive finite"),
    ("eps None", lambda: forecast(demo_schema(), None, 1000), BudgetError, "positive finite"),
    ("eps 1e6", lambda: forecast(demo_schema(), 1e6, 1000), BudgetError, "above 100"),
    ("eps np.nan", lambda: forecast(demo_schema(), np.float32("nan"), 1000), BudgetError,
     "positive finite"),
    ("delta 1", lambda: forecast(demo_schema(), 1.0, 1000, delta=1.0), BudgetError, "δ must lie"),
    ("delta text", lambda: forecast(demo_schema(), 1.0, 1000, delta="1e-5"), BudgetError,
     "δ must lie"),
    ("model unknown", lambda: forecast(demo_schema(), 1.0, 1000, "gpt-9"), ValueError,
     "unknown model"),
    ("schema None", lambda: forecast(None, 1.0, 1000), SchemaError, "needs a table's Schema"),
    ("schema dict", lambda: forecast(demo_schema().to_dict(), 1.0, 1000), SchemaError,
     "not dict"),
    ("schema linked", lambda: forecast(pbcseq_schema(), 1.0, 300), SchemaError,
     "covers single tables, not linked ones"),
    ("schema unbounded", lambda: forecast(Schema(columns=[ColumnSpec("x", "integer")]), 1.0, 100),
     SchemaError, "'x' has none"),
    ("rows checked alone", lambda: check_forecast_rows(np.int64(-1)), ValueError, "not -1"),
]


@pytest.mark.parametrize("name, call, error, words", FORECAST_CASES,
                         ids=[c[0] for c in FORECAST_CASES])
def test_the_forecast_refuses_what_is_no_table_in_one_line(name, call, error, words):
    with pytest.raises(error) as caught:
        call()
    assert words in str(caught.value), caught.value
    one_line(str(caught.value))


# (schema, rows, ε, model, whether the forecast extrapolates): every TVD and both ends of its
# interval in [0, 1]; the note where ε, rows or columns leave the benchmark runs' span
FORECAST_VALUES = [
    ("demo at ε 0.05", demo_schema, 4000, 0.05, "auto", "ε 0.05 below them"),
    ("demo at ε 0.001", demo_schema, 4000, 0.001, "auto", "ε 0.001 below them"),
    ("demo, 100 rows at ε 0.05", demo_schema, 100, 0.05, "auto", "100 rows below them"),
    ("dp-wgan, 100 rows at ε 0.05", demo_schema, 100, 0.05, "dp-wgan", "100 rows below them"),
    ("dtgan-d, 2 rows at ε 0.01", demo_schema, 2, 0.01, "dtgan-d", "2 rows below them"),
    ("demo, 10**9 rows", demo_schema, 10 ** 9, 1.0, "auto", "1,000,000,000 rows above them"),
    ("200 columns", lambda: _wide(200), 4000, 1.0, "auto", "200 columns above them"),
    ("3 columns at ε 50", lambda: _wide(3), 5000, 50.0, "dp-tbart", "ε 50 above them"),
    ("demo at ε 1", demo_schema, 4000, 1.0, "auto", None),
    ("demo at ε 0.5, 2,000 rows", demo_schema, 2000, 0.5, "dp-tbart", None),
    ("demo at ε 0.25, 151 rows", demo_schema, 151, 0.25, "aim", None),
]


@pytest.mark.parametrize("name, schema, rows, epsilon, model, note", FORECAST_VALUES,
                         ids=[c[0] for c in FORECAST_VALUES])
def test_forecast_tvds_lie_in_0_1_and_say_where_they_extrapolate(name, schema, rows, epsilon,
                                                                  model, note):
    """Issue 58 item 5: the forecast reported TVDs above 1 (5.4; 1.126 on the demo schema at ε 0.05)
    and wrote them into every run's config. Clipped where they are computed
    (benchmark_model._interval), and noted where the model extrapolates."""
    schema = schema()
    made = forecast(schema, epsilon, rows, model)
    kept = run_forecast(schema, rows, epsilon, made.model)
    assert {"tvd1", "tvd2"} <= set(made.figures)
    for what in ("tvd1", "tvd2"):
        i = made.figures[what]
        assert 0.0 <= i.low <= i.expected <= i.high <= 1.0, (what, i)
        assert 0.0 <= kept[what]["low"] <= kept[what]["high"] <= 1.0
    if note is None:
        assert made.extrapolation is None and "extrapolation" not in kept
        assert "extrapolation" not in made.to_dict()
    else:
        assert note in made.extrapolation and made.extrapolation == kept["extrapolation"]
        assert "the benchmark runs the forecast is fitted on (ε 0.25 to 1" in made.extrapolation
        assert made.to_dict()["extrapolation"] == made.extrapolation


def test_the_cli_forecast_prints_clipped_figures_and_the_note(inputs, tmp_path, monkeypatch):
    code, out = cli(["forecast", "--schema", str(inputs / "schema.json"), "--epsilon", "0.05",
                     "--rows", "100", "--model", "dp-wgan", "--json"], tmp_path, monkeypatch)
    assert code == 0, out
    made = json.loads(out)
    assert all(0 <= made[w][k] <= 1 for w in ("tvd1", "tvd2") for k in ("low", "expected", "high"))
    assert "100 rows below them" in made["extrapolation"]
    code, out = cli(["forecast", "--schema", str(inputs / "schema.json"), "--epsilon", "0.05",
                     "--rows", "4000"], tmp_path, monkeypatch)
    assert code == 0 and "note: an extrapolation beyond the benchmark runs" in out, out
    code, out = cli(["forecast", "--schema", str(inputs / "schema.json"), "--epsilon", "1",
                     "--rows", "4000"], tmp_path, monkeypatch)
    assert code == 0 and "note:" not in out and "2-way TVD: about" in out, out


# --- NumPy numbers are numbers --------------------------------------------------------------------
# (ε, δ): accepted wherever ε and δ are checked
NUMPY_GOOD = [
    (np.float32(1.0), 1e-5), (np.float64(1.0), 1e-5), (np.int64(1), 1e-5), (np.int32(2), 1e-5),
    (np.float16(0.5), np.float32(1e-5)), (1.0, np.float64(1e-6)),
]


@pytest.mark.parametrize("epsilon, delta", NUMPY_GOOD,
                         ids=[f"numpy-{type(e).__name__}-{type(d).__name__}"
                              for e, d in NUMPY_GOOD])
def test_numpy_numbers_are_accepted_as_epsilon_and_delta(epsilon, delta):
    """Issue 58 item 6h: epsilon=np.float32(1.0) was refused as "not a positive finite number"."""
    check_budget(epsilon, delta)
    check_run_budget(epsilon, delta, np.float32(0.0))
    request = FitRequest(model="dp-tbart", epsilon=epsilon, delta=delta,
                         calibration_share=np.float64(0.3), seed=np.int64(3)).check(demo_schema())
    stored = json.loads(json.dumps(request.to_dict()))  # the run's config is JSON
    assert math.isclose(stored["epsilon"], float(epsilon)) and type(request.epsilon) in (int, float)
    assert stored["seed"] == 3 and type(request.seed) is int
    made = forecast(demo_schema(), epsilon, np.int64(1000), "aim", delta=delta)
    assert made.rows == 1000 and made.figures


NUMPY_BAD = [  # still refused: not a number, or not a usable one
    (np.bool_(True), "positive finite"), (np.float32("nan"), "positive finite"),
    (np.float64(-1.0), "positive finite"), (np.float32(0.0), "positive finite"),
    (np.float64(np.inf), "positive finite"), (np.array([1.0]), "positive finite"),
]


@pytest.mark.parametrize("epsilon, words", NUMPY_BAD, ids=[f"numpy-bad-{i}" for i in range(6)])
def test_numpy_values_that_are_no_epsilon_are_still_refused(epsilon, words):
    with pytest.raises(BudgetError, match=words):
        FitRequest(model="dp-tbart", epsilon=epsilon).check()


# --- exports: what a spreadsheet would run, in cells and in column names --------------------------
HEADERS = ["=HYPERLINK(\"http://x\",\"y\")", "+cmd|' /C calc'!A0", "-2+3", "@SUM(A1)", "\tname",
           "\rname"]


@pytest.mark.parametrize("header", HEADERS, ids=[f"header-{i}" for i in range(len(HEADERS))])
def test_column_names_a_spreadsheet_would_run_are_exported_as_text(header, tmp_path):
    """Issue 58 item 6b: cells were neutralised, column names exported verbatim; both now, in one
    table's CSV and in linked tables' two files."""
    table = pd.DataFrame({header: ["=1+1", "a"], "age": [30, -2], "plain": ["x", "y"]})
    rows = list(csv.reader(io.StringIO(to_csv(table), newline="")))
    assert rows == [["'" + header, "age", "plain"], ["'=1+1", "30", "x"], ["a", "-2", "y"]], rows
    children = table.rename(columns={"plain": "id"})
    paths = write_linked(LinkedTables(table, children), tmp_path / "out")
    for path in paths.values():
        with open(path, newline="", encoding="utf-8") as f:
            header_row = next(csv.reader(f))
        assert header_row[0] == "'" + header, header_row


# --- the app's rules editor ----------------------------------------------------------------------
EDITOR_RULES = [(f"age < {BIG}", "a number of 401 digits is too large for a rule"),
                ("age < 1e400", "reads as infinity")]


@pytest.fixture(scope="module")
def schema_page(tmp_path_factory):
    """The app on its schema step with the demo table, once for the editor's cases."""
    from streamlit.testing.v1 import AppTest
    home = tmp_path_factory.mktemp("app-home")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SYNTH_WORKBENCH_HOME", str(home))
        at = AppTest.from_file(str(Path(__file__).resolve().parent.parent / "app.py"),
                               default_timeout=300).run()
        at.switch_page("app_pages/data.py").run()
        at.button(key="use_demo").click().run()
        at.switch_page("app_pages/schema.py").run()
        yield at


@pytest.mark.parametrize("rule, words", EDITOR_RULES, ids=["editor-400-digits", "editor-1e400"])
def test_the_rules_editor_answers_a_huge_number_in_one_line(rule, words, schema_page):
    """Issue 58 item 6a: the app's rules editor ended in an OverflowError traceback."""
    at = schema_page
    version = at.session_state["schema_version"] if "schema_version" in at.session_state else 0
    at.text_input(key=f"rule_new_{version}_—").set_value(rule).run()
    assert not at.exception, [e.value for e in at.exception]
    shown = " | ".join(str(e.value) for e in at.error)
    assert words in shown and "Not a rule yet" in shown, shown
    assert not at.session_state["schema"].rules


# --- how many cases this file holds --------------------------------------------------------------
NEW_CASES = {
    "rules": RULE_CASES, "rules held together": RULE_TABLE_CASES, "computed columns": DERIVED_CASES,
    "CLI": CLI_CASES, "devices, pipes, folders and huge files": DEVICE_CASES,
    "API reads": API_FILE_CASES, "forecast refusals": FORECAST_CASES,
    "forecast values": FORECAST_VALUES, "NumPy numbers": NUMPY_GOOD, "NumPy non-numbers": NUMPY_BAD,
    "exported headers": HEADERS, "rules editor": EDITOR_RULES,
}
SINGLE_CASES = 2  # the computed column within bounds, the CLI forecast's clipped figures


def case_count() -> int:
    """The distinct parametrised cases of this file, and its single tests."""
    return sum(len(cases) for cases in NEW_CASES.values()) + SINGLE_CASES


def test_this_file_adds_at_least_110_distinct_cases():
    assert case_count() >= 110, case_count()
    cli_ids = [(tuple(c[0]), c[1]) for c in CLI_CASES]
    assert len(set(cli_ids)) == len(cli_ids)
    devices = [(tuple(c[0]), c[1]) for c in DEVICE_CASES]
    assert len(set(devices)) == len(devices)
    assert len({r for r, _ in RULE_CASES}) == len(RULE_CASES)
