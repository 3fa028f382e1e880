"""The steward's work on a table, kept in the workbench home, so that a reload, a new tab or the
same table uploaded again finds it (issue 61 item 2). Nothing here is in a run folder or an export.

schema-work/<fingerprint>.json, one file per table: the schema as the steward left it (the draft's
facts as edited, rules, roles, the columns left out and the facts to bring them back, the
confirmation), when it was saved and confirmed, and the table's fingerprint; never a row, nor a
statistic the schema does not hold. The fingerprint is privacy.table_identity's over every column
of the table as loaded, keyed by the budget book's key: the same table exported again (rows or
columns in another order, 40 written 40.0) finds the same file. Written atomically and owner-only
(a draft's facts were read from the private table).

last-table/: the last table loaded in the app, as Streamlit forgets an upload's bytes on a reload:
an upload's files as uploaded (owner-only, like a run's private rows: in the home only, never
exported), a file opened by its path on this machine by that path (a table too large to upload is
not copied), a demo by its name. The next table loaded replaces it; the steward may forget it.
"""
from __future__ import annotations

import hashlib
import hmac
import json
import math
import shutil
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from . import home
from .demo import DEMOS, load_demo
from .files import DATA_LIMIT, SCHEMA_LIMIT, atomic_output, read_input, write_atomic
from .privacy import table_identity as identity
from .privacy.book_file import BookFile
from .schema import ColumnSpec, Schema, SchemaError, draft_schema, read_table_bytes
from .schema import read_table as read_file
from .schema.batches import TableFile, opened
from .schema.linked import LinkedSchema, LinkedTables, draft_linked, schema_from_dict
from .schema.spec import RULE_DERIVED
from .shape import shape_of

VERSION = 1
WORK_FIELDS = {"version", "table", "saved", "confirmed_on", "schema", "left_out"}
KEPT_FIELDS = {"version", "source", "name", "files", "markers", "link", "loaded"}
# where the last table came from: uploaded (kept as its bytes), a path on this machine, a demo
SOURCES = ("upload", "path", "demo")


class WorkError(ValueError):
    """A kept file the workbench cannot read (edited by hand, cut short): why, in one line."""


def day(when: float) -> str:
    """A date as the steward reads it: 3 May 2026."""
    return time.strftime("%d %B %Y", time.localtime(when)).lstrip("0")


def fingerprint(table) -> str:
    """The keyed fingerprint of a table as loaded (linked tables: both), over all its columns,
    whatever the schema leaves out; of a file too large to read whole (`TableFile`, whose table in
    memory is a random sample), of its path, size and time of change, which a reload finds without
    reading it again; privacy.BookError where the book's key cannot be had."""
    key = BookFile(home.budgets_path()).ensure_key()
    if isinstance(table, TableFile):
        stat = Path(table.path).stat()
        said = json.dumps([str(Path(table.path).resolve()), stat.st_size, stat.st_mtime_ns])
        return "file-" + hmac.new(key, said.encode(), hashlib.sha256).hexdigest()[:32]
    if isinstance(table, LinkedTables):
        parts = [("parents", table.parents, list(table.parents.columns)),
                 ("children", table.children, list(table.children.columns))]
    else:
        parts = [("table", table, list(table.columns))]
    return identity.fingerprint(identity.row_hashes(parts, key), key)


def is_confirmed(schema) -> bool:
    """Whether a drafted schema was confirmed public (a declared one has nothing to confirm)."""
    parts = shape_of(schema).parts(schema)
    return any(p.drafted_from_data for p in parts) and not schema.provenance["warning"]


@dataclass
class Work:
    """A table's kept schema work: its schema, the columns the steward left out ({editor key:
    (facts, position)}, workbench.schema_editor), when it was saved, and when it was confirmed
    (None: it is not)."""
    schema: Schema | LinkedSchema
    left_out: dict
    saved: float
    confirmed_on: float | None

    def described(self) -> str:
        """It in words: the schema you confirmed on 3 May 2026 (or were editing)."""
        if self.confirmed_on is not None:
            return f"the schema you confirmed on {day(self.confirmed_on)}"
        return f"the schema you were editing on {day(self.saved)}"

    def offer(self) -> str:
        """The one line that offers it back."""
        return f"Continue with {self.described()}"


def work_path(table_key: str):
    return home.schema_work_root() / f"{table_key}.json"


def _column(spec: ColumnSpec) -> dict:
    return {k: v for k, v in asdict(spec).items() if v is not None and k not in RULE_DERIVED}


def save_work(table_key: str, schema, left_out: dict) -> Work:
    """Keep `schema` and the columns left out as the table's work; a confirmation keeps its date
    while the schema stays confirmed."""
    now, before = time.time(), None
    try:
        before = read_work(table_key)
    except WorkError:
        pass  # replaced by this
    confirmed_on = None
    if is_confirmed(schema):
        confirmed_on = before.confirmed_on if before and before.confirmed_on else now
    data = {"version": VERSION, "table": table_key, "saved": now, "confirmed_on": confirmed_on,
            "schema": schema.to_dict(),
            "left_out": [{"key": k, "position": p, "column": _column(s)}
                         for k, (s, p) in left_out.items()]}
    write_atomic(work_path(table_key), json.dumps(data, indent=1), private=True)
    return Work(schema, dict(left_out), now, confirmed_on)


def _read_json(path, fields: set, what: str) -> dict | None:
    """The JSON object kept at `path` (None if there is none); WorkError in one line if it is not
    one this module wrote."""
    if not path.exists():
        return None
    raw = read_input(path, what, SCHEMA_LIMIT, WorkError)
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise WorkError(f"it is not valid JSON: {e}") from None
    if not isinstance(data, dict) or data.get("version") != VERSION:
        raise WorkError(f"it is not a {what} of version {VERSION}")
    unknown = set(data) - fields
    if unknown:
        raise WorkError(f"unknown field(s) {', '.join(sorted(map(str, unknown)))}")
    return data


def _time(value, what: str, optional: bool = False) -> float | None:
    if optional and value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise WorkError(f"its {what} must be a time in seconds, not {value!r}")
    return float(value)


def _left_out(entries) -> dict:
    """{editor key: (facts, position)} of the columns left out, as save_work wrote them."""
    if not isinstance(entries, list):
        raise WorkError("its left_out must be a list")
    allowed, out = set(ColumnSpec.__dataclass_fields__) - RULE_DERIVED, {}
    for entry in entries:
        position = entry.get("position") if isinstance(entry, dict) else None
        if not isinstance(entry, dict) or not isinstance(entry.get("key"), str) \
                or isinstance(position, bool) or not isinstance(position, int) or position < 0 \
                or not isinstance(entry.get("column"), dict) or set(entry["column"]) - allowed:
            raise WorkError("each left_out entry is a key, a position and a column's facts")
        try:
            spec = ColumnSpec(**entry["column"])
            spec.check()
        except (TypeError, SchemaError) as e:
            raise WorkError(f"a column left out cannot be read ({e})") from None
        out[entry["key"]] = (spec, position)
    return out


def read_work(table_key: str) -> Work | None:
    """The work kept for the table (None where there is none); WorkError in one line where its
    file is not one this module wrote (edited by hand, cut short, another table's)."""
    data = _read_json(work_path(table_key), WORK_FIELDS, "schema work file")
    if data is None:
        return None
    if data.get("table") != table_key:
        raise WorkError("it names another table")
    try:
        schema = schema_from_dict(data.get("schema"))
    except (SchemaError, TypeError, KeyError, AttributeError, ValueError) as e:
        raise WorkError(f"its schema cannot be read ({e})") from None
    confirmed_on = _time(data.get("confirmed_on"), "confirmed_on", optional=True)
    return Work(schema, _left_out(data.get("left_out", [])), _time(data.get("saved"), "saved"),
                confirmed_on if is_confirmed(schema) else None)


# --- the last table loaded ------------------------------------------------------------------------
@dataclass
class KeptTable:
    """The last table loaded: an upload's files [(name, bytes)] or an opened file's [(name,
    path)], the missing markers it was read with and its link ({key, max_children, order}: two
    linked files), or a demo's name; when it was loaded."""
    source: str
    name: str
    files: list
    markers: list
    link: dict | None
    loaded: float

    def load(self):
        """(table, its fresh draft or the demo's declared schema, about), read again as it was
        loaded; SchemaError or ValueError where it cannot be."""
        if self.source == "demo":
            return load_demo(self.name)
        frames = []
        for name, data in self.files:
            frame = (opened(data, self.markers) if self.source == "path" and self.link is None
                     else read_file(data, missing_markers=self.markers) if self.source == "path"
                     else read_table_bytes(data, name, missing_markers=self.markers))
            frame.columns = [str(c) for c in frame.columns]
            frames.append(frame)
        if self.link is None:
            return frames[0], draft_schema(frames[0], missing_markers=self.markers), ""
        tables = LinkedTables(*frames)
        return tables, draft_linked(tables, self.link["key"], self.link["max_children"],
                                    self.link.get("order"), missing_markers=self.markers), ""


def _kept_meta():
    return home.last_table_root() / "table.json"


def keep_table(source: str, name: str, files=(), markers=(), link: dict | None = None) -> None:
    """Keep the table just loaded in place of the last: an upload's files owner-only, an opened
    file's path, a demo's name."""
    root = home.last_table_root()
    forget_table()
    root.mkdir(mode=0o700, parents=True, exist_ok=True)
    stored = []
    for i, (file_name, data) in enumerate(files if source == "upload" else ()):
        with atomic_output(root / f"{i}.data", "wb", private=True) as f:
            f.write(data)
        stored.append({"name": str(file_name), "stored": f"{i}.data"})
    for file_name, path in (files if source == "path" else ()):
        stored.append({"name": str(file_name), "path": str(Path(path).expanduser().resolve())})
    meta = {"version": VERSION, "source": source, "name": name, "files": stored,
            "markers": [str(m) for m in markers], "link": link, "loaded": time.time()}
    write_atomic(_kept_meta(), json.dumps(meta), private=True)


def _check_kept(data: dict) -> None:
    source, files, link, markers = data.get("source"), data.get("files"), data.get("link"), \
        data.get("markers", [])
    if source not in SOURCES or not isinstance(data.get("name"), str) \
            or not isinstance(files, list) or not isinstance(markers, list) \
            or not all(isinstance(m, str) for m in markers):
        raise WorkError("its source, name, files or markers are not what the workbench writes")
    if source == "demo" and data["name"] not in DEMOS:
        raise WorkError(f"no demo table is named {data['name']!r}")
    if source != "demo" and len(files) != (1 if link is None else 2):
        raise WorkError("it holds neither one table's file nor two linked ones'")
    if link is not None and (not isinstance(link, dict) or not isinstance(link.get("key"), str)
                             or not isinstance(link.get("max_children"), int)):
        raise WorkError("its link is not a key and a most rows per person")
    if source == "upload" and any(not isinstance(f, dict)
                                  or f.get("stored") not in ("0.data", "1.data") for f in files):
        raise WorkError("a file it names is not one the workbench kept")
    if source == "path" and any(not isinstance(f, dict) or not isinstance(f.get("path"), str)
                                or not Path(f["path"]).is_absolute() for f in files):
        raise WorkError("a file it names is not a path on this machine")


def read_table() -> KeptTable | None:
    """The last table loaded (None where none is kept); WorkError in one line where it cannot be
    read."""
    data = _read_json(_kept_meta(), KEPT_FIELDS, "kept table")
    if data is None:
        return None
    _check_kept(data)
    files = [(str(f.get("name")), f["path"] if data["source"] == "path" else
              read_input(home.last_table_root() / f["stored"], "kept table's file", DATA_LIMIT,
                         WorkError))
             for f in data["files"]]
    return KeptTable(data["source"], data["name"], files, data.get("markers", []),
                     data.get("link"), _time(data.get("loaded"), "loaded"))


def forget_table() -> None:
    """Remove the kept table (an upload's files with it)."""
    shutil.rmtree(home.last_table_root(), ignore_errors=True)
