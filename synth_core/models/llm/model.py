"""DP-LLMTGen (Tran & Xiong 2024): a causal language model fine-tuned with LoRA in two stages.

A row is written as text (encoding.text), numbers to the precision the public schema declares: by
default "{column} is {value}, {column} is {value}, …" with the column order permuted per row (so any
set of columns can be given in a prompt); for a pretrained backbone, a compact CSV line in schema
order after a header that names the columns once (half the tokens; the header's keys and values are
computed once per batch, `prefix_cache`), and an output layer cut to the tokens a row can hold
(`output_tokens`).

Stage 1, format learning, costs no privacy: the model is fine-tuned (without DP) on rows drawn from
the public schema alone (`schema.random_table`: uniform over the public categories, uniform within
the public bounds); it learns how a row is written, not what the private rows say. Stage 2
fine-tunes the LoRA parameters (or, for the untrained default backbone, its weights: `stage2_full`)
with DP-SGD through the core's engine (Poisson sampling, per-sample clipping, calibrated Gaussian
noise, events, cancel, ledger). Its loss is a weighted cross-entropy, weight α on the tokens of
values and 1 − α on the tokens of the format, plus β × a numerical-understanding loss: the squared
error, scaled by the column's public range, between the true number and the number made of the
expected values of the model's predicted digits, which is differentiable in the model's logits. For
a pretrained backbone sampled with constraints (the default) the cross-entropy at each token is over
the tokens the row grammar allows there (`constrained_loss`, grammar.Automaton): the choice the
model makes when it samples, so a token with one choice costs nothing and the noisy steps go into
the values rather than into the format.

Stage 2 does not learn which column comes next (`stage2_order`, off by default). The order is drawn
at random for each row, so that choice says nothing about the table, and its loss cannot fall below
log(columns left); yet each row's gradient would hold its random pulls, which clipping scales
together with the useful part. At a column name stage 2's loss is −log Σ_names p(name): that some
column comes next, i.e. that the value ended there (which a number's length depends on). Stage 1
still trains the choice, and constrained decoding draws the next column uniformly from those not yet
written (`uniform_order`), as training did, so the model decides only when a value ends.
(benchmarks/history/2026-11-27.md, "Fourth session", has the figures.)

Sampling (sampling.py) starts from a random column name ("random-initialised prompt") or from the
conditions ("sex is Female, income is >50K" — value-specified prompt). Generated text is parsed back
and checked against the public schema; a malformed row is rejected and counted, never returned.
Constrained decoding (SynLM, Sablayrolles et al. 2023) masks, at each step, every token that would
leave the row grammar: a trie over the remaining column names and the public categories, and a
number automaton that only lets through digits that can still end inside the public bounds at the
declared precision.

Backbone: any Hugging Face causal LM in a local directory or the local hub cache (loaded with
local_files_only: nothing is downloaded), or, by default, a small GPT-2 built from a config with a
tokenizer built from the public schema. The default has no pretrained knowledge; a pretrained model
knows what "age" or "Bachelors" mean and does better.
"""

from __future__ import annotations

import dataclasses
import math
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
from ..base import SynthModel, register
from ..traits import LocalChoice
from .config import PRESETS, PRETRAINED, LLMConfig
from .backbone import (cache_keyword, decoding_cache, default_backbone, pretrained_backbone, restrict_outputs,
                       returned_cache, with_lora)
from .grammar import Automaton, Grammar
from .sampling import TextSampling


# --- the model --------------------------------------------------------------------------------------
@register("dp-llmtgen")
class DPLLMTGen(TextSampling, SynthModel):
    """A causal language model, LoRA-fine-tuned on rows written as text: format first, then with
    DP-SGD."""

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
    # a row is tens of tokens generated one by one (seconds per row with a pretrained backbone on
    # the CPU): a calibrated sample keeps its first pool rather than wait up to four times as long
    # for a larger one
    max_pool_growth = 1


    @classmethod
    def local_choices(cls) -> list[LocalChoice]:
        """The backbone: the offline default, a pretrained model installed or in the local Hugging
        Face cache, or a directory a model was saved to."""
        from .backbone import PACKAGED_INSTALL, list_local_causal_lms, packaged_backbones, resolve_backbone
        offered = {**{f"SmolLM2-135M, pretrained (installed package) · {name}": name for name in packaged_backbones()},
                   **{f"{m['id']} (in the local Hugging Face cache)": m["id"] for m in list_local_causal_lms()}}
        return [LocalChoice(
            option="backbone", label="Backbone", title="Language model (backbone)",
            explanation="The offline default is a small GPT-2 that starts with **no pretrained knowledge**: it learns "
                        "the row format from random public-schema rows and then your data with DP; on a CPU budget it "
                        "learns each column's values but little of how the columns depend on each other. A pretrained "
                        "causal language model (GPT-2, Llama, Qwen, …) already knows what the column names and values "
                        "mean and does better. To use one, give the directory it was saved to (the folder with its "
                        "config.json and tokenizer), or pick a model already in this machine's Hugging Face cache "
                        "(fetched beforehand on a machine with network access, e.g. `hf download gpt2`). Nothing is "
                        "downloaded here.",
            default_label="Offline default: small GPT-2, no pretrained knowledge", offered=offered,
            check=resolve_backbone, help="Installed packages and models in the local Hugging Face cache "
                                         "($HF_HOME/hub or ~/.cache/huggingface/hub) are listed.",
            nothing_offered="No pretrained model is installed and none is in the local Hugging Face cache. The small "
                            f"pretrained SmolLM2-135M installs offline with `{PACKAGED_INSTALL}`.",
            path_label="A local model directory…", path_prompt="Model directory",
            path_placeholder="/path/to/a/saved/causal-lm",
            missing_path="Give the model directory, or choose the offline default.")]

    @classmethod
    def upgrade_state(cls, state: dict) -> dict:
        # saves from before `row_format` and `output_tokens` wrote sentences and predicted every
        # token
        config = dict(state["config"])
        config.setdefault("row_format", "sentence")
        config.setdefault("output_tokens", "all")
        return {**state, "config": config}

    @classmethod
    def configure(cls, preset: str, overrides: dict | None = None, seed: int | None = 0, device: str | None = None):
        """The preset's values, with a pretrained backbone's recipe (PRETRAINED) under the
        options."""
        if isinstance(overrides, dict) and overrides.get("backbone") and preset in PRETRAINED:
            recipe = PRETRAINED[preset]
            overrides = {**recipe["model"], **recipe["train"], **overrides}
        return super().configure(preset, overrides, seed=seed, device=device)

    @classmethod
    def timing_variant(cls, options: dict) -> str:
        return f"backbone {options['backbone']}" if options.get("backbone") else ""

    @classmethod
    def probe_batch_limit(cls, options: dict) -> int:
        # a pretrained backbone trains a few rows a second on a CPU: probe steps of 32 and 16 rows
        return 32 if options.get("backbone") else super().probe_batch_limit(options)

    # --- building ---------------------------------------------------------------------------------
    @property
    def pretrained(self) -> bool:
        return self.config.backbone is not None

    @property
    def row_format(self) -> str:
        cfg = self.config
        return cfg.row_format if cfg.row_format is not None else ("compact" if self.pretrained else "sentence")

    def build(self) -> None:
        cfg = self.config
        self.schema.require_bounds()
        if cfg.output_tokens not in ("row", "all"):
            raise ValueError(f"output_tokens must be 'row' or 'all', not {cfg.output_tokens!r}")
        if cfg.backbone is None:
            self.tokenizer = build_schema_tokenizer(self.schema)
            self.codec = TextCodec(self.schema, self.tokenizer, self.row_format)
            base = default_backbone(cfg, self.tokenizer, self.codec.bos, self.codec.eos,
                                    self._longest_row() + len(self.codec.prefix_ids))
        else:
            self.tokenizer, base = pretrained_backbone(cfg.backbone)
            if self.tokenizer.eos_token_id is None:
                raise SchemaError(f"the tokenizer of {cfg.backbone} has no end-of-sequence token")
            self.codec = TextCodec(self.schema, self.tokenizer, self.row_format)
        self.max_len = self._longest_row() + 2
        # a model's output layer may be wider than its tokenizer (padded vocabularies): mask that
        # too
        self.codec.vocab_size = max(len(self.tokenizer), int(base.config.vocab_size))
        # the model's outputs: token ids (`outputs`, None: one per token id) and a token id's output
        self.outputs: list[int] | None = None
        self.output_of = torch.arange(self.codec.vocab_size, device=self.device)
        if self.pretrained and cfg.output_tokens == "row":
            self.outputs = self.codec.output_tokens()
            restrict_outputs(base, self.outputs)
            self.output_of = torch.full((self.codec.vocab_size,), -1, dtype=torch.long, device=self.device)
            self.output_of[self.outputs] = torch.arange(len(self.outputs), device=self.device)
        self.token_of = (torch.tensor(self.outputs, device=self.device) if self.outputs is not None
                         else torch.arange(self.codec.vocab_size, device=self.device))
        self.n_outputs = len(self.token_of)
        self.net = with_lora(base, cfg, self.device)
        self.cache_keyword = cache_keyword(self.net)
        self.lora_names = {n for n, _ in self.net.named_parameters() if "lora_" in n}
        # a pretrained model's output layer cut to the row's tokens is small: stage 2 trains it,
        # which moves the values' distributions directly (as the default's LoRA on its output layer
        # does)
        self.head_names = ({n for n, p in self.net.named_parameters() if p is self._output_layer().weight}
                           if self.outputs is not None else set())
        # the first ORDER token of each column's name, after BOS or after a value
        self._order_starts = torch.zeros(self.n_outputs, dtype=torch.bool, device=self.device)
        for segs, kinds in ((self.codec.name_ids, self.codec.name_kinds[0]), (self.codec.next_ids, self.codec.name_kinds[1])):
            for seg, kind in zip(segs, kinds):
                if ORDER in kind:
                    self._order_starts[self.output_of[seg[kind.index(ORDER)]]] = True
        self.format_learned = False
        # does the loss teach which column comes next (see learn_format)
        self.order_choice_now = cfg.stage2_order
        self.stage1_result: TrainResult | None = None
        self.numeric_cols = torch.tensor([s.is_numeric for s in self.schema.columns])
        self.inv_range = torch.tensor([1.0 / r for r in self.codec.ranges], dtype=torch.float32)
        # special tokens other than EOS are never part of a row, constrained or not
        never = torch.zeros(self.codec.vocab_size, dtype=torch.bool, device=self.device)
        never[[t for t in self.tokenizer.all_special_ids if t != self.codec.eos and t < self.codec.vocab_size]] = True
        never[len(self.tokenizer):] = True
        self._never = never[self.token_of]
        self.digit_outputs = [int(self.output_of[t]) for t in self.codec.digit_ids]
        self.digit_value = torch.full((self.n_outputs,), -1.0)
        for d, out in enumerate(self.digit_outputs):
            self.digit_value[out] = float(d)
        self._prefix = torch.tensor([self.codec.prefix_ids], dtype=torch.long, device=self.device)
        # stage 2's masks (constrained_loss), built when rows are encoded
        self._loss_masks: Automaton | None = None

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

    def prefix_cache(self, batch: int, capacity: int | None = None):
        """The header's keys and values (compact format), computed once for `batch` rows with the
        current weights, without gradient: the header is public and the same for every row, so each
        row's gradient is that of its own tokens reading it. None when rows have no header, unless
        `capacity` is given: then a cache for decoding that many positions (header included;
        backbone.decoding_cache)."""
        if self._prefix.shape[1] == 0:
            return None if capacity is None else decoding_cache(capacity)
        from transformers import DynamicCache
        with torch.no_grad():
            past = returned_cache(self.net(input_ids=self._prefix, use_cache=True))
        header = DynamicCache(ddp_cache_data=[(layer.keys.expand(batch, -1, -1, -1),
                                               layer.values.expand(batch, -1, -1, -1)) for layer in past.layers])
        return header if capacity is None else decoding_cache(capacity, header)

    def time_fixed_costs(self, probe_steps: int = 3) -> float:
        """For timing.estimate_fit_seconds: stage 1's seconds (they do not scale with the private
        table), estimated from `probe_steps` timed stage-1 steps instead of running it all. Stage 1
        is then skipped by this model (marked learned): a timing probe only, whose weights are never
        used."""
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
        """Give the output layer its own copy of a shared embedding matrix when stage 2 trains them:
        it clips each row's gradient per parameter use, and one weight used as both embedding and
        output layer would have two. A LoRA-only stage 2 leaves them shared (frozen), as a
        pretrained GPT-2 has them."""
        if not self.stage2_full:
            return
        head = self._output_layer()
        if head.weight is self.net.get_input_embeddings().weight:
            head.weight = nn.Parameter(head.weight.detach().clone(), requires_grad=head.weight.requires_grad)

    def stage2_names(self) -> set[str]:
        """The parameters stage 2 trains: LoRA only, or every weight but the position embeddings
        (GPT-2 feeds them one row of position ids for the whole batch, so they have no per-row
        gradient to clip; they keep what stage 1 learned from the public schema)."""
        if not self.stage2_full:
            return set(self.lora_names) | self.head_names
        return {n for n, _ in self.net.named_parameters() if not n.endswith("wpe.weight")}

    def _trainable(self, full: bool) -> None:
        """full: every weight (stage 1, no privacy); else what stage 2 trains (see stage2_names)."""
        names = self.stage2_names()
        for n, p in self.net.named_parameters():
            p.requires_grad_(full or n in names)

    @property
    def constrained_loss(self) -> bool:
        cfg = self.config
        if cfg.constrained_loss is not None:
            return bool(cfg.constrained_loss)
        return bool(cfg.constrained) and self.pretrained

    # --- encoding ---------------------------------------------------------------------------------
    def encode(self, table: pd.DataFrame, seed: int | None = None, masks: bool = True) -> torch.Tensor:
        """(rows, 5, L) tensor: token ids (-1 pad), kinds, columns, digit exponents, and the index
        of the grammar's mask at each token (see constrained_loss; 0: none, always when `masks` is
        False); each row in its own random column order (seeded)."""
        rng = np.random.default_rng(self.train_config.seed if seed is None else seed)
        C = len(self.codec.names)
        cols = [table[n].tolist() for n in self.schema.names]
        book = None
        if masks and self.constrained_loss:
            if self._loss_masks is None:
                self._loss_masks = Automaton(Grammar(self.codec, "cpu", self.outputs))
            book = self._loss_masks
        encoded = []
        for i in range(len(table)):
            values = [None if (v is None or v is pd.NA or (isinstance(v, float) and math.isnan(v))) else v
                      for v in (col[i] for col in cols)]
            row = self.codec.encode_row(values, list(rng.permutation(C)))
            where = book.of_row(row[0].tolist()) if book is not None else [0] * row.shape[1]
            encoded.append(np.vstack([row, np.asarray(where, dtype=np.int64)[None]]))
        L = max(e.shape[1] for e in encoded)
        out = np.zeros((len(encoded), 5, L), dtype=np.int64)
        out[:, 0, :] = -1
        for i, e in enumerate(encoded):
            out[i, :, :e.shape[1]] = e
        return torch.from_numpy(out)

    # --- training ---------------------------------------------------------------------------------
    def loss_fn(self, module, rows: torch.Tensor) -> torch.Tensor:
        """Per-row loss: weighted cross-entropy (α on value tokens, 1 − α on format tokens) + β ×
        the numerical-understanding loss (see numeric_loss)."""
        ce, num = self.row_losses(module, rows)
        return ce + self.config.beta * num

    def row_losses(self, module, rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        ids = rows[:, 0]
        L = int((ids >= 0).sum(1).max())
        rows = rows[:, :, :L]
        ids, kinds, cols, exps, where = rows[:, 0], rows[:, 1], rows[:, 2], rows[:, 3], rows[:, 4, 1:]
        inp = ids[:, :-1].clamp(min=0)
        # the target outputs (pads masked below)
        tgt, kind = self.output_of[ids[:, 1:].clamp(min=0)], kinds[:, 1:]
        logits = module(input_ids=inp.contiguous(), **{self.cache_keyword: self.prefix_cache(len(inp))},
                        use_cache=False).logits.float()
        if bool((where > 0).any()):
            if self._loss_masks is None:
                raise RuntimeError("rows encoded with the grammar's masks after those were let go: encode them again")
            # over what constrained decoding allows at each token (a token with one choice costs
            # nothing); a finite floor, not -inf: the name and digit terms below also read positions
            # where none is allowed
            allowed = self._loss_masks.table(logits.device)[where]
            logits = logits.masked_fill(~allowed, -1e9)
        ce = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt.clamp(min=0).reshape(-1),
                             reduction="none").view(tgt.shape)
        a = self.config.alpha
        order = kind == ORDER
        w = torch.where((kind == FORMAT) | order, 1.0 - a, torch.where((kind == VALUE) | (kind == DIGIT), a, 0.0))
        if not self.order_choice_now and bool(self._order_starts.any()):
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
        """Per row: mean over numeric columns of ((E[number] − number) / public range)², where
        E[number] is Σ E[digit]·10^place with E[digit] = Σ_d d·p(d) over the digit tokens'
        probabilities (teacher forcing). Differentiable in the logits, unlike an argmax-based
        number."""
        dev = logits.device
        digit_ids = torch.tensor(self.digit_outputs, device=dev)
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
        # no format learning: constrained decoding keeps the rows well formed
        if cfg.stage1_rows <= 0:
            self.format_learned = True
            self.stage1_result = TrainResult(steps_done=0, steps_planned=0, cancelled=False, epsilon_spent=0.0,
                                             seconds=0.0, samples_seen=0, last_loss=None, device=str(self.device))
            return self.stage1_result
        full = cfg.stage1_full if cfg.stage1_full is not None else not self.pretrained
        self._trainable(full)
        # stage 1 teaches the format itself: its loss is over every output (no masks)
        data = self.encode(self.format_table(), seed=(self.train_config.seed or 0) + 11, masks=False)
        tc = dataclasses.replace(self.train_config, epochs=cfg.stage1_epochs, batch_size=cfg.stage1_batch_size,
                                 lr=cfg.stage1_lr)
        # stage 1 learns the whole format, which column comes next included
        self.order_choice_now = True
        if not self.pretrained:
            # the default's input and output embeddings are trained as ONE matrix in stage 1, as
            # GPT-2's are: a value token's embedding then carries what the output side learned of it
            # (which column it belongs to), which stage 2 builds its links between columns on. Stage
            # 2 needs them apart (see untie_embeddings). Adult, ε = 1: train-on-synthetic ROC-AUC
            # 0.56 untied, 0.71 tied (benchmarks/history/2026-11-27.md, "Fourth session")
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
        """Stage 1 (public schema only, no privacy cost), before the private table is first touched;
        then stage 2's parameters are made trainable (see stage2_names). False if stage 1 was
        cancelled."""
        if not self.format_learned:
            self.learn_format(should_stop)
            # cancelled during stage 1: the private table was never read
            if not self.format_learned:
                return False
        self.untie_embeddings()
        self._trainable(False)
        return True

    def train_private(self, data, plan, on_event, should_stop, steps) -> TrainResult:
        try:
            return super().train_private(data, plan, on_event, should_stop, steps)
        finally:
            # the grammar states the private rows reached (their prefixes) are not kept past their
            # training
            self._loss_masks = None

    def ledger_details(self) -> dict:
        return {"trained_parameters": ("every weight but the position embeddings (untrained default backbone)"
                                       if self.stage2_full else
                                       "LoRA and the output layer" if self.head_names else "LoRA only"),
                "trained_parameter_count": self.n_trainable,
                "format_learning": ("stage 1 on rows drawn from the public schema only (no privacy cost)"
                                    if self.config.stage1_rows > 0 else "none (constrained decoding keeps the format)"),
                "format_learning_rows": self.config.stage1_rows}

    # --- persistence --------------------------------------------------------------------------------
    # model.pt holds every weight for the default backbone (its base weights were trained in stage
    # 1) or a pretrained one trained in full, the LoRA adapter only for a pretrained one trained
    # with LoRA (rebuilt from `backbone`, offline). The default backbone's tokenizer is rebuilt from
    # the schema; a pretrained one's is saved beside (tokenizer/).
    def state(self) -> dict:
        return {**super().state(), "format_learned": self.format_learned}

    def weights_to_save(self) -> dict[str, torch.Tensor]:
        sd = self.net.state_dict()
        if self.pretrained and not self.stage2_full:
            sd = {k: v for k, v in sd.items() if "lora_" in k or k in self.head_names}
        return sd

    def save_extra(self, directory: Path) -> None:
        if self.pretrained:
            self.tokenizer.save_pretrained(directory / "tokenizer")

    def load_weights(self, weights: dict[str, torch.Tensor], directory: Path) -> None:
        missing, unexpected = self.net.load_state_dict(weights, strict=False)
        if unexpected or (not self.pretrained and missing) or any("lora_" in k or k in self.head_names for k in missing):
            raise FileNotFoundError(f"the weights in {directory} do not fit the model "
                                    f"({len(missing)} missing, {len(unexpected)} unexpected)")

    def restore(self, state: dict) -> None:
        self.format_learned = bool(state.get("format_learned", True))
