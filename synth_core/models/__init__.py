"""Model families. Asking this package for `MODELS` or `get_model_class` (or any name below) imports
every family, which registers it in `MODELS`; importing a submodule alone (`models.recommend`, whose
`auto` the CLI's parser names) imports no family, nor torch (PEP 562)."""
from __future__ import annotations

import importlib

# the modules that register the families: dp-tbart; tablediffusion, tablediffusion-denoiser;
# tablediffusion-masked; dtgan-d, dtgan-g, dp-wgan; dp-llmtgen; aim; and on persons' tables
# (a class that takes shape.PERSONS) dp-tbart
FAMILY_MODULES = ("tbart", "diffusion", "masked_diffusion", "gan", "llm", "aim", "persons")

__all__ = ["FAMILIES", "LINKED_MODELS", "MODELS", "SamplingError", "SynthModel", "families_for",
           "get_model_class", "model_class_for", "register"]


def __getattr__(name: str):
    if name in __all__:
        for module in FAMILY_MODULES:
            importlib.import_module(f".{module}", __name__)
        value = getattr(importlib.import_module(".base", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
