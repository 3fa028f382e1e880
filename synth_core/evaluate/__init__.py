"""Evaluation of synthetic tables: fidelity, utility, privacy in practice, fairness, projections.

The review page, the CLI (`evaluate`, `audit`) and the benchmarks all use this package.
"""

from .fairness import demographic_parity_gap, fairness_figures, group_rates
from .fidelity import (
    detection_auc,
    fidelity_report,
    kway_tvd,
    kway_tvd_report,
    ml_efficacy,
    ml_efficacy_regression,
)
from .figures import THRESHOLDS, Figure, column_figures, quick_figures
from .features import PublicEncoder
from .inputs import EvaluationError, check_comparable
from .privacy_risk import DCRResult, distance_to_closest_record
from .privacy_risk import attribute_inference, membership_inference
from .projections import Projection, pca_projection, umap_projection
from .report import build_report, evaluate
from .structure import alpha_beta_authenticity, association_difference, association_matrix, pmse_ratio
from .utility import utility

__all__ = [
    "kway_tvd",
    "kway_tvd_report",
    "detection_auc",
    "ml_efficacy",
    "ml_efficacy_regression",
    "fidelity_report",
    "EvaluationError",
    "check_comparable",
    "PublicEncoder",
    "Figure",
    "THRESHOLDS",
    "quick_figures",
    "column_figures",
    "Projection",
    "pca_projection",
    "umap_projection",
    "DCRResult",
    "distance_to_closest_record",
    "fairness_figures",
    "demographic_parity_gap",
    "group_rates",
    "membership_inference",
    "attribute_inference",
    "association_matrix",
    "association_difference",
    "pmse_ratio",
    "alpha_beta_authenticity",
    "utility",
    "evaluate",
    "build_report",
]
