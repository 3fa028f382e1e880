"""What a family says about itself and what the time estimate asks of it: neither is part of its DP
contract (models.base.SynthModel), and neither is read by anything that spends ε."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ..privacy.planning import NoisePlan, RhoPlan, plan_rho
from .calibration import MIN_POOL, POOL_GROWTH


@dataclass(frozen=True)
class LocalChoice:
    """A family option whose value is something on this machine (a pretrained model): its default,
    what is offered from this machine (label -> value), or a path typed in; `check` turns a value
    into the one the option takes (ValueError saying what is wrong). Nothing is downloaded: the page
    offers what is here."""
    option: str                     # the config field it sets
    label: str                      # the choice's short name ("Backbone")
    title: str
    explanation: str
    default_label: str              # the option's default (None)
    offered: dict[str, str]
    check: Callable[[str], str]
    help: str = ""
    nothing_offered: str = ""       # said when `offered` is empty
    path_label: str = "A local directory…"
    path_prompt: str = "Directory"
    path_placeholder: str = ""
    missing_path: str = "Give the directory, or choose the default."


class Described:
    """The words pages, reports and the CLI use for a family."""
    label = ""              # a plain-language name, shown before the family's technical name
    description = ""        # one plain-language line: what the model is
    when_to_pick = ""       # one plain-language line: when a steward should choose it
    # one plain-language line: what usually makes this family's synthetic table more faithful
    improve_hint = "A larger ε, a larger model size or more epochs usually helps."
    # the app's size choice -> a preset name in `presets`
    size_presets: dict[str, str] = {}

    @classmethod
    def summary(cls) -> str:
        """The description's first sentence, without its technical aside in parentheses: a
        caption."""
        return cls.description.split(". ")[0].split(" (")[0].rstrip(".")

    @classmethod
    def local_choices(cls) -> list[LocalChoice]:
        """Options whose values are found on this machine, for the model page to offer (none by
        default)."""
        return []

    @classmethod
    def planning_note(cls, epsilon: float, accountant: str) -> str:
        """What the terminal says while the run plans its noise, before anything is spent."""
        return f"calibrating noise for ε = {epsilon:g} with the {accountant.upper()} accountant"

    @classmethod
    def size_of(cls, preset: str) -> str:
        """The size a person chose for a preset (quick, standard, best: `size_presets`), or the
        preset's own name where no size maps to it (tiny): the word every page, run name and report
        uses."""
        return next((size for size, p in cls.size_presets.items() if p == preset), preset)


class Timed:
    """What the time estimate (runs.timing) and the sampler's pool ask of a family."""
    # a training step's cost grows with the rows in it (DP-SGD's batch); AIM's round reads counts
    # computed once
    step_cost_grows_with_rows = True
    # how many times its first size a calibration pool may grow to while its weights rest on too few
    # rows (models.calibration.grow_and_calibrate); a family whose rows are slow to draw keeps its
    # first pool
    max_pool_growth = POOL_GROWTH
    # the fewest candidates a calibrated sample's first pool holds (models.calibration.pool_size)
    min_pool = MIN_POOL
    # seconds of setting up before the first step when no run of the family was timed (the plan, the
    # noisy count and marginals, building the model): 1.6-2.1 s for DP-TBART on 4 tables (2 cores)
    setup_s = 1.6
    # libraries its worker imports afresh as it sets up, beyond setup_s, which the app's process
    # that times a probe may hold already (synth_core.import_clock)
    worker_imports: tuple[str, ...] = ()

    @classmethod
    def timing_variant(cls, options: dict) -> str:
        """What of these options makes a step cost another order of magnitude (a part of the time
        estimate's key); "" when none does."""
        return ""

    @classmethod
    def forget_compiled(cls) -> None:
        """Drop what this process compiled for the family, so that the estimate's probe times a step
        as the run's fresh worker process takes it (AIM's rounds compile JAX programs: warm, a round
        took 0.02 s where the worker's took 0.5-0.8 s)."""

    @classmethod
    def probe_batch_limit(cls, options: dict) -> int:
        """The largest batch the time estimate's probe steps should hold."""
        return 1 << 30

    def expected_steps(self, plan) -> int:
        """The steps to expect of a run of this plan, for a time estimate made before any run of the
        model on this machine: all of them; an adaptive mechanism (AIM) usually ends far earlier."""
        return plan.steps

    def timed_plan(self, plan):
        """The plan the estimate's probe runs a few rounds of, for a family with its own mechanism
        (`uses_dp_sgd = False`): the run's own."""
        return plan

    def most_steps(self, plan) -> int:
        """The most steps or rounds a run of this plan may take: all of them (AIM: the top of the
        band its rounds are held in)."""
        return plan.steps

    def probe_plan(self, rows: int, batch: int, steps: int) -> NoisePlan | RhoPlan:
        """A plan for timing `steps` steps of `batch` expected rows on `rows` random rows from the
        public schema (the estimate's probe): σ does not change a step's cost. A family with its own
        mechanism (`uses_dp_sgd = False`): `steps` rounds paid in ρ, each on all the rows."""
        if not self.uses_dp_sgd:
            return plan_rho(1.0, 1e-6, steps, rows)
        return NoisePlan(noise_multiplier=1.0, sample_rate=batch / rows, expected_batch_size=batch, steps=steps,
                         epsilon=1.0, delta=1e-6, accountant="rdp", max_grad_norm=self.train_config.max_grad_norm,
                         planned_epsilon=1.0)
