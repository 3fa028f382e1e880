"""The public schema: what the data steward declares public about a table.

Everything a model, an encoder or a sampler may know about the private table without paying for it
from the privacy budget lives here: column names, kinds, numeric bounds, category lists, whether a
column may be missing, the rules of derived columns (schema/derived.py). `validate_table` checks a
private table against a schema and never drops a row silently; `draft_schema` proposes a schema by
*reading the data*, and marks it as such until the steward confirms that every fact in it is public.
"""
from __future__ import annotations

import dataclasses
import json
import math
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from ..files import MB, SCHEMA_LIMIT, read_input, write_atomic
from . import derived as derived_rules
from . import rules as schema_rules
from .errors import MAX_MAGNITUDE, SchemaError, _preview, _short, finite_number  # noqa: F401 (re-exported)
from .scale import PublicScale

SCHEMA_VERSION = 1
KINDS = ("categorical", "integer", "continuous")
BINNINGS = ("uniform", "log")
ROLES = (None, "sensitive", "target")
DATES = (None, "year")
# a continuous column's written precision: beyond this a float64 no longer holds the digits
MOST_DECIMALS = 12
# the most rows a table may be said to have (a schema's public count, a forecast's): far beyond
# what one machine reads; a count above it is a typo or 2**70, never a table
MAX_ROWS = 10 ** 9


# a column's fields derived from the schema's rules, never declared
RULE_DERIVED = {"rule_edges", "rule_values"}


@dataclass
class ColumnSpec(PublicScale):
    """One column's public facts (its public scale: schema.scale.PublicScale).

    lower/upper: public bounds of a numeric column; values outside are clipped (and counted).
    categories: the public list of a categorical column's values, compared as strings, in the
    steward's order
        (kept by the encoders, the charts and the app; a draft lists numbers by their value: 1-5, 6-10, 10-20).
    unknown: if set, a category outside the public list is mapped to this reserved category
        instead of being an error.
    binning: how a discretising model cuts the public range: "uniform" or "log" (log1p of the
        distance to the lower bound: fine bins near the lower bound, for heavy-tailed amounts).
    decimals: precision a continuous value is written with (None: as sampled).
    role: "sensitive" or "target" for fairness tooling; no effect on privacy.
    date: "year" for an integer column read from dates (validation keeps each date's year, a
        generalisation a drafted schema proposes for a date column).
    derived: the public rule that computes this categorical column from another ({"from", "bins",
    "labels"}
        or {"from", "map"}, see schema/derived.py): never modelled, computed after sampling.
    quantiles: the column's values at the probability levels 1/L, …, (L−1)/L, released with DP by a
    run and
        paid from its ε (privacy.measurements.measure_quantiles): a discretising model's bins then follow the
        column's distribution (`edges`), a repeated value getting a bin of its own.
    values: the numbers a numeric column takes (codes, brackets, a scale's steps; schema.scale):
    every model
        writes one of them. points: numbers a share of its rows hold exactly (the 0 of amounts), drawn exactly.
    rule_edges, rule_values: set by Schema.modelled from the schema's rules, never declared (see
    below).
    """

    name: str
    kind: str
    lower: float | None = None
    upper: float | None = None
    categories: list[str] | None = None
    nullable: bool = False
    unknown: str | None = None
    binning: str = "uniform"
    decimals: int | None = None
    role: str | None = None
    date: str | None = None
    derived: dict | None = None
    quantiles: list[float] | None = None
    values: list[float] | None = None
    points: list[float] | None = None
    # edges the schema's declared rules put in the scale (Schema.modelled: a value a rule names gets
    # a bin of its own, a threshold it compares with an edge), so a bin never holds values on both
    # sides of a rule; derived from the rules, never written
    rule_edges: list[float] | None = field(default=None, compare=False, repr=False)
    # the values rules name
    rule_values: list[float] | None = field(default=None, compare=False, repr=False)

    @property
    def is_numeric(self) -> bool:
        return self.kind in ("integer", "continuous")

    @property
    def has_bounds(self) -> bool:
        return self.lower is not None and self.upper is not None

    def check(self) -> None:
        """Raise SchemaError if this column's facts contradict each other."""
        where = f"column {self.name!r}"
        if not isinstance(self.name, str) or not self.name:
            raise SchemaError("every column needs a non-empty name")
        if self.kind not in KINDS:
            raise SchemaError(f"{where}: kind must be one of {', '.join(KINDS)}, not {self.kind!r}")
        if self.binning not in BINNINGS:
            raise SchemaError(f"{where}: binning must be one of {', '.join(BINNINGS)}, not {self.binning!r}")
        if self.role not in ROLES:
            raise SchemaError(f"{where}: role must be 'sensitive', 'target' or empty, not {self.role!r}")
        if self.date not in DATES:
            raise SchemaError(f"{where}: date must be 'year' or empty, not {self.date!r}")
        if self.date is not None and self.kind != "integer":
            raise SchemaError(f"{where}: a column read from dates (date={self.date!r}) is an integer column")
        if not isinstance(self.nullable, bool):
            raise SchemaError(f"{where}: nullable must be true or false, not {self.nullable!r}")
        if self.decimals is not None and (isinstance(self.decimals, bool) or not isinstance(self.decimals, int)
                                          or not 0 <= self.decimals <= MOST_DECIMALS):
            raise SchemaError(f"{where}: decimals must be a whole number from 0 to {MOST_DECIMALS}, not "
                              f"{self.decimals!r}")
        if self.decimals is not None and self.kind != "continuous":
            raise SchemaError(f"{where}: decimals is for a continuous column, not an {self.kind} one")
        if self.unknown is not None and not isinstance(self.unknown, str):
            raise SchemaError(f"{where}: the unknown category must be text, not {self.unknown!r}")
        if self.derived is not None and not isinstance(self.derived, dict):
            raise SchemaError(f"{where}: derived must be an object (a rule), not {self.derived!r}")
        if self.is_numeric:
            for label, bound in (("lower", self.lower), ("upper", self.upper)):
                if bound is not None and not finite_number(bound):
                    raise SchemaError(f"{where}: {label} bound must be a finite number, not "
                                      f"{_short(bound)}")
                if bound is not None and abs(bound) > MAX_MAGNITUDE:
                    raise SchemaError(f"{where}: {label} bound {bound:g} is beyond ±{MAX_MAGNITUDE:g}, more than a "
                                      "number column can hold exactly; rescale the column (e.g. to thousands) or "
                                      "leave it out")
            if self.kind == "integer":
                for label, bound in (("lower", self.lower), ("upper", self.upper)):
                    if bound is not None and bound != math.floor(bound):
                        raise SchemaError(f"{where} is an integer column: its {label} bound must be a whole "
                                          f"number, not {bound!r}")
            if self.has_bounds and self.lower >= self.upper:
                raise SchemaError(f"{where}: lower bound {self.lower} must be below upper bound {self.upper}")
        # the value set and points, once the bounds they must lie within are known to be bounds
        self.check_scale(where)
        if self.is_numeric:
            if self.categories:
                raise SchemaError(f"{where}: a numeric column has no category list")
            if self.quantiles is not None:
                q = self.quantiles
                if (not isinstance(q, list) or not q or not all(finite_number(v) for v in q)
                        or any(b < a for a, b in zip(q, q[1:]))
                        or (self.has_bounds and not self.lower <= q[0] <= q[-1] <= self.upper)):
                    raise SchemaError(f"{where}: quantiles must be a non-empty ascending list of numbers within the "
                                      "bounds")
        else:
            if not self.categories or not isinstance(self.categories, (list, tuple)):
                raise SchemaError(f"{where}: a categorical column needs a non-empty public category list")
            for c in self.categories:
                if c is None or isinstance(c, (bool, list, tuple, dict, set)) \
                        or (isinstance(c, float) and not math.isfinite(c)):
                    raise SchemaError(f"{where}: every category must be text or a number, not {c!r}"
                                      + ("; a missing value is declared with nullable, not as a category"
                                         if c is None else ""))
            cats = [str(c) for c in self.categories]
            dupes = sorted({c for c in cats if cats.count(c) > 1})
            if dupes:
                raise SchemaError(f"{where}: categories listed twice: {_preview(dupes)}")
            self.categories = cats
            if self.unknown is not None:
                self.unknown = str(self.unknown)
        if self.derived is not None:
            self.derived = derived_rules.canonical(self)

    def vocabulary(self) -> list[str]:
        """The categories a model may emit: the public list plus the reserved unknown category."""
        cats = list(self.categories or [])
        if self.unknown is not None and self.unknown not in cats:
            cats.append(self.unknown)
        return cats

    def check_value(self, value: Any) -> Any:
        """A value this column may be fixed to (a sampling condition): None for a missing value (if
        the column is nullable), a number inside the public bounds, or a public category;
        SchemaError otherwise."""
        where = f"column {self.name!r}"
        if value is None or (isinstance(value, float) and math.isnan(value)):
            if not self.nullable:
                raise SchemaError(f"{where} is not nullable, so it cannot be fixed to a missing value")
            return None
        if self.is_numeric:
            try:
                x = float(value)
            except (TypeError, ValueError):
                raise SchemaError(f"{where} is numeric; {value!r} is not a number") from None
            if not math.isfinite(x):
                raise SchemaError(f"{where} is numeric; {value!r} is not a finite number")
            if self.kind == "integer" and x != math.floor(x):
                raise SchemaError(f"{where} holds whole numbers; {x:g} is not one")
            if self.decimals is not None and round(x, self.decimals) != x:
                raise SchemaError(f"{where} is written with {self.decimals} decimal(s); {x!r} has more")
            lo, hi = self._range(None)
            if not lo <= x <= hi:
                raise SchemaError(f"{where}: {x:g} lies outside the public bounds [{lo:g}, {hi:g}]")
            return x
        value = str(value)
        if value not in self.vocabulary():
            raise SchemaError(f"{where} has no public category {value!r}; "
                              f"choose one of {', '.join(self.vocabulary()[:10])}")
        return value


SCHEMA_FIELDS = {"version", "drafted_from_data", "confirmed", "missing_markers", "columns", "excluded", "rows", "rules"}


@dataclass
class Schema:
    """The public facts of a table, with where they came from.

    drafted_from_data: the facts were proposed by reading the private table (`draft_schema`).
    confirmed: the steward confirmed every fact is public. A drafted, unconfirmed schema is refused
    for
        training unless the steward accepts it explicitly, and is flagged in the run's ledger and every report.
    excluded: columns of the table that are not modelled, with the reason (validation ignores them).
    rows: the number of rows, if the steward declares it public; a run then plans with it and
    reports it,
        else it measures a noisy count paid from ε.
    rules: conditions every row meets, in pandas' query syntax (schema/rules.py): the private
    table's rows that
        break one are dropped at validation, and every synthetic row obeys them all.
    """

    columns: list[ColumnSpec]
    drafted_from_data: bool = False
    confirmed: bool = True
    missing_markers: list[str] = field(default_factory=list)
    version: int = SCHEMA_VERSION
    # columns of the table left out of the model, and why (a draft proposes identifiers, empty
    # columns, ...)
    excluded: dict[str, str] = field(default_factory=dict)
    # the table's number of rows, when the steward declares it public (else a run pays for a noisy
    # count)
    rows: int | None = None
    # conditions every row meets (schema/rules.py)
    rules: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.columns = [c if isinstance(c, ColumnSpec) else ColumnSpec(**c) for c in self.columns]
        self.check()

    # --- access -------------------------------------------------------------------------------
    @property
    def names(self) -> list[str]:
        return [c.name for c in self.columns]

    def __getitem__(self, name: str) -> ColumnSpec:
        for c in self.columns:
            if c.name == name:
                return c
        raise KeyError(f"no column {name!r} in the schema")

    def __contains__(self, name: str) -> bool:
        return name in self.names

    @property
    def numeric_columns(self) -> list[str]:
        return [c.name for c in self.columns if c.is_numeric]

    @property
    def categorical_columns(self) -> list[str]:
        return [c.name for c in self.columns if not c.is_numeric]

    # --- derived columns (schema/derived.py): computed from a public rule, never modelled -----------------
    @property
    def derived_columns(self) -> list[ColumnSpec]:
        return [c for c in self.columns if c.derived]

    def modelled(self) -> "Schema":
        """The schema a model learns, its encoders read and measured marginals count: this one
        without its derived columns (itself if it has none)."""
        # without rules (a model's schema) it keeps the ones it has
        edges, values = self.rule_scale()
        stale = {c.name for c in self.columns if c.is_numeric and self.rules
                 and (c.rule_edges, c.rule_values) != (edges.get(c.name), values.get(c.name))}
        if not self.derived_columns and not stale:
            return self
        columns = [dataclasses.replace(c, rule_edges=edges.get(c.name), rule_values=values.get(c.name))
                   if c.name in stale else c for c in self.columns if not c.derived]
        # the rules are held on the full rows, derived columns computed (SynthModel.sample)
        return dataclasses.replace(self, columns=columns, rules=[] if self.derived_columns else self.rules)

    def rule_scale(self) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
        """What the declared rules say of numeric columns' scales: (edges, values) by column
        (schema/rules.py, `scale_from_rules`)."""
        if not self.rules:
            return {}, {}
        return schema_rules.scale_from_rules(self)

    def derive(self, table: pd.DataFrame) -> pd.DataFrame:
        """The table with every derived column computed from its rule (added, or replaced), the
        schema's columns in the schema's order: how sampled rows get their derived columns."""
        if not self.derived_columns:
            return table
        out = table.copy()
        for c in self.derived_columns:
            out[c.name] = derived_rules.compute(c, out, self)
        return out[self.names]

    def derived_sources(self, column: ColumnSpec) -> list[str]:
        """The columns a derived column is computed from."""
        return derived_rules.sources(column, self)

    @property
    def rule_checks(self) -> list:
        """The rules parsed against the columns (schema.expressions.Expression: `evaluate(table)`
        per row)."""
        return schema_rules.compiled(self.rules, self)

    @property
    def provenance(self) -> dict:
        """What the ledger and reports say about where the public facts came from."""
        flagged = self.drafted_from_data and not self.confirmed
        return {
            "drafted_from_data": self.drafted_from_data,
            "confirmed": self.confirmed,
            "warning": (
                "The schema was drafted by reading the private table and was never confirmed as "
                "public: its bounds and category lists may disclose facts about the data."
                if flagged else None
            ),
        }

    def check_conditions(self, conditions: dict | None) -> dict:
        """Sampling conditions {column: value} checked against the public facts
        (ColumnSpec.check_value)."""
        checked = {}
        for name, value in (conditions or {}).items():
            if name not in self:
                raise SchemaError(f"cannot condition on {name!r}: no such column in the schema")
            if self[name].derived:
                source = " and ".join(repr(s) for s in self.derived_sources(self[name]))
                raise SchemaError(f"cannot condition on {name!r}: it is computed from {source} after sampling; "
                                  f"condition on {source} instead")
            checked[name] = self[name].check_value(value)
        return checked

    def confirm(self) -> "Schema":
        """The steward states that every fact in this schema is public."""
        self.confirmed = True
        return self

    def check(self) -> None:
        if not self.columns:
            raise SchemaError("the schema has no columns")
        names = [c.name for c in self.columns]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise SchemaError(f"the schema names a column twice: {_preview(dupes)}")
        for c in self.columns:
            c.check()
        for role, why in (("target", "a review predicts one"), ("sensitive", "fairness is measured across one")):
            holding = [c.name for c in self.columns if c.role == role]
            if len(holding) > 1:
                raise SchemaError(f"the schema marks {len(holding)} columns as the {role} ({_preview(holding)}); "
                                  f"{why}: keep the role on one column")
        for label, flag in (("drafted_from_data", self.drafted_from_data), ("confirmed", self.confirmed)):
            if not isinstance(flag, bool):
                raise SchemaError(f"the schema's {label} must be true or false, not {flag!r}")
        if not isinstance(self.missing_markers, list) or not all(isinstance(m, str) for m in self.missing_markers):
            raise SchemaError("the schema's missing_markers must be a list of texts")
        if self.derived_columns:
            for c in self.derived_columns:
                derived_rules.check_sources(c, self)
        self.rule_checks  # noqa: B018 -- each rule parsed against the columns: SchemaError naming a bad one
        if self.version != SCHEMA_VERSION:
            raise SchemaError(f"schema version {self.version} is not supported (this is version {SCHEMA_VERSION})")
        if self.rows is not None and (isinstance(self.rows, bool) or not isinstance(self.rows, int)
                                      or not 1 <= self.rows <= MAX_ROWS):
            raise SchemaError(f"the public number of rows must be a whole number from 1 to "
                              f"{MAX_ROWS:,}, not {_short(self.rows)}")

    def require_bounds(self) -> None:
        missing = [c.name for c in self.columns if c.is_numeric and not c.has_bounds]
        if missing:
            raise SchemaError(
                f"numeric columns without public bounds: {_preview(missing)}. Declare lower/upper in the "
                "schema, or pay part of the budget to estimate them privately (--bounds-epsilon)."
            )

    # --- JSON ---------------------------------------------------------------------------------
    def to_dict(self) -> dict:
        return {
            "version": self.version,
            "drafted_from_data": self.drafted_from_data,
            "confirmed": self.confirmed,
            "missing_markers": list(self.missing_markers),
            "columns": [{k: v for k, v in asdict(c).items()
                         if (v is not None or k in ("lower", "upper")) and k not in RULE_DERIVED} for c in self.columns],
            **({"excluded": dict(self.excluded)} if self.excluded else {}),
            **({"rows": self.rows} if self.rows is not None else {}),
            **({"rules": list(self.rules)} if self.rules else {}),
        }

    @classmethod
    def from_dict(cls, data: dict) -> "Schema":
        if not isinstance(data, dict) or not isinstance(data.get("columns"), list):
            raise SchemaError("a schema is a JSON object with a 'columns' list")
        if "version" not in data:
            raise SchemaError("the schema has no 'version' field")
        unknown = set(data) - SCHEMA_FIELDS
        if unknown:
            raise SchemaError(f"the schema has unknown fields: {_preview(sorted(map(str, unknown)))}")
        excluded = data.get("excluded") or {}
        if not isinstance(excluded, dict):
            raise SchemaError("the schema's excluded must be an object of column: reason")
        allowed = set(ColumnSpec.__dataclass_fields__) - RULE_DERIVED
        columns = []
        for i, col in enumerate(data["columns"]):
            if not isinstance(col, dict):
                raise SchemaError(f"schema column #{i + 1} is not an object")
            extra = set(col) - allowed
            if extra:
                raise SchemaError(f"schema column {col.get('name', i + 1)!r} has unknown fields: {_preview(sorted(extra))}")
            if "name" not in col or "kind" not in col:
                raise SchemaError(f"schema column #{i + 1} needs a 'name' and a 'kind'")
            columns.append(ColumnSpec(**col))
        return cls(
            columns=columns,
            drafted_from_data=data.get("drafted_from_data", False),
            confirmed=data.get("confirmed", True),
            missing_markers=data.get("missing_markers", []),
            version=data["version"],
            excluded={str(k): str(v) for k, v in excluded.items()},
            rows=data.get("rows"),
            rules=data.get("rules") or [],
        )

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    @classmethod
    def from_json(cls, text: str) -> "Schema":
        return cls.from_dict(parse_schema_json(text))

    def save(self, path: str | os.PathLike) -> None:
        """Write the schema as JSON; a draft (facts read from the private table) is readable by its
        owner only."""
        write_atomic(Path(path), self.to_json(), private=self.drafted_from_data)

    @classmethod
    def load(cls, path: str | os.PathLike) -> "Schema":
        return cls.from_json(read_schema_text(path))


def read_schema_text(path: str | os.PathLike) -> str:
    """The text of the schema file at `path` (files.read_input: a regular file of at most
    SCHEMA_LIMIT); SchemaError in one line otherwise."""
    data = read_input(path, "schema file", SCHEMA_LIMIT, SchemaError)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise SchemaError(f"cannot read the schema file {path}: it is not UTF-8 text (a schema is "
                          "JSON)") from None


def parse_schema_json(text: str):
    """A schema's JSON text parsed: SchemaError in one line if it is not JSON, or is longer than
    SCHEMA_LIMIT (the app's imported schema is text, not a file)."""
    if isinstance(text, (bytes, bytearray)):
        text = text.decode("utf-8", errors="replace")
    if len(text) > SCHEMA_LIMIT:
        raise SchemaError(f"the schema is {len(text) / MB:,.0f} MB of text, more than the "
                          f"{SCHEMA_LIMIT // MB} MB a schema may be")
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise SchemaError(f"the schema is not valid JSON: {e}") from None
    except RecursionError:
        raise SchemaError("the schema is not valid JSON: it nests too deeply") from None
