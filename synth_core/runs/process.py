"""Which process trains a run, and whether it still does: a record of its id and start time, so that
a run whose process was killed (SIGKILL, a full disk that stopped it, a restarted machine) is told
from one that trains, whatever program started it (the app's worker, the CLI, torchrun, a script
calling the API), and a process id reused by another program is not taken for it."""
from __future__ import annotations

import os
import time
from pathlib import Path


def _stat_fields(pid: int) -> list[str] | None:
    """/proc/PID/stat after the command name (field 3 onwards), None without /proc or the
    process."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def record(pid: int) -> dict:
    """What a run keeps of the process that trains it: its id, when it was recorded, and its start
    time in clock ticks since boot (field 22 of /proc/PID/stat), which another process given the
    same id cannot share."""
    fields = _stat_fields(pid)
    return {"pid": int(pid), "started": time.time(), **({"start_ticks": int(fields[19])} if fields else {})}


def alive(entry: dict, legacy_command: bytes | None = None) -> bool:
    """Whether the recorded process still runs (a zombie has finished). A record without a start
    time (written before records had one) is the process only if its command line holds
    `legacy_command`."""
    try:
        pid = int(entry["pid"])
        os.kill(pid, 0)
    except (KeyError, TypeError, ValueError, ProcessLookupError):
        return False
    except PermissionError:
        return True
    fields = _stat_fields(pid)
    if fields is None:
        return not Path("/proc").is_dir()  # no /proc: trust kill(0)
    if fields[0] == "Z":
        return False
    if "start_ticks" in entry:
        return int(fields[19]) == int(entry["start_ticks"])
    try:
        return legacy_command is None or legacy_command in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
