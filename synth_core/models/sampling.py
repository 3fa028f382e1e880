"""Sampling, written once for every family and shape: the model's own rows kept where they obey
the rules (`draw_obeying`), or a pool of them weighed towards the run's noisy marginals and
resampled (`sample`). A family of another shape (models.persons: persons with their rows) overrides
the hooks, not the flow. Sampling is post-processing: it costs no ε.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np
import pandas as pd
import torch

from ..errors import SamplingError
from ..privacy.measurements import Marginals
from ..schema import SchemaError
from ..schema.rules import breaking, contradiction
from ..schema.scale import on_declared_values
from .calibration import balance_rows, calibrate_weights, grow_pool, pool_size
from .options import check_sample_rows
from .resampling import resample

# sampling under the schema's rules: a model whose rows obey them less often than 1 in
# MAX_REJECTION is told so (the rule to blame named) instead of drawing on; each draw is at least
# MIN_RULE_DRAW rows, so the rate is seen
MAX_REJECTION = 50
MIN_RULE_DRAW = 200


def draw_with_rejection(n: int, draw: Callable[[int], Any], rejecting: bool, max_tries_factor: int,
                        chunk_size: int) -> tuple[list, int, int]:
    """Call `draw(m)` (m rows generated, those meeting the conditions returned) until n rows are
    kept or `max_tries_factor`·n were tried; chunks grow with the observed acceptance rate. Returns
    (the kept chunks, rows kept, rows tried)."""
    kept, accepted, tried = [], 0, 0
    budget = n * (max_tries_factor if rejecting else 1)
    while accepted < n and tried < budget:
        want = n - accepted
        if rejecting and tried:
            rate = max(accepted / tried, 1.0 / max_tries_factor)
            want = int(want / rate * 1.2) + 1
        m = min(chunk_size, max(want, 1), budget - tried)
        chunk = draw(m)
        tried += m
        kept.append(chunk)
        accepted += len(chunk)
    return kept, accepted, tried


class Rows:
    """What a sample is made of, and how its pool is weighed and picked: a single table's rows,
    kept where they obey the rules, weighed towards the run's noisy marginals (`marginals`), picked
    and then given their derived columns. A family of another shape declares its own (`drawn_as`;
    models.persons.Persons), as a type, not a branch in the flow."""
    marginals = Marginals  # what the run's noisy marginals are to it (model.json's "calibration")

    @staticmethod
    def conditions(model, n: int, conditions: dict | None) -> dict:
        """The conditions checked (a derived column refused, naming its source; none that
        contradict a rule), and the count asked for."""
        model._check_rows(n)
        schema = model.full_schema
        conditions = schema.check_conditions(conditions)
        contradicted = contradiction(schema.rule_checks, conditions, schema)
        if contradicted:
            raise SchemaError(contradicted)
        return conditions

    @staticmethod
    def draw(model, n: int, conditions: dict, seed: int | None, **options):
        """n of the model's own rows as sampling keeps them: obeying the rules."""
        return model.draw_obeying(n, conditions, seed, **options)

    @staticmethod
    def weigh(model, pool: pd.DataFrame, conditions: dict) -> tuple[np.ndarray, dict]:
        """The pool's weights towards the measured marginals, and what calibration did."""
        return calibrate_weights(pool, model.calibration, model.schema, conditions,
                                 model.full_schema.rule_checks)

    @staticmethod
    def join(model, pool: pd.DataFrame, extra: pd.DataFrame) -> pd.DataFrame:
        return pd.concat([pool, extra], ignore_index=True)

    @staticmethod
    def balanced(model, pool: pd.DataFrame) -> np.ndarray:
        """The pool's cells on each column's counts, for a pick balanced on them."""
        return balance_rows(pool, model.calibration, model.schema)

    @staticmethod
    def pick(model, pool: pd.DataFrame, picked: np.ndarray) -> pd.DataFrame:
        """The pool's rows `picked` (indices, repeats allowed)."""
        return pool.iloc[picked].reset_index(drop=True)

    @staticmethod
    def facts(model, picked, info: dict) -> dict:
        """What `last_sample_info` says of a calibrated sample beside its row count."""
        return {"calibration": info}

    @staticmethod
    def finish(model, table):
        """The sample as returned: derived columns computed from their rules."""
        return model.full_schema.derive(table)


class Sampling:
    """SynthModel's sampling; a family supplies `draw` (abstract in SynthModel)."""
    drawn_as: type = Rows  # what a sample is made of (a shape's family: its own, models.persons)

    def sample(self, n: int, conditions: dict | None = None, seed: int | None = None,
               calibrate: bool = True, **options):
        """n synthetic rows (a person family: persons with their rows); `conditions` fixes chosen
        columns' values, e.g. {"sex": "Female"}. Sampling costs no privacy. A run that measured
        marginals (`calibration`) draws a pool from the model and resamples it towards them
        (models.calibration); calibrate=False returns the model's own. Derived columns are then
        computed from their rules. `last_sample_info` reports the method and the calibration.
        Written once: what differs by shape is `drawn_as`'s."""
        how = self.drawn_as
        conditions = how.conditions(self, n, conditions)
        if not calibrate or self.calibration is None:
            return how.finish(self, how.draw(self, n, conditions, seed, **options))
        try:
            pool = how.draw(self, pool_size(n, self.min_pool), conditions, seed, **options)
        except SamplingError:  # conditions met too rarely for a pool: the n asked, uncalibrated
            table = how.draw(self, n, conditions, seed, **options)
            self.last_sample_info["calibration"] = {
                "note": "too few rows meet the conditions for a calibration pool"}
            return how.finish(self, table)

        def more(rows: int, k: int):  # the k-th further draw, for a pool that must grow
            try:
                return how.draw(self, rows, conditions, None if seed is None else seed + 3 * k,
                                **options)
            except SamplingError:
                return None

        pool, weights, info = grow_pool(pool, n, more, lambda p: how.weigh(self, p, conditions),
                                        lambda p, extra: how.join(self, p, extra),
                                        self.max_pool_growth)
        rng = np.random.default_rng(None if seed is None else seed + 2)
        balanced = resample(weights, n, rng, lambda: how.balanced(self, pool))
        picked = how.pick(self, pool, balanced)
        self.last_sample_info = {**self.last_sample_info, "rows": n,
                                 **how.facts(self, picked, info)}
        return how.finish(self, picked)

    def draw_obeying(self, n: int, conditions: dict, seed: int | None, **options) -> pd.DataFrame:
        """n rows of `draw`, each number of a column with a declared value set on one of its values
        (whatever the family, schema.scale), that obey the schema's rules (schema/rules.py): the
        model's rows that break one are rejected and more are drawn, as many more as the rate seen
        so far asks; SamplingError naming the rule to blame when fewer than 1 in MAX_REJECTION obey
        (post-processing of the model's own rows: no ε)."""
        rules = self.full_schema.rule_checks
        if not rules:
            return on_declared_values(self.draw(n, conditions, seed, **options), self.schema)
        kept, obeyed, tried, broken = [], 0, 0, dict.fromkeys((r.text for r in rules), 0)
        while obeyed < n:
            rate = obeyed / tried if tried else 1.0
            want = max(MIN_RULE_DRAW, int((n - obeyed) / max(rate, 1 / MAX_REJECTION) * 1.1) + 1)
            drawn = self.draw(want, conditions, None if seed is None else seed + 7 * len(kept),
                              **options)
            rows = on_declared_values(drawn, self.schema)
            breaks = breaking(rules, self.full_schema.derive(rows))
            for text, rows_broken in breaks.items():
                broken[text] += int(rows_broken.sum())
            keep = ~np.logical_or.reduce(list(breaks.values()))
            kept.append(rows.loc[keep])
            obeyed, tried = obeyed + int(keep.sum()), tried + len(rows)
            if obeyed < n and (obeyed * MAX_REJECTION < tried or tried >= MAX_REJECTION * n):
                worst = max(broken, key=broken.get)
                raise SamplingError(
                    f"only {obeyed:,} of {tried:,} rows the model drew obey the declared rules; "
                    f"the rule {worst!r} is broken by {broken[worst] / tried:.0%} of them. Check "
                    "the rule (and any conditions), or train with more ε so the model learns it")
        self.last_sample_info = {**self.last_sample_info, "rows": n, "rules": {
            "tried": tried, "obeyed": obeyed, "acceptance": obeyed / tried, "broken": broken}}
        return pd.concat(kept, ignore_index=True).iloc[:n].reset_index(drop=True)

    def _sampling_randomness(self, seed: int | None) -> tuple[torch.Generator, np.random.Generator]:
        """The generators sampling draws from: seeded by `seed` (the same rows again), fresh
        otherwise."""
        generator = torch.Generator(device=self.device)
        drawn_seed = int(seed) if seed is not None else int(torch.randint(0, 2**31 - 1, (1,)))
        generator.manual_seed(drawn_seed)
        return generator, np.random.default_rng(None if seed is None else seed + 1)

    @staticmethod
    def _check_rows(n) -> None:
        check_sample_rows(n)
