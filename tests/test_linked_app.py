"""Linked tables in the app (issue 45's pages): two uploads and the key, both tables' schemas, the
families that model them with a person as the unit, training in the background, the review of both
levels, and the export of both CSVs with the privacy report; a swapped pair of files refused in one
line."""
from __future__ import annotations

import io
import json

import pandas as pd

from test_app import RUN_S, downloads, new_app, no_exceptions, texts, wait_for_run, wait_for_sample, workspace  # noqa: F401
from test_linked import patients
from synth_core.runs import RunDir


def csv_bytes(frame: pd.DataFrame) -> bytes:
    return frame.to_csv(index=False).encode()


def upload_linked(at, parents: bytes, children: bytes, max_children: int = 6, order: str | None = "day"):
    at.switch_page("app_pages/data.py").run()
    at.radio(key="upload_shape").set_value("Two linked tables: a row per person, and their rows").run()
    at.file_uploader(key="upload_parents").set_value(("patients.csv", parents, "text/csv"))
    at.file_uploader(key="upload_children").set_value(("visits.csv", children, "text/csv"))
    at.run()
    no_exceptions(at)
    at.number_input(key="link_max_children").set_value(max_children)
    if order:
        at.selectbox(key="link_order").set_value(order)
    at.run()
    at.button(key="use_linked").click().run()
    no_exceptions(at)
    return at


def test_linked_tables_go_from_two_uploads_to_both_csvs_with_a_person_as_the_unit(workspace):
    tables = patients(80, seed=4)
    at = upload_linked(new_app(), csv_bytes(tables.parents), csv_bytes(tables.children))
    assert "Loaded 80 persons" in texts(at.success) and "linked by pid" in texts(at.success)
    assert "80 persons" in texts(at.markdown)  # both tables shown, the link said
    assert at.session_state["schema"].key == "pid" and at.session_state["schema"].max_children == 6

    # 2. both tables' schemas: drafted from the data, so flagged until confirmed; the key in neither
    at.switch_page("app_pages/schema.py").run()
    no_exceptions(at)
    assert "drafted by reading your private table" in texts(at.warning)
    assert "Each row of the second table belongs to the person whose **pid**" in texts(at.markdown)
    assert [t.label for t in at.tabs][:2] == ["Persons: one row each", "Their rows"]
    # what bounding will do, for the steward's eyes
    assert "more than 6 child rows" in texts(at.markdown)
    at.button(key="confirm_schema").click().run()
    no_exceptions(at)
    schema = at.session_state["schema"]
    assert not schema.provenance["warning"] and "pid" not in schema.parent and "pid" not in schema.child
    # one file: both tables, the link
    assert "Download schema JSON" in [b.label for b in at.get("download_button")]
    assert json.loads(schema.to_json())["linked"] == {"key": "pid", "max_children": 6, "order": "day"}

    # 3. only the families that model linked tables, a person the unit; tiny, started in the
    # background
    at.switch_page("app_pages/model.py").run()
    no_exceptions(at)
    assert at.radio(key="family").options == ["Recommended for this table · auto", "Column-by-column writer, person "
                                              "by person · dp-tbart"]
    assert "A person is the unit" in texts(at.info)
    assert {"Persons per step (batch)", "Share of persons per step (q)"} <= {m.label for m in at.metric}
    at.radio(key="table_total_choice").set_value("Moderate harm: ε = 3 in all (about three runs at ε = 1)").run()
    at.selectbox(key="preset").set_value("tiny").run()
    # the time before the start: DP-SGD steps over random persons from the public schema, then the
    # review's persons drawn after training
    at.button(key="estimate_button").click().run(timeout=RUN_S)
    no_exceptions(at)
    steps = next(m.value for m in at.metric if m.label == "Training steps")
    assert "About" in texts(at.info) and f"{steps} training steps of" in texts(at.info)
    assert "drawing the synthetic rows for the review" in texts(at.info)
    at.button(key="start_training").click().run()
    no_exceptions(at)
    assert not at.error, texts(at.error)
    assert wait_for_run(at) == "completed"
    assert "training persons" in texts(at.caption)
    run = RunDir(at.session_state["run_path"])
    ledger = run.ledger_dict()
    assert ledger["spent_epsilon"] <= 1.0 + 1e-9
    assert any(e["details"].get("unit") == "person" and e["details"].get("max_children") == 6
               for e in ledger["entries"])
    # the review's persons are drawn by the job after training (as many as it released it trained
    # on), not by the review page while the steward waits
    review = run.read_review_sample(schema)
    assert review is not None and len(review.parents) >= 10 and len(review.children) > 0
    assert set(review.children["pid"]) <= set(review.parents["pid"])
    assert run.config()["sampling_estimate_s"] > 0  # the train page's time left counts that draw

    # 5. the review of both levels and of the link, and its report
    at.switch_page("app_pages/review.py").run()
    no_exceptions(at)
    figures = at.dataframe[0].value
    assert "how many rows each person has (TVD)" in list(figures["figure"])
    assert all(0.0 <= float(v) <= 1.0 for v in figures["synthetic"])
    assert "Persons whose rows follow day" in texts(at.caption)
    at.button(key="build_linked_report").click().run()
    no_exceptions(at)
    assert "not for release" in texts(at.warning)

    # 6. both tables exported, linked by fresh keys, with the privacy report
    at.switch_page("app_pages/generate.py").run()
    no_exceptions(at)
    at.number_input(key="rows").set_value(40).run()
    at.button(key="generate").click().run()
    wait_for_sample(at)
    assert "40 synthetic persons" in texts(at.success)
    served = downloads(at)
    parents = pd.read_csv(io.StringIO(served["download_parents"]))
    children = pd.read_csv(io.StringIO(served["download_children"]))
    assert list(parents["pid"]) == list(range(1, 41))  # fresh keys, never the real P0001 …
    assert set(children["pid"]) <= set(parents["pid"]) and children.groupby("pid").size().max() <= 6
    assert "download_csv" not in served
    report = json.loads(served["download_report_json"])
    assert "person" in json.dumps(report).lower()
    assert "Persons (each with their child rows): 40" in served["download_report_md"]


def test_swapped_linked_uploads_are_refused_in_one_line_and_nothing_is_loaded(workspace):
    tables = patients(40, seed=5)
    at = upload_linked(new_app(), csv_bytes(tables.children), csv_bytes(tables.parents), order=None)
    assert "look swapped" in texts(at.error)
    assert "table" not in at.session_state
    assert "No table loaded yet." in texts(at.info)


def test_the_linked_demo_loads_with_a_schema_declared_from_its_documentation(workspace):
    from synth_core.demo import DEMOS
    at = new_app()
    at.switch_page("app_pages/data.py").run()
    at.selectbox(key="demo_choice").set_value(next(d for d in DEMOS if "linked" in d)).run()
    at.button(key="use_demo").click().run()
    no_exceptions(at)
    assert "**312 persons** and **1,945 rows**" in texts(at.markdown)
    schema = at.session_state["schema"]
    # declared, nothing read from the rows
    assert schema.key == "id" and not schema.provenance["warning"]
    at.switch_page("app_pages/schema.py").run()
    no_exceptions(at)
    assert not at.error, texts(at.error)
    assert "Declared schema" in texts(at.success)


def test_the_link_editor_declares_a_panel_s_time_and_refuses_what_cannot_be_in_one_line(workspace):
    """Step 2 shows what the draft proposed of a yearly panel (year a time index without gaps, exper
    +1 a year), and edits it: gaps allowed, the time index removed with its changes; a most rows per
    person the years cannot hold is refused in one line and the link kept."""
    from test_panel import panel
    tables = panel(60)
    at = upload_linked(new_app(), csv_bytes(tables.parents), csv_bytes(tables.children),
                       max_children=5, order="year")
    schema = at.session_state["schema"]
    assert schema.time_index == {"unique": True, "consecutive": True}
    assert schema.changes == {"exper": 1}
    at.switch_page("app_pages/schema.py").run()
    no_exceptions(at)
    assert "proposed only where every person's rows show them" in texts(at.caption)
    version = at.session_state["schema_version"] if "schema_version" in at.session_state else 0
    assert at.checkbox(key=f"link_time_{version}").value
    at.checkbox(key=f"link_consecutive_{version}").uncheck().run()
    no_exceptions(at)
    assert at.session_state["schema"].time_index == {"unique": True, "consecutive": False}
    assert at.session_state["schema"].changes == {"exper": 1}
    at.number_input(key=f"link_max_{version}").set_value(9).run()
    assert "fewer than the 9 rows" in texts(at.error) and "\n" not in texts(at.error)
    assert at.session_state["schema"].max_children == 5
    at.number_input(key=f"link_max_{version}").set_value(5).run()
    at.checkbox(key=f"link_time_{version}").uncheck().run()
    no_exceptions(at)
    schema = at.session_state["schema"]
    assert schema.time_index is None and schema.changes == {} and schema.order == "year"


def test_the_review_page_shows_the_share_of_persons_whose_sequence_is_valid():
    """Step 5 for a panel: the share of persons whose rows obey the declared time index and change,
    real (training and held out) and synthetic, in words beside the figures."""
    from streamlit.testing.v1 import AppTest

    def page():
        from test_panel import declared, panel
        from synth_core.evaluate.linked import canonical
        from workbench import linked_review
        schema = declared()
        synthetic = canonical(panel(50, seed=2), schema)
        synthetic.children.loc[synthetic.children["nr"] == 1, "year"] = 1985  # a year twice
        linked_review.render(schema, panel(60), panel(20, seed=1), {"run": synthetic}, {}, "panel")

    at = AppTest.from_function(page, default_timeout=RUN_S).run()
    no_exceptions(at)
    said = texts(at.caption)
    assert "Persons whose rows run along year as declared" in said
    assert "real 100% of 60 persons" in said and "real, held out 100% of 20 persons" in said
    assert "run 98% of 50 persons (year at most once per person 98%" in said
