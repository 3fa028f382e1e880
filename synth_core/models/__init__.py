"""Model families. Importing this package registers every family in `MODELS`."""
from .base import MODELS, SamplingError, SynthModel, get_model_class, register
from . import tbart  # noqa: F401  (registers dp-tbart)
from . import diffusion  # noqa: F401  (registers tablediffusion, tablediffusion-denoiser)
from . import masked_diffusion  # noqa: F401  (registers tablediffusion-masked)
from . import gan  # noqa: F401  (registers dtgan-d, dtgan-g, dp-wgan)
from . import llm  # noqa: F401  (registers dp-llmtgen)
from . import aim  # noqa: F401  (registers aim)

__all__ = ["MODELS", "SamplingError", "SynthModel", "get_model_class", "register"]
