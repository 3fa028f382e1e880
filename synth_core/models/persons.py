"""DP-TBART over persons (linked tables): the transformer of models.tbart reads a whole person as
one sequence, their row, how many child rows they have, then each of those rows (encoding.persons),
so that one DP-SGD sample is one person. Poisson sampling picks persons, per-sample clipping bounds
a whole person's gradient, and the accountant plans over the number of persons: the ε of the run
protects a person with all their child rows (at most max_children, privacy.contribution).

Sampling writes persons position by position, the count of child rows drawn after the person's row.
Conditions on the parents' columns are met exactly where they lead the parents' columns, by
rejection of persons otherwise. A declared time index and the changes along it (schema.panel) are
then built into each person's rows (`hold_panel`): every person drawn obeys them, in the pool
calibration weighs and in its pick.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F

from ..encoding import TokenEncoder
from ..encoding.persons import PersonEncoder
from ..privacy.person_marginals import PersonMarginals
from ..schema.linked import COUNT_COLUMN, LinkedRows, LinkedSchema, LinkedTables
from ..schema.panel import hold_panel
from .base import SamplingError, SynthModel, draw_with_rejection, register
from .sampling import Rows
from ..shape import PERSONS
from .calibration import MIN_PERSON_POOL, balance_persons, calibrate_persons
from .tbart import PRESETS, TabularTransformer, TBARTConfig

# DP-TBART's presets with three times the epochs on the CPU sizes: a table of persons holds hundreds
# or thousands of them, so ten epochs of batches of an eighth are only 80 steps (bench_linked's
# tables at ε = 1 and 4: 30 epochs gave a lower parent × child 2-way TVD than 10 in 3 cases of 4, by
# 0.02-0.07, and 0.02 higher on pbcseq at ε = 1; 60 no better on pbcseq at ε = 4)
PERSON_PRESETS = {name: {"model": dict(p["model"]), "train": {**p["train"], "epochs": 3 * p["train"]["epochs"]}}
                  if name in ("quick", "cpu") else p for name, p in PRESETS.items()}


class PersonTransformer(TabularTransformer):
    """TabularTransformer whose forward gives, for each kind of token, the logits at the positions
    of that kind."""

    def forward(self, tokens_in: torch.Tensor, kinds: torch.Tensor, positions: list[torch.Tensor]) -> list:
        h = self.hidden(tokens_in, kinds)
        return [head(h[:, where]) for head, where in zip(self.heads, positions)]


class Persons(Rows):
    """A person family's sample (models.sampling.Rows' hooks): persons with their child rows, a
    pool weighed at both levels (privacy.person_marginals, models.calibration.calibrate_persons)
    and picked whole, each with their rows."""
    marginals = PersonMarginals

    @staticmethod
    def conditions(model, n: int, conditions: dict | None) -> dict:
        model._check_rows(n)
        return model.schema.check_conditions(conditions)

    @staticmethod
    def draw(model, n: int, conditions: dict, seed: int | None, **options) -> LinkedTables:
        return model.draw(n, conditions, seed, **options)

    @staticmethod
    def _levels(model, pool: LinkedTables) -> tuple:
        """The persons' rows with their count of child rows; theirs; each child row's person."""
        key = model.schema.key
        owner = pool.children[key].to_numpy() - 1
        persons = pool.parents.drop(columns=[key]).assign(
            **{COUNT_COLUMN: np.bincount(owner, minlength=len(pool))})
        return persons, pool.children.drop(columns=[key]), owner, model.calibration, model.schema

    @classmethod
    def weigh(cls, model, pool: LinkedTables, conditions: dict) -> tuple[np.ndarray, dict]:
        return calibrate_persons(*cls._levels(model, pool), conditions)

    @staticmethod
    def join(model, pool: LinkedTables, extra: LinkedTables) -> LinkedTables:
        return join_persons(pool, extra, model.schema.key)

    @classmethod
    def balanced(cls, model, pool: LinkedTables) -> np.ndarray:
        return balance_persons(*cls._levels(model, pool))

    @staticmethod
    def pick(model, pool: LinkedTables, picked: np.ndarray) -> LinkedTables:
        return pick_persons(pool, picked, model.schema.key)

    @staticmethod
    def facts(model, picked: LinkedTables, info: dict) -> dict:
        return {"child_rows": len(picked.children), "calibration": {**info, "unit": "persons"}}

    @staticmethod
    def finish(model, tables: LinkedTables) -> LinkedTables:
        return tables


@register("dp-tbart")
class PersonTBART(SynthModel):
    """DP-TBART trained on person sequences: person-level DP for a parent table and its child
    rows."""

    label = "Column-by-column writer, person by person"
    description = ("Transformer that writes a person's row and then each of their child rows, one column at a time; "
                   "the privacy guarantee covers a whole person with all their rows.")
    when_to_pick = "Linked tables: persons and their visits, customers and their transactions."
    config_class = TBARTConfig
    presets = PERSON_PRESETS
    size_presets = {"quick": "quick", "standard": "cpu", "best": "paper"}
    dp_mechanism = "DP-SGD over persons (Poisson sampling of persons, per-person clipping, Gaussian noise)"
    trains_distributed = False
    min_pool = MIN_PERSON_POOL  # a person is a long sequence to draw
    drawn_as = Persons  # persons with their rows, weighed at both levels
    takes = PERSONS     # persons' tables (schema.linked)

    @classmethod
    def configure(cls, preset, overrides=None, seed=0, device=None):
        config, train_config = super().configure(preset, overrides, seed=seed, device=device)
        if config.random_order or config.augmult > 1:
            raise ValueError("a person's sequence is written in one order: random_order and augmult are not "
                             "available for linked tables")
        return config, train_config

    @classmethod
    def check_schema(cls, schema) -> None:
        if not isinstance(schema, LinkedSchema):
            raise ValueError("this family models linked tables (a parents' and a children's schema)")

    # --- building ---------------------------------------------------------------------------------------
    def build(self) -> None:
        self.encoder = PersonEncoder(self.schema, n_bins=self.config.n_bins)
        enc = self.encoder
        self.net = PersonTransformer(self.config, enc.vocab_size, enc.n_kinds, enc.sizes, n_positions=enc.length)
        self.positions = [torch.from_numpy(np.flatnonzero(enc.kinds == k)) for k in range(enc.n_kinds)]
        self.kinds = torch.from_numpy(enc.kinds)
        self.kind_offsets = torch.from_numpy(enc.kind_offsets)

    def encode(self, rows: LinkedRows) -> torch.Tensor:
        return torch.from_numpy(self.encoder.encode(rows))

    def ledger_details(self) -> dict:
        return {"unit": "person", "max_children": self.schema.max_children}

    # --- training -----------------------------------------------------------------------------------------
    def loss_fn(self, module, rows: torch.Tensor) -> torch.Tensor:
        """Per person, the mean cross-entropy of their tokens (their row, their count of child rows,
        those rows), each token over its own kind's vocabulary."""
        device = rows.device
        B, L = rows.shape
        kinds = self.kinds.to(device)
        length = self.encoder.child_start(rows[:, self.encoder.parent.n_columns] - self.encoder.count_offset)
        valid = torch.arange(L, device=device).unsqueeze(0) < length.unsqueeze(1)
        local = torch.where(valid, rows - self.kind_offsets.to(device)[kinds], torch.zeros_like(rows))
        bos = torch.full((B, 1), TokenEncoder.BOS, dtype=rows.dtype, device=device)
        positions = [p.to(device) for p in self.positions]
        logits = module(torch.cat([bos, rows[:, :-1]], dim=1), kinds.expand(B, L).contiguous(), positions)
        total = torch.zeros(B, device=device)
        for where, lg in zip(positions, logits):
            nll = F.cross_entropy(lg.reshape(-1, lg.shape[-1]), local[:, where].reshape(-1), reduction="none")
            total = total + (nll.view(B, -1) * valid[:, where]).sum(dim=1)
        return total / valid.sum(dim=1)

    # --- sampling ------------------------------------------------------------------------------------------
    @torch.no_grad()
    def generate_tokens(self, n: int, fixed: dict[int, int], generator: torch.Generator,
                        temperature: float = 1.0) -> np.ndarray:
        """n persons' sequences; the parents' columns in `fixed` (position: global token, a leading
        prefix) are set, not drawn. Positions past every person's child rows are left as padding."""
        net, device, enc = self.net, self.device, self.encoder
        net.eval()
        offsets = self.kind_offsets.to(device)
        seq = torch.full((n, enc.length + 1), TokenEncoder.BOS, dtype=torch.long, device=device)
        kinds = self.kinds.to(device)
        caches = [dict(capacity=enc.length) for _ in net.blocks]
        end = enc.length
        for t in range(enc.length):
            if t >= end:  # every person's child rows are written
                break
            h = net.hidden(seq[:, t:t + 1], kinds[t].expand(n, 1), caches, start=t)[:, -1, :]
            if t in fixed:
                seq[:, t + 1] = fixed[t]
                continue
            kind = int(enc.kinds[t])
            logits = net.heads[kind](h) / max(temperature, 1e-6)
            local = torch.multinomial(torch.softmax(logits.float(), dim=-1), 1, generator=generator).squeeze(1)
            seq[:, t + 1] = local + offsets[kind]
            if kind == enc.count_kind:
                end = int(enc.child_start(int(local.max())))
        return seq[:, 1:].cpu().numpy()

    def draw(self, n: int, conditions: dict | None = None, seed: int | None = None, temperature: float = 1.0,
             max_tries_factor: int = 200, chunk_size: int = 4096) -> LinkedTables:
        """n persons and their child rows, keys fresh (1 … n); conditions on the parents'
        columns."""
        self._check_rows(n)
        conditions = self.schema.check_conditions(conditions)
        parent = self.encoder.parent
        fixed = {parent.column_index(name): parent.encode_value(name, value) for name, value in conditions.items()}
        exact = {c: t for c, t in fixed.items() if all(p in fixed for p in range(c))}
        rejected_on = {c: t for c, t in fixed.items() if c not in exact}
        generator, rng = self._sampling_randomness(seed)

        def draw(m: int) -> np.ndarray:
            tokens = self.generate_tokens(m, exact, generator, temperature)
            if rejected_on:
                tokens = tokens[np.all([tokens[:, c] == t for c, t in rejected_on.items()], axis=0)]
            return tokens

        kept, accepted, tried = draw_with_rejection(n, draw, bool(rejected_on), max_tries_factor, chunk_size)
        if accepted < n:
            raise SamplingError(f"only {accepted} of {n} persons met the conditions after trying {tried}; ask for "
                                "fewer persons or relax the conditions")
        parents, children, person = self.encoder.decode(np.concatenate(kept)[:n], rng, self.config.numeric_decoding)
        # a person's rows follow the declared order column, as the real ones do
        if self.schema.order is not None:
            order = np.lexsort((children[self.schema.order].to_numpy(dtype=float, na_value=np.inf), person))
            children, person = children.iloc[order].reset_index(drop=True), person[order]
        children, person = hold_panel(children, person, self.schema)  # built to obey the panel
        self.last_sample_info = {"rows": n, "child_rows": len(children),
                                 "method": "rejection" if rejected_on else ("exact" if fixed else "unconditional"),
                                 "acceptance_rate": accepted / tried if tried else 0.0}
        for name, value in conditions.items():
            if self.schema.parent[name].is_numeric and value is not None:
                parents[name] = float(value)
        return with_keys(parents, children, person, self.schema.key)

    # --- persistence --------------------------------------------------------------------------------------
    def state(self) -> dict:
        """model.json: the base's, marked linked (the marginals of both levels under
        "calibration", as every family keeps its own)."""
        return {**super().state(), "linked": True}

    def restore(self, state: dict) -> None:
        if state.get("person_calibration"):  # written before the key was the base's
            self.calibration = PersonMarginals.from_dict(state["person_calibration"])


def join_persons(pool: LinkedTables, extra: LinkedTables, key: str) -> LinkedTables:
    """Two draws of persons as one, the second's keys after the first's."""
    shift = {key: lambda frame: frame[key] + len(pool)}
    return LinkedTables(pd.concat([pool.parents, extra.parents.assign(**shift)], ignore_index=True),
                        pd.concat([pool.children, extra.children.assign(**shift)], ignore_index=True))


def pick_persons(pool: LinkedTables, picked: np.ndarray, key: str) -> LinkedTables:
    """The persons `picked` (indices into the pool's, repeats allowed) with their child rows, keys
    fresh."""
    owner = pool.children[key].to_numpy() - 1
    order = np.argsort(owner, kind="stable")
    counts = np.bincount(owner, minlength=len(pool.parents))
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    lengths = counts[picked]
    within = np.arange(lengths.sum()) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    rows = order[np.repeat(starts[picked], lengths) + within]
    parents = pool.parents.iloc[picked].drop(columns=[key]).reset_index(drop=True)
    children = pool.children.iloc[rows].drop(columns=[key]).reset_index(drop=True)
    return with_keys(parents, children, np.repeat(np.arange(len(picked)), lengths), key)


def with_keys(parents: pd.DataFrame, children: pd.DataFrame, person: np.ndarray, key: str) -> LinkedTables:
    """The tables with fresh keys (1 … persons) in the key column, first."""
    parents = parents.copy()
    parents.insert(0, key, np.arange(1, len(parents) + 1))
    children = children.copy()
    children.insert(0, key, np.asarray(person, dtype=np.int64) + 1)
    return LinkedTables(parents, children)

