"""A table opened by its path on this machine (issue 62 item 4): a file too large for the browser's
upload is read where it is, drafted as an upload is, and a reload reads it there again; the
workbench home keeps its path, never a copy."""
from __future__ import annotations

import json

import pytest
from streamlit.testing.v1 import AppTest

from synth_core.demo import demo_table
from test_app import APP, RUN_S, new_app, no_exceptions, texts, workspace  # noqa: F401

TABLE = demo_table(300, seed=5)


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("SYNTH_WORKBENCH_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def open_path(at: AppTest, path) -> AppTest:
    at.switch_page("app_pages/data.py").run()
    at.text_input(key="open_path").set_value(str(path)).run()
    at.button(key="open_path_button").click()
    return at.run()


@pytest.mark.parametrize("suffix", ["csv", "parquet"])
def test_a_file_opened_by_its_path_is_drafted_and_a_reload_reads_it_there(home, tmp_path,
                                                                          suffix):
    path = tmp_path / f"extract.{suffix}"
    (TABLE.to_csv(path, index=False) if suffix == "csv" else TABLE.to_parquet(path, index=False))
    at = open_path(new_app(), path)
    no_exceptions(at)
    assert not at.error, texts(at.error)
    assert at.session_state["table_name"] == path.name
    assert len(at.session_state["table"]) == len(TABLE)
    assert f"Loaded {path.name}: 300 rows" in texts(at.success)
    # the home keeps where the file is, not its bytes
    kept = json.loads((home / "last-table" / "table.json").read_text())
    assert kept["source"] == "path" and kept["files"] == [{"name": path.name, "path": str(path)}]
    assert sorted(p.name for p in (home / "last-table").iterdir()) == ["table.json"]

    reloaded = AppTest.from_file(APP, default_timeout=RUN_S)
    reloaded.switch_page("app_pages/schema.py").run()
    no_exceptions(reloaded)
    assert f"Restored {path.name}" in texts(reloaded.info)
    assert len(reloaded.session_state["table"]) == len(TABLE)


def test_a_path_with_no_file_is_said_and_a_moved_file_is_said_on_reload(home, tmp_path):
    at = open_path(new_app(), tmp_path / "nowhere.csv")
    assert "No file at" in texts(at.error) and "table_name" not in at.session_state
    at = open_path(at, tmp_path)
    assert "it is a folder" in texts(at.error)

    path = tmp_path / "extract.csv"
    TABLE.to_csv(path, index=False)
    at = open_path(at, path)
    assert at.session_state["table_name"] == "extract.csv"
    path.rename(tmp_path / "moved.csv")
    reloaded = AppTest.from_file(APP, default_timeout=RUN_S).run()
    no_exceptions(reloaded)
    assert "cannot be read again" in texts(reloaded.warning)
    assert "no such file" in texts(reloaded.warning)


def test_two_linked_files_open_by_their_paths(home, tmp_path):
    from test_linked import patients
    tables = patients(60, seed=2)
    tables.parents.to_csv(tmp_path / "patients.csv", index=False)
    tables.children.to_parquet(tmp_path / "visits.parquet", index=False)
    at = new_app()
    at.switch_page("app_pages/data.py").run()
    at.radio(key="path_shape").set_value(
        "Two linked tables: a row per person, and their rows").run()
    at.text_input(key="open_path_parents").set_value(str(tmp_path / "patients.csv"))
    at.text_input(key="open_path_children").set_value(str(tmp_path / "visits.parquet")).run()
    no_exceptions(at)
    at.number_input(key="path_link_max_children").set_value(6).run()
    at.button(key="path_use_linked").click().run()
    no_exceptions(at)
    assert "Loaded 60 persons" in texts(at.success), texts(at.error)
    kept = json.loads((home / "last-table" / "table.json").read_text())
    assert kept["source"] == "path" and kept["link"]["key"] == "pid"
    assert [f["path"] for f in kept["files"]] == [str(tmp_path / "patients.csv"),
                                                   str(tmp_path / "visits.parquet")]
    reloaded = AppTest.from_file(APP, default_timeout=RUN_S).run()
    no_exceptions(reloaded)
    assert "Restored patients.csv + visits.parquet" in texts(reloaded.info)
    assert len(reloaded.session_state["table"].parents) == 60


def test_a_file_too_large_to_read_whole_is_sampled_and_its_run_reads_the_whole_file(
        workspace, tmp_path, monkeypatch):
    """Issue 62: a file whose table would not fit in memory read whole is opened as a uniform
    random sample, said so; a reload samples it again; a run started on it names the file, and
    its worker reads every row a batch at a time (runs.file_runs)."""
    import synth_core.files as files
    import synth_core.schema.batches as batches
    from synth_core.runs import RunDir
    from test_app import choose_family, choose_total, wait_for_run
    monkeypatch.setattr(files, "DATA_LIMIT", 1_000)   # this file is "too large" now
    monkeypatch.setattr(batches, "SAMPLE_ROWS", 500)
    path = tmp_path / "registry.csv"
    demo_table(2_000, seed=3).to_csv(path, index=False)
    at = open_path(new_app(), path)
    no_exceptions(at)
    assert not at.error, texts(at.error)
    assert len(at.session_state["table"]) == 500 and at.session_state["table_rows"] == 2_000
    assert "Loaded registry.csv: 2,000 rows" in texts(at.success)
    assert "too large to read whole here" in texts(at.success)
    assert "a random 500 of them" in texts(at.caption)

    reloaded = AppTest.from_file(APP, default_timeout=RUN_S)
    reloaded.switch_page("app_pages/data.py").run()
    no_exceptions(reloaded)
    assert "Restored registry.csv" in texts(reloaded.info)
    assert len(reloaded.session_state["table"]) == 500
    assert reloaded.session_state["table_file"].path == path.resolve()

    at.switch_page("app_pages/model.py").run()
    choose_total(at)
    # the language model reads the table whole: not offered, and the page says so
    at.radio(key="family").set_value("more").run()
    assert "dp-llmtgen" not in at.selectbox(key="more_family").options
    assert any("Not offered for a file too large to read whole" in c.value
               and "dp-llmtgen" in c.value for c in at.caption)
    choose_family(at, "aim")
    at.selectbox(key="preset").set_value("tiny").run()
    at.checkbox(key="accept_draft").check().run()
    at.button(key="start_training").click().run()
    no_exceptions(at)
    assert not at.error, texts(at.error)
    wait_for_run(at)
    run = RunDir(at.session_state["run_path"])
    assert run.status()["state"] == "completed", run.status()
    request = run.request()
    assert request["source"]["path"] == str(path.resolve())
    assert request["rows"] + request["holdout_rows"] == 2_000
