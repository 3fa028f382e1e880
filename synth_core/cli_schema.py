"""`python -m synth_core schema draft | confirm | check`: a public schema of one table or of two
linked ones, drafted from the data (and marked so), confirmed by the steward, checked against a
table; and reading the private tables a schema describes (`read_tables`), for `fit` too. Imports
neither torch nor Opacus."""
from __future__ import annotations

from .files import check_output_file
from .schema import Schema, SchemaError, draft_schema, read_table
from .schema.derived import describe
from .schema.panel import panel_words
from .schema.linked import (DEFAULT_MAX_CHILDREN, LinkedSchema, LinkedTables, check_max_children,
                            draft_linked, load_schema)


def schema_command(args) -> int:
    """`schema draft`, `schema confirm`, `schema check`, of one table or of two linked ones."""
    if args.schema_command == "draft":
        check_output_file(args.out, "schema file")
        linked_only = args.max_children is not None or args.order
        if (args.child is None) != (args.key is None) or (args.child is None and linked_only):
            raise SchemaError("linked tables are drafted with --child and --key together (--max-children and --order "
                              "belong to them)")
        if args.max_children is not None:  # before a table is read (0 was read as the default)
            check_max_children(args.max_children)
        table = _table_to_draft(args)
        options = dict(max_categories=args.max_categories, missing_markers=args.missing)
        if args.child is not None:
            tables = LinkedTables(table, read_table(args.child, missing_markers=args.missing))
            k = DEFAULT_MAX_CHILDREN if args.max_children is None else args.max_children
            schema = draft_linked(tables, args.key, max_children=k, order=args.order, **options)
            parts = [("parents", schema.parent), ("children", schema.child)]
        else:
            schema = draft_schema(table, **options)
            parts = [("", schema)]
        schema.save(args.out)
        columns = " and ".join(f"{len(s.columns)} columns" + (f" ({label})" if label else "") for label, s in parts)
        print(f"wrote {args.out} (readable by you only): {columns}, DRAFTED FROM THE DATA. Edit the bounds and "
              "categories into public facts, then run `python -m synth_core schema confirm` on it; until then every "
              "run using it is flagged.")
        if args.child is not None:
            k = schema.max_children
            print(f"max_children: {k}, the most child rows one person contributes (a public choice, not read from the "
                  f"data: a person with more keeps a random {k} of them); edit it in the file")
        for label, s in parts:
            for name, why in s.excluded.items():
                print(f"left out: {name}{f' ({label})' if label else ''}: {why}")
    elif args.schema_command == "confirm":
        schema = load_schema(args.schema)
        print(f"{args.schema} states these facts about the table; confirming says each is public "
              "(published, or known to anyone without the data):")
        print("\n".join(_describe(schema)))
        schema.confirm().save(args.schema)
        print(f"{args.schema}: confirmed as public")
    else:
        schema = load_schema(args.schema)
        tables = read_tables(args, schema)
        if isinstance(schema, LinkedSchema):
            from .schema.linked import link_tables
            rows, report = link_tables(tables, schema)
            counts = rows.children_per_person()
            print(f"{len(rows)} persons and {len(rows.children)} child rows fit the schema; "
                  f"{int((counts > schema.max_children).sum())} persons have more than {schema.max_children}")
        else:
            from .schema import validate_table
            _, report = validate_table(tables, schema)
            print(f"{report.rows} rows fit the schema")
        for line in report.summary():
            print(f"note: {line}")
    return 0


def _table_to_draft(args):
    """The table a draft reads: the file whole, or where reading it whole would take over 1.6 GB
    (schema.batches.too_large, as `fit` decides), a uniform random million of its rows, read a
    batch at a time (`batches.opened`; linked tables: whole)."""
    from .schema.batches import opened
    if args.child is None:
        table = opened(args.data, args.missing)
        rows = table.attrs.get("rows", len(table))
        if rows > len(table):
            print(f"{args.data} is too large to read whole: drafting from a random "
                  f"{len(table):,} of its {rows:,} rows (values held by few rows may be "
                  "missing from the draft; add them before you confirm it)", flush=True)
        return table
    return read_table(args.data, missing_markers=args.missing)


def read_tables(args, schema):
    """The private table of `--data`, or for a linked schema the parents' (--data) and the
    children's (--child)."""
    if not isinstance(schema, LinkedSchema):
        if args.child is not None:
            raise SchemaError("--child is for linked tables, but the schema describes one table: draft it from both "
                              "(`schema draft --data PARENTS --child CHILDREN --key COLUMN`)")
        return read_table(args.data, schema)
    if args.child is None:
        raise SchemaError(f"the schema links two tables by {schema.key!r}: give the children's table with --child")
    if args.key is not None and args.key != schema.key:
        raise SchemaError(f"--key {args.key!r} is not the schema's key, {schema.key!r}")
    return LinkedTables(read_table(args.data, schema.parent), read_table(args.child, schema.child))


def _describe(schema: Schema | LinkedSchema) -> list[str]:
    """The facts of a schema, one line per column, for a steward to read before confirming them."""
    if isinstance(schema, LinkedSchema):
        return ([f"  two tables linked by {schema.key!r}; a person contributes at most {schema.max_children} child "
                 "rows" + (f", in the order of {schema.order!r}" if schema.order else "")]
                + [f"  {words}" for words in [panel_words(schema.order, schema.time_index,
                                                          schema.changes)] if words]
                + ["  the parents' table (one row a person):"] + ["  " + line for line in _describe(schema.parent)]
                + ["  the children's table:"] + ["  " + line for line in _describe(schema.child)])
    lines = []
    for c in schema.columns:
        if c.is_numeric:
            facts = f"{c.kind}, from {c.lower:g} to {c.upper:g}" if c.has_bounds else f"{c.kind}, NO BOUNDS"
            if c.binning == "log":
                facts += " (log scale)"
        else:
            cats = c.vocabulary()
            facts = f"categories: {', '.join(cats[:8])}" + (f", … ({len(cats)} in all)" if len(cats) > 8 else "")
        extra = [x for x in ("missing values allowed" if c.nullable else "", f"role {c.role}" if c.role else "",
                             "read from dates (years)" if c.date else "",
                             f"derived, never modelled: {describe(c.derived)}" if c.derived else "") if x]
        lines.append(f"  {c.name}: {facts}" + (f"; {'; '.join(extra)}" if extra else ""))
    for rule in schema.rules:
        lines.append(f"  every row obeys: {rule}")
    if schema.rows is not None:
        lines.append(f"  the number of rows, {schema.rows:,}, is declared public")
    for name, why in schema.excluded.items():
        lines.append(f"  left out: {name} ({why})")
    return lines
