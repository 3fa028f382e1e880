"""Panels whose time runs once per person (issue 59, item 3; schema.panel): a linked schema declares
its order column a time index and a child column's change along it; sampled persons obey both (0
violations, through fit → run folder → api.sample → reload), the declaration round-trips through
JSON and a bad one is refused in one line, a draft proposes them only where every person shows
them, and the review shows the share of persons whose sequence is valid."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from synth_core import api
from synth_core.evaluate.linked import HELD_OUT, canonical, review_linked, write_linked_report
from synth_core.models import persons as person_model
from synth_core.schema import ColumnSpec, Schema, SchemaError
from synth_core.schema.linked import (LinkedSchema, LinkedTables, draft_linked, link_tables,
                                     load_schema)
from synth_core.schema.panel import MIN_PERSONS, obeyed

K = 5  # max_children: a person's waves


def panel(n: int = 120, seed: int = 0) -> LinkedTables:
    """Invented workers (schooling, sector) and their yearly records: each person enters between
    1980 and 1983 and stays 2 to 5 years without a gap; experience grows by exactly 1 a year, the
    wage with it. Key: `nr`; the records shuffled, as a file may hold them."""
    rng = np.random.default_rng(seed)
    parents = pd.DataFrame({"nr": np.arange(100, 100 + n), "school": rng.integers(8, 17, n),
                            "sector": rng.choice(["public", "private"], n)})
    waves = rng.integers(2, K + 1, n)
    person = np.repeat(np.arange(n), waves)
    step = np.arange(len(person)) - np.repeat(np.cumsum(waves) - waves, waves)
    year = rng.integers(1980, 1984, n)[person] + step
    exper = rng.integers(0, 8, n)[person] + step
    children = pd.DataFrame({"nr": parents["nr"].to_numpy()[person], "year": year, "exper": exper,
                             "wage": np.round(1 + 0.1 * exper + rng.normal(0, 0.2, len(person)), 2),
                             "union": rng.choice(["no", "yes"], len(person))})
    return LinkedTables(parents, children.sample(frac=1, random_state=seed).reset_index(drop=True))


def declared(consecutive: bool = True, **link) -> LinkedSchema:
    parent = Schema(columns=[ColumnSpec("school", "integer", lower=0, upper=20),
                             ColumnSpec("sector", "categorical", categories=["public", "private"])])
    child = Schema(columns=[ColumnSpec("year", "integer", lower=1980, upper=1989),
                            ColumnSpec("exper", "integer", lower=0, upper=15),
                            ColumnSpec("wage", "continuous", lower=0, upper=5, decimals=2),
                            ColumnSpec("union", "categorical", categories=["no", "yes"])])
    link = {"max_children": K, "order": "year", "changes": {"exper": 1},
            "time_index": {"unique": True, "consecutive": consecutive}, **link}
    return LinkedSchema(parent=parent, child=child, key="nr", **link)


def violations(children: pd.DataFrame) -> dict:
    """What breaks the declaration in a sampled children's table, counted by hand (not by the code
    under test): repeated years, gaps, experience steps other than +1 a year, values off bounds."""
    rows = children.sort_values(["nr", "year"])
    by = rows.groupby("nr")
    years, exper = by["year"].diff().dropna(), by["exper"].diff().dropna()
    return {"repeated": int((years == 0).sum()), "gaps": int((years != 1).sum()),
            "exper": int((exper != years).sum()),
            "bounds": int((~rows["year"].between(1980, 1989)).sum()
                          + (~rows["exper"].between(0, 15)).sum())}


@pytest.fixture(scope="module")
def fitted(tmp_path_factory):
    """One run on the invented panel (ε = 2, the tiny model, calibrated), as the API fits it."""
    tmp = tmp_path_factory.mktemp("panel")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SYNTH_WORKBENCH_HOME", str(tmp / "home"))
        api.fit(panel(80), declared(), "dp-tbart", epsilon=2.0, preset="tiny", run_dir=tmp / "run",
                options={"epochs": 2})
    return tmp


def test_sampled_persons_hold_each_year_once_and_the_change_exact(fitted, tmp_path, monkeypatch):
    """fit → run folder → api.sample → the CSVs reloaded: every person's years run once and without
    a gap, experience +1 a year, within the public bounds, calibrated or not; the model's own rows
    (without the panel built in) repeat years, so the figures are the construction's."""
    _, info = api.sample(fitted / "run", 100, seed=3, out=tmp_path / "synthetic")
    assert info["calibration"]["unit"] == "persons"  # a pool of persons weighed, whole ones picked
    children = pd.read_csv(tmp_path / "synthetic" / "children.csv")
    assert children.groupby("nr").size().max() > 1
    assert violations(children) == {"repeated": 0, "gaps": 0, "exper": 0, "bounds": 0}
    model = api.load_model(fitted / "run")
    own = model.sample(60, seed=1, calibrate=False)
    assert violations(own.children.astype({"year": int, "exper": int})) == {
        "repeated": 0, "gaps": 0, "exper": 0, "bounds": 0}
    monkeypatch.setattr(person_model, "hold_panel", lambda children, person, _: (children, person))
    raw = model.sample(60, seed=1, calibrate=False)
    assert violations(raw.children)["repeated"] > 0 and violations(raw.children)["exper"] > 0


def test_a_time_index_declared_without_consecutive_lets_years_skip_but_never_repeat():
    """Declared unique only: years never repeat, but a person may skip one; the change is then the
    step times the years elapsed (+3 over three years)."""
    schema = declared(consecutive=False)
    rng = np.random.default_rng(0)
    person = np.repeat(np.arange(40), 5)
    children = pd.DataFrame({"year": rng.integers(1980, 1990, 200), "wage": 1.0, "union": "no",
                             "exper": rng.integers(0, 16, 200)})
    built, person = person_model.hold_panel(children, person, schema)
    tables = LinkedTables(pd.DataFrame({"nr": np.arange(1, 41)}), built.assign(nr=person + 1))
    counts = violations(tables.children)
    assert counts["repeated"] == 0 and counts["exper"] == 0 and counts["bounds"] == 0
    assert counts["gaps"] > 0  # the model's own spacing kept where it repeats nothing
    assert obeyed(tables.children, person, schema).all().all()


def test_the_declaration_round_trips_and_bad_ones_are_refused_in_one_line(tmp_path):
    schema = declared()
    (tmp_path / "s.json").write_text(schema.to_json())
    back = load_schema(tmp_path / "s.json")
    assert back == schema and back.to_dict()["linked"] == {
        "key": "nr", "max_children": K, "order": "year",
        "time_index": {"unique": True, "consecutive": True}, "changes": {"exper": 1}}
    assert "time_index" not in declared(time_index=None, changes={}).to_dict()["linked"]

    def refused(match: str, **link) -> None:
        data = schema.to_dict()
        data["linked"].update(link)
        (tmp_path / "bad.json").write_text(json.dumps(data))
        with pytest.raises(SchemaError, match=match) as e:
            load_schema(tmp_path / "bad.json")
        assert "\n" not in str(e.value)

    refused("must be an integer column", order="wage")
    refused("no such column", changes={"tenure": 1})
    refused("a categorical column: only a number", changes={"union": 1})
    refused("must be a finite number", changes={"exper": "1"})
    refused("must be a finite number", changes={"exper": True})
    refused("must be a finite number", changes={"exper": None})
    refused("written in steps of 1", changes={"exper": 0.5})
    refused("is the time index", changes={"year": 1})
    refused("needs a range of 16", changes={"exper": 4})  # 4 a year over 4 years: 16 > 15
    refused("changes run along a time index", time_index=None)
    refused("unique: true", time_index={"unique": False})
    refused("consecutive must be true or false", time_index={"unique": True, "consecutive": "yes"})
    refused("a time index is an object", time_index=[2])
    refused("changes is an object", changes=[["exper", 1]])
    refused("takes 10 values .1980 to 1989., fewer than the 11 rows", max_children=11)
    refused("is an object of key, max_children", tenure={"exper": 1})
    with pytest.raises(SchemaError, match="order column of a person's rows") as e:
        declared(order=None)
    assert "\n" not in str(e.value)


def test_a_draft_proposes_the_panel_only_where_every_person_shows_it():
    """Drafted from the rows (flagged until confirmed): year a time index without gaps, exper +1 a
    year; not the wage (no constant step). One person with a year twice, or too few persons with two
    rows, and nothing is proposed; the private tables' persons that break one are counted."""
    tables = panel()
    draft = draft_linked(tables, "nr", max_children=K, order="year")
    assert draft.time_index == {"unique": True, "consecutive": True}
    assert draft.changes == {"exper": 1}
    assert draft.provenance["warning"] and "drafted" in draft.provenance["warning"]
    assert not draft.confirm().provenance["warning"]
    twice = tables.children.copy()
    first = twice.index[twice["nr"] == 100]
    twice.loc[first[:2], "year"] = 1985
    assert draft_linked(LinkedTables(tables.parents, twice), "nr", K, "year").time_index is None
    few = panel(MIN_PERSONS - 1)
    assert draft_linked(few, "nr", K, "year").time_index is None
    assert draft_linked(tables, "nr", K).time_index is None  # no order column, no time
    _, report = link_tables(LinkedTables(tables.parents, twice), declared())
    assert report.broken_sequences == 1
    assert any("break the declared time index" in line for line in report.summary())


def test_the_review_shows_the_share_of_persons_whose_sequence_is_valid(tmp_path):
    schema = declared()
    real, held = canonical(panel(), schema), canonical(panel(40, seed=1), schema)
    broken = real.children.copy()
    mover = broken.index[broken["nr"] == 1]
    broken.loc[mover, "exper"] = broken.loc[mover, "exper"] + np.arange(len(mover)) * 2
    review = review_linked(real, {"synthetic": LinkedTables(real.parents, broken)}, schema, held)
    shares = review["sequences"]
    assert list(shares) == ["real", HELD_OUT, "synthetic"]
    assert shares["real"]["valid"] == shares[HELD_OUT]["valid"] == 1.0
    persons = shares["synthetic"]["persons"]
    assert shares["synthetic"]["valid"] == pytest.approx(1 - 1 / persons)
    assert shares["synthetic"]["facts"]["year at most once per person"] == 1.0
    facts = shares["synthetic"]["facts"]
    assert facts["exper +1 per step of year"] == pytest.approx(1 - 1 / persons)
    html_path, _ = write_linked_report(review, tmp_path / "review")
    assert "Persons whose rows run along the time index" in html_path.read_text()
    assert "exper +1 per step of year" in html_path.read_text()
    plain = LinkedSchema(schema.parent, schema.child, key="nr", max_children=K, order="year")
    assert review_linked(real, {"s": real}, plain)["sequences"] == {"real": None, "s": None}


def test_a_panel_on_declared_values_keeps_to_them():
    """A biennial panel whose years are declared values (1980, 1982, …, 1990): without gaps means
    the next wave, and experience +1 a year moves by 2 a wave, on its own declared values (0 to 20,
    evenly spaced); a change along values not evenly spaced is refused in one line."""
    waves = [1980, 1982, 1984, 1986, 1988, 1990]
    child = Schema(columns=[ColumnSpec("year", "integer", values=waves),
                            ColumnSpec("exper", "integer", values=list(range(0, 21)))])
    parent = Schema(columns=[ColumnSpec("school", "integer", lower=0, upper=20)])
    schema = LinkedSchema(parent, child, key="nr", max_children=K, order="year",
                          time_index={"unique": True, "consecutive": True}, changes={"exper": 1})
    rng = np.random.default_rng(1)
    person = np.repeat(np.arange(60), rng.integers(1, K + 1, 60))
    drawn = pd.DataFrame({"year": rng.choice(waves, len(person)),
                          "exper": rng.integers(0, 21, len(person))})
    built, person = person_model.hold_panel(drawn, person, schema)
    assert set(built["year"]) <= set(waves) and set(built["exper"]) <= set(range(0, 21))
    rows = built.assign(nr=person).groupby("nr")
    assert (rows["year"].diff().dropna() == 2).all() and (rows["exper"].diff().dropna() == 2).all()
    assert obeyed(built, person, schema).all().all()
    uneven = Schema(columns=[child["year"], ColumnSpec("exper", "integer", values=[0, 1, 3, 4])])
    with pytest.raises(SchemaError, match="evenly spaced") as e:
        LinkedSchema(parent, uneven, key="nr", max_children=K, order="year",
                     time_index={"unique": True, "consecutive": True}, changes={"exper": 1})
    assert "\n" not in str(e.value)
    same = LinkedSchema(parent, uneven, key="nr", max_children=K, order="year",
                        time_index={"unique": True, "consecutive": True}, changes={"exper": 0})
    kept, _ = person_model.hold_panel(drawn.assign(exper=3), np.sort(person), same)
    assert set(kept["exper"]) == {3}
