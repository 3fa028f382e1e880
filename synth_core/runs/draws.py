"""Drawing synthetic rows in a process of its own, for the app: one process per draw, so draws run
side by side (several browser sessions, several runs) and none waits behind another. What a draw
was asked, how far it got, what it made and how it ended live in the run folder (rundir.DrawDir),
so a reload finds it.

The process is `python -m synth_core.worker --draw RUN DRAW`; it draws through release.generate,
metered here (`DrawMeter`: progress, cancel, a bound on the rows drawn). A draw runs in a session
of its own: it outlives the page that started it (a reload finds it), and a cancel (the page's
button, or SIGTERM) stops it at once, then nothing of it is written but its state. Unlike a
training run, whose budget is spent, a draw costs nothing to start again: when the app that
started it stops (Ctrl-C, SIGTERM), the draws it started and that still run are cancelled.
"""
from __future__ import annotations

import atexit
import os
import signal
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pandas as pd

from ..shape import shape_of
from . import process
from .rundir import DRAW_FILES, LIVE_STATES, DrawDir, RunDir, RunError

WRITE_S = 0.5  # a draw's progress is written at most this often
# a model's draw of more rows than this is made in chunks of this many (single tables: rows are
# independent), so that its progress moves and a cancel is seen between them: a million rows with
# a calibration pool were one draw of three million, its progress at 0 for about a minute
CHUNK_ROWS = 20_000


class DrawError(RuntimeError):
    """A draw that ended without rows: `state` cancelled or failed, the message its status says."""

    def __init__(self, state: str, message: str):
        super().__init__(message)
        self.state = state


class DrawStopped(RuntimeError):
    """The steward cancelled the draw (the page's button, or SIGTERM)."""


class DrawLimitReached(RuntimeError):
    """The model drew the most rows this draw may draw before the rows asked were complete."""

    def __init__(self, drawn: int, limit: int):
        super().__init__(f"the model drew {drawn:,} rows, the most this draw may draw ({limit:,})")
        self.drawn, self.limit = drawn, limit


def set_draw_status(draw: DrawDir, state: str, message: str | None = None) -> None:
    """The draw's state (rundir.STATES), what to tell the steward, and when it was written."""
    draw.write("status", {"state": state, "message": message, "time": time.time()})


def start_draw(run: RunDir, request: dict, python: str | None = None) -> DrawDir:
    """A new draw of `run` holding `request` (release.generate says what it holds), its process
    started in a session of its own; if that process cannot start, the draw is marked failed and
    the error raised."""
    draw = DrawDir.create(run)
    draw.write("request", {**request, "created": time.time()})
    set_draw_status(draw, "created", "waiting for the drawing process to start")
    command = [python or sys.executable, "-m", "synth_core.worker", "--draw", str(run.path),
               draw.id]
    try:
        fd = os.open(draw.path / DRAW_FILES["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        with os.fdopen(fd, "ab") as log:
            proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, start_new_session=True,
                                    cwd=str(Path(__file__).resolve().parents[2]))
    except OSError as e:
        set_draw_status(draw, "failed", f"the drawing process could not start: {e}")
        raise
    threading.Thread(target=proc.wait, daemon=True).start()  # reaped when it ends: no zombie
    draw.write("worker", process.record(proc.pid))
    _STARTED.append(draw)
    return draw


_STARTED: list[DrawDir] = []  # the draws this process started: cancelled when it exits


@atexit.register
def _cancel_started() -> None:
    """Cancel the draws this process started that still run (the app stopped: Streamlit turns
    Ctrl-C and SIGTERM into a normal exit, which runs this)."""
    for draw in _STARTED:
        try:
            if draw.read("status", {}).get("state") in LIVE_STATES:
                cancel_draw(draw)
        except (OSError, RunError, ValueError):
            continue


def _alive(draw: DrawDir) -> bool | None:
    """Whether the draw's process still runs; None before its record is written."""
    record = draw.read("worker", {})
    return process.alive(record, legacy_command=b"synth_core.worker") if record else None


def draw_state(draw: DrawDir) -> dict:
    """The draw's status, with a draw whose process died unnoticed (killed, the machine restarted)
    marked as ended: cancelled if the steward had asked, else failed."""
    status = draw.read("status")
    if status.get("state") in LIVE_STATES and _alive(draw) is False:
        time.sleep(0.2)  # the process may have written its last status just now
        status = draw.read("status")
        if status.get("state") in LIVE_STATES:
            if draw.cancel_requested():
                set_draw_status(draw, "cancelled", "Cancelled: no rows were written.")
            else:
                set_draw_status(draw, "failed", "the drawing process stopped unexpectedly (killed, "
                                                "or the machine restarted); no rows were written")
            status = draw.read("status")
    return status


def live_draws(run: RunDir) -> list[DrawDir]:
    """The run's draws still to end (any session's), newest first."""
    out = []
    for draw in DrawDir.all(run):
        try:
            if draw_state(draw).get("state") in LIVE_STATES:
                out.append(draw)
        except RunError:
            continue
    return out


def cancel_draw(draw: DrawDir) -> None:
    """Stop the draw now: its flag for a process still starting, SIGTERM for one that draws."""
    draw.request_cancel()
    if _alive(draw):
        try:
            os.kill(int(draw.read("worker")["pid"]), signal.SIGTERM)
        except (ProcessLookupError, PermissionError):
            pass


def draw_progress(draw: DrawDir) -> dict:
    """How far the draw got: the rows asked; the rows the model has drawn (tried ones included) of
    those it is expected to draw and of the most it may (`limit`; None: no bound of its own);
    seconds so far and left (None: unknown, or `overdue`: past its estimate, as a calibrated pool
    that grows or rare conditions make it; `at_most_s` until the limit)."""
    request, done = draw.read("request", {}), draw.read("progress", {})
    now = time.time()
    drawn, expected = int(done.get("drawn", 0)), request.get("expected_rows")
    limit = request.get("limit")
    # a row's seconds: as this draw has measured them, else as past runs of the model did
    row_s = done["drawing_s"] / drawn if drawn and done.get("drawing_s") else request.get("row_s")
    remaining = at_most = None
    if row_s is not None and expected:
        remaining = row_s * (expected - drawn) - (now - done["time"] if "time" in done else 0.0)
    if row_s is not None and limit:
        at_most = max(0.0, row_s * (limit - drawn))
    overdue = remaining is not None and remaining < 0
    return {"rows": request.get("rows"), "drawn": drawn, "expected_rows": expected, "limit": limit,
            "elapsed_s": now - request.get("created", now), "expected_s": request.get("expected_s"),
            "remaining_s": None if overdue else remaining, "at_most_s": at_most, "overdue": overdue,
            "fraction": min(0.99, drawn / expected) if expected else 0.0,
            "cancelling": draw.cancel_requested()}


@dataclass
class Stop:
    """A draw process's stop request (SIGTERM): raised at once while the model draws (`drawing`),
    else noted and seen before the model's next draw; a table once drawn is written whole."""
    asked: bool = False
    raising: bool = False

    def on_signal(self, signum, frame) -> None:
        self.asked = True
        if self.raising:
            self.raising = False
            raise DrawStopped("asked to stop")

    @contextmanager
    def drawing(self):
        if self.asked:
            raise DrawStopped("asked to stop")
        self.raising = True
        try:
            yield
        finally:
            self.raising = False


class DrawMeter:
    """Counts the rows a model draws, tried ones included (its `rows_tried` where the family says),
    writes them as the draw's progress at most every WRITE_S, and before each of the model's draws
    stops the draw when it was cancelled (DrawStopped) or has drawn `limit` rows
    (DrawLimitReached)."""

    def __init__(self, draw: DrawDir, limit: int | None = None,
                 stopped: Callable[[], bool] = lambda: False):
        self.draw, self.limit, self.stopped = draw, limit, stopped
        self.drawn, self.start, self.written = 0, time.time(), 0.0
        self.write()

    def install(self, model):
        """Meter `model.draw`, which every sample, pool and condition goes through (in chunks of
        CHUNK_ROWS where the table's shape allows); the model."""
        real = model.draw

        def one(n, conditions, seed, **options):
            self.check()
            before, out = model.last_sample_info, None
            try:
                out = real(n, conditions, seed, **options)
                return out
            finally:
                info = model.last_sample_info
                fresh = info is not before and isinstance(info, dict)  # this draw's own
                tried = info.get("rows_tried") if fresh else None
                self.count(tried if tried is not None else len(out) if out is not None else n)

        def metered(n, conditions=None, seed=None, **options):
            if n <= CHUNK_ROWS or not shape_of(model.schema).chunks:
                return one(n, conditions, seed, **options)
            sizes = [CHUNK_ROWS] * (n // CHUNK_ROWS) + ([n % CHUNK_ROWS] if n % CHUNK_ROWS else [])
            return pd.concat([one(size, conditions, None if seed is None else seed + 7919 * i,
                                  **options) for i, size in enumerate(sizes)], ignore_index=True)
        model.draw = metered
        return model

    def check(self) -> None:
        if self.stopped() or self.draw.cancel_requested():
            raise DrawStopped("the draw was cancelled")
        if self.limit is not None and self.drawn >= self.limit:
            raise DrawLimitReached(self.drawn, self.limit)

    def count(self, rows: int) -> None:
        self.drawn += int(rows)
        if time.time() - self.written >= WRITE_S:
            self.write()

    def write(self) -> None:
        now = self.written = time.time()
        self.draw.write("progress", {"drawn": self.drawn, "drawing_s": now - self.start,
                                     "time": now})
