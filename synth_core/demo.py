"""A built-in demo table, generated from a public schema with a fixed seed: no file, no network.

The rows are invented (a small census-like table with real dependencies: education drives income, hours
depend on the job), so the demo shows what training, ε and sampling look like without any private data.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from .schema import ColumnSpec, Schema

EDUCATION = ["HS-grad", "Some-college", "Bachelors", "Masters", "Doctorate"]
JOBS = ["Clerical", "Sales", "Craft", "Professional", "Managerial", "Service"]


def demo_schema() -> Schema:
    return Schema(columns=[
        ColumnSpec("age", "integer", lower=17, upper=90),
        ColumnSpec("sex", "categorical", categories=["Female", "Male"], role="sensitive"),
        ColumnSpec("education", "categorical", categories=EDUCATION),
        ColumnSpec("job", "categorical", categories=JOBS, nullable=True),
        ColumnSpec("hours-per-week", "integer", lower=1, upper=99),
        ColumnSpec("capital-gain", "integer", lower=0, upper=99999, binning="log"),
        ColumnSpec("income", "categorical", categories=["<=50K", ">50K"], role="target"),
    ])


def demo_table(n: int = 4000, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    age = np.clip(rng.normal(40, 13, n).round(), 17, 90).astype(int)
    sex = rng.choice(["Female", "Male"], n, p=[0.45, 0.55])
    edu_idx = np.clip(rng.poisson(1.1, n) + (age > 30), 0, len(EDUCATION) - 1)
    education = np.array(EDUCATION)[edu_idx]
    job_p = np.array([[0.30, 0.20, 0.25, 0.05, 0.05, 0.15], [0.10, 0.15, 0.10, 0.35, 0.25, 0.05]])
    job = np.array([rng.choice(JOBS, p=job_p[int(e >= 2)]) for e in edu_idx], dtype=object)
    job[rng.random(n) < 0.04] = None
    hours = np.clip(rng.normal(np.where(np.isin(job, ["Professional", "Managerial"]), 46, 38), 9).round(), 1, 99).astype(int)
    gain = np.where(rng.random(n) < 0.08, np.round(np.exp(rng.normal(8.5, 1.0, n))), 0).clip(0, 99999).astype(int)
    logit = -4.0 + 0.9 * edu_idx + 0.03 * (age - 40) + 0.4 * (sex == "Male") + 0.03 * (hours - 40) + 2.0 * (gain > 5000)
    income = np.where(rng.random(n) < 1 / (1 + np.exp(-logit)), ">50K", "<=50K")
    return pd.DataFrame({"age": age, "sex": sex, "education": education, "job": job, "hours-per-week": hours,
                         "capital-gain": gain, "income": income})
