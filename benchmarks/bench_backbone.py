"""Which transformer does Opacus train fastest for DP-TBART: our module or transformers' GPT-2?

Same size (2 layers, width 64, 4 heads), same Adult tokens, 2,048 rows per step, one DP step with
Opacus ghost clipping vs one non-private step; median of 5 steps after 2 warm-ups.

    python benchmarks/bench_backbone.py        (needs `pip install transformers`)
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from opacus.grad_sample import GradSampleModuleFastGradientClipping  # noqa: E402
from opacus.utils.fast_gradient_clipping_utils import DPTensorFastGradientClipping  # noqa: E402

from synth_core.encoding import TokenEncoder  # noqa: E402
from synth_core.training.engine import _ghost_clipping_backward  # noqa: E402
from synth_core.models import get_model_class  # noqa: E402
from synth_core.schema import Schema, read_table, validate_table  # noqa: E402


def median_step(fn, reps=5, warm=2) -> float:
    times = []
    for i in range(warm + reps):
        t = time.perf_counter()
        fn()
        if i >= warm:
            times.append(time.perf_counter() - t)
    return float(np.median(times))


def main() -> None:
    from transformers import GPT2Config, GPT2LMHeadModel
    torch.manual_seed(0)
    schema = Schema.load(ROOT / "benchmarks" / "adult.schema.json")
    table, _ = validate_table(read_table(ROOT.parent / "shared" / "datasets" / "adult.csv", schema), schema)
    ours = get_model_class("dp-tbart")(schema)
    rows = ours.encode(table.sample(2048, random_state=0))
    enc: TokenEncoder = ours.encoder
    C = enc.n_columns

    # GPT-2 over the same tokens: one shared head over the whole vocabulary, masked to each column's
    # slice
    cfg = GPT2Config(vocab_size=enc.vocab_size, n_positions=C, n_embd=64, n_layer=2, n_head=4,
                     resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                     tie_word_embeddings=False)  # ghost clipping cannot handle tied weights
    gpt2 = GPT2LMHeadModel(cfg)
    bias = torch.from_numpy(np.where(enc.vocab_mask(), 0.0, -1e9).astype(np.float32))
    bos = torch.zeros((len(rows), 1), dtype=torch.long)
    tokens_in = torch.cat([bos, rows[:, :-1]], dim=1)
    # Opacus needs batch-first positions
    position_ids = torch.arange(C).expand(len(rows), C).contiguous()

    def gpt2_losses(module):
        logits = module(input_ids=tokens_in, position_ids=position_ids).logits + bias
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), rows.reshape(-1), reduction="none").view(rows.shape).mean(1)

    results = {}
    for name, net, losses_fn in [
        ("own module", ours.net, lambda m: ours.loss_fn(m, rows)),
        ("transformers GPT-2", gpt2, gpt2_losses),
    ]:
        params = sum(p.numel() for p in net.parameters())
        net.train()

        def plain():
            net.zero_grad()
            losses_fn(net).mean().backward()
        t_plain = median_step(plain)
        gsm = GradSampleModuleFastGradientClipping(net, loss_reduction="mean", use_ghost_clipping=True, max_grad_norm=1.0)
        opt = torch.optim.SGD(gsm.parameters(), lr=0.0)

        class _Opt:  # what DPTensorFastGradientClipping needs of an optimizer
            def zero_grad(self):
                opt.zero_grad()

        def dp():
            losses = losses_fn(gsm)
            if name == "own module":
                _ghost_clipping_backward(gsm, _Opt(), losses)
            else:
                DPTensorFastGradientClipping(gsm, _Opt(), losses, "mean").backward()
            opt.zero_grad()
        t_dp = median_step(dp)
        gsm._close()
        results[name] = (params, t_plain, t_dp)
        print(f"{name:<20} {params:>8,} params  non-private {len(rows) / t_plain:>6.0f} rows/s  "
              f"DP (ghost) {len(rows) / t_dp:>6.0f} rows/s  ratio {t_plain / t_dp:.2f}")
    own, hf = results["own module"], results["transformers GPT-2"]
    print(f"DP step: GPT-2 takes {hf[2] / own[2]:.1f}x the time of the own module")


if __name__ == "__main__":
    main()
