import numpy as np
import pandas as pd
import pytest
import torch
from threadpoolctl import threadpool_limits

from synth_core.demo import demo_schema, demo_table
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


@pytest.fixture
def one_thread():
    """Evaluation tests: one BLAS/OpenMP thread, so their timings do not fight the other tests."""
    with threadpool_limits(limits=1):
        yield


@pytest.fixture(scope="module")
def demo():
    """(schema, 2,000 rows, 1,000 other rows) of the built-in invented demo table."""
    schema = demo_schema()
    table = demo_table(3000, seed=0)
    return schema, table.iloc[:2000].reset_index(drop=True), table.iloc[2000:].reset_index(drop=True)
