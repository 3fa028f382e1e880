"""The public schema (spec: what the steward declares public, and the scales it owns; derived: the
rules of columns computed from others) and the tables read against it (reading: files; tables:
validation, drafting, random rows from the schema alone)."""
from .spec import BINNINGS, DATES, KINDS, MAX_MAGNITUDE, ROLES, SCHEMA_VERSION, ColumnSpec, Schema, SchemaError
from .reading import read_table, read_table_bytes
from .draft import draft_schema
from .tables import ColumnReport, ValidationReport, left_out, random_table, schema_columns, validate_table

__all__ = ["BINNINGS", "DATES", "KINDS", "MAX_MAGNITUDE", "ROLES", "SCHEMA_VERSION", "ColumnReport", "ColumnSpec", "Schema", "SchemaError",
           "ValidationReport", "draft_schema", "left_out", "random_table", "read_table", "read_table_bytes",
           "schema_columns", "validate_table"]
