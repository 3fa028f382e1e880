"""Reading a steward's file (CSV or Parquet) into a table: its encoding and separator detected, and
numbers written for people (thousands separators, percentages) read as numbers."""
from __future__ import annotations

import codecs
import csv
import io
import os
from pathlib import Path
from typing import Iterable

import pandas as pd

from ..files import FILE_LIMIT, read_input
from .spec import Schema, SchemaError, _preview


def read_table(path: str | os.PathLike, schema: Schema | None = None, missing_markers: Iterable[str] = ()) -> pd.DataFrame:
    """Read a CSV or Parquet file; a clear SchemaError for an unreadable, empty or ambiguous
    file, or one that is not a regular file or holds more than FILE_LIMIT (files.read_input: a
    file named by its path may be larger than an upload)."""
    data = read_input(path, "data file", FILE_LIMIT, SchemaError)
    return read_table_bytes(data, Path(path).name, schema, missing_markers)


SEPARATORS = {",": "commas", ";": "semicolons", "\t": "tabs", "|": "vertical bars"}


def decode_text(data: bytes, name: str) -> tuple[str, str]:
    """The text of a CSV file and the encoding it was read in: UTF-16 or UTF-8 by their byte-order
    marks, else UTF-8, else Windows-1252 (Excel's), else Latin-1. A file with NUL bytes and no
    UTF-16 mark is not text."""
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return data.decode("utf-16"), "UTF-16"
    if data.startswith(codecs.BOM_UTF8):
        return data[len(codecs.BOM_UTF8):].decode("utf-8"), "UTF-8"
    if b"\x00" in data[:65536]:
        raise SchemaError(f"cannot read {name} as a table: it is not text (is it a spreadsheet or another format? "
                          "save it as CSV)")
    for encoding, label in (("utf-8", "UTF-8"), ("cp1252", "Windows-1252 (Excel)"), ("latin-1", "Latin-1")):
        try:
            return data.decode(encoding), label
        except UnicodeDecodeError:
            continue
    raise AssertionError("Latin-1 decodes every byte")


def sniff_separator(header: str) -> str:
    """The header's separator: commas if it holds two or more comma-separated names, else the first
    of semicolon, tab and vertical bar that does (a single column otherwise)."""
    for sep in SEPARATORS:
        if len(next(csv.reader([header], delimiter=sep))) > 1:
            return sep
    return ","


def _csv_source(data: bytes, text: str, encoding: str) -> io.IOBase:
    """What pandas parses: UTF-8 from the file's own bytes (without its byte-order mark), other
    encodings from the decoded text."""
    if encoding != "UTF-8":
        return io.StringIO(text)
    return io.BytesIO(data[len(codecs.BOM_UTF8):] if data.startswith(codecs.BOM_UTF8) else data)


def read_table_bytes(data: bytes, filename: str, schema: Schema | None = None,
                     missing_markers: Iterable[str] = ()) -> pd.DataFrame:
    """Read an uploaded CSV or Parquet file from memory (nothing is written to disk). A CSV's
    encoding and separator are detected (`decode_text`, `sniff_separator`); what was detected is in
    `table.attrs["read_as"]`."""
    markers = list(missing_markers) or (list(schema.missing_markers) if schema else [])
    name = Path(filename).name
    read_as = "Parquet"
    try:
        if Path(name).suffix.lower() in (".parquet", ".pq"):
            table = pd.read_parquet(io.BytesIO(data))
        else:
            text, encoding = decode_text(data, name)
            header = text.split("\n", 1)[0].rstrip("\r")
            if not header.strip():
                raise SchemaError(f"{name} is empty")
            sep = sniff_separator(header)
            source = _csv_source(data, text, encoding)
            del text  # a table of 1M rows: its text, and as a StringIO four times it, held 0.5 GB
            table = pd.read_csv(source, **csv_options(sep, schema, markers),
                                **({"encoding": "utf-8"} if isinstance(source, io.BytesIO) else {}))
            read_as = csv_read_as(name, header, sep, encoding)
    except SchemaError:
        raise
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError, ValueError, OSError) as e:
        reason = str(e).splitlines()[0] if str(e) else type(e).__name__
        if isinstance(e, UnicodeDecodeError):
            reason = "it is not text in a known encoding (is it a spreadsheet or another format?)"
        raise SchemaError(f"cannot read {name} as a table: {reason}") from None
    except Exception as e:  # pyarrow raises its own types for a damaged Parquet file
        raise SchemaError(f"cannot read {name} as a table: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}") from None
    if len(table.columns) == 0:
        raise SchemaError(f"{name} has no columns")
    if len(table) == 0:
        raise SchemaError(f"{name} has a header but no rows")
    if read_as != "Parquet":
        read_as = numbers_for_people(table, schema, read_as)
    table.attrs["read_as"] = read_as
    return table


def csv_options(sep: str, schema: Schema | None, markers: list[str]) -> dict:
    """How pandas parses a steward's CSV, whole or a batch at a time (schema/batches.py): the
    schema's categories as text, the missing markers and pandas' own (NA, N/A, blanks)."""
    return dict(sep=sep, skipinitialspace=True, na_values=markers or None, keep_default_na=True,
                dtype={c.name: str for c in schema.columns if not c.is_numeric} if schema else None)


def csv_read_as(name: str, header: str, sep: str, encoding: str) -> str:
    """How a CSV was read, in words; SchemaError for a header that repeats a name (pandas renames
    a repeated "a" to "a.1": the steward must hear about it)."""
    raw_names = [n.strip() for n in next(csv.reader([header], delimiter=sep))]
    dupes = sorted({n for n in raw_names if raw_names.count(n) > 1})
    if dupes:
        raise SchemaError(f"{name} has duplicated column names: {_preview(dupes)}")
    return f"{encoding} text, " + (f"columns separated by {SEPARATORS[sep]}" if len(raw_names) > 1
                                   else "one column")


def numbers_for_people(table: pd.DataFrame, schema: Schema | None, read_as: str,
                       skip: frozenset = frozenset()) -> str:
    """`read_as` with the columns read as numbers in place (`_numbers_written_for_people`) said;
    those in `skip` left as they are (text in the whole table)."""
    numbers = _numbers_written_for_people(table, schema, skip)
    if numbers:
        read_as += "; read as numbers: " + ", ".join(f"{name} ({how})"
                                                     for name, how in numbers.items())
    return read_as


# numbers as people write them: thousands separated by commas ("1,234,567", "-1,234.5") or a
# percentage ("45%", "12.5 %"); a percentage is read as the number before its sign (45, not 0.45),
# as the steward reads it
_THOUSANDS = r"[-+]?\d{1,3}(?:,\d{3})+(?:\.\d+)?|[-+]?\d+(?:\.\d+)?"
_PERCENT = r"[-+]?\d+(?:\.\d+)?\s?%"


def _each_once(values: pd.Series) -> pd.Series:
    """The distinct values: every one of them matched is every row matched (a million rows
    matched one by one took seconds)."""
    return pd.Series(values.unique())


def _numbers_written_for_people(table: pd.DataFrame, schema: Schema | None,
                                skip: frozenset = frozenset()) -> dict[str, str]:
    """Read in place the text columns whose every value is a number written with thousands
    separators (one at least) or a percentage; {column: how it was written}. A column the schema
    declares categorical stays text."""
    read = {}
    for name in table.columns:
        column = table[name]
        if pd.api.types.is_numeric_dtype(column) or pd.api.types.is_bool_dtype(column):
            continue
        if schema is not None and str(name) in schema and not schema[str(name)].is_numeric:
            continue
        if str(name) in skip:
            continue
        text = column.astype("string").str.strip().replace("", pd.NA)
        present = _each_once(text.dropna())
        if len(present) == 0:
            continue
        if present.str.contains(",", regex=False).any() and present.str.fullmatch(_THOUSANDS).all():
            how, digits = "thousands separators", text.str.replace(",", "", regex=False)
        elif present.str.fullmatch(_PERCENT).all():
            how, digits = "percentages", text.str.rstrip("%").str.strip()
        else:
            continue
        table[name] = pd.to_numeric(digits, errors="raise").astype(float)
        read[str(name)] = how
    return read
