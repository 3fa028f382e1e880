"""Evaluation metrics for synthetic tabular data."""

from .fidelity import (
    detection_auc,
    fidelity_report,
    kway_tvd,
    kway_tvd_report,
    ml_efficacy,
    ml_efficacy_regression,
)

__all__ = [
    "kway_tvd",
    "kway_tvd_report",
    "detection_auc",
    "ml_efficacy",
    "ml_efficacy_regression",
    "fidelity_report",
]
