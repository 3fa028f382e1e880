"""Writing files safely: a reader sees the old content or the new one, never half of either."""
from __future__ import annotations

import errno
import os
from pathlib import Path


def write_atomic(path: Path, text: str, *, make_parent: bool = True, private: bool = False) -> None:
    """Write a file so that a reader sees the old or the new content, never half of one.

    make_parent: create missing folders (False: a missing folder is an error, FileNotFoundError; a run's
    files use this so that a deleted run folder is never re-created). private: the file is readable by its
    owner only (it holds statistics of a private table)."""
    path = Path(path)
    if path.is_dir():
        raise IsADirectoryError(errno.EISDIR, "is a folder, not a file", str(path))
    if make_parent:
        path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600 if private else 0o666)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def open_private(path: Path, mode: str = "wb"):
    """A new file (replacing any), readable by its owner only, opened for writing."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    return os.fdopen(fd, mode, **({} if "b" in mode else {"encoding": "utf-8", "newline": ""}))
