"""DP-LLMTGen (Tran & Xiong 2024): a causal language model fine-tuned with LoRA in two stages.

A row is written as text, "{column} is {value}, {column} is {value}, …", with the column order
permuted per row (so any set of columns can be given in a prompt) and numbers written to the precision
the public schema declares.

Stage 1, format learning, costs no privacy: the model is fine-tuned (without DP) on rows drawn from the
public schema alone (`schema.random_table`: uniform over the public categories, uniform within the
public bounds); it learns how a row is written, not what the private rows say. Stage 2 fine-tunes the
LoRA parameters (or, for the untrained default backbone, its weights: `stage2_full`) with DP-SGD through
the core's engine (Poisson sampling, per-sample clipping, calibrated Gaussian noise, events, cancel,
ledger). Its loss is a weighted cross-entropy, weight α on the tokens of values and 1 − α on the tokens of
the format, plus β × a numerical-understanding loss: the squared error, scaled by the column's public
range, between the true number and the number made of the expected values of the model's predicted
digits, which is differentiable in the model's logits.

Stage 2 does not learn which column comes next (`stage2_order`, off by default). The order is drawn at random
for each row, so that choice says nothing about the table, and its loss cannot fall below log(columns left);
yet each row's gradient would hold its random pulls, which clipping scales together with the useful part.
At a column name stage 2's loss is −log Σ_names p(name): that some column comes next, i.e. that the value
ended there (which a number's length depends on). Stage 1 still trains the choice, and constrained decoding
draws the next column uniformly from those not yet written (`uniform_order`), as training did, so the
model decides only when a value ends. (benchmarks/RESULTS.md, "Fourth session", has the figures.)

Sampling starts from a random column name ("random-initialised prompt") or from the conditions
("sex is Female, income is >50K" — value-specified prompt). Generated text is parsed back and checked
against the public schema; a malformed row is rejected and counted, never returned. Constrained
decoding (SynLM, Sablayrolles et al. 2023) masks, at each step, every token that would leave the row
grammar: a trie over the remaining column names and the public categories, and a number automaton that
only lets through digits that can still end inside the public bounds at the declared precision.

Backbone: any Hugging Face causal LM in a local directory or the local hub cache (loaded with
local_files_only: nothing is downloaded), or, by default, a small GPT-2 built from a config with a
tokenizer built from the public schema. The default has no pretrained knowledge; a pretrained model
knows what "age" or "Bachelors" mean and does better.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd
import torch
import torch.nn as nn
import torch.nn.functional as F

from ...encoding.text import (DIGIT, EXP_OFFSET, FORMAT, ORDER, ORDER_TAIL, VALUE, TextCodec,
                              build_schema_tokenizer)
from ...schema import SchemaError, random_table
from ...training.engine import TrainResult, train
from ..base import SamplingError, SynthModel, register
from .backbone import default_backbone, pretrained_backbone, with_lora
from .grammar import Grammar


@dataclass
class LLMConfig:
    # None: the offline default, a GPT-2 built from a config with a tokenizer built from the schema;
    # else a local directory or a hub id already in the local Hugging Face cache
    backbone: str | None = None
    n_layer: int = 2          # the default backbone's size (ignored for a pretrained one)
    n_head: int = 4
    n_embd: int = 64
    lora_r: int = 8
    lora_alpha: int = 16
    lora_targets: list | None = None  # None: every attention and MLP projection peft knows for the model
    # LoRA on the last k blocks of a pretrained backbone only (None: every block). The blocks below hold no
    # trainable weight, so the backward pass (and per-row clipping) stops above them: on a CPU, most of a
    # step's time is the backward through a deep frozen network
    lora_last_layers: int | None = None
    alpha: float = 0.65       # weight of value tokens in the cross-entropy (1 - alpha on format tokens)
    # stage 2 learns which column comes next (True), or only that one does (False: the loss at a column name
    # is -log P(any column name), whether the value ended; the choice among them is left out). The column
    # order is drawn at random per row, so the choice says nothing about the table: stage 1 teaches it, and
    # in stage 2 its gradient would only be noise inside each row's clipped gradient
    stage2_order: bool = False
    beta: float = 0.1         # weight of the numerical-understanding loss
    stage1_rows: int = 20000  # rows drawn from the public schema for format learning
    stage1_epochs: float = 1.0
    stage1_batch_size: int = 128
    stage1_lr: float = 3e-3
    # train every weight in stage 1 (public data only) or LoRA only; None: every weight for the untrained
    # default backbone, LoRA only for a pretrained one (whose knowledge full fine-tuning on random rows erodes)
    stage1_full: bool | None = None
    # stage 2 (DP-SGD): every weight but the position embeddings, or LoRA only. None: every weight for the
    # untrained default backbone, LoRA only for a pretrained one. LoRA is how a pretrained model keeps what it
    # knows; the default knows nothing, and after stage 1 its LoRA learned no link between columns even
    # without noise (benchmarks/RESULTS.md, "Third session: why the default backbone learned no links")
    stage2_full: bool | None = None
    constrained: bool = True  # constrained decoding by default
    # constrained decoding: the model says when a value ends; which column comes next is drawn uniformly from
    # those not yet written, as in training (whose order is random per row). Else the model picks it too,
    # from what stage 1 taught it (stage 2 does not train that choice unless stage2_order)
    uniform_order: bool = True
    compliance_probe: int = 200  # rows sampled without constraints to report their format compliance
    sample_batch_size: int = 1024


# Stage 2's per-sample clipping: "hooks" (Opacus materialises each row's LoRA gradient: one backward pass,
# ~16k numbers a row for the CPU sizes) is ~1.6x faster on a CPU than "ghost" (norms without per-sample
# gradients, but two backward passes through the frozen network). Both clip each row's whole gradient to
# max_grad_norm; ghost stays for the GPU size, whose LoRA gradients per row are too large to materialise.
PRESETS: dict[str, dict] = {
    # seconds, for tests and demos on tiny tables
    "tiny": dict(model=dict(n_layer=2, n_head=2, n_embd=32, lora_r=4, stage1_rows=300, stage1_epochs=2,
                            stage1_batch_size=32, stage1_lr=1e-2, compliance_probe=20, sample_batch_size=256),
                 train=dict(epochs=2, batch_size=64, lr=1e-2, max_grad_norm=1.0, grad_sample_mode="hooks")),
    # a first look on 2 CPU cores for a table the size of Adult
    "quick": dict(model=dict(n_layer=2, n_head=4, n_embd=64, lora_r=8, stage1_rows=60000, stage1_epochs=1,
                             stage1_batch_size=16, stage1_lr=2e-3),
                  train=dict(epochs=1, batch_size=512, lr=1e-2, max_grad_norm=1.0, grad_sample_mode="hooks")),
    # the CPU default: a row costs ~40 tokens, so one DP epoch of Adult is ~1.6M tokens. Stage 1 (no privacy
    # cost) takes small batches: a CPU step's cost is proportional to its rows, and the row grammar (which
    # columns are left, how many digits a bounded number has) is learned per step, not per row: 120,000
    # random rows in batches of 16 took unconstrained format compliance on Adult from 0% (10,000 rows in
    # batches of 128) to ~80% in ~4 minutes on one thread
    "cpu": dict(model=dict(n_layer=2, n_head=4, n_embd=64, lora_r=8, stage1_rows=120000, stage1_epochs=1,
                           stage1_batch_size=16, stage1_lr=2e-3),
                train=dict(epochs=2, batch_size=512, lr=1e-2, max_grad_norm=1.0, grad_sample_mode="hooks")),
    # GPT-2-small-sized default backbone, or a pretrained one given as `backbone`, for a GPU
    "gpu": dict(model=dict(n_layer=12, n_head=12, n_embd=768, lora_r=16, lora_alpha=32, stage1_rows=50000,
                           stage1_epochs=2, stage1_lr=5e-4, stage1_batch_size=64),
                train=dict(epochs=5, batch_size=1024, lr=3e-3, max_grad_norm=1.0, grad_sample_mode="ghost")),
}


# --- the model --------------------------------------------------------------------------------------
@register("dp-llmtgen")
class DPLLMTGen(SynthModel):
    """A causal language model, LoRA-fine-tuned on rows written as text: format first, then with DP-SGD."""

    label = "Language model writing rows as text"
    description = ("Language model that writes each row as text (\"age is 39, sex is Female, …\"), first taught "
                   "the format on random rows from the public schema, then fine-tuned with DP. Strongest with a "
                   "pretrained model that already knows what the column names and values mean; without one it "
                   "uses a small untrained GPT-2 (set the option backbone to a local model directory or a cached "
                   "hub id, see list_local_causal_lms).")
    when_to_pick = ("Tables with meaningful column and category names when a pretrained language model is "
                    "available locally, or when fairness-controlled generation by prompts matters; slower than DP-TBART.")
    config_class = LLMConfig
    presets = PRESETS
    size_presets = {"quick": "quick", "standard": "cpu", "best": "gpu"}

    # --- building ---------------------------------------------------------------------------------
    @property
    def pretrained(self) -> bool:
        return self.config.backbone is not None

    def build(self) -> None:
        cfg = self.config
        self.schema.require_bounds()
        if cfg.backbone is None:
            self.tokenizer = build_schema_tokenizer(self.schema)
            self.codec = TextCodec(self.schema, self.tokenizer)
            base = default_backbone(cfg, self.tokenizer, self.codec.bos, self.codec.eos, self._longest_row())
        else:
            self.tokenizer, base = pretrained_backbone(cfg.backbone)
            if self.tokenizer.eos_token_id is None:
                raise SchemaError(f"the tokenizer of {cfg.backbone} has no end-of-sequence token")
            self.codec = TextCodec(self.schema, self.tokenizer)
        self.max_len = self._longest_row() + 2
        # a model's output layer may be wider than its tokenizer (padded vocabularies): mask that too
        self.codec.vocab_size = max(len(self.tokenizer), int(base.config.vocab_size))
        self.net = with_lora(base, cfg, self.device)
        self.lora_names = {n for n, _ in self.net.named_parameters() if "lora_" in n}
        # the first ORDER token of each column's name, after BOS or after a value
        self._order_starts = torch.zeros(self.codec.vocab_size, dtype=torch.bool, device=self.device)
        for segs, kinds in ((self.codec.name_ids, self.codec.name_kinds[0]), (self.codec.next_ids, self.codec.name_kinds[1])):
            for seg, kind in zip(segs, kinds):
                if ORDER in kind:
                    self._order_starts[seg[kind.index(ORDER)]] = True
        self.format_learned = False
        self.order_choice_now = cfg.stage2_order  # does the loss teach which column comes next (see learn_format)
        self.stage1_result: TrainResult | None = None
        self.numeric_cols = torch.tensor([s.is_numeric for s in self.schema.columns])
        self.inv_range = torch.tensor([1.0 / r for r in self.codec.ranges], dtype=torch.float32)
        # special tokens other than EOS are never part of a row, constrained or not
        self._never = torch.zeros(self.codec.vocab_size, dtype=torch.bool, device=self.device)
        self._never[[t for t in self.tokenizer.all_special_ids if t != self.codec.eos and t < self.codec.vocab_size]] = True
        self._never[len(self.tokenizer):] = True
        self.digit_value = torch.full((self.codec.vocab_size,), -1.0)
        for d, tid in enumerate(self.codec.digit_ids):
            self.digit_value[tid] = float(d)

    def _longest_row(self) -> int:
        """Tokens of the longest possible row, from the public schema."""
        c = self.codec
        total = 2
        for j, spec in enumerate(self.schema.columns):
            if spec.is_numeric:
                widths = [len(c.format_value(j, spec.lower)), len(c.format_value(j, spec.upper))]
            else:
                widths = [len(v) for v in c.cat_ids[j].values()]
            if spec.nullable:
                widths.append(len(c.missing_ids))
            total += max(len(c.name_ids[j]), len(c.next_ids[j])) + max(widths)
        return total

    @property
    def n_parameters(self) -> int:
        return sum(p.numel() for p in self.net.parameters())

    def time_fixed_costs(self, probe_steps: int = 3) -> float:
        """For timing.estimate_fit_seconds: stage 1's seconds (they do not scale with the private table),
        estimated from `probe_steps` timed stage-1 steps instead of running it all. Stage 1 is then skipped
        by this model (marked learned): a timing probe only, whose weights are never used."""
        calls = [0]

        def stop() -> bool:
            calls[0] += 1
            return calls[0] > probe_steps

        result = self.learn_format(stop)
        self.format_learned = True
        return result.seconds / max(1, result.steps_done) * result.steps_planned

    @property
    def n_trainable(self) -> int:
        """Parameters stage 2 trains."""
        names = self.stage2_names()
        return sum(p.numel() for n, p in self.net.named_parameters() if n in names)

    @property
    def stage2_full(self) -> bool:
        cfg = self.config
        return cfg.stage2_full if cfg.stage2_full is not None else not self.pretrained

    def _output_layer(self) -> nn.Module:
        head = self.net.get_output_embeddings()
        return getattr(head, "base_layer", head)  # under a peft LoRA wrapper, the Linear it wraps

    def untie_embeddings(self) -> None:
        """Give the output layer its own copy of a shared embedding matrix when stage 2 trains them: it clips
        each row's gradient per parameter use, and one weight used as both embedding and output layer would
        have two. A LoRA-only stage 2 leaves them shared (frozen), as a pretrained GPT-2 has them."""
        if not self.stage2_full:
            return
        head = self._output_layer()
        if head.weight is self.net.get_input_embeddings().weight:
            head.weight = nn.Parameter(head.weight.detach().clone(), requires_grad=head.weight.requires_grad)

    def stage2_names(self) -> set[str]:
        """The parameters stage 2 trains: LoRA only, or every weight but the position embeddings (GPT-2 feeds
        them one row of position ids for the whole batch, so they have no per-row gradient to clip; they
        keep what stage 1 learned from the public schema)."""
        if not self.stage2_full:
            return set(self.lora_names)
        return {n for n, _ in self.net.named_parameters() if not n.endswith("wpe.weight")}

    def _trainable(self, full: bool) -> None:
        """full: every weight (stage 1, no privacy); else what stage 2 trains (see stage2_names)."""
        names = self.stage2_names()
        for n, p in self.net.named_parameters():
            p.requires_grad_(full or n in names)

    # --- encoding ---------------------------------------------------------------------------------
    def encode(self, table: pd.DataFrame, seed: int | None = None) -> torch.Tensor:
        """(rows, 4, L) tensor: token ids (-1 pad), kinds, columns, digit exponents; each row in its own
        random column order (seeded)."""
        rng = np.random.default_rng(self.train_config.seed if seed is None else seed)
        C = len(self.codec.names)
        cols = [table[n].tolist() for n in self.schema.names]
        encoded = []
        for i in range(len(table)):
            values = [None if (v is None or v is pd.NA or (isinstance(v, float) and math.isnan(v))) else v
                      for v in (col[i] for col in cols)]
            encoded.append(self.codec.encode_row(values, list(rng.permutation(C))))
        L = max(e.shape[1] for e in encoded)
        out = np.zeros((len(encoded), 4, L), dtype=np.int64)
        out[:, 0, :] = -1
        for i, e in enumerate(encoded):
            out[i, :, :e.shape[1]] = e
        return torch.from_numpy(out)

    # --- training ---------------------------------------------------------------------------------
    def loss_fn(self, module, rows: torch.Tensor) -> torch.Tensor:
        """Per-row loss: weighted cross-entropy (α on value tokens, 1 − α on format tokens) + β × the
        numerical-understanding loss (see numeric_loss)."""
        ce, num = self.row_losses(module, rows)
        return ce + self.config.beta * num

    def row_losses(self, module, rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        ids = rows[:, 0]
        L = int((ids >= 0).sum(1).max())
        rows = rows[:, :, :L]
        ids, kinds, cols, exps = rows[:, 0], rows[:, 1], rows[:, 2], rows[:, 3]
        inp = ids[:, :-1].clamp(min=0)
        tgt, kind = ids[:, 1:], kinds[:, 1:]
        logits = module(input_ids=inp.contiguous(), use_cache=False).logits.float()
        ce = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt.clamp(min=0).reshape(-1),
                             reduction="none").view(tgt.shape)
        a = self.config.alpha
        order = kind == ORDER
        w = torch.where((kind == FORMAT) | order, 1.0 - a, torch.where((kind == VALUE) | (kind == DIGIT), a, 0.0))
        if not self.order_choice_now:
            # a column name comes next, whichever: -log Σ_names p(name) instead of -log p(this name)
            starts = self._order_starts.to(logits.device)
            any_name = torch.logsumexp(logits, -1) - torch.logsumexp(logits.masked_fill(~starts, float("-inf")), -1)
            ce = torch.where(order, any_name, ce)
        else:
            w = torch.where(kind == ORDER_TAIL, 1.0 - a, w)
        w = w.to(ce.dtype)
        ce_row = (ce * w).sum(1) / w.sum(1).clamp(min=1e-8)
        return ce_row, self.numeric_loss(logits, tgt, kind, cols[:, 1:], exps[:, 1:])

    def numeric_loss(self, logits, tgt, kind, cols, exps) -> torch.Tensor:
        """Per row: mean over numeric columns of ((E[number] − number) / public range)², where E[number]
        is Σ E[digit]·10^place with E[digit] = Σ_d d·p(d) over the digit tokens' probabilities
        (teacher forcing). Differentiable in the logits, unlike an argmax-based number."""
        dev = logits.device
        digit_ids = torch.tensor(self.codec.digit_ids, device=dev)
        p = torch.softmax(logits[..., digit_ids], dim=-1)                       # (B, T, 10)
        expected = (p * torch.arange(10, device=dev, dtype=p.dtype)).sum(-1)    # (B, T)
        true = self.digit_value.to(dev)[tgt.clamp(min=0)]
        is_digit = kind == DIGIT
        place = torch.pow(10.0, (exps - EXP_OFFSET).to(p.dtype)) * self.inv_range.to(dev)[cols]
        contrib = torch.where(is_digit, (expected - true.to(p.dtype)) * place, torch.zeros_like(expected))
        C = len(self.codec.names)
        err = torch.zeros(tgt.shape[0], C, device=dev, dtype=p.dtype).scatter_add(1, cols * is_digit, contrib)
        n_num = max(1, int(self.numeric_cols.sum()))
        return (err ** 2).sum(1) / n_num

    def format_table(self, n: int | None = None) -> pd.DataFrame:
        """Stage 1's training rows: drawn from the public schema alone (no private data)."""
        seed = None if self.train_config.seed is None else self.train_config.seed + 7
        return random_table(self.schema, n or self.config.stage1_rows, seed=seed)

    def learn_format(self, should_stop: Callable[[], bool] | None = None) -> TrainResult:
        """Stage 1 (ε = 0): non-private fine-tuning on random rows from the public schema."""
        cfg = self.config
        full = cfg.stage1_full if cfg.stage1_full is not None else not self.pretrained
        self._trainable(full)
        data = self.encode(self.format_table(), seed=(self.train_config.seed or 0) + 11)
        tc = dataclasses.replace(self.train_config, epochs=cfg.stage1_epochs, batch_size=cfg.stage1_batch_size,
                                 lr=cfg.stage1_lr)
        self.order_choice_now = True  # stage 1 learns the whole format, which column comes next included
        if not self.pretrained:
            # the default's input and output embeddings are trained as ONE matrix in stage 1, as GPT-2's are:
            # a value token's embedding then carries what the output side learned of it (which column it
            # belongs to), which stage 2 builds its links between columns on. Stage 2 needs them apart (see
            # untie_embeddings). Adult, ε = 1: train-on-synthetic ROC-AUC 0.56 untied, 0.71 tied
            # (benchmarks/RESULTS.md, "Fourth session")
            self._output_layer().weight = self.net.get_input_embeddings().weight
        try:
            result = train(self.net, data, self.loss_fn, tc, None, should_stop=should_stop)
        finally:
            self.order_choice_now = cfg.stage2_order
            self.untie_embeddings()
        self._trainable(False)
        self.format_learned = not result.cancelled
        self.stage1_result = result
        return result

    def prepare(self, should_stop: Callable[[], bool] | None = None) -> bool:
        """Stage 1 (public schema only, no privacy cost), before the private table is first touched; then
        stage 2's parameters are made trainable (see stage2_names). False if stage 1 was cancelled."""
        if not self.format_learned:
            self.learn_format(should_stop)
            if not self.format_learned:  # cancelled during stage 1: the private table was never read
                return False
        self.untie_embeddings()
        self._trainable(False)
        return True

    def ledger_details(self) -> dict:
        return {"trained_parameters": ("every weight but the position embeddings (untrained default backbone)"
                                       if self.stage2_full else "LoRA only"),
                "trained_parameter_count": self.n_trainable,
                "format_learning": "stage 1 on rows drawn from the public schema only (no privacy cost)",
                "format_learning_rows": self.config.stage1_rows}

    # --- sampling ---------------------------------------------------------------------------------
    def _conditions_text(self, conditions: dict) -> dict[int, str]:
        """Checked conditions as the text of each fixed column's value, by column index."""
        return {self.schema.names.index(name): self.codec.format_value(self.schema.names.index(name), value)
                for name, value in self.schema.check_conditions(conditions).items()}

    @torch.no_grad()
    def generate_ids(self, prompts: list[list[int]], states: list[tuple] | None, generator: torch.Generator,
                     temperature: float = 1.0) -> list[list[int]]:
        """Continue each prompt until EOS or the longest row; `states` (constrained decoding) gives each
        row's grammar state after its prompt. Rows are grouped by prompt length."""
        net, device = self.net, self.device
        net.eval()
        grammar = self._grammar if states is not None else None
        out: list[list[int] | None] = [None] * len(prompts)
        by_len: dict[int, list[int]] = {}
        for i, p in enumerate(prompts):
            by_len.setdefault(len(p), []).append(i)
        for plen, idx in by_len.items():
            x = torch.tensor([prompts[i] for i in idx], dtype=torch.long, device=device)
            st = [states[i] for i in idx] if states is not None else None
            done = torch.zeros(len(idx), dtype=torch.bool, device=device)
            gen: list[list[int]] = [[] for _ in idx]
            res = net(input_ids=x, use_cache=True)
            past = res.past_key_values
            for _ in range(self.max_len - plen + 4):
                logits = res.logits[:, -1, :].float() / max(temperature, 1e-6)
                if st is not None:
                    masks = {}
                    keys = [masks.setdefault(s, len(masks)) for s in st]
                    table = torch.stack([grammar.allowed(s) for s in masks]).to(device)
                    mask = table[torch.tensor(keys, device=device)]
                    logits = logits.masked_fill(~mask, float("-inf"))
                else:
                    logits = logits.masked_fill(self._never, float("-inf"))
                probs = torch.softmax(logits, dim=-1)
                if st is not None and self.config.uniform_order:
                    probs = self._uniform_next_column(probs, mask)
                nxt = torch.multinomial(probs, 1, generator=generator).squeeze(1)
                nxt = torch.where(done, torch.full_like(nxt, self.codec.eos), nxt)
                tokens, finished = nxt.tolist(), done.tolist()
                for r, t in enumerate(tokens):
                    if not finished[r]:
                        gen[r].append(t)
                        if st is not None:
                            st[r] = grammar.step(st[r], t)
                done |= nxt == self.codec.eos
                if bool(done.all()):
                    break
                res = net(input_ids=nxt.unsqueeze(1), past_key_values=past, use_cache=True)
                past = res.past_key_values
            for r, i in enumerate(idx):
                out[i] = prompts[i] + gen[r]
        return out

    def _uniform_next_column(self, probs: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Spread each row's probability of the tokens that start a column's name evenly over the allowed
        ones: the total (the chance that the value ends here) is the model's, the next column is uniform.
        (With a tokenizer whose column names share their first token, it is uniform over first tokens.)"""
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
        firsts = [None] * m if cond else list(rng.integers(0, C, m))
        prompts = [self.codec.prompt_ids(cond, f) for f in firsts]
        rest = tuple(j for j in range(C) if j not in cond)
        states = None
        if constrained:
            if cond:  # the prompt ends with the last condition's value: ", name is " or EOS comes next
                states = [(rest, "name", None, ()) if rest else ((), "end", None, ())] * m
            else:
                states = [(tuple(range(C)), "value", int(f), ()) for f in firsts]
        seqs = self.generate_ids(prompts, states, generator, temperature)
        return self._decode_rows(seqs)

    def draw(self, n: int, conditions: dict | None = None, seed: int | None = None, temperature: float = 1.0,
               max_tries_factor: int = 20, chunk_size: int = 8192, constrained: bool | None = None) -> pd.DataFrame:
        """n rows. `conditions` ({"sex": "Female"}) become the prompt's prefix ("sex is Female, …"), so every
        row satisfies them. With constrained decoding (the default) every generated row is well formed;
        without it malformed rows are rejected and counted. `last_sample_info` reports the format
        compliance with constraints and, from `compliance_probe` unconstrained rows, without."""
        self._check_rows(n)
        constrained = self.config.constrained if constrained is None else bool(constrained)
        conditions = dict(conditions or {})
        cond = self._conditions_text(conditions)
        if getattr(self, "_grammar", None) is None or len(self._grammar.cache) > 200_000:
            self._grammar = Grammar(self.codec, self.device)  # masks are kept between calls
        generator, rng = self._sampling_randomness(seed)
        batch = min(self.config.sample_batch_size, chunk_size)
        kept, tried, reasons = [], 0, {}
        budget = n * max_tries_factor
        while len(kept) < n and tried < budget:
            want = n - len(kept)
            if tried and len(kept) < tried:
                want = int(want / max(len(kept) / tried, 1 / max_tries_factor) * 1.1) + 1
            m = min(batch, want, budget - tried)
            rows, why = self._draw(m, cond, constrained, generator, rng, temperature)
            tried += m
            kept += rows
            for k, v in why.items():
                reasons[k] = reasons.get(k, 0) + v
        compliance = (tried - sum(reasons.values())) / tried if tried else 0.0
        info = {
            "rows": min(len(kept), n),
            "method": "value-specified prompt" if cond else "unconditional",
            "exact_columns": [self.schema.names[j] for j in cond], "rejection_columns": [],
            "acceptance_rate": len(kept) / tried if tried else 0.0, "rows_tried": tried,
            "constrained": constrained, "rejected": reasons, "rejected_rows": int(sum(reasons.values())),
            "format_compliance": compliance,
        }
        if constrained:
            info["format_compliance_constrained"] = compliance
            probe = min(self.config.compliance_probe, n)
            if probe > 0:
                rows, why = self._draw(probe, cond, False, generator, rng, temperature)
                info["format_compliance_unconstrained"] = len(rows) / probe
                info["unconstrained_probe_rows"] = probe
        else:
            info["format_compliance_unconstrained"] = compliance
        self.last_sample_info = info
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

    # --- persistence --------------------------------------------------------------------------------
    # model.pt holds every weight for the default backbone (its base weights were trained in stage 1) or a
    # pretrained one trained in full, the LoRA adapter only for a pretrained one trained with LoRA (rebuilt
    # from `backbone`, offline). The default backbone's tokenizer is rebuilt from the schema; a pretrained
    # one's is saved beside (tokenizer/).
    def state(self) -> dict:
        return {**super().state(), "format_learned": self.format_learned}

    def weights_to_save(self) -> dict[str, torch.Tensor]:
        sd = self.net.state_dict()
        if self.pretrained and not self.stage2_full:
            sd = {k: v for k, v in sd.items() if "lora_" in k}
        return sd

    def save_extra(self, directory: Path) -> None:
        if self.pretrained:
            self.tokenizer.save_pretrained(directory / "tokenizer")

    def load_weights(self, weights: dict[str, torch.Tensor], directory: Path) -> None:
        missing, unexpected = self.net.load_state_dict(weights, strict=False)
        if unexpected or (not self.pretrained and missing) or any("lora_" in k for k in missing):
            raise FileNotFoundError(f"the weights in {directory} do not fit the model "
                                    f"({len(missing)} missing, {len(unexpected)} unexpected)")

    def restore(self, state: dict) -> None:
        self.format_learned = bool(state.get("format_learned", True))
