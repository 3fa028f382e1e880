"""DP-LLMTGen's settings: the config (what a run saves) and the presets, with what a pretrained
backbone on a CPU changes in them (model.py reads both)."""

from __future__ import annotations

from dataclasses import dataclass


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
    # None: the attention and MLP projections peft knows for the model; "all-linear": every linear
    # layer
    lora_targets: list | str | None = None
    # LoRA on the last k blocks of a pretrained backbone only (None: every block). The blocks below
    # hold no trainable weight, so the backward pass (and per-row clipping) stops above them: on a
    # CPU, most of a step's time is the backward through a deep frozen network
    lora_last_layers: int | None = None
    # weight of value tokens in the cross-entropy (1 - alpha on format tokens)
    alpha: float = 0.65
    # stage 2 learns which column comes next (True), or only that one does (False: the loss at a
    # column name is -log P(any column name), whether the value ended; the choice among them is left
    # out). The column order is drawn at random per row, so the choice says nothing about the table:
    # stage 1 teaches it, and in stage 2 its gradient would only be noise inside each row's clipped
    # gradient
    stage2_order: bool = False
    beta: float = 0.1         # weight of the numerical-understanding loss
    stage1_rows: int = 20000  # rows drawn from the public schema for format learning
    stage1_epochs: float = 1.0
    stage1_batch_size: int = 128
    stage1_lr: float = 3e-3
    # train every weight in stage 1 (public data only) or LoRA only; None: every weight for the
    # untrained default backbone, LoRA only for a pretrained one (whose knowledge full fine-tuning
    # on random rows erodes)
    stage1_full: bool | None = None
    # stage 2 (DP-SGD): every weight but the position embeddings, or LoRA only. None: every weight
    # for the untrained default backbone, LoRA only for a pretrained one. LoRA is how a pretrained
    # model keeps what it knows; the default knows nothing, and after stage 1 its LoRA learned no
    # link between columns even without noise (benchmarks/history/2026-11-27.md, "Third session: why
    # the default backbone learned no links")
    stage2_full: bool | None = None
    # how a row is written (encoding.text): "sentence" ("age is 39, sex is Female, …", any column
    # order) or "compact" (a CSV line after a header naming the columns once: half the tokens,
    # schema order). None: compact for a pretrained backbone (whose time goes into each token),
    # sentence for the default
    row_format: str | None = None
    # what the output layer predicts: "row" (only the tokens a row's text can hold, from the public
    # schema: a pretrained model's 49k-token output layer and its softmax cost more than its last
    # blocks on a CPU) or "all" (the tokenizer's vocabulary). The default backbone's vocabulary is
    # the schema's already
    output_tokens: str = "row"
    constrained: bool = True  # constrained decoding by default
    # stage 2's cross-entropy at each token over the tokens constrained decoding allows there (the
    # choice the model makes when it samples) instead of over every output. None: for a pretrained
    # backbone sampled with constraints. One without stage 1 puts most of its probability outside
    # the row grammar (SmolLM2 on Adult: 39% inside; 57% of a row's tokens have one allowed token),
    # and over every output the noisy steps go into teaching it a format that constrained decoding
    # imposes anyway (2,000 Adult rows, ε = 1: 2-way TVD 0.425 -> 0.244). The default backbone
    # learns the format in stage 1: level or slightly worse with it on three tables
    # (benchmarks/history/2026-11-27.md), so it keeps the loss over every output
    constrained_loss: bool | None = None
    # constrained decoding: the model says when a value ends; which column comes next is drawn
    # uniformly from those not yet written, as in training (whose order is random per row). Else the
    # model picks it too, from what stage 1 taught it (stage 2 does not train that choice unless
    # stage2_order)
    uniform_order: bool = True
    # at most this many rows sampled without constraints to report their format compliance
    compliance_probe: int = 200
    sample_batch_size: int = 1024

    ZERO_OK = frozenset({"stage1_rows", "compliance_probe"})  # 0: no stage 1, no probe

    def check(self) -> None:
        """What models.base.check_model_options leaves: sizes that must agree, shares, choices."""
        from ..options import check_choices
        if self.backbone is None and self.n_embd % self.n_head:
            raise ValueError(f"n_embd ({self.n_embd}) must be a multiple of n_head ({self.n_head})")
        if not 0 <= self.alpha <= 1:
            raise ValueError(f"alpha is a weight from 0 to 1, not {self.alpha!r}")
        if self.backbone is not None and not isinstance(self.backbone, str):
            raise ValueError(f"backbone must be a local path or a cached model id, not {self.backbone!r}")
        check_choices(self, output_tokens=("row", "all"))
        if self.row_format is not None:
            check_choices(self, row_format=("sentence", "compact"))


# Stage 2's per-sample clipping: "hooks" (Opacus materialises each row's LoRA gradient: one backward
# pass, ~16k numbers a row for the CPU sizes) is ~1.6x faster on a CPU than "ghost" (norms without
# per-sample gradients, but two backward passes through the frozen network). Both clip each row's
# whole gradient to max_grad_norm; ghost stays for the GPU size, whose LoRA gradients per row are
# too large to materialise.
PRESETS: dict[str, dict] = {
    # seconds, for tests and demos on tiny tables
    "tiny": dict(model=dict(n_layer=2, n_head=2, n_embd=32, lora_r=4, stage1_rows=300, stage1_epochs=2,
                            stage1_batch_size=32, stage1_lr=1e-2, compliance_probe=20, sample_batch_size=256),
                 train=dict(epochs=2, batch_size=64, lr=1e-2, max_grad_norm=1.0, grad_sample_mode="hooks")),
    # a first look on 2 CPU cores for a table the size of Adult
    "quick": dict(model=dict(n_layer=2, n_head=4, n_embd=64, lora_r=8, stage1_rows=60000, stage1_epochs=1,
                             stage1_batch_size=16, stage1_lr=2e-3),
                  train=dict(epochs=1, batch_size=512, lr=1e-2, max_grad_norm=1.0, grad_sample_mode="hooks")),
    # the CPU default: a row costs ~40 tokens, so one DP epoch of Adult is ~1.6M tokens. Stage 1 (no
    # privacy cost) takes small batches: a CPU step's cost is proportional to its rows, and the row
    # grammar (which columns are left, how many digits a bounded number has) is learned per step,
    # not per row: 120,000 random rows in batches of 16 took unconstrained format compliance on
    # Adult from 0% (10,000 rows in batches of 128) to ~80% in ~4 minutes on one thread
    "cpu": dict(model=dict(n_layer=2, n_head=4, n_embd=64, lora_r=8, stage1_rows=120000, stage1_epochs=1,
                           stage1_batch_size=16, stage1_lr=2e-3),
                train=dict(epochs=2, batch_size=512, lr=1e-2, max_grad_norm=1.0, grad_sample_mode="hooks")),
    # GPT-2-small-sized default backbone, or a pretrained one given as `backbone`, for a GPU
    "gpu": dict(model=dict(n_layer=12, n_head=12, n_embd=768, lora_r=16, lora_alpha=32, stage1_rows=50000,
                           stage1_epochs=2, stage1_lr=5e-4, stage1_batch_size=64),
                train=dict(epochs=5, batch_size=1024, lr=3e-3, max_grad_norm=1.0, grad_sample_mode="ghost")),
}


# What a pretrained backbone changes in a preset: these replace the preset's values, under any
# option given. On the CPU presets (SmolLM2-135M: 30 blocks, 576 wide, costs ~100x the default per
# token): LoRA on the last 2 blocks only (the backward pass stops there), the compact rows and the
# output layer cut to the row's tokens make a step ~7x cheaper (Adult with SmolLM2, 2 cores: 1.0 ->
# 7.3 rows/s). No stage 1: on random rows from the schema it taught the pretrained model uniform
# values, which 16 noisy steps could not undo (2,000 Adult rows, ε = 1: 1-way TVD 0.466); the model
# reads CSV already and constrained decoding keeps the format. LoRA on every linear layer of those
# blocks, and the small output layer, give stage 2 something to move. Poisson batches of 64 rows at
# learning rate 1e-2 on the `cpu` preset: SmolLM2 moves with the updates, and ~250-row batches on a
# 2,000-row table gave it 16; 64-row ones give ~60 for the same rows seen, the same time and ε
# (2-way TVD at ε = 1: Adult 2,000 rows 0.506 -> 0.394, HMDA 0.430 -> 0.341, Wages1 0.412 -> 0.300;
# a rate of 2e-2 was level on TVD but left HMDA's rare `deny` class out;
# benchmarks/history/2026-11-27.md). Stage 2's loss is over what constrained decoding allows at each
# token (LLMConfig.constrained_loss): with it, 2-way TVD at ε = 1 fell again (Adult 0.425 -> 0.244,
# HMDA 0.341 -> 0.318, Wages1 0.300 -> 0.258), ahead of the default on all three. With it, `quick`
# (1 epoch) takes the same batches and rate: 2-way TVD 0.417 -> 0.294 on those Adult rows, HMDA
# 0.403 -> 0.326 (its rare class kept; before this loss it was lost), Wages1 0.410 -> 0.328.
# On the GPU preset: no stage 1 either; LoRA r = 8 on every linear layer of the last 4 blocks
# (457,536 trained weights with the output layer), 2 epochs of Poisson batches of 256 at learning
# rate 2e-2, physical batches of
# 256. Full Adult at ε = 1 on an H200: 2-way TVD 0.124 and train-on-synthetic AUC 0.824, ahead of
# the untrained default's gpu preset (0.174 / 0.536); LoRA on every block with the default's batches
# of 1,024 for one epoch (5.0 M weights, 38 steps: the noise swamped the updates) gave 0.218 / 0.389
# (benchmarks/history/2026-11-27.md).
_CPU_MODEL = dict(lora_last_layers=2, lora_targets="all-linear", stage1_rows=0, sample_batch_size=256,
                  compliance_probe=50)
_CPU_TRAIN = dict(lr=1e-2, batch_size=64)
PRETRAINED: dict[str, dict] = {
    "tiny": dict(model=dict(lora_last_layers=1, stage1_rows=32, stage1_batch_size=16, sample_batch_size=64),
                 train=dict(epochs=1)),
    "quick": dict(model=_CPU_MODEL, train=dict(_CPU_TRAIN, epochs=1)),
    "cpu": dict(model=_CPU_MODEL, train=dict(_CPU_TRAIN, epochs=2)),
    "gpu": dict(model=dict(lora_last_layers=4, lora_r=8, lora_alpha=16, lora_targets="all-linear", stage1_rows=0),
                train=dict(epochs=2, batch_size=256, lr=2e-2, physical_batch_size=256)),
}
