"""What every model family shares: configuration and presets, DP fit through the engine, save and load,
the registry. A family supplies the hooks `SynthModel`'s docstring lists (`build`, `encode`, `draw`, and
`loss_fn` or its own mechanism); scikit-learn style, `fit` then `sample` (sampling.py: the flow,
written once). The token models' `draw` is in token.py, the vector models' in vector.py.

A family never computes or records an ε: it declares how its training samples (`sampling_shape`), the
privacy layer plans the noise for it, the engine counts the steps it starts, and `fit` has the privacy layer
charge them (`privacy.ledger.record_training`) however training ends. A family that trains differently
(the GANs) overrides the `train_private` hook; one with work before the private table is read (DP-LLMTGen's
format learning) overrides `prepare`; one with more to say in the ledger, `ledger_details`.
A family with its own mechanism instead of DP-SGD (`uses_dp_sgd = False`: AIM) spends a budget ρ
that the same hooks plan, make and charge from what it declares (models.own_mechanism).
"""
from __future__ import annotations

import abc
import dataclasses
import json
from pathlib import Path
from typing import Any, Callable

import pandas as pd
import torch

from ..errors import SamplingError  # noqa: F401  (raised here; its home costs no import of torch)
from ..privacy import NoisePlan, PrivacyLedger
from ..privacy import planning, selection
from ..privacy.planning import RhoPlan, SamplingShape
from ..privacy.ledger import record_training
from ..privacy.measurements import Marginals
from ..schema import Schema
from ..schema.linked import schema_from_dict
from ..shape import PERSONS, SINGLE, shape_of
from ..training import distributed
from ..training.device import device_label, pick_device
from ..training.engine import StepCount, TrainConfig, TrainResult, train
from .own_mechanism import OwnMechanism
from .sampling import Sampling, draw_with_rejection  # noqa: F401 - the families' import
from .options import check_model_options
from . import plan_words
from .plan_words import PlanSummary
from .traits import Described, Timed

# every family's classes by (name, the shape they take): one registry; a family declares its shape
# (`takes`, a capability as scikit-learn's tags are), and a name may have one class per shape
FAMILIES: dict[tuple[str, str], type["SynthModel"]] = {}
MODELS: dict[str, type["SynthModel"]] = {}         # those that take one table, by name (a view)
LINKED_MODELS: dict[str, type["SynthModel"]] = {}  # those that take persons' tables (a view)


def register(name: str):
    """Register a family under `name` (what --model, the app's list and a run's model.json call
    it) for the shape its class declares it takes (`takes`); refused (TypeError) if it leaves part
    of the contract (SynthModel's docstring) unimplemented."""
    def deco(cls):
        missing = sorted(getattr(cls, "__abstractmethods__", ()))
        if missing:
            raise TypeError(f"the family {name!r} does not implement {', '.join(missing)}")
        if cls.uses_dp_sgd and cls.loss_fn is SynthModel.loss_fn and cls.train_private is SynthModel.train_private:
            raise TypeError(f"the family {name!r} trains by DP-SGD: implement loss_fn (one loss per row), or set "
                            "uses_dp_sgd = False and implement train_private (its own mechanism)")
        if not cls.uses_dp_sgd and cls.train_private is SynthModel.train_private:
            raise TypeError(f"the family {name!r} has its own mechanism (uses_dp_sgd = False): "
                            "implement train_private, spending self.budget")
        cls.family = name
        FAMILIES[(name, cls.takes.name)] = cls
        (LINKED_MODELS if cls.takes is PERSONS else MODELS)[name] = cls
        return cls
    return deco


def get_model_class(name: str, shape=SINGLE) -> type["SynthModel"]:
    """The family `name` for tables of `shape` (synth_core.shape: one table by default); ValueError,
    one line, for an unknown name or a family that does not take that shape."""
    if (name, shape.name) in FAMILIES:
        return FAMILIES[(name, shape.name)]
    if not any(n == name for n, _ in FAMILIES):
        raise ValueError(f"unknown model {name!r}; choose one of {', '.join(sorted(MODELS))}")
    raise ValueError(f"{name} does not support {shape.name} yet; choose "
                     f"{', '.join(sorted(n for n, s in FAMILIES if s == shape.name))}")


def families_for(schema, answers: frozenset | None = None) -> list[str]:
    """The families that train tables of `schema`'s shape (one table, or linked ones), by name;
    `answers`: only those that fit a table an engine holds that gives these
    (`encoding.engine.Counting.answers`: a file too large to read whole, a cluster's table)."""
    shape = shape_of(schema)
    return sorted(n for n, s in FAMILIES if s == shape.name and
                  (answers is None or get_model_class(n, shape).from_engine in answers))


def model_class_for(name: str, schema) -> type["SynthModel"]:
    """The class that trains the family `name` on tables of `schema`'s shape (one table, or linked ones)."""
    return get_model_class(name, shape_of(schema))


class SynthModel(Described, Timed, OwnMechanism, Sampling, abc.ABC):
    """A model family's DP contract. A family implements, and ARCHITECTURE.md's "Adding a family" walks through:

    build()          (abstract) its network in `self.net` from the public schema only (None: no network)
    encode(table)    (abstract) the validated private rows as what its training reads
    draw(n, conditions, seed)  (abstract) n rows of the model meeting `conditions`; sets `last_sample_info`
    and by DP-SGD through the shared engine (per-sample clipping, Poisson batches, secret noise):
    loss_fn(module, rows)      one loss per row
    sampling_shape(n_rows)     how its training samples (the default reads its TrainConfig); never an ε
    or by its own mechanism, with `uses_dp_sgd = False` and its ledger words in `dp_mechanism`:
    train_private(data, plan, on_event, should_stop, steps)  spends `self.budget` (ρ, made by
                     `fit`), counts its rounds in `steps`; `round_event`, `rounds_result` tell them
    planned_rounds()           its rounds (default 1); the base plans, charges and describes them

    and as class attributes `config_class` (a dataclass of its options; its own `check` adds what must agree)
    and `presets` (at least tiny, quick and cpu: {"model": {...}, "train": {...}}; "train" is
    DP-SGD's). Optional hooks: check_schema, prepare, ledger_details, count_noise, plan_summary,
    weights_to_save, load_weights, save_extra, restore, upgrade_state. What it says about itself
    (models.traits.Described) and what the time estimate asks of it (models.traits.Timed) are apart
    from this contract."""
    family = "base"
    config_class: type = object
    presets: dict[str, dict] = {}

    def __init__(self, schema: Schema, preset: str = "cpu", device: str | None = None, seed: int | None = 0,
                 **overrides: Any):
        self.config, self.train_config = self.configure(preset, overrides, seed=seed, device=device)
        self.preset = preset
        # the steward's schema, saved with the model; a family learns (and encodes) its modelled columns only:
        # derived columns are computed from their public rules after sampling (`sample`)
        self.full_schema = schema
        self.schema = schema.modelled()
        self.device = pick_device(device)
        self.plan: NoisePlan | RhoPlan | None = None
        self.budget: selection.RhoBudget | None = None  # its own mechanism's ρ, made by `fit`
        self.train_result: TrainResult | None = None
        self.last_sample_info: dict = {}
        self.calibration: Marginals | None = None  # the run's noisy marginals, if it measured any
        if seed is not None:
            torch.manual_seed(seed)  # the initial weights are part of what a seed reproduces
        self.build()
        if self.net is not None:  # a family without a network (AIM's graphical model) sets None
            self.net.to(self.device)

    @classmethod
    def configure(cls, preset: str, overrides: dict | None = None, seed: int | None = 0,
                  device: str | None = None) -> tuple[Any, TrainConfig]:
        """(model config, training config) for a preset and options, each checked (ValueError naming the
        option): what a run can be refused for before anything touches the private table."""
        if preset not in cls.presets:
            raise ValueError(f"unknown preset {preset!r} for {cls.family}; choose one of {', '.join(cls.presets)}")
        if overrides is not None and not isinstance(overrides, dict):
            raise ValueError(f"options are KEY=VALUE pairs (a dict), not {type(overrides).__name__}")
        overrides = dict(overrides or {})
        model_fields = {f.name for f in dataclasses.fields(cls.config_class)}
        train_fields = ({f.name for f in dataclasses.fields(TrainConfig)} - {"seed", "device"}) if cls.uses_dp_sgd else set()
        unknown = set(overrides) - model_fields - train_fields
        if unknown:
            raise ValueError(f"unknown options for {cls.family}: {', '.join(sorted(unknown))}")
        base = cls.presets[preset]
        config = cls.config_class(**{**base["model"], **{k: v for k, v in overrides.items() if k in model_fields}})
        check_model_options(config)
        trained = {k: v for k, v in overrides.items() if k in train_fields}
        train_config = TrainConfig(**{**base.get("train", {}), **trained}, seed=seed, device=device)
        train_config.check()
        pick_device(device)  # a device this machine has
        return config, train_config

    # --- a family implements these (see the class's docstring) ----------------------------------------
    @abc.abstractmethod
    def build(self) -> None:
        """Set `self.net` (a torch module, or None) from the public schema and the config only."""

    @abc.abstractmethod
    def encode(self, table: pd.DataFrame) -> torch.Tensor:
        """The validated private rows as the tensor training reads."""

    def loss_fn(self, module, rows) -> torch.Tensor:
        """One loss per row of `rows` (a Poisson batch of `encode`'s tensor), for DP-SGD."""
        raise NotImplementedError(f"{self.family} trains by its own mechanism, not by DP-SGD")

    @property
    def n_parameters(self) -> int:
        return sum(p.numel() for p in self.net.parameters()) if self.net is not None else 0

    # --- training -----------------------------------------------------------------------------------
    # what the ledger calls this family's private training
    dp_mechanism = "DP-SGD (Poisson sampling, per-sample clipping, Gaussian noise)"
    # whether it trains by DP-SGD (takes the training options: epochs, batch size, ...); AIM does not
    uses_dp_sgd = True
    # the shape of the tables it trains on (synth_core.shape): one table; a person family: PERSONS
    takes = SINGLE
    # whether its training already fits noisy marginals (AIM): a calibration measurement would only repeat it
    measures_marginals = False
    # whether its private training runs across torchrun's processes (training.distributed)
    trains_distributed = True
    # what it asks of a table an engine holds (encoding/engine.py, `Counting.answers`), None: it
    # reads the table whole. "counts": AIM's rounds ask counts of cliques (any engine, a
    # cluster's too); "rows": the token and vector families read their encoded rows from the
    # engine's disk, a Poisson batch at a time (an engine on this machine)
    from_engine: str | None = None
    # the variance of the row count the run released (0: public, or no ledger); set by `fit` from the ledger
    count_variance = 0.0

    @classmethod
    def check_schema(cls, schema) -> None:
        """ValueError if the family cannot model a table with this public schema in reasonable time (asked
        before anything is spent; a family with limits overrides it)."""

    @classmethod
    def check_processes(cls, processes: int) -> None:
        """ValueError if the family cannot train across this many processes."""
        if processes > 1 and not cls.trains_distributed:
            raise ValueError(f"{cls.family} trains in one process; start it without torchrun (or ask for one "
                             "process), or choose another family")

    def sampling_shape(self, n_rows: int) -> SamplingShape:
        """How DP training samples a table of n_rows rows (see privacy.planning.SamplingShape)."""
        tc = self.train_config
        # small tables: at least ~8 Poisson batches per epoch. Fewer, larger batches leave too few steps to
        # learn from (demo table, 3.6k rows, ε=1: 2-way TVD 0.162 with n/2 batches vs 0.129 with n/8)
        batch = min(tc.batch_size, max(1, n_rows // 8))
        return SamplingShape(population=n_rows, expected_batch=batch, epochs=tc.epochs, max_grad_norm=tc.max_grad_norm)

    def plan_privacy(self, n_rows: int, epsilon: float, delta: float, accountant: str = "prv",
                     alongside: tuple = ()) -> NoisePlan | RhoPlan:
        """The noise plan; `alongside`: the run's Gaussian measurements, composed with the training.
        Its own mechanism's: ρ for its planned rounds (`rho_plan`)."""
        if not self.uses_dp_sgd:
            return self.rho_plan(n_rows, epsilon, delta, alongside)
        return planning.plan(self.sampling_shape(n_rows), epsilon, delta, accountant, alongside)

    def count_noise(self, plan) -> float | None:
        """The noise's standard deviation on each column's counts that the family's own measurements carry under
        `plan` (AIM: its first round), for a forecast; None: it measures none (DP-SGD alone)."""
        return None

    def plan_summary(self, plan, rows: int, epsilon: float, accountant: str, bounds: bool = False,
                     statistics: bool = False) -> PlanSummary:
        """The plan in a steward's words, for the model page (models.plan_words): what it adds, how many steps,
        what training alone costs, and any warning. `accountant`: the one asked for; bounds, statistics:
        whether the run pays for DP bounds and measures the marginals alongside."""
        if not self.uses_dp_sgd:
            return self.rho_summary(plan, rows, epsilon, bounds, statistics)
        return plan_words.dp_sgd_summary(plan, rows, epsilon, self.train_config.epochs, self.n_parameters,
                                         accountant, bounds, statistics, self.ledger_details().get("unit", "row"))

    def fit(self, table: pd.DataFrame, epsilon: float, delta: float, accountant: str = "prv",
            ledger: PrivacyLedger | None = None,
            on_event: Callable[[dict], None] | None = None,
            should_stop: Callable[[], bool] | None = None,
            plan: NoisePlan | None = None) -> "SynthModel":
        """DP training on a table already validated against the schema (schema.validate_table).

        ε here is what DP training may spend; `plan`, if given, must come from `plan_privacy` with the same
        arguments (it saves a second calibration). The steps started are charged to `ledger` however
        training ends: completed, cancelled (the model trained so far is kept) or failed."""
        if plan is not None and not plan.matches(epsilon, delta, accountant):
            raise ValueError("the noise plan was calibrated for another budget")
        self.plan = plan if plan is not None else self.plan_privacy(len(table), epsilon, delta, accountant)
        self.budget = None if self.uses_dp_sgd else selection.RhoBudget(self.plan.rho)
        self.count_variance = ledger.count_variance if ledger is not None else 0.0
        steps, outcome = StepCount(), "interrupted"
        try:
            if self.prepare(should_stop):
                self.train_result = self.train_private(self.encode(table), self.plan, on_event, should_stop, steps)
            else:  # cancelled before the private table was read
                self.train_result = TrainResult(steps_done=0, steps_planned=self.plan.steps, cancelled=True,
                                                epsilon_spent=0.0, seconds=0.0, samples_seen=0, last_loss=None,
                                                device=device_label(self.device))
            outcome = "cancelled" if self.train_result.cancelled else "completed"
        finally:
            if ledger is not None:
                self.charge(ledger, outcome, steps.started)
        return self

    def charge(self, ledger: PrivacyLedger, outcome: str, steps: int) -> None:
        """Charge the private training to the ledger, however it ended (outcome: completed, cancelled or
        interrupted): the `steps` started, by the plan; its own mechanism's: the ρ it spent
        (`rho_charge`)."""
        if not self.uses_dp_sgd:
            return self.rho_charge(ledger, outcome, steps)
        mechanism = self.dp_mechanism if outcome != "interrupted" else "DP-SGD (interrupted)"
        group = distributed.current()
        record_training(ledger, mechanism, self.plan, steps, cancelled=outcome == "cancelled",
                        model=self.family, **({"processes": group.world_size} if group.active else {}),
                        **self.ledger_details())

    def prepare(self, should_stop: Callable[[], bool] | None = None) -> bool:
        """Work done before the private table is read (no privacy cost); False if it was cancelled."""
        return True

    def train_private(self, data: torch.Tensor, plan: NoisePlan, on_event: Callable[[dict], None] | None,
                      should_stop: Callable[[], bool] | None, steps: StepCount) -> TrainResult:
        """DP training on the encoded rows under `plan`; every step started is counted in `steps`."""
        return train(self.net, data, self.loss_fn, self.train_config, plan, on_event=on_event,
                     should_stop=should_stop, steps=steps)

    def ledger_details(self) -> dict:
        """What else the ledger should say about this family's private training."""
        return {}

    # --- sampling -----------------------------------------------------------------------------------
    @abc.abstractmethod
    def draw(self, n: int, conditions: dict | None = None, seed: int | None = None, **options) -> pd.DataFrame:
        """The family's sampler: n rows of the model meeting `conditions`; sets `last_sample_info`."""

    # --- persistence --------------------------------------------------------------------------------
    def state(self) -> dict:
        """What model.json holds: enough to rebuild the model before its weights are loaded."""
        return {
            "family": self.family, "preset": self.preset,
            "config": dataclasses.asdict(self.config), "train_config": self.train_config.to_dict(),
            "schema": self.full_schema.to_dict(),
            "plan": self.plan.to_dict() if self.plan else None,
            "calibration": self.calibration.to_dict() if self.calibration else None,
        }

    def weights_to_save(self) -> dict[str, torch.Tensor]:
        """The weights model.pt holds (every weight of the network; a family may keep fewer)."""
        return self.net.state_dict() if self.net is not None else {}

    def save_extra(self, directory: Path) -> None:
        """Anything else a family needs beside model.pt and model.json."""

    def save(self, directory: str | Path) -> None:
        from ..files import atomic_output, write_atomic
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        self.save_extra(directory)
        with atomic_output(directory / "model.pt", "wb", private=True) as f:
            torch.save({k: v.detach().cpu() for k, v in self.weights_to_save().items()}, f)
        write_atomic(directory / "model.json", json.dumps(self.state(), indent=2), private=True)

    @classmethod
    def upgrade_state(cls, state: dict) -> dict:
        """A saved state as this version reads it: a family whose defaults changed fills in, here, the
        values that older saves were made with."""
        return state

    def load_weights(self, weights: dict[str, torch.Tensor], directory: Path) -> None:
        """Put saved weights into the freshly built network (every weight must fit; without a
        network, none)."""
        if self.net is None and weights:
            raise KeyError("weights saved for a network this model does not have")
        if self.net is not None:
            self.net.load_state_dict(weights)

    def restore(self, state: dict) -> None:
        """Anything a family keeps in its state beyond what rebuilds it."""

    @classmethod
    def load(cls, directory: str | Path, device: str | None = None) -> "SynthModel":
        """The model saved in `directory`, as the family it was saved by (whichever class this is called on)."""
        directory = Path(directory)
        try:
            state = json.loads((directory / "model.json").read_text())
        except (OSError, json.JSONDecodeError, UnicodeDecodeError) as e:
            raise FileNotFoundError(f"no saved model in {directory}: {e}") from None
        try:
            klass = get_model_class(state["family"], PERSONS if state.get("linked") else SINGLE)
            if not issubclass(klass, cls):
                raise ValueError(f"{directory} holds a {state['family']} model, not a {cls.family} one")
            state = klass.upgrade_state(state)
            tc = {k: v for k, v in state["train_config"].items()
                  if k not in ("seed", "device")} if klass.uses_dp_sgd else {}
            model = klass(schema_from_dict(state["schema"]), preset=state["preset"], device=device,
                          seed=state["train_config"].get("seed"), **state["config"], **tc)
        except (KeyError, TypeError, AttributeError) as e:
            raise ValueError(f"the model description {directory / 'model.json'} is damaged ({type(e).__name__}: "
                             f"{e}); train the run again") from None
        try:
            weights = torch.load(directory / "model.pt", map_location=model.device, weights_only=True)
        except FileNotFoundError:
            raise FileNotFoundError(f"no saved weights in {directory} (model.pt is missing)") from None
        except Exception as e:  # noqa: BLE001 - torch raises several kinds for a truncated or foreign file
            raise ValueError(f"the weights file {directory / 'model.pt'} is damaged ({type(e).__name__}); train the "
                             "run again") from None
        try:
            model.load_weights(weights, directory)
        except (RuntimeError, KeyError, TypeError) as e:
            first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            raise ValueError(f"the weights in {directory} do not fit the model ({first}); train the run again") from None
        if model.net is not None:
            model.net.eval()
        model.restore(state)
        if state.get("plan"):
            model.plan = planning.plan_from_dict(state["plan"])
        if state.get("calibration"):
            model.calibration = model.drawn_as.marginals.from_dict(state["calibration"])
        return model
