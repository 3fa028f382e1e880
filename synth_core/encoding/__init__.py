"""Tables to model inputs and back, from the public schema only: tokens (one per column, for the
token models), vectors (one-hot blocks and scaled numbers, for the vector models)."""
from .tokens import NULL_LABEL, ColumnCodec, TokenEncoder
from .vectors import NUMERIC_ENCODINGS, Block, VectorEncoder

__all__ = ["NULL_LABEL", "NUMERIC_ENCODINGS", "Block", "ColumnCodec", "TokenEncoder", "VectorEncoder"]
