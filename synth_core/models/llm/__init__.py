"""DP-LLMTGen: the model (model), the backbone it builds on (backbone), constrained decoding (grammar). Rows
as text are in encoding.text."""
from .backbone import BackboneError, list_local_causal_lms, resolve_backbone
from .grammar import Grammar
from .model import PRESETS, DPLLMTGen, LLMConfig

__all__ = ["PRESETS", "BackboneError", "DPLLMTGen", "Grammar", "LLMConfig", "list_local_causal_lms",
           "resolve_backbone"]
