"""Writing files safely: a reader sees the old content or the new one, never half of either; and a
target that is not a regular file (a device such as /dev/null or /dev/full, a FIFO, a socket, a
folder) is never replaced.

Every file the workbench writes goes through `atomic_output`: a temporary file created owner-only in
the target's own folder (so the rename cannot cross file systems), flushed to disk, renamed over the
target, and removed if anything fails (a full disk, Ctrl-C).

Every file a steward names for the workbench to read (a table, a schema) goes through
`read_input`: a regular file only (a device such as /dev/zero, a FIFO or a folder is refused
before it is opened: reading it would never end, or block) of at most a stated size
(FILE_LIMIT, DATA_LIMIT, SCHEMA_LIMIT), so that a wrong path costs a line, not the machine's
memory.
"""
from __future__ import annotations

import errno
import fcntl
import os
import secrets
import stat
from contextlib import contextmanager
from pathlib import Path


class OutputError(ValueError):
    """A path the workbench was asked to write that it must not write: the message says why, in one
    line."""


MB = 1024 * 1024
# a table's file: the app's upload limit (.streamlit/config.toml, maxUploadSize)
DATA_LIMIT = 200 * MB
# a table named by its path (the CLI, the app's "Open a file on this machine"): what the browser
# cannot upload; pandas holds about five times a CSV (a 108 MB file peaked at 563 MB), so 2 GB of
# CSV is about 10 GB of memory (benchmarks/RESULTS.md, "Scale curve")
FILE_LIMIT = 2048 * MB
# a schema's JSON: one of many thousand categories is a few MB
SCHEMA_LIMIT = 10 * MB


def read_input(path: str | os.PathLike, what: str, limit: int,
               error: type[Exception] = ValueError) -> bytes:
    """The bytes of the file a steward named as the `what` ("data file", "schema file"), or
    `error` in one line: no such file, a folder, anything that is not a regular file (a device,
    a FIFO, a socket; a link is followed), or more than `limit` bytes. Reads at most `limit` + 1
    bytes, whatever the file claims."""
    if path is None or not str(path).strip():
        raise error(f"give the {what} to read (the path is empty)")
    shown = f"the {what} {path}"
    try:
        _check_input(os.stat(path).st_mode, os.stat(path).st_size, shown, limit, error)
        # O_NONBLOCK: a FIFO swapped in after the check opens without waiting for a writer
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        raise error(f"cannot read {shown}: no such file") from None
    except OSError as e:
        raise error(f"cannot read {shown}: {e.strerror or e}") from None
    with os.fdopen(fd, "rb") as f:
        _check_input(os.fstat(fd).st_mode, os.fstat(fd).st_size, shown, limit, error)
        try:
            data = f.read(limit + 1)
        except OSError as e:
            raise error(f"cannot read {shown}: {e.strerror or e}") from None
    if len(data) > limit:
        raise error(f"cannot read {shown}: it holds more than the {_size(limit)} the workbench "
                    "reads")
    return data


def input_file(path: str | os.PathLike, what: str, error: type[Exception] = ValueError) -> Path:
    """The path of a file a steward named that is read a part at a time, never whole (so of any
    size: schema/batches.py), or `error` in one line as `read_input` says it: no such file, a
    folder, anything that is not a regular file."""
    if path is None or not str(path).strip():
        raise error(f"give the {what} to read (the path is empty)")
    shown = f"the {what} {path}"
    try:
        _check_input(os.stat(path).st_mode, 0, shown, 0, error)
    except FileNotFoundError:
        raise error(f"cannot read {shown}: no such file") from None
    except OSError as e:
        raise error(f"cannot read {shown}: {e.strerror or e}") from None
    return Path(path)


def _check_input(mode: int, size: int, shown: str, limit: int, error: type[Exception]) -> None:
    if stat.S_ISDIR(mode):
        raise error(f"cannot read {shown}: it is a folder, not a file")
    if not stat.S_ISREG(mode):
        raise error(f"cannot read {shown}: it is not a regular file (a device, a pipe or a "
                    "socket), which may never end; give an ordinary file")
    if size > limit:
        raise error(f"cannot read {shown}: it holds {_size(size)}, more than the {_size(limit)} "
                    "the workbench reads")


def _size(n: int) -> str:
    return f"{n / MB:,.0f} MB" if n >= MB else f"{n:,} bytes"


def check_output_file(path: str | os.PathLike, what: str = "file") -> Path:
    """`path` as a file to (re)write: refused when empty, a folder, or anything that exists and is
    not a regular file (a device, a FIFO, a socket; a link is followed). Returns it as a Path."""
    if path is None or not str(path).strip():
        raise OutputError(f"give the name of the {what} to write (the path is empty)")
    path = Path(path)
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return path
    except OSError as e:
        raise OutputError(f"{path} cannot be written: {e.strerror}") from None
    if stat.S_ISDIR(mode):
        raise OutputError(f"{path} is a folder; give the name of the {what} to write")
    if not stat.S_ISREG(mode):
        raise OutputError(f"{path} is not a regular file (a device, a pipe or a socket): the workbench writes "
                          f"only ordinary files; give the name of the {what} to write")
    return path


def check_output_folder(path: str | os.PathLike, what: str = "folder") -> Path:
    """`path` as a folder to write into: refused when empty, or when it exists and is not a
    folder."""
    if path is None or not str(path).strip():
        raise OutputError(f"give the {what} to write (the path is empty)")
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise OutputError(f"{path} is a file, not a folder; give a new or empty folder for the {what}")
    return path


def _umask() -> int:
    """The process's umask, read without changing it (os.umask would, for every thread, for a
    moment)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    return 0o022


@contextmanager
def atomic_output(path: str | os.PathLike, mode: str = "w", *, make_parent: bool = True, private: bool = False):
    """A file object to write `path` through; the target is replaced only when the block ends
    without error.

    make_parent: create missing folders (False: a missing folder is an error, FileNotFoundError; a
    run's files use this so that a deleted run folder is never re-created). private: the file stays
    readable by its owner only (it holds statistics of a private table); otherwise it gets the usual
    permissions (umask)."""
    path = check_output_file(path)
    if make_parent:
        path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, mode, **({} if "b" in mode else {"encoding": "utf-8", "newline": ""})) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
            if not private:
                os.fchmod(f.fileno(), 0o666 & ~_umask())
        check_output_file(path)  # still not a device: nothing swapped one in meanwhile
        os.replace(tmp, path)
    finally:
        try:
            tmp.unlink()
        except FileNotFoundError:
            pass


def write_atomic(path: str | os.PathLike, text: str, *, make_parent: bool = True, private: bool = False) -> None:
    """Write a text file so that a reader sees the old or the new content, never half of one
    (atomic_output)."""
    if Path(path).is_dir():
        raise IsADirectoryError(errno.EISDIR, "is a folder, not a file", str(path))
    with atomic_output(path, make_parent=make_parent, private=private) as f:
        f.write(text)


@contextmanager
def locked(path: Path):
    """Hold an exclusive lock on the file `path` (created owner-only) across processes until the
    block ends."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    with os.fdopen(fd, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
