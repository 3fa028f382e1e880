"""One fit request: what a run is asked to do, the one shape that the API, the CLI, background jobs,
the worker and the model page build, and the only place a fit's defaults and its checks live.

    request = FitRequest(model="auto", epsilon=1.0)
    request.check(schema)                    # every problem at once, before anything is spent
    request.resolved(schema, released_rows)  # auto's choice applied, every default filled in

Importing it costs no torch: a family's own checks import the models when they are asked.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from .models.recommend import AUTO, CANDIDATES, LINKED_AUTO, Recommendation, recommend
from .privacy.accounting import ACCOUNTANTS
from .privacy.budget import (DEFAULT_CALIBRATION_SHARE, BudgetError, check_calibration_share, check_quantile_share,
                             check_run_budget, plain_number)
from .schema import Schema, SchemaError
from .schema.linked import LinkedSchema
from .shape import shape_of

# review_rows: as many rows as the run releases it trained on (its noisy count, never the exact one)
REVIEW_RELEASED = "released"
# the most rows a review sample holds (a background job draws one after training)
REVIEW_ROWS = 20000
DEFAULT_PRESET = "cpu"  # a named family's size when none is asked for
# a request's numeric fields (`FitRequest.__post_init__`)
NUMBERS = ("epsilon", "delta", "bounds_epsilon", "values_epsilon", "calibration_share", "quantile_share",
           "seed", "review_rows", "table_epsilon", "holdout_share", "processes")
MAX_HOLDOUT_SHARE = 0.5
# the fewest rows a run trains on: fewer cannot be split, validated and trained on meaningfully
MIN_ROWS = 10
# below this, DP has so few rows per unit of noise that the synthetic table is mostly noise (said,
# not refused)
FEW_ROWS = 1000


def check_rows(n: int, what: str = "the table") -> None:
    """BudgetError unless `n` rows are enough to train on (MIN_ROWS)."""
    if n < MIN_ROWS:
        raise BudgetError(f"{what} has only {n} row{'s' if n != 1 else ''}; DP training needs at least {MIN_ROWS} "
                          "rows, and thousands to learn much")


def review_rows_for(n_train: int) -> int:
    """The review sample a background job draws after training on `n_train` rows (linked tables:
    persons, each with their child rows)."""
    return min(int(n_train), REVIEW_ROWS)


@dataclass(frozen=True)
class FitRequest:
    """A fit's options (never the rows, never where the run goes).

    model: a family or "auto" (family, preset, options and shares recommended from public facts: the
    schema and the row count the run releases). preset: None is the recommendation's for auto, "cpu"
    for a family. calibration_share: the part of what the count and bounds leave of ε that measures
    the table's marginals (composed with training; samples are then calibrated to them). None: the
    recommendation's for auto; 0 for a family that measures marginals as it trains (AIM);
    DEFAULT_CALIBRATION_SHARE for the others. quantile_share: likewise for the numeric columns'
    quantiles (their bins follow them); None: the recommendation's for auto, else 0. review_rows:
    also draw a review sample of this many rows before the run is marked done (REVIEW_RELEASED: as
    many as the run releases, at most REVIEW_ROWS). public_table: the steward says the table is
    public or invented: it draws from no table's budget. table_epsilon: the total of a table the
    budget book has never seen (default: this run's ε). values_epsilon: the part of ε that finds,
    with DP, the value sets and point masses of numeric columns that declare none
    (privacy.value_sets). holdout_share, processes, name, table_name: a background job's (rows kept
    aside for the review, training processes, how the run is listed). book_table: the name of the
    table in the budget book this run counts on (a new file attached to it; a name no table has yet
    names this one); new_table: a file that resembles a known table is another table."""
    model: str = "dp-tbart"
    epsilon: float = 1.0
    delta: float | None = None
    accountant: str = "prv"
    preset: str | None = None
    options: dict = field(default_factory=dict)
    bounds_epsilon: float = 0.0
    # the part of ε finding the value sets numeric columns lack (privacy.value_sets)
    values_epsilon: float = 0.0
    # where DP bounds are searched (None: privacy.bounds')
    coarse_range: tuple[float, float] | None = None
    calibration_share: float | None = None
    quantile_share: float | None = None
    seed: int | None = 0
    device: str | None = None
    review_rows: int | str | None = None
    accept_draft: bool = False
    public_table: bool = False
    table_epsilon: float | None = None
    holdout_share: float = 0.0
    processes: int | None = None
    name: str | None = None
    table_name: str | None = None
    book_table: str | None = None   # the name of the table in the budget book this run counts on
    # the steward says a file resembling a known table is another table
    new_table: bool = False
    # set by resolved(): auto's choice (None for a named family or before resolving)
    choice: Recommendation | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        """Numbers of any kind (np.float32(1.0), np.int64(2): a table's cell, a computation) held as
        Python's, so that the checks take them and the run's config can be written as JSON."""
        for name in NUMBERS:
            object.__setattr__(self, name, plain_number(getattr(self, name)))

    # --- checks -------------------------------------------------------------------------------------
    def problems(self, schema: Schema | None = None, world_size: int = 1) -> list[ValueError]:
        """Every problem with the request (and the public schema, when given), each an error whose
        message is one line for the steward; nothing is spent and the private table is not read."""
        out: list[ValueError] = []

        def ask(check, *args, **kwargs) -> None:
            try:
                check(*args, **kwargs)
            except (ValueError, TypeError) as e:  # BudgetError and SchemaError are ValueErrors
                out.append(e if isinstance(e, ValueError) else ValueError(str(e)))

        if schema is not None:
            ask(self._check_schema, schema)
        ask(self._check_model, schema, world_size)
        ask(self._check_budget, schema)
        ask(self._check_shares)
        ask(self._check_job)
        return out

    def check(self, schema: Schema | None = None, world_size: int = 1) -> "FitRequest":
        """Raise one error naming every problem (of the first problem's kind), or return the
        request."""
        found = self.problems(schema, world_size)
        if len(found) == 1:
            raise found[0]
        if found:
            raise type(found[0])("; ".join(str(e) for e in found))
        return self

    def _check_schema(self, schema: Schema | LinkedSchema) -> None:
        shape_of(schema)  # a Schema or a LinkedSchema (SchemaError, one line, for anything else)
        schema.check()
        self._check_shape(shape_of(schema))
        if schema.provenance["warning"] and not self.accept_draft:
            raise SchemaError("the schema was drafted by reading the private table and never confirmed as public: "
                              "edit it into public facts and confirm it (`schema confirm`), or accept training on "
                              "it as it is (--accept-draft; every report will say so)")
        if not self.bounds_epsilon:
            schema.require_bounds()  # nothing pays for missing bounds
        if self.values_epsilon and shape_of(schema).dp_value_sets:
            from .privacy.value_sets import searchable
            if not searchable(schema):
                raise SchemaError("no number column can have its values found: each needs whole numbers or "
                                  "declared decimals, and no values of its own; spend no ε on finding them")

    def _check_shape(self, shape) -> None:
        """What the table's shape (synth_core.shape) cannot be trained with yet."""
        asked = [what for what, value, can in (
            ("DP bounds (bounds_epsilon)", self.bounds_epsilon, shape.dp_bounds),
            ("DP value sets (values_epsilon)", self.values_epsilon, shape.dp_value_sets),
            ("a quantile share", self.quantile_share, shape.quantiles)) if value and not can]
        if asked:
            raise SchemaError(f"{shape.name} cannot be trained with {' or '.join(asked)} yet: declare every "
                              "bound in the schema and leave the quantile share at 0")

    def _check_model(self, schema: Schema | None, world_size: int) -> None:
        # the families, and torch, when a request is checked
        from .models import get_model_class, model_class_for
        if not isinstance(self.model, str) or not self.model:
            raise ValueError("the request names no model")
        if isinstance(schema, LinkedSchema):
            klass = model_class_for(self.model if self.model != AUTO else LINKED_AUTO, schema)
            klass.configure(self.preset or DEFAULT_PRESET, self.options, seed=self.seed, device=self.device)
            klass.check_processes(max(world_size, self.processes or 1))
            return
        if self.model == AUTO:
            if self.options:
                raise ValueError("options belong to a model family; with --model auto the family is chosen for "
                                 "you: name a family to set its options")
            # a size every family auto may pick has
            for family in CANDIDATES if self.preset else ():
                get_model_class(family).configure(self.preset, None, seed=self.seed, device=self.device)
            return
        klass = get_model_class(self.model)
        klass.configure(self.preset or DEFAULT_PRESET, self.options, seed=self.seed, device=self.device)
        if schema is not None and isinstance(schema, Schema):
            klass.check_schema(schema)
        klass.check_processes(max(world_size, self.processes or 1))

    def _check_budget(self, schema: Schema | None) -> None:
        from .privacy.measurements import count_epsilon
        if self.accountant not in ACCOUNTANTS:
            raise BudgetError(f"unknown accountant {self.accountant!r}; choose one of {', '.join(ACCOUNTANTS)}")
        check_run_budget(self.epsilon, self.delta, self.bounds_epsilon, values_epsilon=self.values_epsilon)
        # a noisy count, and something left after it
        if schema is None or getattr(schema, "rows", None) is None:
            check_run_budget(self.epsilon, self.delta, self.bounds_epsilon, count_epsilon(self.epsilon),
                             values_epsilon=self.values_epsilon)
        if self.table_epsilon is not None:
            if self.public_table:
                raise ValueError("a public table draws from no budget: give it no total (table_epsilon)")
            check_run_budget(self.table_epsilon, None)

    def _check_shares(self) -> None:
        if self.calibration_share is not None:
            check_calibration_share(self.calibration_share)
        if self.quantile_share is not None:
            check_quantile_share(self.quantile_share, self.calibration_share or 0.0)

    def _check_job(self) -> None:
        from .models.options import check_sample_rows
        if self.book_table is not None and (not isinstance(self.book_table, str) or not self.book_table.strip()
                                            or len(self.book_table) > 100
                                            or any(ord(ch) < 32 for ch in self.book_table)):
            raise ValueError("a table's name in the budget book is 1 to 100 characters on one line, not "
                             f"{self.book_table!r}")
        if not isinstance(self.new_table, bool):
            raise ValueError(f"new_table is true or false, not {self.new_table!r}")
        if self.review_rows not in (None, 0, REVIEW_RELEASED):
            check_sample_rows(self.review_rows)
        share = self.holdout_share
        if isinstance(share, bool) or not isinstance(share, (int, float)) or not 0 <= share < MAX_HOLDOUT_SHARE:
            raise ValueError(f"the share of rows kept aside for review must be in [0, {MAX_HOLDOUT_SHARE:g}), "
                             f"not {share!r}")
        if self.processes is not None:
            from .training import distributed
            most = distributed.most_processes()
            if isinstance(self.processes, bool) or not isinstance(self.processes, int) \
                    or not 1 <= self.processes <= most:
                raise ValueError(f"processes must be a whole number from 1 to {most} on this machine, not "
                                 f"{self.processes!r}")

    def engine_families(self, schema: Schema | LinkedSchema,
                        answers: frozenset = frozenset({"counts", "rows"})) -> tuple[str, ...]:
        """The families that may fit a table an engine holds (encoding/engine.py) that gives
        `answers` (`Counting.answers`): those that ask it no more (`from_engine`), for auto among
        its candidates; SchemaError, before anything is spent, for what the engine does not
        answer (linked tables, a family that reads the rows as text, or reads rows a cluster
        keeps)."""
        from .models import families_for, model_class_for
        here = "rows" in answers
        words = ("a table counted by the engine (too large to hold)" if here else
                 "a table counted where it lives (a cluster)")
        if not shape_of(schema).engine:
            raise SchemaError(f"{words} is one table; linked tables are read whole")
        asked = CANDIDATES if self.model == AUTO else (self.model,)
        takes = families_for(schema, answers)
        able = tuple(f for f in asked if f in takes)
        if not able:
            how = ("or a smaller table" if here else
                   "or train on the table's file where it lives (docs/cluster.md)")
            raise SchemaError(f"{self.model} reads the rows themselves, which {words} does not "
                              f"give; choose {', '.join(takes)}, {how}")
        model_class_for(able[0], schema).check_schema(schema)
        return able

    # --- defaults -----------------------------------------------------------------------------------
    def resolved(self, schema: Schema, rows: int, among: tuple[str, ...] | None = None
                 ) -> "FitRequest":
        """The request with every default filled in and, for auto, the recommendation for the public
        `schema` and the row count the run releases (`rows`: declared public or noisy, never the
        exact one) applied; `among`: auto picks only these families."""
        from .models import model_class_for
        # one family models linked tables, its marginals measured at two levels
        if isinstance(schema, LinkedSchema):
            share = DEFAULT_CALIBRATION_SHARE if self.calibration_share is None else self.calibration_share
            return dataclasses.replace(self, model=LINKED_AUTO if self.model == AUTO else self.model,
                                       preset=self.preset or DEFAULT_PRESET, calibration_share=share, quantile_share=0.0)
        if self.model != AUTO:
            klass = model_class_for(self.model, schema)
            share = self.calibration_share
            # a family that measures marginals itself (AIM) gains nothing from measuring again
            if share is None:
                share = 0.0 if klass.measures_marginals else DEFAULT_CALIBRATION_SHARE
            return dataclasses.replace(self, preset=self.preset or DEFAULT_PRESET, calibration_share=share,
                                       quantile_share=self.quantile_share or 0.0)
        choice = recommend(schema, rows, self.epsilon, among)
        preset = self.preset or choice.preset
        resolved = dataclasses.replace(
            self, model=choice.family, preset=preset, options=choice.options_for(preset), choice=choice,
            calibration_share=choice.calibration_share if self.calibration_share is None else self.calibration_share,
            quantile_share=choice.quantile_share if self.quantile_share is None else self.quantile_share)
        model_class_for(resolved.model, schema).configure(preset, resolved.options, seed=self.seed, device=self.device)
        check_quantile_share(resolved.quantile_share, resolved.calibration_share)
        return resolved

    @property
    def auto(self) -> bool:
        return self.model == AUTO or self.choice is not None

    # --- on disk ------------------------------------------------------------------------------------
    def to_dict(self) -> dict:
        """The request as JSON can hold it (auto's choice is the run config's, not the
        request's)."""
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "choice"}
        out["options"] = dict(self.options or {})
        out["coarse_range"] = None if self.coarse_range is None else list(self.coarse_range)
        return out

    @classmethod
    def from_dict(cls, data: dict, extra_ok: bool = False) -> "FitRequest":
        """A request from a dict (a job's request.json, a page's choices). Unknown keys are refused
        unless extra_ok (a stored request also holds its job's own records: the table, when it was
        made, …)."""
        if not isinstance(data, dict):
            raise ValueError(f"a fit request is a mapping of options, not {type(data).__name__}")
        names = {f.name for f in dataclasses.fields(cls)} - {"choice"}
        unknown = set(data) - names
        if unknown and not extra_ok:
            raise ValueError(f"unknown request keys: {', '.join(sorted(unknown))}")
        known = {k: v for k, v in data.items() if k in names}
        if known.get("options") is None:
            known.pop("options", None)
        if known.get("coarse_range") is not None:
            known["coarse_range"] = tuple(known["coarse_range"])
        return cls(**known)

    def replace(self, **changes) -> "FitRequest":
        """The request with some options changed (TypeError for a name that is not an option)."""
        return dataclasses.replace(self, **changes)
