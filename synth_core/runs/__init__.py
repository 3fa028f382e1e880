"""Runs on disk: the run folder and its whole layout (rundir), and training in a background process
(jobs)."""
from .rundir import LIVE_STATES, STATES, RunDir, RunError, RunGone

__all__ = ["LIVE_STATES", "STATES", "RunDir", "RunError", "RunGone"]
