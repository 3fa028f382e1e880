"""DP-LLMTGen: the model (model), its settings and presets (config), the backbone it builds on
(backbone), constrained decoding (grammar). Rows as text are in encoding.text."""
from .backbone import PACKAGED_INSTALL, BackboneError, list_local_causal_lms, packaged_backbones, resolve_backbone
from .grammar import Grammar
from .config import PRESETS, LLMConfig
from .model import DPLLMTGen

__all__ = ["PACKAGED_INSTALL", "PRESETS", "BackboneError", "DPLLMTGen", "Grammar", "LLMConfig",
           "list_local_causal_lms", "packaged_backbones", "resolve_backbone"]
