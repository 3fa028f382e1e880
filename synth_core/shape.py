"""The table's shape as a type (issue 60): one table of rows, or persons with their rows in a second
table.

`shape_of(schema)` chooses it once; everything that differs between the two asks it instead of
testing the schema's type: the unit a guarantee protects and its word, the schemas of the parts,
which measurements a run may pay for before training, and whether a forecast exists. A third shape
(a person with two child tables, a time series per person) is a third class with these members
(ARCHITECTURE.md lists where).
"""
from __future__ import annotations

from dataclasses import dataclass

from .schema import Schema, SchemaError
from .schema.linked import LinkedSchema


@dataclass(frozen=True)
class SingleTable:
    """One table, one row a person: every mechanism of the privacy layer applies."""

    name: str = "a table"        # the shape in words
    unit: str = "rows"           # what one protected example is, as a page and a ledger say it
    one: str = "row"
    dp_bounds: bool = True       # missing numeric bounds may be paid for with DP
    dp_value_sets: bool = True   # value sets and point masses may be found with DP
    quantiles: bool = True       # a share of ε may measure the numeric columns' quantiles
    forecast: bool = True        # the benchmark runs the forecast rests on are single tables
    no_forecast: str = ""        # why there is none, where there is none
    chunks: bool = True          # a large draw may be made in chunks, joined (rows are independent)

    @staticmethod
    def parts(schema: Schema) -> list[Schema]:
        """The tables' schemas, in the order a page shows them."""
        return [schema]


@dataclass(frozen=True)
class PersonTables:
    """Persons (a parents' table) with their child rows, linked by a key: a guarantee protects a
    person with all their rows. Every bound is declared; no quantiles; no forecast yet."""

    name: str = "linked tables"
    unit: str = "persons"
    one: str = "person"
    dp_bounds: bool = False
    dp_value_sets: bool = False
    quantiles: bool = False
    forecast: bool = False
    chunks: bool = False  # one draw: persons' keys are numbered across it
    no_forecast: str = ("the forecast covers single tables, not linked ones: the benchmark runs it "
                        "rests on are single tables")

    @staticmethod
    def parts(schema: LinkedSchema) -> list[Schema]:
        return [schema.parent, schema.child]


SINGLE, PERSONS = SingleTable(), PersonTables()


def shape_of(schema) -> SingleTable | PersonTables:
    """The shape a schema declares; SchemaError for anything that is not a schema."""
    if isinstance(schema, LinkedSchema):
        return PERSONS
    if isinstance(schema, Schema):
        return SINGLE
    raise SchemaError(f"the schema must be a Schema (see Schema.load), not {type(schema).__name__}")
