"""The number automaton of constrained decoding: which characters may follow a number's prefix so
that the number can still end inside the column's public bounds, written at the schema's precision
(exactly `decimals` digits after the point; no leading zeros; a minus sign only first).

A state is what is left to write, not the prefix itself: after the whole part W, for each count k of
whole digits still to come, the offsets (in units of 10^-decimals) that a value W·10^k + … may still
add inside the bounds, relative to the least such value. Two prefixes with the same futures are one
state (most prefixes of a wide column's values are "any k more digits"), so the states and their
masks stay few however many distinct values are drawn, and a step is a few integer operations
instead of re-parsing the prefix.

States (hashable tuples): ("sign", negative, lo, hi) before the first digit, magnitudes in [lo, hi]
units; ("int", R) with R[k] = (lo, hi) offsets or None; ("frac", m, (lo, hi)) after m digits of the
fraction. None is a dead state (no completion); the start may have no positive values left and still
allow "-" (`alive`)."""
from __future__ import annotations

import math


def _cut(iv, lo: int, hi: int):
    """iv ∩ [lo, hi], shifted so that lo is 0; None if empty."""
    if iv is None:
        return None
    a, b = max(iv[0], lo), min(iv[1], hi)
    return None if a > b else (a - lo, b - lo)


def _int_state(R: list):
    while R and R[-1] is None:
        R.pop()
    return ("int", tuple(R)) if R else None


class NumberAutomaton:
    """One numeric column's automaton: bounds [lower, upper] written with `decimals` digits after
    the point."""

    def __init__(self, lower: float, upper: float, decimals: int):
        self.d = int(decimals)
        self.scale = s = 10 ** self.d
        lo_u, hi_u = math.ceil(float(lower) * s - 1e-9), math.floor(float(upper) * s + 1e-9)
        pos, neg = (max(0, lo_u), hi_u), (max(1, -hi_u), -lo_u)  # magnitudes of each sign, in units
        # may be empty of positive values, with negative ones left
        self.start = ("sign", False, *pos)
        self._negative = ("sign", True, *neg) if neg[0] <= neg[1] else None

    def step(self, state, ch: str):
        """The state after character `ch`, or None when no number inside the bounds starts so."""
        s = self.scale
        if ch == "-":
            return self._negative if state is not None and state[0] == "sign" and not state[1] else None
        if state is None:
            return None
        kind = state[0]
        if ch == ".":
            return ("frac", 0, state[1][0]) if kind == "int" and self.d > 0 and state[1][0] is not None else None
        if not ch.isdigit() or len(ch) != 1:
            return None
        c = int(ch)
        if kind == "sign":
            iv = (state[2], state[3])
            if c == 0:  # "0" takes no more whole digits
                return _int_state([_cut(iv, 0, s - 1)])
            R, k = [], 0
            while c * 10 ** k * s <= iv[1]:
                R.append(_cut(iv, c * 10 ** k * s, (c + 1) * 10 ** k * s - 1))
                k += 1
            return _int_state(R)
        if kind == "int":
            R = state[1]
            return _int_state([_cut(R[k + 1], c * 10 ** k * s, (c + 1) * 10 ** k * s - 1)
                               for k in range(len(R) - 1)])
        m, iv = state[1], state[2]
        if m >= self.d:
            return None
        span = 10 ** (self.d - m - 1)
        iv = _cut(iv, c * span, (c + 1) * span - 1)
        return None if iv is None else ("frac", m + 1, iv)

    def complete(self, state) -> bool:
        """Whether the characters so far are a whole number of this column."""
        if state is None:
            return False
        if state[0] == "int":
            return self.d == 0 and state[1][0] is not None
        return state[0] == "frac" and state[1] == self.d

    def alive(self, state) -> bool:
        """Whether some number inside the bounds starts with what led to `state`."""
        if state is None:
            return False
        return state[0] != "sign" or state[2] <= state[3] or (not state[1] and self._negative is not None)

    def accepts(self, text: str) -> tuple[bool, bool]:
        """(a completion of `text` is a valid number, `text` itself is one)."""
        state = self.start
        for ch in text:
            state = self.step(state, ch)
        return self.alive(state), self.complete(state)
