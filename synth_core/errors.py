"""Errors that cross layers and that the entry points answer in one line, defined where importing
them costs nothing (no torch): the CLI catches them before it has imported the modules that raise
them."""
from __future__ import annotations


class SamplingError(RuntimeError):
    """Sampling could not produce what was asked; the message says why and what to change."""


class ProcessLost(RuntimeError):
    """Another process of a distributed run stopped or failed; this one cannot go on alone."""
