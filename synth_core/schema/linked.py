"""Linked tables: a parent table (one row per person: patients, customers) and a child table whose
rows belong to a person through a key (visits, transactions), declared public together.

    LinkedSchema   the two tables' schemas, the key, the most child rows a person may contribute (`max_children`,
                   the steward's public choice), an optional order column of the child table, and
                   a panel's time along it (schema.panel: the order column a time index, a child
                   column's change per step)
    LinkedTables   the two tables as read (the key still in them), or as sampled (fresh keys)
    link_tables    both tables checked against the schema and linked: LinkedRows (each child row's person)

Keys are identifiers: never modelled, never exported (a synthetic table's keys are fresh: 1, 2, 3,
…). A person's child rows beyond `max_children` are bounded by privacy.contribution, which needs the
rows linked first.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import pandas as pd

from ..files import write_atomic
from .panel import check_panel, draft_panel, obeyed, time_index_of
from .spec import (SCHEMA_VERSION, ColumnSpec, Schema, SchemaError, _preview, _short,
                   parse_schema_json, read_schema_text)
from .draft import draft_schema
from .tables import ValidationReport, _is_missing, _parse_dates, random_table, validate_table

# what a draft proposes as the most child rows a person may contribute: a public default, never read
# from the data
DEFAULT_MAX_CHILDREN = 10
# the most a person may contribute: a sequence of this many child rows is what the model reads for
# every person
MOST_CHILDREN = 200
# the column of a person's row that counts their child rows (0 … max_children): what the models and
# the marginals of persons read beside the parents' own columns; never a column of either table
COUNT_COLUMN = "(child rows)"
KEY_REASON = "the key that links the two tables: an identifier, never modelled (synthetic keys are fresh)"
LINKED_FIELDS = {"version", "linked", "parent", "child"}
LINK_FIELDS = {"key", "max_children", "order", "time_index", "changes"}


@dataclass
class LinkedSchema:
    """Two public schemas linked by a key: `parent` (one row per person) and `child` (a person's
    rows)."""
    parent: Schema
    child: Schema
    key: str
    max_children: int = DEFAULT_MAX_CHILDREN
    # a child column the rows of one person follow (None: the table's order)
    order: str | None = None
    version: int = SCHEMA_VERSION
    # the order column as a time index ({"unique": True, "consecutive": bool}; None: an order
    # only), and child columns' change per step of it ({column: step}): schema.panel
    time_index: dict | None = None
    changes: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.time_index = time_index_of(self.time_index)
        self.check()
        self.changes = {name: int(step) if float(step).is_integer() else float(step)
                        for name, step in self.changes.items()}

    # --- what the pipeline asks of a schema ------------------------------------------------------------
    @property
    def rows(self) -> int | None:
        """The number of persons, where the steward declares it public (the parents' row count)."""
        return self.parent.rows

    @property
    def provenance(self) -> dict:
        flagged = next((s.provenance for s in (self.parent, self.child) if s.provenance["warning"]), None)
        return flagged or self.parent.provenance

    @property
    def rule_checks(self) -> list:
        return []

    def check(self) -> None:
        """SchemaError naming what cannot be: each table's own problems, the key, max_children, the
        order column."""
        for label, schema in (("parents'", self.parent), ("children's", self.child)):
            if not isinstance(schema, Schema):
                raise SchemaError(f"the {label} schema must be a Schema, not {type(schema).__name__}")
        if not isinstance(self.key, str) or not self.key.strip():
            raise SchemaError("a linked schema names its key column (`key`): the column both tables share")
        for label, schema in (("parents'", self.parent), ("children's", self.child)):
            if self.key in schema:
                raise SchemaError(f"the key {self.key!r} is a column of the {label} schema: a key is an identifier, "
                                  "never modelled; leave it out of the columns")
            if schema.rules or schema.derived_columns:
                raise SchemaError(f"the {label} schema declares rules or derived columns: linked tables do not "
                                  "support them yet; remove them")
        if self.child.rows is not None:
            raise SchemaError("the children's schema declares a row count: a linked table's public count is the "
                              "number of persons (the parents' rows); remove the children's")
        check_max_children(self.max_children)
        if self.order is not None and (self.order not in self.child or not self.child[self.order].is_numeric):
            raise SchemaError(f"the order column {self.order!r} must be a numeric column of the children's schema")
        check_panel(self.child, self.order, self.time_index, self.changes, self.max_children)
        if COUNT_COLUMN in self.parent or COUNT_COLUMN in self.child:
            raise SchemaError(f"{COUNT_COLUMN!r} is the name of a person's count of child rows: rename that column")
        clash = sorted(set(self.parent.names) & set(self.child.names))
        if clash:
            raise SchemaError(f"both tables have a column named {_preview(clash)}: rename one so that every "
                              "column says which table it belongs to")
        if self.version != SCHEMA_VERSION:
            raise SchemaError(f"schema version {self.version} is not supported (this is version {SCHEMA_VERSION})")

    def persons(self) -> Schema:
        """The schema of a person's row as models and measurements of persons read it: the parents'
        columns and COUNT_COLUMN, how many child rows the person has (0 … max_children, public
        bounds)."""
        count = ColumnSpec(COUNT_COLUMN, "integer", lower=0, upper=self.max_children)
        return replace(self.parent.modelled(), columns=[*self.parent.modelled().columns, count], rows=None)

    def require_bounds(self) -> None:
        self.parent.require_bounds()
        self.child.require_bounds()

    def modelled(self) -> "LinkedSchema":
        parent, child = self.parent.modelled(), self.child.modelled()
        return self if (parent, child) == (self.parent, self.child) else replace(self, parent=parent, child=child)

    def check_conditions(self, conditions: dict | None) -> dict:
        """Conditions on the parents' columns (a person's own facts); a child column cannot be
        fixed."""
        for name in conditions or {}:
            if name in self.child:
                raise SchemaError(f"cannot condition on {name!r}: it is a column of the child rows; condition on "
                                  f"the parents' columns ({_preview(self.parent.names)})")
        return self.parent.check_conditions(conditions)

    def confirm(self) -> "LinkedSchema":
        self.parent.confirm()
        self.child.confirm()
        return self

    # --- JSON ---------------------------------------------------------------------------------------------
    def to_dict(self) -> dict:
        return {"version": self.version,
                "linked": {"key": self.key, "max_children": self.max_children,
                           **({"order": self.order} if self.order else {}),
                           **({"time_index": dict(self.time_index)} if self.time_index else {}),
                           **({"changes": dict(self.changes)} if self.changes else {})},
                "parent": self.parent.to_dict(), "child": self.child.to_dict()}

    @classmethod
    def from_dict(cls, data: dict) -> "LinkedSchema":
        unknown = set(data) - LINKED_FIELDS
        if unknown:
            raise SchemaError(f"the linked schema has unknown fields: {_preview(sorted(map(str, unknown)))}")
        link = data.get("linked")
        if not isinstance(link, dict) or set(link) - LINK_FIELDS:
            raise SchemaError("a linked schema's 'linked' is an object of key, max_children, "
                              "order, time_index and changes")
        for part in ("parent", "child"):
            if not isinstance(data.get(part), dict):
                raise SchemaError(f"a linked schema needs its '{part}' table's schema")
        return cls(parent=Schema.from_dict(data["parent"]), child=Schema.from_dict(data["child"]),
                   key=link.get("key"), max_children=link.get("max_children", DEFAULT_MAX_CHILDREN),
                   order=link.get("order"), version=data.get("version"),
                   time_index=link.get("time_index"),
                   changes={} if link.get("changes") is None else link["changes"])

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    def save(self, path: str | os.PathLike) -> None:
        write_atomic(Path(path), self.to_json(), private=self.parent.drafted_from_data or self.child.drafted_from_data)


def schema_from_dict(data: dict) -> Schema | LinkedSchema:
    """A schema (one table) or a linked schema (two), as its JSON says."""
    if isinstance(data, dict) and "linked" in data:
        return LinkedSchema.from_dict(data)
    return Schema.from_dict(data)


def schema_from_json(text: str) -> Schema | LinkedSchema:
    return schema_from_dict(parse_schema_json(text))


def load_schema(path: str | os.PathLike) -> Schema | LinkedSchema:
    """The schema file at `path`, of one table or of two linked ones (spec.read_schema_text)."""
    return schema_from_json(read_schema_text(path))


def check_max_children(k) -> None:
    """SchemaError in one line unless `k`, the most child rows one person contributes, is a whole
    number from 1 to MOST_CHILDREN (0 would keep no child row: it is refused, never a default)."""
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MOST_CHILDREN:
        raise SchemaError(f"max_children (the most child rows one person contributes) must be a "
                          f"whole number from 1 to {MOST_CHILDREN}, not {_short(k)}")


# --- the tables -------------------------------------------------------------------------------------------
@dataclass
class LinkedTables:
    """The parents' and the children's tables, each with the key column."""
    parents: pd.DataFrame
    children: pd.DataFrame

    def __len__(self) -> int:
        return len(self.parents)

    def as_one(self) -> pd.DataFrame:
        """Both tables stacked (a column says which), for what fingerprints a table (the budget
        book)."""
        return pd.concat([self.parents.assign(**{"(table)": "parents"}), self.children.assign(**{"(table)": "children"})],
                         ignore_index=True)


@dataclass
class LinkedRows:
    """Both tables validated against their schemas (keys gone): `person[i]` is the parents' row
    child row i belongs to; a person's child rows follow their order (the order column's, else the
    table's)."""
    parents: pd.DataFrame
    children: pd.DataFrame
    person: np.ndarray

    def __len__(self) -> int:
        return len(self.parents)

    def children_per_person(self) -> np.ndarray:
        return np.bincount(self.person, minlength=len(self.parents))


@dataclass
class LinkedReport:
    """What linking and validating changed. Every count here describes the private tables: the
    steward's alone."""
    parents: ValidationReport
    children: ValidationReport
    orphans: int = 0             # child rows whose key has no parent: dropped
    # persons with more than max_children rows (privacy.contribution kept a random few)
    truncated_persons: int = 0
    dropped_children: int = 0    # the child rows that bounding left out
    max_children: int = 0
    # what a single table's report says (linked tables have no rules yet)
    dropped_for_rules: int = 0
    broken_sequences: int = 0    # persons whose rows break the declared time index or changes

    @property
    def rows(self) -> int:
        return self.parents.rows

    def summary(self) -> list[str]:
        lines = [f"parents: {line}" for line in self.parents.summary()]
        lines += [f"children: {line}" for line in self.children.summary()]
        if self.orphans:
            lines.append(f"{self.orphans:,} child rows whose key matches no parent were dropped")
        if self.truncated_persons:
            lines.append(f"{self.truncated_persons:,} persons had more than {self.max_children} child rows: a random "
                         f"{self.max_children} of each one's were kept ({self.dropped_children:,} rows left out)")
        if self.broken_sequences:
            lines.append(f"{self.broken_sequences:,} persons' rows break the declared time index "
                         "or a change along it: they are kept as they are (synthetic persons obey "
                         "both)")
        return lines

    def to_dict(self) -> dict:
        return {"parents": self.parents.to_dict(), "children": self.children.to_dict(), "orphans": self.orphans,
                "truncated_persons": self.truncated_persons,
                "dropped_children": self.dropped_children,
                "broken_sequences": self.broken_sequences}


def _keys(column: pd.Series, markers: list[str]) -> tuple[pd.Series, pd.Series, bool]:
    """A key column as comparable text (whole numbers without their ".0"), where it is missing, and
    whether every value present is a number."""
    missing = _is_missing(column, markers)
    present = column[~missing]
    numbers = pd.to_numeric(present, errors="coerce")
    numeric = bool(numbers.notna().all()) and len(present) > 0
    if numeric and bool((numbers == numbers.round()).all()):
        text = numbers.round().astype("int64").astype(str)
    else:
        text = present.astype(str).str.strip()
    return text.reindex(column.index), missing, numeric


def linked_columns(tables: LinkedTables, schema: LinkedSchema) -> tuple[LinkedTables, list[str]]:
    """Each table with its key and the columns its schema names, and the names of the others (as
    schema.tables.schema_columns says of one table): what a run's private copy holds."""
    kept, dropped = [], []
    for table, part in ((tables.parents, schema.parent), (tables.children, schema.child)):
        names = {schema.key, *part.names}
        kept.append(table[[c for c in table.columns if str(c) in names]])
        dropped += [str(c) for c in table.columns if str(c) not in names and str(c) not in dropped]
    return LinkedTables(*kept), dropped


def split_persons(tables: LinkedTables, key: str, held: np.ndarray) -> tuple[LinkedTables, LinkedTables]:
    """(the persons not `held`, the persons `held`: positions in the parents' table), each with
    their child rows."""
    mask = np.zeros(len(tables.parents), dtype=bool)
    mask[held] = True
    out = []
    for chosen in (~mask, mask):
        parents = tables.parents.loc[chosen].reset_index(drop=True)
        children = tables.children.loc[tables.children[key].isin(parents[key])].reset_index(drop=True)
        out.append(LinkedTables(parents, children))
    return out[0], out[1]


def link_tables(tables: LinkedTables, schema: LinkedSchema) -> tuple[LinkedRows, LinkedReport]:
    """Both tables checked (SchemaError, one line, for a key missing from either, a repeated parent
    key, keys of different types, a table without rows, the two files swapped), validated against
    their schemas, and linked; child rows whose key matches no parent are dropped and counted."""
    if not isinstance(tables, LinkedTables):
        raise SchemaError("a linked schema trains on two tables: the parents' and the children's (--data and --child)")
    key, parents, children = schema.key, tables.parents, tables.children
    for label, table in (("parents'", parents), ("children's", children)):
        if key not in [str(c) for c in table.columns]:
            raise SchemaError(f"the {label} table has no key column {key!r} (its columns: "
                              f"{_preview([str(c) for c in table.columns])})")
        if len(table) == 0:
            raise SchemaError(f"the {label} table has no rows")
    parent_keys, parent_missing, parent_numeric = _keys(parents[key], schema.parent.missing_markers)
    child_keys, child_missing, child_numeric = _keys(children[key], schema.child.missing_markers)
    repeated = parent_keys[~parent_missing].duplicated()
    if repeated.any():
        if not child_keys[~child_missing].duplicated().any():
            raise SchemaError("the two files look swapped: keys repeat in the parents' table and not in the "
                              "children's; give the table of one row per person as --data, its rows as --child")
        raise SchemaError(f"{int(repeated.sum()):,} keys repeat in the parents' table (e.g. "
                          f"{parent_keys[~parent_missing][repeated].iloc[0]!r}): it holds one row per person")
    if parent_missing.any():
        raise SchemaError(f"{int(parent_missing.sum()):,} rows of the parents' table have no key: every person needs one")
    if child_numeric != parent_numeric and not child_missing.all():
        kinds = ("numbers", "text") if parent_numeric else ("text", "numbers")
        raise SchemaError(f"the key {key!r} holds {kinds[0]} in the parents' table and {kinds[1]} in the children's: "
                          "is it the same key?")
    position = pd.Series(np.arange(len(parents)), index=parent_keys.to_numpy())
    person = child_keys.map(position)
    linked = person.notna().to_numpy()
    parent_rows, parent_report = validate_table(parents.drop(columns=[key]), schema.parent)
    kept_children = children.loc[linked].drop(columns=[key])
    if kept_children.empty:
        raise SchemaError(f"no row of the children's table has a key {key!r} found in the parents' table")
    child_rows, child_report = validate_table(kept_children, schema.child)
    person = person[linked].to_numpy(dtype=np.int64)
    order = np.lexsort((_order_key(kept_children, child_rows, schema), person))
    rows = LinkedRows(parent_rows, child_rows.iloc[order].reset_index(drop=True), person[order])
    # what bounding will leave out
    over = np.clip(rows.children_per_person() - schema.max_children, 0, None)
    facts = obeyed(rows.children, rows.person, schema)
    return rows, LinkedReport(parent_report, child_report, orphans=int((~linked).sum()),
                              truncated_persons=int((over > 0).sum()), dropped_children=int(over.sum()),
                              max_children=schema.max_children,
                              broken_sequences=0 if facts is None
                              else int((~facts.all(axis=1)).sum()))


def _order_key(raw: pd.DataFrame, rows: pd.DataFrame, schema: LinkedSchema) -> np.ndarray:
    """What each person's child rows are sorted by (a stable sort: ties keep the file's order;
    missing last): the order column as validated, or, for a column read from dates (validation keeps
    their year), the dates themselves, so that a person's rows within one year are ordered too."""
    if not schema.order:
        return np.arange(len(rows))
    if schema.child[schema.order].date is not None:
        # in UTC, so that dates written with and without their time zone compare
        dates = pd.to_datetime(_parse_dates(raw[schema.order].reset_index(drop=True)), utc=True, errors="coerce")
        return (dates - pd.Timestamp(0, tz="UTC")).dt.total_seconds().fillna(np.inf).to_numpy()
    return rows[schema.order].astype(float).fillna(np.inf).to_numpy()


def random_tables(schema: LinkedSchema, persons: int, seed: int | None = None) -> LinkedTables:
    """`persons` persons drawn from the public schema alone (schema.tables.random_table), each with
    1 to max_children child rows, keys 1 … persons: rows to time a model on before training, never
    the steward's."""
    per = np.random.default_rng(seed).integers(1, schema.max_children + 1, persons)
    parents = random_table(schema.parent, persons, seed=seed)
    children = random_table(schema.child, int(per.sum()), seed=None if seed is None else seed + 1)
    return LinkedTables(parents.assign(**{schema.key: np.arange(1, persons + 1)}),
                        children.assign(**{schema.key: np.repeat(np.arange(1, persons + 1), per)}))


def key_candidates(tables: LinkedTables) -> list[str]:
    """The columns both tables have, those whose values are distinct in the parents' table (a key's)
    first: what a steward picks the key from."""
    parent_names = [str(c) for c in tables.parents.columns]
    shared = [str(c) for c in tables.children.columns if str(c) in parent_names]
    distinct = {name: bool(tables.parents[name].dropna().is_unique) for name in shared}
    return sorted(shared, key=lambda name: not distinct[name])


def draft_linked(tables: LinkedTables, key: str, max_children: int = DEFAULT_MAX_CHILDREN, order: str | None = None,
                 **options) -> LinkedSchema:
    """Both tables' schemas drafted (schema.draft.draft_schema: READING THE PRIVATE TABLES,
    protective by default), the key left out of both; max_children is the public default, never read
    from the data.

    With an order column, a panel's time is proposed where every person's rows show it
    (schema.panel.draft_panel: the order column a time index, a column's change per step). What
    that discloses is of the kind the draft's bounds already disclose, no more: one statement about
    all persons at once, read without noise, never a value of one person, and only where at least
    panel.MIN_PERSONS persons have two rows (a step the drafted bounds could not hold is not
    proposed). Like a bound it is not DP: a person whose rows broke the pattern would withhold it.
    It is flagged with the children's draft (drafted_from_data, unconfirmed) until the steward
    confirms both tables, as every other drafted fact is."""
    for label, table in (("parents'", tables.parents), ("children's", tables.children)):
        if key not in [str(c) for c in table.columns]:
            raise SchemaError(f"the {label} table has no key column {key!r}")
    drafts = []
    for table in (tables.parents, tables.children):
        draft = draft_schema(table.drop(columns=[key]), **options)
        draft.excluded = {key: KEY_REASON, **draft.excluded}
        drafts.append(draft)
    owner, missing, _ = _keys(tables.children[key], drafts[1].missing_markers)
    time_index, changes = draft_panel(tables.children, owner.mask(missing), order, drafts[1],
                                      max_children)
    return LinkedSchema(parent=drafts[0], child=drafts[1], key=key, max_children=max_children,
                        order=order, time_index=time_index, changes=changes)

