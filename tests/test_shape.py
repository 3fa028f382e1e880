"""The table's shape as a type (issue 60 item 1): chosen once from the schema, asked by the request,
the pipeline, the forecast and the model page instead of a test of the schema's type in each."""
import re
from pathlib import Path

import pytest

from synth_core.demo import demo_schema, pbcseq_schema
from synth_core.forecast import forecast
from synth_core.request import FitRequest
from synth_core.schema import SchemaError
from synth_core.shape import PERSONS, SINGLE, shape_of

ROOT = Path(__file__).resolve().parents[1]


def test_the_shape_is_chosen_once_from_the_schema():
    single, linked = shape_of(demo_schema()), shape_of(pbcseq_schema())
    assert single is SINGLE and linked is PERSONS
    assert (single.unit, linked.unit) == ("rows", "persons")
    assert single.parts(demo_schema()) == [demo_schema()]
    assert [p.names for p in linked.parts(pbcseq_schema())] == [pbcseq_schema().parent.names,
                                                                pbcseq_schema().child.names]
    with pytest.raises(SchemaError, match="not dict"):
        shape_of(demo_schema().to_dict())


def test_what_a_shape_cannot_do_is_refused_from_its_facts():
    for field in ("bounds_epsilon", "values_epsilon", "quantile_share"):
        with pytest.raises(SchemaError, match="linked tables cannot be trained with"):
            FitRequest(model="dp-tbart", epsilon=1.0, **{field: 0.1}).check(pbcseq_schema())
    with pytest.raises(SchemaError, match="covers single tables, not linked ones"):
        forecast(pbcseq_schema(), 1.0, 300)
    assert forecast(demo_schema(), 1.0, 300).rows == 300


# lines of a page or the workbench that switch on linked tables: the shape answers instead (48
# before the shape type, 42 with it on the model page, 0 since the pages ask it for their words,
# parts, admission, fairness, the drawn table's frames and files, and the families it takes)
SWITCH = re.compile(r"\b(linked|LinkedSchema)\b")
MOST_SWITCHES = 0
# tests of a schema's or a table's type in the core, outside the schema package and the shape: the
# count may only fall, as the shape takes them over. 26 remain (33 before the one plan, the
# sampling shape and the registry by declared shape), each where the work is a layer above the
# shape's (it cannot import them):
# - privacy: the budget book's fingerprints of both tables (table_budget 4) and the pipeline's
#   person-level measurements and bounded children (pipeline 3);
# - the families: the person family refusing another schema (persons 1) and auto's linked pick
#   (recommend 1, request 2);
# - the run folder's and the CLI's files: private rows in two files (jobs 3, rundir 2), reading
#   and describing two tables (cli_schema 3, cli_review 2, cli 1, api 1, schema_work 1);
# - timing's random persons (timing 2).
CORE_SWITCH = re.compile(r"isinstance\([^)]*Linked(Schema|Tables)\)")
MOST_CORE_SWITCHES = 26


def test_pages_switch_on_linked_tables_no_more_than_before():
    found = []
    for path in [*(ROOT / "app_pages").glob("*.py"), *(ROOT / "workbench").glob("*.py")]:
        if path.name in ("linked_review.py", "link_editor.py"):  # a linked table's own views
            continue
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            code = line.split("#")[0]
            if SWITCH.search(code) and re.search(r"\bif\b|\belse\b|isinstance", code) \
                    and not code.lstrip().startswith(("import", "from", '"', "'")):
                found.append(f"{path.name}:{n}")
    assert len(found) <= MOST_SWITCHES, found


def test_the_core_tests_a_schema_s_type_no_more_than_before():
    found = [f"{path.relative_to(ROOT)}:{n}"
             for path in (ROOT / "synth_core").rglob("*.py")
             if "schema" not in path.relative_to(ROOT / "synth_core").parts[:1]
             and path.name != "shape.py"
             for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
             if CORE_SWITCH.search(line.split("#")[0])]
    assert len(found) <= MOST_CORE_SWITCHES, found
