"""Constrained decoding (SynLM, Sablayrolles et al. 2023): at each step, the tokens that keep a row
inside the row grammar: a trie over the remaining column names and the public categories, and a
number automaton (numbers.NumberAutomaton) that only lets through digits that can still end inside
the public bounds at the declared precision. Automaton numbers the states as rows reach them, for
the sampler and the masked loss."""
from __future__ import annotations

import torch

from ...encoding.text import TextCodec
from .numbers import NumberAutomaton

# a numeric value's segment once its first character is read: (NUMBER, number automaton state)
NUMBER = "#"


class Grammar:
    """Which tokens may come next in a row, from a row's decoding state (Automaton numbers the
    states).

    State: (remaining columns, phase, column, segment). Phases: "name" (a remaining column's ", name
    is "; "name is " for the first column), "value" of a column, "end" (only EOS). The segment is
    the ids read in the phase, except a number's: (NUMBER, its automaton's state), so that prefixes
    with the same futures are one state. In the compact format every column's segment is the
    separator and the first remaining column is the one it names. States and steps speak token ids;
    masks are over the model's outputs (`outputs`: the token id of each output; None: one output per
    token id)."""

    def __init__(self, codec: TextCodec, device, outputs: list[int] | None = None):
        self.c = codec
        self.device = device
        self.size = codec.vocab_size if outputs is None else len(outputs)
        self.index = None if outputs is None else {t: i for i, t in enumerate(outputs)}
        self.value_cache: dict = {}
        self._value_next: dict = {}  # (column, segment, token) -> segment (None: the value ends)
        self._by_ids: dict[tuple, torch.Tensor] = {}  # one mask object per set of allowed tokens
        self._unions: dict = {}
        self._first_names = [tuple(ids) for ids in codec.name_ids]
        self._next_names = [tuple(ids) for ids in codec.next_ids]
        self.numbers = {j: NumberAutomaton(spec.lower, spec.upper, codec.decimals[j])
                        for j, spec in enumerate(codec.schema.columns) if spec.is_numeric}

    def _mask(self, ids) -> torch.Tensor:
        """The mask allowing token ids `ids`: the same object for the same set (Automaton relies on
        it)."""
        key = tuple(sorted(set(ids)))
        mask = self._by_ids.get(key)
        if mask is None:
            mask = self._by_ids[key] = torch.zeros(self.size, dtype=torch.bool)
            mask[[t if self.index is None else self.index[t] for t in key]] = True
        return mask

    def value_tokens(self, j: int, seg: tuple) -> tuple[torch.Tensor, bool]:
        """(tokens that continue column j's value after `seg`, whether `seg` is a complete value);
        cached by (j, seg) alone, so that states differing only in the columns left share the
        work."""
        key = (j, seg)
        if key in self.value_cache:
            return self.value_cache[key]
        c = self.c
        ok: set[int] = set()
        end = False
        if seg[:1] == (NUMBER,) or (seg == () and j in self.numbers):
            numbers = self.numbers[j]
            state = seg[1] if seg else numbers.start
            end = numbers.complete(state)
            ok = {tid for ch, tid in c.char_id.items() if numbers.alive(numbers.step(state, ch))}
        for seq in self._alternatives(j):
            if tuple(seq[:len(seg)]) == seg:
                if len(seq) > len(seg):
                    ok.add(seq[len(seg)])
                else:
                    end = True
        self.value_cache[key] = (self._mask(ok), end)
        return self.value_cache[key]

    def allowed(self, state: tuple) -> torch.Tensor:
        """The mask of what may come next in `state` (Automaton keeps each state's)."""
        remaining, phase, j, seg = state
        c = self.c
        if phase == "end":
            mask = self._mask([c.eos])
        elif phase == "name":
            names, n = self._names(remaining), len(seg)
            mask = self._mask([names[r][n] for r in remaining if len(names[r]) > n and names[r][:n] == seg])
        else:
            mask, end = self.value_tokens(j, seg)
            # or what follows the value: the next column's first token, or EOS after the last
            if end:
                follow = self._mask([c.next_ids[r][0] for r in remaining if r != j] or [c.eos])
                key = (id(mask), id(follow))
                if key not in self._unions:
                    self._unions[key] = mask | follow
                mask = self._unions[key]
        return mask

    def step(self, state: tuple, token: int) -> tuple:
        remaining, phase, j, seg = state
        if phase == "end":
            return state
        if phase == "name":
            return self._enter_name(remaining, seg + (token,))
        # value phase: does the token end the value (separator's first token or EOS)?
        nseg = self._value_step(j, seg, token)
        if nseg is None:
            rest = tuple(r for r in remaining if r != j)
            if not rest:
                return ((), "end", None, ())
            return self._enter_name(rest, (token,))
        return (remaining, "value", j, nseg)

    def _names(self, remaining: tuple) -> list[tuple]:
        """Each column's name segment: "name is " for the row's first column, ", name is " after."""
        return self._first_names if len(remaining) == len(self.c.names) else self._next_names

    def _enter_name(self, remaining: tuple, seg: tuple) -> tuple:
        names = self._names(remaining)
        for r in remaining:
            if names[r] == seg:
                return (remaining, "value", r, ())
        return (remaining, "name", None, seg)

    def _alternatives(self, j: int) -> list:
        """Column j's values as token sequences, when it has a fixed list: its categories, its
        missing value."""
        spec = self.c.schema.columns[j]
        alternatives = [] if spec.is_numeric else list(self.c.cat_ids[j].values())
        if spec.nullable:
            alternatives.append(self.c.missing_ids)
        return alternatives

    def _value_step(self, j: int, seg: tuple, token: int) -> tuple | None:
        """Column j's segment after `token`, or None when the token does not continue the value."""
        key = (j, seg, token)
        if key not in self._value_next:
            self._value_next[key] = self._next_segment(j, seg, token)
        return self._value_next[key]

    def _next_segment(self, j: int, seg: tuple, token: int) -> tuple | None:
        ch = self.c.id_char.get(token)
        if j in self.numbers and ch is not None and (seg == () or seg[0] == NUMBER):
            numbers = self.numbers[j]
            return (NUMBER, numbers.step(seg[1] if seg else numbers.start, ch))
        nseg = seg + (token,)
        if seg[:1] != (NUMBER,) and any(tuple(seq[:len(nseg)]) == nseg for seq in self._alternatives(j)):
            return nseg
        return None


class Automaton:
    """The grammar with its states numbered as they are reached, for constrained decoding and the
    masked loss alike: each state's mask is an index into one table (each distinct mask once; index
    0 allows every output: no mask), each transition is computed once, so a step of a row is a
    lookup and the table lives on the device. Indices only grow, so rows encoded or drawn at
    different times share one table.

    For the loss, a position's mask is a public function of the row's own tokens before it (the
    schema's grammar), so each row's loss still reads that row alone."""

    def __init__(self, grammar: Grammar):
        self.grammar = grammar
        self.masks: list[torch.Tensor] = [torch.ones(grammar.size, dtype=torch.bool)]
        # each mask's allowed outputs (None: all), for of_row
        self._allows: list[frozenset | None] = [None]
        self.mask_of: list[int] = []  # state id -> mask index
        # the grammar's mask objects (one per set of tokens) -> index
        self._by_object: dict[int, int] = {}
        self._ids: dict[tuple, int] = {}
        self._states: list[tuple] = []
        self._next: dict[tuple[int, int], int] = {}
        self._table: torch.Tensor | None = None
        self._filled = 0
        C = len(grammar.c.names)
        # compact: the first value
        self.start = self.state_id(grammar._enter_name(tuple(range(C)), ()))

    def __len__(self) -> int:
        return len(self._states)

    def state_id(self, state: tuple) -> int:
        sid = self._ids.get(state)
        if sid is None:
            sid = self._ids[state] = len(self._states)
            self._states.append(state)
            mask = self.grammar.allowed(state)
            k = self._by_object.get(id(mask))
            if k is None:
                k = self._by_object[id(mask)] = len(self.masks)
                self.masks.append(mask)  # kept: its id stays its own
                self._allows.append(frozenset(mask.nonzero().flatten().tolist()))
            self.mask_of.append(k)
        return sid

    def next(self, sid: int, token: int) -> int:
        nxt = self._next.get((sid, token))
        if nxt is None:
            nxt = self._next[(sid, token)] = self.state_id(self.grammar.step(self._states[sid], token))
        return nxt

    def of_row(self, ids: list[int]) -> list[int]:
        """Mask indices for a row's token ids (BOS first): entry t is the mask over what may stand
        at t; 0 at BOS, and where the grammar would not allow the row's token (never for a row
        inside the schema)."""
        g, out, sid = self.grammar, [0], self.start
        for tok in ids[1:]:
            k = self.mask_of[sid]
            out_id = tok if g.index is None else g.index.get(tok)
            out.append(k if out_id is not None and (k == 0 or out_id in self._allows[k]) else 0)
            sid = self.next(sid, tok)
        return out

    def table(self, device: torch.device) -> torch.Tensor:
        """Every mask so far, on `device` (rows past the last index unused): masks found since the
        last call are copied over, the rest stays."""
        n, device = len(self.masks), torch.device(device)
        if self._table is None or self._table.device.type != device.type or (
                device.index is not None and self._table.device.index != device.index):
            self._table, self._filled = None, 0
        if self._table is None or n > len(self._table):
            grown = torch.zeros(max(64, 2 * n), self.grammar.size, dtype=torch.bool, device=device)
            if self._table is not None:
                grown[:self._filled] = self._table[:self._filled]
            self._table = grown
        if self._filled < n:
            self._table[self._filled:n] = torch.stack(self.masks[self._filled:n]).to(device)
            self._filled = n
        return self._table
