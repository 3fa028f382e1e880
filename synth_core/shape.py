"""The table's shape as a type (issue 60): one table of rows, or persons with their rows in a second
table.

`shape_of(schema)` chooses it once; everything that differs between the two asks it instead of
testing the schema's type: the unit a guarantee protects and its words, the schemas of the parts
and how an edited part is put back, admitting the data, which measurements a run may pay for
before training, whether a forecast and fairness control exist, what a drawn table shows and the
files it is exported as. A third shape (a person with two child tables, a time series per person)
is a third class with these members (ARCHITECTURE.md lists where).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from .schema import Schema, SchemaError, validate_table
from .schema.linked import LinkedSchema, LinkedTables, link_tables


@dataclass(frozen=True)
class SingleTable:
    """One table, one row a person: every mechanism of the privacy layer applies."""

    name: str = "a table"        # the shape in words
    counted: str = "one table"
    unit: str = "rows"           # what one protected example is, as a page and a ledger say it
    one: str = "row"
    the: str = "the table"       # the data, as a sentence names it ("Does the table fit …")
    does: str = "does"
    each: str = ""               # what comes with each unit drawn
    fixable: str = "columns"     # the columns a drawn value may be fixed in
    dp_bounds: bool = True       # missing numeric bounds may be paid for with DP
    dp_value_sets: bool = True   # value sets and point masses may be found with DP
    quantiles: bool = True       # a share of ε may measure the numeric columns' quantiles
    forecast: bool = True        # the benchmark runs the forecast rests on are single tables
    no_forecast: str = ""        # why there is none, where there is none
    rules: bool = True           # rules every row obeys may be declared
    fairness: bool = True        # a draw may be fairness-controlled
    no_fairness: str = ""
    links: bool = False          # the parts are linked by a key (the link has its own editor)
    chunks: bool = True          # a large draw may be made in chunks, joined (rows are independent)
    # a table too large to hold may be counted by the embedded engine (encoding/engine.py)
    engine: bool = True
    part_labels: tuple = ("",)   # a page's tab per part ("" for the only one)
    part_owners: tuple = ("the table",)  # each part, as a message names it

    @staticmethod
    def parts(schema: Schema) -> list[Schema]:
        """The tables' schemas, in the order a page shows them."""
        return [schema]

    @staticmethod
    def with_part(schema: Schema, i: int, new: Schema) -> Schema:
        """The schema with its i-th part replaced by `new` (an editor's change)."""
        return new

    @staticmethod
    def admit(data, schema: Schema):
        """(the data as training reads it, the report of what that changed); SchemaError if it
        does not fit."""
        return validate_table(data, schema)

    @staticmethod
    def fixable_schema(schema: Schema) -> Schema:
        return schema

    @staticmethod
    def time_index(schema: Schema) -> str | None:
        return None

    @staticmethod
    def drawn(table) -> str:
        """A drawn table in words."""
        return f"{len(table):,} synthetic rows"

    @staticmethod
    def frames(table) -> dict:
        """A drawn table's frames by the label a page shows them under."""
        return {"": table}

    @staticmethod
    def files(table, stem: str) -> list[tuple[str, str, str, object]]:
        """The export: (key, what, file name, frame) per CSV."""
        return [("csv", "the synthetic table", f"{stem}.csv", table)]

    @staticmethod
    def files_note(schema: Schema) -> str:
        return ""

    @staticmethod
    def link(schema: Schema) -> dict | None:
        """How the parts are linked (kept with an upload, to read it again); None: one table."""
        return None

    @staticmethod
    def part_frames(data, schema: Schema) -> list:
        """The data's frames, one per part of `schema`, without the columns that link them."""
        return [data]


@dataclass(frozen=True)
class PersonTables:
    """Persons (a parents' table) with their child rows, linked by a key: a guarantee protects a
    person with all their rows. Every bound is declared; no quantiles; no forecast yet."""

    name: str = "linked tables"
    counted: str = "two linked tables"
    unit: str = "persons"
    one: str = "person"
    the: str = "the tables"
    does: str = "do"
    each: str = " (each with their rows)"
    fixable: str = "columns of the persons"
    dp_bounds: bool = False
    dp_value_sets: bool = False
    quantiles: bool = False
    forecast: bool = False
    no_forecast: str = ("the forecast covers single tables, not linked ones: the benchmark runs it "
                        "rests on are single tables")
    rules: bool = False
    fairness: bool = False
    no_fairness: str = "Not offered for linked tables yet."
    links: bool = True
    chunks: bool = False  # one draw: persons' keys are numbered across it
    engine: bool = False  # persons are linked whole, in memory
    part_labels: tuple = ("Persons: one row each", "Their rows")
    part_owners: tuple = ("the persons' table", "their rows' table")
    # the files a sample is written as, in a folder: the run's and the export's
    part_files: tuple = (("parents", "parents.csv"), ("children", "children.csv"))

    @staticmethod
    def parts(schema: LinkedSchema) -> list[Schema]:
        return [schema.parent, schema.child]

    @staticmethod
    def with_part(schema: LinkedSchema, i: int, new: Schema) -> LinkedSchema:
        return dataclasses.replace(schema, **{("parent", "child")[i]: new})

    @staticmethod
    def admit(data, schema: LinkedSchema):
        return link_tables(data, schema)

    @staticmethod
    def fixable_schema(schema: LinkedSchema) -> Schema:
        return schema.parent  # a person's own columns

    @staticmethod
    def time_index(schema: LinkedSchema) -> str | None:
        return schema.time_index

    @staticmethod
    def drawn(tables) -> str:
        return (f"{len(tables.parents):,} synthetic persons with {len(tables.children):,} rows "
                "of theirs")

    @staticmethod
    def frames(tables) -> dict:
        return {"Persons": tables.parents, "Their rows": tables.children}

    def files(self, tables, stem: str) -> list[tuple[str, str, str, object]]:
        what = {"parents": "the persons", "children": "their rows"}
        return [(part, what[part], f"{stem}-{name}", getattr(tables, part))
                for part, name in self.part_files]

    @staticmethod
    def link(schema: LinkedSchema) -> dict | None:
        return {"key": schema.key, "max_children": schema.max_children, "order": schema.order}

    @staticmethod
    def part_frames(tables, schema: LinkedSchema) -> list:
        return [tables.parents.drop(columns=[schema.key], errors="ignore"),
                tables.children.drop(columns=[schema.key], errors="ignore")]

    @staticmethod
    def files_note(schema: LinkedSchema) -> str:
        return (f"Both files have the key column {schema.key}: new keys 1, 2, 3, … that link each "
                "row to its synthetic person (never a real key).")


SINGLE, PERSONS = SingleTable(), PersonTables()


def shape_of_data(data) -> SingleTable | PersonTables:
    """The shape of loaded data: linked tables (schema.linked.LinkedTables), or one table."""
    return PERSONS if isinstance(data, LinkedTables) else SINGLE


def shape_of(schema) -> SingleTable | PersonTables:
    """The shape a schema declares; SchemaError for anything that is not a schema."""
    if isinstance(schema, LinkedSchema):
        return PERSONS
    if isinstance(schema, Schema):
        return SINGLE
    raise SchemaError(f"the schema must be a Schema (see Schema.load), not {type(schema).__name__}")
