"""Rows as text, from the public schema only, in one of two formats:
- "sentence": "{column} is {value}, {column} is {value}, …", the columns in any order (DP-LLMTGen's);
- "compact": the values alone in the schema's column order, as a CSV line ("39,State-gov,…"), after a header
  that names the columns once ("age,workclass,…" and a line break; ":" for the schema's own tokenizer). The header is the same for every row:
  a model reads it once (`prefix_ids`) and each row starts with its last token. Half the tokens of a
  sentence (Adult with SmolLM2's tokenizer: 55 against 108), so half the work per row; the order is fixed,
  so a prompt can only fix leading columns (the others are met by rejection).

Numbers are written to the precision the public schema declares (about four significant digits of
the public range otherwise), one character per token, so every digit has its own prediction; a
missing value is written as a marker that is no public category. `TextCodec` turns a row into token
ids with the kind of each token (format, value, digit, which column comes next) and parses generated
text back, checking every value against the public schema. `build_schema_tokenizer` makes a
word-level tokenizer from the schema alone, for a language model without a tokenizer of its own.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from ..schema import ColumnSpec, Schema, SchemaError

NUMBER_CHARS = "0123456789-."
MISSING_CANDIDATES = ("N/A", "(missing)", "<missing>")
# the compact format's, the first that no category contains
SEPARATOR_CANDIDATES = (",", "|", ";", "\t")
ROW_FORMATS = ("sentence", "compact")
SPECIALS = ("<|endoftext|>", "<|pad|>", "<|unk|>")
EXP_OFFSET = 20  # digit place exponents are stored shifted so that they fit a non-negative channel

# token kinds in the encoded data
# ORDER: the first token that names the next column (where column names differ); ORDER_TAIL: the
# rest of it
PAD, FORMAT, VALUE, DIGIT, ORDER, ORDER_TAIL = 0, 1, 2, 3, 4, 5


def missing_marker(schema: Schema) -> str:
    """How a missing value is written: the first candidate that is no public category."""
    used = {c for spec in schema.columns for c in spec.vocabulary()}
    for m in MISSING_CANDIDATES:
        if m not in used:
            return m
    raise SchemaError("every spelling for a missing value is a category of the schema")


def build_schema_tokenizer(schema: Schema):
    """A word-level tokenizer from the public schema alone: one token per "{column} is " and per
    ", {column} is " (a row costs one token of format per column), per category and for the missing
    marker; one token per printable ASCII character (digits,
    sign, decimal point and whatever else a generation may contain). Rebuilt from the schema on
    load."""
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    chars = [chr(i) for i in range(32, 127)]
    vocab = {t: i for i, t in enumerate(list(SPECIALS) + chars)}
    tk = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<|unk|>"))
    tk.pre_tokenizer = pre_tokenizers.Split(Regex("."), behavior="isolated")
    tk.decoder = decoders.Fuse()
    tk.add_special_tokens([AddedToken(s, special=True, normalized=False) for s in SPECIALS])
    words = [f"{c.name} is " for c in schema.columns] + [f", {c.name} is " for c in schema.columns]
    words += [", ", missing_marker(schema)]
    for spec in schema.columns:
        words += [c for c in spec.vocabulary() if len(c) > 1]
    seen, unique = set(), []
    for w in words:
        if w not in seen and w not in vocab:
            seen.add(w)
            unique.append(w)
    tk.add_tokens([AddedToken(w, normalized=False) for w in unique])
    return PreTrainedTokenizerFast(tokenizer_object=tk, bos_token="<|endoftext|>", eos_token="<|endoftext|>",
                                   pad_token="<|pad|>", unk_token="<|unk|>", clean_up_tokenization_spaces=False)


# --- text codec ------------------------------------------------------------------------------------
def auto_decimals(spec: ColumnSpec) -> int:
    """Digits after the point for a continuous column: as declared, else about four significant
    digits of the public range."""
    if spec.kind == "integer":
        return 0
    if spec.decimals is not None:
        return int(spec.decimals)
    span = float(spec.upper) - float(spec.lower)
    return int(max(0, min(6, 3 - math.floor(math.log10(span)))))


def compact_separator(schema: Schema) -> str:
    """The compact format's separator: the first candidate that no category (nor the missing marker)
    contains."""
    texts = [c for spec in schema.columns for c in spec.vocabulary()] + [missing_marker(schema)]
    for sep in SEPARATOR_CANDIDATES:
        if not any(sep in t for t in texts):
            return sep
    raise SchemaError("every separator for the compact row format occurs in a category; use row_format=sentence")


class TextCodec:
    """Rows to token ids and back, for one schema, one tokenizer and one row format.

    Each row is segments, each followed by a value (value tokens; numbers one character per token,
    so every digit has its own prediction), EOS at the end. Sentence format: "{column} is " for the
    first column and ", {column} is " for the others (format tokens), in any order. Compact format:
    nothing before the first column and the separator before the others, in schema order
    (`fixed_order`), after `prefix_ids` (the header without its last token, which starts every row
    instead of BOS)."""

    def __init__(self, schema: Schema, tokenizer, row_format: str = "sentence"):
        if row_format not in ROW_FORMATS:
            raise SchemaError(f"row_format must be one of {', '.join(ROW_FORMATS)}, not {row_format!r}")
        self.schema = schema
        self.tok = tokenizer
        self.row_format = row_format
        self.fixed_order = row_format == "compact"
        self.names = schema.names
        self.missing = missing_marker(schema)
        self.eos = int(tokenizer.eos_token_id)
        self.bos = int(tokenizer.bos_token_id if tokenizer.bos_token_id is not None else tokenizer.eos_token_id)
        self.prefix_ids: list[int] = []
        self.vocab_size = len(tokenizer)
        self.decimals = [auto_decimals(c) if c.is_numeric else None for c in schema.columns]
        if self.fixed_order:
            self.sep = compact_separator(schema)
            # the header ends with a line break (a tokenizer without one, like the schema's, ends it
            # with ":")
            end = "\n" if self.tok.decode(self._ids("\n")) == "\n" else ":"
            header = self._ids(self.sep.join(self.names) + end)
            self.prefix_ids, self.bos = header[:-1], header[-1]
            self.name_ids = [[] for _ in self.names]
            self.next_ids = [self._ids(self.sep) for _ in self.names]
            if len(self.next_ids[0]) != 1:
                raise SchemaError(f"the tokenizer has no single token for the separator {self.sep!r}")
        else:
            self.sep = ", "
            self.name_ids = [self._ids(f"{n} is ") for n in self.names]
            self.next_ids = [self._ids(f", {n} is ") for n in self.names]
        self.missing_ids = self._ids(self.missing)
        self.cat_ids = [{c: self._ids(c) for c in spec.vocabulary()} if not spec.is_numeric else None
                        for spec in schema.columns]
        self.char_id = {}
        for ch in NUMBER_CHARS:
            ids = tokenizer.convert_tokens_to_ids(ch)
            if ids is None or ids == tokenizer.unk_token_id or tokenizer.decode([ids]) != ch:
                ids = self._ids(ch)
                if len(ids) != 1 or tokenizer.decode(ids) != ch:
                    raise SchemaError(f"the tokenizer has no single token for {ch!r}; numbers need one per character")
                ids = ids[0]
            self.char_id[ch] = int(ids)
        self.id_char = {v: k for k, v in self.char_id.items()}
        self.digit_ids = [self.char_id[str(d)] for d in range(10)]
        for full in (() if self.fixed_order else (self.name_ids, self.next_ids)):
            for a in range(len(full)):
                for b in range(len(full)):
                    if a != b and full[b][:len(full[a])] == full[a]:
                        raise SchemaError(f"column names {self.names[a]!r} and {self.names[b]!r} tokenize ambiguously")
        self.ranges = [float(c.upper) - float(c.lower) if c.is_numeric else 1.0 for c in schema.columns]
        # kinds of the name segments' tokens: ORDER, then ORDER_TAIL, where the segments of
        # different columns differ (after their common prefix, before their common suffix); FORMAT
        # elsewhere (the compact format's separator says only that the value ended: a format token)
        self.name_kinds = ([[[] for _ in self.names], [[FORMAT] for _ in self.names]] if self.fixed_order else
                           [self._name_kinds(self.name_ids), self._name_kinds(self.next_ids)])

    def output_tokens(self) -> list[int]:
        """Every token a row's text can hold after its start (what a model must be able to
        predict)."""
        ids = {self.eos, *self.char_id.values(), *self.missing_ids}
        for seg in self.name_ids + self.next_ids:
            ids.update(seg)
        for cats in self.cat_ids:
            for seq in (cats or {}).values():
                ids.update(seq)
        return sorted(ids)

    @staticmethod
    def _name_kinds(segments: list[list[int]]) -> list[list[int]]:
        def common(seqs):
            n = 0
            while all(len(q) > n for q in seqs) and len({q[n] for q in seqs}) == 1:
                n += 1
            return n
        head = common(segments)
        tail = common([q[::-1] for q in segments])
        out = []
        for q in segments:
            stop = max(head + 1, len(q) - tail)
            out.append([FORMAT] * head + [ORDER] + [ORDER_TAIL] * (stop - head - 1) + [FORMAT] * (len(q) - stop))
        return out

    def _ids(self, text: str) -> list[int]:
        return list(self.tok.encode(text, add_special_tokens=False))

    # --- values to text ---
    def format_value(self, j: int, value) -> str:
        spec = self.schema.columns[j]
        if value is None or (isinstance(value, float) and math.isnan(value)) or value is pd.NA:
            return self.missing
        if spec.is_numeric:
            d = self.decimals[j]
            text = f"{float(value):.{d}f}"
            return text[1:] if text.startswith("-") and float(text) == 0 else text
        return str(value)

    def value_segment(self, j: int, text: str) -> tuple[list[int], list[int], list[int]]:
        """ids, kinds and digit place exponents (shifted by EXP_OFFSET; 0 for non-digits) of a
        value."""
        spec = self.schema.columns[j]
        if not spec.is_numeric or text == self.missing:
            ids = self.cat_ids[j][text] if (not spec.is_numeric and text != self.missing) else self.missing_ids
            return list(ids), [VALUE] * len(ids), [0] * len(ids)
        ids = [self.char_id[ch] for ch in text]
        digits = text.lstrip("-")
        point = digits.index(".") if "." in digits else len(digits)
        exps, kinds, p = [], [], point - 1
        for ch in text:
            if ch.isdigit():
                exps.append(p + EXP_OFFSET)
                kinds.append(DIGIT)
                p -= 1
            else:
                exps.append(0)
                kinds.append(VALUE)
        return ids, kinds, exps

    def encode_row(self, values: list, order: list[int]) -> np.ndarray:
        """(4, L): ids, kinds, column of each token, digit exponents; starts with BOS (the header's
        last token in the compact format, whose order is the schema's whatever `order` says), ends
        with EOS."""
        if self.fixed_order:
            order = list(range(len(self.names)))
        ids, kinds, cols, exps = [self.bos], [PAD], [0], [0]
        for k, j in enumerate(order):
            name = self.next_ids[j] if k else self.name_ids[j]
            ids += name; kinds += self.name_kinds[1 if k else 0][j]; cols += [j] * len(name); exps += [0] * len(name)
            v_ids, v_kinds, v_exps = self.value_segment(j, self.format_value(j, values[j]))
            ids += v_ids; kinds += v_kinds; cols += [j] * len(v_ids); exps += v_exps
        ids.append(self.eos); kinds.append(FORMAT); cols.append(0); exps.append(0)
        return np.array([ids, kinds, cols, exps], dtype=np.int64)

    def prompt_ids(self, conditions: dict[int, str], first: int | None) -> list[int]:
        """BOS, then "c is v" for each condition, joined by ", "; or BOS and a first column name. In
        the compact format the conditions must be the leading columns, in schema order (see
        exact_prefix)."""
        if self.fixed_order and list(conditions) != list(range(len(conditions))):
            raise ValueError("the compact row format can only fix leading columns, in schema order")
        ids = [self.bos]
        for k, (j, text) in enumerate(conditions.items()):
            ids += (self.next_ids[j] if k else self.name_ids[j]) + self.value_segment(j, text)[0]
        if not conditions and first is not None:
            ids += self.name_ids[first]
        return ids

    # --- text to values ---
    def parse_value(self, j: int, text: str):
        """The value of column j written as `text`, or raise ValueError with the reason."""
        spec = self.schema.columns[j]
        if text == self.missing:
            if not spec.nullable:
                raise ValueError("missing value in a column that is not nullable")
            return None
        if not spec.is_numeric:
            if text not in self.cat_ids[j]:
                raise ValueError("not a public category")
            return text
        body = text[1:] if text.startswith("-") else text
        whole, _, frac = body.partition(".")
        if not whole.isdigit() or (frac and not frac.isdigit()) or ("." in body and not frac):
            raise ValueError("not a number")
        if spec.kind == "integer" and frac:
            raise ValueError("not an integer")
        value = float(text)
        if value < float(spec.lower) or value > float(spec.upper):
            raise ValueError("outside the public bounds")
        return value

    def exact_prefix(self, fixed: list[int]) -> list[int]:
        """Which of the fixed columns a prompt can fix exactly: any in the sentence format; in the
        compact format the leading columns that are all fixed (the rest are met by rejection)."""
        if not self.fixed_order:
            return list(fixed)
        k = 0
        while k in fixed:
            k += 1
        return list(range(k))

    def parse(self, text: str) -> tuple[list | None, str | None]:
        """A row's values in schema order, or (None, reason)."""
        if self.fixed_order:
            return self._parse_compact(text)
        parts = text.split(", ")
        fields: list[tuple[int, str]] = []
        for part in parts:
            match = None
            for j, name in enumerate(self.names):
                if part.startswith(f"{name} is ") and (match is None or len(name) > len(self.names[match])):
                    match = j
            if match is None:
                if not fields:
                    return None, "malformed"
                j, prev = fields[-1]
                fields[-1] = (j, prev + ", " + part)  # a value that contains ", "
                continue
            fields.append((match, part[len(self.names[match]) + 4:]))
        values: list[Any] = [None] * len(self.names)
        seen = set()
        for j, raw in fields:
            if j in seen:
                return None, "column repeated"
            seen.add(j)
            try:
                values[j] = self.parse_value(j, raw)
            except ValueError as e:
                return None, str(e)
        if len(seen) < len(self.names):
            return None, "column missing"
        return values, None

    def _parse_compact(self, text: str) -> tuple[list | None, str | None]:
        parts = text.split(self.sep)
        if len(parts) < len(self.names):
            return None, "column missing"
        if len(parts) > len(self.names):
            return None, "malformed"
        values: list[Any] = []
        for j, raw in enumerate(parts):
            try:
                values.append(self.parse_value(j, raw))
            except ValueError as e:
                return None, str(e)
        return values, None
