"""DP-LLMTGen's sampling: rows written by the trained language model, token by token with a KV cache
(backbone.decoding_cache), in batches grouped by prompt length; constrained decoding
(grammar.Automaton over grammar.Grammar) keeps every row inside the public schema; a value-specified
prompt ("sex is Female, …") fixes conditions exactly, and those the row format cannot put in a
prompt (the compact format's non-leading columns) are met by rejection. Generated text is parsed
back and checked against the public schema; a malformed row is rejected and counted, never returned.

A mixin of DPLLMTGen (model.py), which builds what it reads: net, codec, tokenizer, the output map
(`token_of`), `_never`, `_order_starts`, `prefix_cache`, `cache_keyword`, `max_len`."""
from __future__ import annotations

import numpy as np
import pandas as pd
import torch

from ..base import SamplingError
from .backbone import returned_cache
from .grammar import Automaton, Grammar

AUTOMATON_STATES = 200_000  # numbered decoding states kept at most (each a few hundred bytes)


class TextSampling:
    # --- sampling ---------------------------------------------------------------------------------
    def _conditions_text(self, conditions: dict) -> dict[int, str]:
        """Checked conditions as the text of each fixed column's value, by column index."""
        return {self.schema.names.index(name): self.codec.format_value(self.schema.names.index(name), value)
                for name, value in self.schema.check_conditions(conditions).items()}

    @torch.no_grad()
    def generate_ids(self, prompts: list[list[int]], states: list[tuple] | None, generator: torch.Generator,
                     temperature: float = 1.0) -> list[list[int]]:
        """Continue each prompt until EOS or the longest row; `states` (constrained decoding) gives
        each row's grammar state after its prompt. Rows are grouped by prompt length."""
        net, device = self.net, self.device
        net.eval()
        automaton = self._automaton if states is not None else None
        out: list[list[int] | None] = [None] * len(prompts)
        by_len: dict[int, list[int]] = {}
        for i, p in enumerate(prompts):
            by_len.setdefault(len(p), []).append(i)
        for plen, idx in by_len.items():
            x = torch.tensor([prompts[i] for i in idx], dtype=torch.long, device=device)
            # each row's state as the automaton's number: a step of a row is then a dict lookup
            sids = [automaton.state_id(states[i]) for i in idx] if automaton is not None else None
            done = torch.zeros(len(idx), dtype=torch.bool, device=device)
            gen: list[list[int]] = [[] for _ in idx]
            steps = self.max_len - plen + 4
            cache = self.prefix_cache(len(idx), capacity=self._prefix.shape[1] + plen + steps)
            res = net(input_ids=x, **{self.cache_keyword: cache}, use_cache=True)
            past = returned_cache(res)
            for _ in range(steps):
                logits = res.logits[:, -1, :].float() / max(temperature, 1e-6)
                if sids is not None:
                    mask_of = automaton.mask_of
                    where = torch.tensor([mask_of[s] for s in sids], device=logits.device)
                    mask = automaton.table(logits.device)[where]
                    logits = logits.masked_fill(~mask, float("-inf"))
                else:
                    logits = logits.masked_fill(self._never, float("-inf"))
                probs = torch.softmax(logits, dim=-1)
                if sids is not None and self.config.uniform_order:
                    probs = self._uniform_next_column(probs, mask)
                nxt = self.token_of[torch.multinomial(probs, 1, generator=generator).squeeze(1)]
                nxt = torch.where(done, torch.full_like(nxt, self.codec.eos), nxt)
                tokens, finished = nxt.tolist(), done.tolist()
                for r, t in enumerate(tokens):
                    if not finished[r]:
                        gen[r].append(t)
                        if sids is not None:
                            sids[r] = automaton.next(sids[r], t)
                done |= nxt == self.codec.eos
                if bool(done.all()):
                    break
                res = net(input_ids=nxt.unsqueeze(1), **{self.cache_keyword: past}, use_cache=True)
                past = returned_cache(res)
            for r, i in enumerate(idx):
                out[i] = prompts[i] + gen[r]
        return out

    def _uniform_next_column(self, probs: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Spread each row's probability of the tokens that start a column's name evenly over the
        allowed ones: the total (the chance that the value ends here) is the model's, the next
        column is uniform. (With a tokenizer whose column names share their first token, it is
        uniform over first tokens.)"""
        starts = self._order_starts & mask  # rows where no name may start keep their probabilities
        mass = (probs * starts).sum(1, keepdim=True)
        spread = mass / starts.sum(1, keepdim=True).clamp(min=1)
        return torch.where(starts, spread.expand_as(probs), probs)

    def _decode_rows(self, seqs: list[list[int]]) -> tuple[list[list], dict[str, int]]:
        rows, reasons = [], {}
        for ids in seqs:
            if not ids or ids[-1] != self.codec.eos:
                reasons["not finished"] = reasons.get("not finished", 0) + 1
                continue
            body = [t for t in ids[1:-1]]
            if self.codec.eos in body:
                reasons["malformed"] = reasons.get("malformed", 0) + 1
                continue
            values, why = self.codec.parse(self.tokenizer.decode(body, skip_special_tokens=False))
            if values is None:
                reasons[why] = reasons.get(why, 0) + 1
            else:
                rows.append(values)
        return rows, reasons

    def _draw(self, m: int, cond: dict[int, str], constrained: bool, generator: torch.Generator,
              rng: np.random.Generator, temperature: float) -> tuple[list[list], dict[str, int]]:
        C = len(self.codec.names)
        # without conditions, the first column is drawn at random (the compact format's is always
        # the first)
        firsts = [None] * m if cond else ([0] * m if self.codec.fixed_order else list(rng.integers(0, C, m)))
        prompts = [self.codec.prompt_ids(cond, f) for f in firsts]
        rest = tuple(j for j in range(C) if j not in cond)
        states = None
        if constrained:
            # the prompt ends with the last condition's value: ", name is " or EOS comes next
            if cond:
                states = [(rest, "name", None, ()) if rest else ((), "end", None, ())] * m
            else:
                states = [(tuple(range(C)), "value", int(f), ()) for f in firsts]
        seqs = self.generate_ids(prompts, states, generator, temperature)
        return self._decode_rows(seqs)

    def draw(self, n: int, conditions: dict | None = None, seed: int | None = None, temperature: float = 1.0,
               max_tries_factor: int = 20, chunk_size: int = 8192, constrained: bool | None = None) -> pd.DataFrame:
        """n rows. `conditions` ({"sex": "Female"}) become the prompt's prefix ("sex is Female, …"),
        so every row satisfies them; in the compact format only leading columns can
        (`TextCodec.exact_prefix`), and rows are drawn until enough meet the others (rejection).
        With constrained decoding (the default) every generated row is well formed; without it
        malformed rows are rejected and counted. `last_sample_info` reports the format compliance
        with constraints and, from a tenth of the rows asked for (at least 10, at most
        `compliance_probe`) drawn unconstrained, without."""
        self._check_rows(n)
        constrained = self.config.constrained if constrained is None else bool(constrained)
        conditions = dict(conditions or {})
        wanted = self._conditions_text(conditions)
        cond = {j: wanted[j] for j in self.codec.exact_prefix(list(wanted))}  # in the prompt
        rejected_on = {j: text for j, text in wanted.items() if j not in cond}

        def meets(row: list) -> bool:
            return all(self.codec.format_value(j, row[j]) == text for j, text in rejected_on.items())

        generator, rng = self._sampling_randomness(seed)
        batch = min(self.config.sample_batch_size, chunk_size)
        kept, tried, reasons, well_formed = [], 0, {}, 0
        budget = n * max_tries_factor
        while len(kept) < n and tried < budget:
            want = n - len(kept)
            if tried and len(kept) < tried:
                want = int(want / max(len(kept) / tried, 1 / max_tries_factor) * 1.1) + 1
            m = min(batch, want, budget - tried)
            if getattr(self, "_automaton", None) is None or len(self._automaton) > AUTOMATON_STATES:
                # the grammar's numbered states and masks are kept between batches and calls (they
                # are public: the schema's grammar), up to a bound: the sentence format reaches ~26
                # new ones a row
                self._automaton = Automaton(Grammar(self.codec, self.device, self.outputs))
            rows, why = self._draw(m, cond, constrained, generator, rng, temperature)
            tried += m
            well_formed += len(rows)
            kept += [r for r in rows if meets(r)] if rejected_on else rows
            for k, v in why.items():
                reasons[k] = reasons.get(k, 0) + v
        compliance = (tried - sum(reasons.values())) / tried if tried else 0.0
        info = {
            "rows": min(len(kept), n),
            "method": "rejection" if rejected_on else ("value-specified prompt" if cond else "unconditional"),
            "exact_columns": [self.schema.names[j] for j in cond],
            "rejection_columns": [self.schema.names[j] for j in rejected_on],
            "acceptance_rate": len(kept) / tried if tried else 0.0, "rows_tried": tried,
            "constrained": constrained, "rejected": reasons, "rejected_rows": int(sum(reasons.values())),
            "format_compliance": compliance,
        }
        if constrained:
            info["format_compliance_constrained"] = compliance
            # a tenth of the rows asked for (at least 10), at most compliance_probe: a small request
            # stays quick
            probe = min(self.config.compliance_probe, n, max(10, n // 10))
            if probe > 0:
                rows, why = self._draw(probe, cond, False, generator, rng, temperature)
                info["format_compliance_unconstrained"] = len(rows) / probe
                info["unconstrained_probe_rows"] = probe
        else:
            info["format_compliance_unconstrained"] = compliance
        self.last_sample_info = info
        if len(kept) < n and rejected_on and well_formed:
            raise SamplingError(
                f"only {len(kept)} of {n} rows met the conditions on {', '.join(info['rejection_columns'])} after "
                f"trying {tried} (the compact row format fixes only leading columns exactly); ask for fewer rows, "
                "relax the conditions, or train with row_format=sentence")
        if len(kept) < n:
            raise SamplingError(
                f"only {len(kept)} of {n} generated rows were well formed after trying {tried} "
                f"(rejected: {', '.join(f'{k} {v}' for k, v in reasons.items())}); sample with constrained decoding")
        return self._to_table(kept[:n])

    def _to_table(self, rows: list[list]) -> pd.DataFrame:
        cols = {}
        for j, spec in enumerate(self.schema.columns):
            values = [r[j] for r in rows]
            if spec.is_numeric:
                arr = np.array([np.nan if v is None else float(v) for v in values], dtype=float)
                cols[spec.name] = arr
            else:
                cols[spec.name] = np.array(values, dtype=object)
        return pd.DataFrame(cols, columns=self.schema.names)
