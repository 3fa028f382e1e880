import atexit
import json
import os
import shutil
import signal
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from threadpoolctl import threadpool_limits

from synth_core.demo import demo_schema, demo_table
from synth_core.schema import ColumnSpec, Schema

torch.set_num_threads(min(2, torch.get_num_threads()))
if os.environ.get("PYTEST_XDIST_WORKER"):
    # several test processes share the cores (pytest -n): one thread each, and for the workers and
    # servers they start, or OpenMP's threads wait on each other (a tiny fit took 4 to 18 times as
    # long on 2 cores)
    os.environ["OMP_NUM_THREADS"] = os.environ["MKL_NUM_THREADS"] = "1"
    torch.set_num_threads(1)
    # numpy's BLAS and scikit-learn's OpenMP in this process, from now on
    threadpool_limits(limits=1)
# the threads a worker and the estimate's probe take (training.device.free_cores): this process's,
# so a run's stored costs and the next estimate name the same device whatever the load meanwhile
os.environ["SYNTH_CPU_THREADS"] = str(torch.get_num_threads())


# JAX's compiled programs (models.aim_config.keep_compiled) shared by this run's test processes and
# the workers and servers they start, rather than kept in each test's own home: set here in the
# first process, before pytest -n starts the others (they inherit it), and removed when that process
# exits (also where a script imports this module)
COMPILED = None
if not os.environ.get("JAX_COMPILATION_CACHE_DIR"):
    COMPILED = os.environ["JAX_COMPILATION_CACHE_DIR"] = tempfile.mkdtemp(prefix="synth-tests-jax-")
    atexit.register(shutil.rmtree, COMPILED, ignore_errors=True)


# the tests that drive the whole app (a real browser, a corpus of real tables, the headless
# walk-through) start first: with two test processes (pytest.ini: -n 2 --dist worksteal) the one
# that starts a long test last runs it alone while the other core idles; started first, the other
# process takes the short tests meanwhile
FIRST = ("test_browser.py", "test_corpus_app.py", "test_app.py")


def pytest_collection_modifyitems(config, items):
    items.sort(key=lambda item: FIRST.index(item.path.name) if item.path.name in FIRST else len(FIRST))


@pytest.fixture(autouse=True)
def isolated_home(tmp_path_factory, monkeypatch):
    """Every test gets its own workbench home (runs, table budgets): none touches the steward's."""
    monkeypatch.setenv("SYNTH_WORKBENCH_HOME", str(tmp_path_factory.mktemp("home")))


@pytest.fixture
def by_the_rule(tmp_path, monkeypatch):
    """No model of benchmark results installed: `auto` picks by its hand-set rule
    (recommend.by_rule), as the tests of the rule's thresholds through a whole fit need whatever the
    forecast's coefficients are."""
    from synth_core import benchmark_model
    monkeypatch.setattr(benchmark_model, "MODEL_FILE", tmp_path / "no-model.json")


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


# How long a test waits for background work (a worker training, the app rerunning) before it gives
# up. A safety net for a hung test, not a speed check: a loaded 2-core CI machine once took 32
# minutes for the suite.
PATIENCE_S = 1800


def wait_until(until, what: str = "background work", timeout_s: float = PATIENCE_S) -> None:
    """Poll `until()` until it holds; fail naming `what` after `timeout_s`."""
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        if until():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def end_workers(root: Path) -> None:
    """End every training worker started for a run under `root` (a test that starts a process ends
    it, pass or fail)."""
    pids = []
    for info in Path(root).rglob("worker.json"):
        try:
            pids.append(int(json.loads(info.read_text())["pid"]))
        except (OSError, ValueError, KeyError, TypeError):
            continue
    for pid in pids:
        try:
            os.kill(pid, signal.SIGTERM)
        except (ProcessLookupError, PermissionError):
            continue
    deadline = time.time() + 30
    for pid in pids:
        while time.time() < deadline:
            try:
                os.kill(pid, 0)
            except (ProcessLookupError, PermissionError):
                break
            time.sleep(0.1)
        else:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass


@pytest.fixture
def worker_root(tmp_path):
    """A folder for runs whose workers are ended when the test ends."""
    yield tmp_path
    end_workers(tmp_path)
