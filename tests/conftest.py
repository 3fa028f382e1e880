import numpy as np
import pandas as pd
import pytest
import torch

from synth_core.schema import ColumnSpec, Schema

torch.set_num_threads(min(2, torch.get_num_threads()))


@pytest.fixture
def toy_schema() -> Schema:
    return Schema(columns=[
        ColumnSpec("age", "integer", lower=18, upper=80),
        ColumnSpec("sex", "categorical", categories=["Female", "Male"]),
        ColumnSpec("job", "categorical", categories=["clerk", "nurse", "pilot"], nullable=True),
        ColumnSpec("hours", "continuous", lower=0.0, upper=100.0),
    ])


@pytest.fixture
def toy_table() -> pd.DataFrame:
    """A small table with a strong dependency (nurses are Female, pilots Male) a model can learn."""
    rng = np.random.default_rng(0)
    n = 600
    sex = rng.choice(["Female", "Male"], n)
    job = np.where(sex == "Female", rng.choice(["nurse", "clerk"], n, p=[0.8, 0.2]),
                   rng.choice(["pilot", "clerk"], n, p=[0.8, 0.2])).astype(object)
    job[rng.random(n) < 0.05] = None
    return pd.DataFrame({
        "age": rng.integers(20, 70, n),
        "sex": sex,
        "job": job,
        "hours": np.round(rng.uniform(10, 60, n), 1),
    })
