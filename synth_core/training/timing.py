"""How long will training take? Measured, not guessed: a few DP-SGD steps on rows drawn from the public
schema alone (no private data, no privacy cost), timed on the device the run will use, scaled to the
planned number of steps."""
from __future__ import annotations

import time

from .device import device_label
from ..models import get_model_class
from ..privacy import NoisePlan
from ..schema import Schema, random_table


def estimate_fit_seconds(model: str, schema: Schema, preset: str, n_rows: int, epsilon: float, delta: float,
                         options: dict | None = None, device: str | None = None, probe_steps: int = 3) -> dict:
    """Planned steps and the estimated seconds to train them, from `probe_steps` timed steps."""
    klass = get_model_class(model)
    synth = klass(schema, preset=preset, device=device, seed=0, **(options or {}))
    plan = synth.plan_privacy(n_rows, epsilon, delta, accountant="rdp")  # only its steps and batch size matter here
    batch = max(1, int(round(plan.expected_batch_size)))
    # a small sampling rate keeps the probe's own accounting cheap; σ does not change a step's cost
    probe_rows = max(20 * batch, 100)
    probe = random_table(schema, probe_rows, seed=0)
    probe_plan = NoisePlan(noise_multiplier=1.0, sample_rate=batch / probe_rows, expected_batch_size=batch,
                           steps=probe_steps + 1, epsilon=1.0, delta=1e-6, accountant="rdp",
                           max_grad_norm=synth.train_config.max_grad_norm, planned_epsilon=1.0)
    stamps: list[float] = []

    def on_event(event: dict) -> None:
        stamps.append(time.perf_counter())

    # fixed costs a model times itself, from a few steps (DP-LLMTGen's format learning on public rows)
    time_fixed = getattr(synth, "time_fixed_costs", None)
    fixed = float(time_fixed(probe_steps)) if time_fixed is not None else 0.0
    start = time.perf_counter()
    synth.fit(probe, probe_plan.epsilon, probe_plan.delta, "rdp", plan=probe_plan, on_event=on_event,
              )
    if len(stamps) >= 2:  # the first step pays for warm-up; time the ones after it
        per_step = (stamps[-1] - stamps[0]) / (len(stamps) - 1)
    else:
        per_step = time.perf_counter() - start
    return {"seconds": per_step * plan.steps + fixed, "per_step_s": per_step, "steps": plan.steps, "batch_size": batch,
            "device": device_label(device)}
