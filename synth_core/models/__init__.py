"""Model families. Importing this package registers every family in `MODELS`."""
from .base import MODELS, SamplingError, SynthModel, get_model_class, register
from . import tbart  # noqa: F401  (registers dp-tbart)
from . import llm  # noqa: F401  (registers dp-llmtgen)

__all__ = ["MODELS", "SamplingError", "SynthModel", "get_model_class", "register"]
