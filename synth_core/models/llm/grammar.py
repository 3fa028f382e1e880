"""Constrained decoding (SynLM, Sablayrolles et al. 2023): at each step, the tokens that keep a row inside the
row grammar: a trie over the remaining column names and the public categories, and a number automaton that
only lets through digits that can still end inside the public bounds at the declared precision."""
from __future__ import annotations

import math

import torch

from ...encoding.text import TextCodec


class Grammar:
    """Which tokens may come next in a row, from a row's decoding state; masks are cached by state.

    State: (remaining columns, phase, column, ids of the current segment). Phases: "name" (a remaining
    column's ", name is "; "name is " for the first column), "value" of a column, "end" (only EOS). In the
    compact format every column's segment is the separator and the first remaining column is the one it
    names. States and steps speak token ids; masks are over the model's outputs (`outputs`: the token id of
    each output; None: one output per token id)."""

    def __init__(self, codec: TextCodec, device, outputs: list[int] | None = None):
        self.c = codec
        self.device = device
        self.size = codec.vocab_size if outputs is None else len(outputs)
        self.index = None if outputs is None else {t: i for i, t in enumerate(outputs)}
        self.cache: dict = {}
        self.value_cache: dict = {}

    def _number_viable(self, j: int, text: str) -> tuple[bool, bool]:
        """(a completion of `text` is a valid number of column j, `text` itself is one)."""
        spec, d = self.c.schema.columns[j], self.c.decimals[j]
        scale = 10 ** d
        lo_u, hi_u = math.ceil(float(spec.lower) * scale - 1e-9), math.floor(float(spec.upper) * scale + 1e-9)
        neg = text.startswith("-")
        body = text[1:] if neg else text
        if "-" in body or body.count(".") > 1:
            return False, False
        # values of this sign, as units of 10^-d, magnitudes in [a, b]
        if neg:
            a, b = max(1, -hi_u), -lo_u
        else:
            a, b = max(0, lo_u), hi_u
        if a > b:
            return False, False
        if body == "":
            return True, False
        whole, dot, frac = body.partition(".")
        if whole == "" or (len(whole) > 1 and whole[0] == "0"):
            return False, False
        if dot and d == 0:
            return False, False
        if len(frac) > d:
            return False, False
        if neg and not dot and whole == "0" and d == 0:
            return False, False  # "-0"
        W = int(whole)
        if dot:
            f = int(frac) if frac else 0
            span = 10 ** (d - len(frac))
            lo_r, hi_r = W * scale + f * span, W * scale + (f + 1) * span - 1
            complete = len(frac) == d and a <= W * scale + f <= b
            return lo_r <= b and hi_r >= a, complete
        complete = d == 0 and a <= W <= b
        ks = [0] if whole == "0" else range(0, len(str(b // scale)) + 2)
        viable = any(W * 10 ** k * scale <= b and ((W + 1) * 10 ** k) * scale - 1 >= a for k in ks)
        return viable, complete

    def _mask(self, ids) -> torch.Tensor:
        mask = torch.zeros(self.size, dtype=torch.bool)
        mask[[t if self.index is None else self.index[t] for t in ids]] = True
        return mask

    def value_tokens(self, j: int, seg: tuple) -> tuple[torch.Tensor, bool]:
        """(tokens that continue column j's value after `seg`, whether `seg` is a complete value); cached
        by (j, seg) alone, so that states differing only in the columns left share the work."""
        key = (j, seg)
        if key in self.value_cache:
            return self.value_cache[key]
        c = self.c
        ok: set[int] = set()
        end = False
        spec = c.schema.columns[j]
        alternatives = [] if spec.is_numeric else list(c.cat_ids[j].values())
        if spec.nullable:
            alternatives.append(c.missing_ids)
        for seq in alternatives:
            if tuple(seq[:len(seg)]) == seg:
                if len(seq) > len(seg):
                    ok.add(seq[len(seg)])
                else:
                    end = True
        if spec.is_numeric and all(t in c.id_char for t in seg):
            text = "".join(c.id_char[t] for t in seg)
            end = end or self._number_viable(j, text)[1]
            for ch, tid in c.char_id.items():
                if self._number_viable(j, text + ch)[0]:
                    ok.add(tid)
        self.value_cache[key] = (self._mask(ok), end)
        return self.value_cache[key]

    def allowed(self, state: tuple) -> torch.Tensor:
        if state in self.cache:
            return self.cache[state]
        remaining, phase, j, seg = state
        c = self.c
        if phase == "end":
            mask = self._mask([c.eos])
        elif phase == "name":
            mask = self._mask(self._name(r, remaining)[len(seg)] for r in remaining
                              if len(seg) < len(self._name(r, remaining))
                              and tuple(self._name(r, remaining)[:len(seg)]) == seg)
        else:
            mask, end = self.value_tokens(j, seg)
            if end:
                rest = tuple(r for r in remaining if r != j)
                key = ("end-of-value", rest)
                if key not in self.cache:
                    self.cache[key] = self._mask([c.next_ids[r][0] for r in rest] if rest else [c.eos])
                mask = mask | self.cache[key]
        self.cache[state] = mask
        return mask

    def step(self, state: tuple, token: int) -> tuple:
        remaining, phase, j, seg = state
        if phase == "end":
            return state
        if phase == "name":
            return self._enter_name(remaining, seg + (token,))
        # value phase: does the token end the value (separator's first token or EOS)?
        rest = tuple(r for r in remaining if r != j)
        continues = bool(self._continues(j, seg, token))
        if not continues:
            if not rest:
                return ((), "end", None, ())
            return self._enter_name(rest, (token,))
        return (remaining, "value", j, seg + (token,))

    def _name(self, r: int, remaining: tuple) -> list[int]:
        return self.c.name_ids[r] if len(remaining) == len(self.c.names) else self.c.next_ids[r]

    def _enter_name(self, remaining: tuple, seg: tuple) -> tuple:
        for r in remaining:
            if tuple(self._name(r, remaining)) == seg:
                return (remaining, "value", r, ())
        return (remaining, "name", None, seg)

    def _continues(self, j, seg, token) -> bool:
        c = self.c
        spec = c.schema.columns[j]
        alternatives = [] if spec.is_numeric else list(c.cat_ids[j].values())
        if spec.nullable:
            alternatives.append(c.missing_ids)
        nseg = seg + (token,)
        if any(tuple(seq[:len(nseg)]) == nseg for seq in alternatives):
            return True
        return spec.is_numeric and token in c.id_char


class LossMasks:
    """The grammar's mask at every position of encoded rows, for a loss over the tokens constrained decoding
    allows there (what the model's choice is among, when it samples): each distinct mask once (`table`;
    row 0 allows every output: no mask), each position the index of its mask. A mask is a public function of
    the row's own tokens before it (the schema's grammar), so each row's loss still reads that row alone.
    Indices only grow, so rows encoded at different times share one table."""

    def __init__(self, grammar: Grammar):
        self.grammar = grammar
        self.rows: list[torch.Tensor] = [torch.ones(grammar.size, dtype=torch.bool)]
        self._by_content: dict[bytes, int] = {}
        self._of_state: dict[tuple, int] = {}
        self._next: dict[tuple, tuple] = {}
        self._table: torch.Tensor | None = None
        C = len(grammar.c.names)
        self.start = grammar._enter_name(tuple(range(C)), ())  # the compact format's first value, else a name

    def _index(self, state: tuple) -> int:
        k = self._of_state.get(state)
        if k is None:
            mask = self.grammar.allowed(state)
            key = mask.numpy().tobytes()
            k = self._by_content.get(key)
            if k is None:
                k = self._by_content[key] = len(self.rows)
                self.rows.append(mask)
                self._table = None
            self._of_state[state] = k
        return k

    def of_row(self, ids: list[int]) -> list[int]:
        """Mask indices for a row's token ids (BOS first): entry t is the mask over what may stand at t; 0 at
        BOS, and where the grammar would not allow the row's token (never for a row inside the schema)."""
        g, out, state = self.grammar, [0], self.start
        for tok in ids[1:]:
            k = self._index(state)
            out_id = tok if g.index is None else g.index.get(tok)
            out.append(k if out_id is not None and bool(self.rows[k][out_id]) else 0)
            key = (state, tok)
            nxt = self._next.get(key)
            if nxt is None:
                nxt = self._next[key] = g.step(state, tok)
            state = nxt
        return out

    def table(self, device) -> torch.Tensor:
        if self._table is None or self._table.device != torch.device(device):
            self._table = torch.stack(self.rows).to(device)
        return self._table
