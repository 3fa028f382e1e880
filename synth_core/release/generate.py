"""One request for synthetic rows from a trained model, as the generate page asks it and a process
of its own draws it.

`generate` picks the path (fairness control, fixed values, or unconditional) and returns the table
with what a privacy report says about how it was drawn. The page does not draw: `SamplingJob.start`
starts a draw process (runs.draws; the worker calls `run_draw`), which writes its progress, its
table and how it ended into the run folder, so draws run side by side, a reload finds them
(`SamplingJob.live`, `SamplingJob.latest`) and a cancel stops one at once. `draw_plan` says before
a draw what it will cost: the rows the model is expected to draw and, with fairness control, the
most it may draw before it stops and says that the gap was not reached.
"""
from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pandas as pd

from ..format import duration
from ..models.calibration import summary as calibration_summary
from ..models.options import check_sample_rows
from ..runs import LIVE_STATES, RunDir
from ..runs.draws import (DrawError, DrawLimitReached, DrawMeter, Stop, cancel_draw, draw_progress,
                          draw_state, live_draws, set_draw_status, start_draw)
from ..runs.rundir import DrawDir
from ..runs.timing import rows_drawn, stored_costs

# fair_sampling is imported where fairness is asked: it imports scikit-learn (1 s)
if TYPE_CHECKING:
    from .fair_sampling import FairGeneration

# fair_sample's pilot: an unconditioned sample whose group rates plan the conditioned rows
FAIR_PILOT_ROWS = 5000
# a fairness-controlled draw stops once the model has drawn this many times the rows its pilot and a
# plain draw of the rows asked would (calibrated pools' candidates and rows tried for rare
# conditions included): about 4 times was drawn for a gap of 0 on the demo table
FAIR_DRAW_FACTOR = 20


@dataclass
class Generated:
    table: pd.DataFrame
    info: dict                                 # how the rows were drawn, for the privacy report
    fairness: FairGeneration | None = None
    note: str | None = None                    # what the steward should know (a gap not reached)
    file: str | None = None                    # its name under the run's samples/, once written


def generate(model, rows: int, conditions: dict | None = None, fairness: dict | None = None,
             seed: int | None = None) -> Generated:
    """`rows` synthetic rows: with fairness control (`fairness`: sensitive, target, positive,
    target_gap), else with fixed values (`conditions`), else unconditioned. Fixed values are not
    combined with fairness."""
    if fairness:
        from .fair_sampling import fair_sample
        result = fair_sample(model, rows, seed=seed, pilot_rows=FAIR_PILOT_ROWS, **fairness)
        info = {"method": "fairness control", **fairness, **result.summary(), "seed": seed}
        notes = [n for n in (_gap_note(result, fairness.get("target_gap")), _share_note(result))
                 if n]
        return Generated(result.table, info, result, " ".join(notes) or None)
    table = model.sample(rows, conditions=conditions or None, seed=seed)
    calibrated = calibration_summary(model.last_sample_info.get("calibration"), len(table))
    info = {"conditions": conditions or {}, "seed": seed,
            **{k: v for k, v in model.last_sample_info.items() if k in ("method", "acceptance_rate")},
            **({"calibration": calibrated} if calibrated else {})}
    return Generated(table, info)


def _gap_note(result: FairGeneration, target_gap: float | None) -> str | None:
    """Said when the rows miss the gap asked for (the plan, made on a pilot, is not the draw)."""
    if target_gap is None or result.gap_after <= target_gap + 1e-9:
        return None
    return (f"The demographic-parity gap of these rows is {result.gap_after:.3f}, above the "
            f"{target_gap:g} you accept: the plan, made on a pilot sample, conditioned "
            f"{result.share:.0%} of the rows, and the model's rows did not reach it. Generate "
            "again, accept a larger gap, or ask for more rows.")


SHARE_SHIFT = 0.02  # a group's share of the rows moved by more than this is said


def _share_note(result: FairGeneration) -> str | None:
    """Said when fairness control moved the groups' shares of the rows (it adds rows group by
    group): each group that moved by more than SHARE_SHIFT, before and after."""
    before = sum(d["rows_before"] for d in result.groups.values())
    after = sum(d["rows_after"] for d in result.groups.values())
    if not before or not after:
        return None
    moved = [(g, d["rows_before"] / before, d["rows_after"] / after)
             for g, d in result.groups.items()
             if abs(d["rows_after"] / after - d["rows_before"] / before) > SHARE_SHIFT]
    if not moved:
        return None
    return ("Fairness control changed the groups' shares of the rows (it adds rows group by group): "
            + ", ".join(f"{g} {a:.1%} → {b:.1%}" for g, a, b in moved) + ".")


@dataclass
class DrawPlan:
    """What a draw will cost, said before it starts: the rows asked, the rows the model is expected
    to draw (a calibrated sample draws a pool), the most it may draw (fairness control; None: no
    bound but the family's own), and a row's seconds here (None: no run of the model was timed)."""
    rows: int
    expected_rows: int
    limit: int | None = None
    row_s: float | None = None

    @property
    def expected_s(self) -> float | None:
        return None if self.row_s is None else self.row_s * self.expected_rows

    def describe(self) -> str:
        """The bound a fairness-controlled draw keeps, in the steward's words."""
        took = f" (about {duration(self.row_s * self.limit)} at most)" if self.row_s else ""
        return (f"Fairness control first draws a pilot sample to plan which rows to condition, "
                f"then the {self.rows:,} rows. It stops once the model has drawn "
                f"{self.limit:,} rows in all, tried and candidate rows included{took}, and then "
                "says that the gap was not reached.")


def draw_plan(model, rows: int, fairness: bool = False) -> DrawPlan:
    """The plan of a draw of `rows` rows (persons) from `model`, with fairness control or not."""
    calibrated = model.calibration is not None
    expected = rows_drawn(rows, calibrated, model.min_pool)
    costs = stored_costs(model.family, model.preset, model.schema, model.device,
                         dataclasses.asdict(model.config))
    row_s = costs.draw_row_s if costs is not None else None
    if not fairness:
        return DrawPlan(rows, expected, None, row_s)
    expected += rows_drawn(max(FAIR_PILOT_ROWS, rows), calibrated, model.min_pool)
    return DrawPlan(rows, expected, FAIR_DRAW_FACTOR * expected, row_s)


def run_draw(draw: DrawDir, model, stop: Stop) -> None:
    """The draw process's work (synth_core.worker --draw): the draw's request drawn from `model`,
    metered (its progress, a cancel, its bound), then its table written under the run's samples/
    and what was drawn in its result. A cancel (DrawStopped) and the model's own errors are the
    worker's to record."""
    request = draw.read("request")
    rows, fairness = int(request["rows"]), request.get("fairness") or None
    meter = DrawMeter(draw, request.get("limit"), lambda: stop.asked)
    meter.install(model)
    set_draw_status(draw, "running", f"drawing {rows:,} rows")
    try:
        with stop.drawing():
            generated = generate(model, rows, request.get("conditions") or None, fairness,
                                 request.get("seed"))
    except DrawLimitReached as e:
        meter.write()
        set_draw_status(draw, "failed", _limit_message(e, rows, fairness))
        return
    meter.write()  # all it drew
    path = draw.run.write_next_sample(generated.table)
    fair = generated.fairness
    kept = None if fair is None else {f.name: getattr(fair, f.name)  # its table: the sample itself
                                      for f in dataclasses.fields(fair) if f.name != "table"}
    draw.write("result", {"file": path.name, "info": generated.info, "note": generated.note,
                          "fairness": kept})
    set_draw_status(draw, "completed", f"{len(generated.table):,} rows drawn")


def _limit_message(e: DrawLimitReached, rows: int, fairness: dict | None) -> str:
    if not fairness:
        return f"Stopped: {e} before the {rows:,} rows were complete."
    return (f"Stopped: fairness control reached its bound ({e}) before the {rows:,} rows with a "
            f"gap of at most {fairness.get('target_gap'):g} were complete, so that gap may be "
            "beyond this model's reach. Accept a larger gap, ask for fewer rows, or generate "
            "without fairness control.")


def read_generated(draw: DrawDir) -> Generated:
    """A completed draw's rows and what was drawn, read back from the run folder; DrawError for one
    that ended otherwise (its state and message)."""
    status = draw.read("status")
    if status.get("state") != "completed":
        raise DrawError(status.get("state"), status.get("message") or status.get("state"))
    result = draw.read("result")
    table = draw.run.read_sample(result["file"], draw.run.schema())
    if table is None:
        raise DrawError("failed", f"the table this draw wrote, {result['file']}, is no longer in "
                                  "the run folder")
    fair = result.get("fairness")
    if fair is not None:
        from .fair_sampling import FairGeneration
    return Generated(table, result["info"], None if fair is None else FairGeneration(table, **fair),
                     result.get("note"), result["file"])


class DrawFuture:
    """A draw's process seen as a Future: done() once it has ended, result() its rows."""

    def __init__(self, draw: DrawDir):
        self.draw = draw

    def done(self) -> bool:
        return draw_state(self.draw).get("state") not in LIVE_STATES

    def result(self) -> Generated:
        return read_generated(self.draw)


@dataclass
class SamplingJob:
    """A draw as a page holds it: whether it is done, how far it got and how long it has left, and
    its rows."""
    key: str                                   # what it draws for (the run's path)
    rows: int
    future: Any                                # done() and result(): a DrawFuture
    started: float = field(default_factory=time.time)
    expected_s: float | None = None
    draw: DrawDir | None = None

    @classmethod
    def start(cls, run: RunDir, model, rows: int, conditions: dict | None = None,
              fairness: dict | None = None, seed: int | None = None) -> "SamplingJob":
        """Start a draw in a process of its own, which never waits for another; a number of rows no
        request may ask for is refused (ValueError) before anything starts."""
        check_sample_rows(rows)
        plan = draw_plan(model, rows, bool(fairness))
        return cls.of(start_draw(run, {"rows": rows, "conditions": conditions or {},
                                       "fairness": fairness or None, "seed": seed,
                                       **dataclasses.asdict(plan), "expected_s": plan.expected_s}))

    @classmethod
    def of(cls, draw: DrawDir) -> "SamplingJob":
        request = draw.read("request")
        return cls(key=str(draw.run.path), rows=int(request["rows"]), future=DrawFuture(draw),
                   started=float(request.get("created", time.time())),
                   expected_s=request.get("expected_s"), draw=draw)

    @classmethod
    def live(cls, run: RunDir) -> list["SamplingJob"]:
        """The run's draws still to end, whichever session started them, newest first."""
        return [cls.of(draw) for draw in live_draws(run)]

    @classmethod
    def latest(cls, run: RunDir) -> "SamplingJob | None":
        """The run's newest draw that has ended (a page opened anew shows it); None if none has."""
        ended = (d for d in DrawDir.all(run) if draw_state(d).get("state") not in LIVE_STATES)
        newest = next(ended, None)
        return None if newest is None else cls.of(newest)

    @property
    def done(self) -> bool:
        return self.future.done()

    def elapsed(self) -> float:
        return time.time() - self.started

    def progress(self) -> dict:
        """runs.draws.draw_progress: rows drawn of those expected and of the bound, seconds."""
        return draw_progress(self.draw)

    def left(self) -> float | None:
        """Seconds left (None when unknown or overdue: a calibrated sample may grow its pool up to
        the family's max_pool_growth times, which no estimate before the draw knows)."""
        if self.draw is not None:
            return self.progress()["remaining_s"]
        if self.expected_s is None or self.overdue:
            return None
        return self.expected_s - self.elapsed()

    @property
    def overdue(self) -> bool:
        if self.draw is not None:
            return self.progress()["overdue"]
        return self.expected_s is not None and self.elapsed() > self.expected_s

    def fraction(self) -> float:
        if self.done:
            return 1.0
        if self.draw is not None:
            return self.progress()["fraction"]
        return min(0.99, self.elapsed() / self.expected_s) if self.expected_s else 0.0

    def cancel(self) -> None:
        cancel_draw(self.draw)

    def result(self) -> Generated:
        """The generated rows; DrawError (cancelled or failed, with its message) if it drew none."""
        return self.future.result()
