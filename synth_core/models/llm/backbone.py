"""Which language model DP-LLMTGen builds on: a causal LM in a local directory or already in the local Hugging
Face cache. Nothing is downloaded: a backbone is checked here, with a one-line reason, before anything trains."""
from __future__ import annotations

import json
import os
from pathlib import Path


def list_local_causal_lms(cache_dir: str | os.PathLike | None = None) -> list[dict]:
    """Causal LMs found in the local Hugging Face hub cache (nothing is downloaded): [{"id", "path",
    "model_type"}], for a user to pick as `backbone`. An empty list when the cache holds none."""
    if cache_dir is None:
        try:
            from huggingface_hub.constants import HF_HUB_CACHE
            cache_dir = HF_HUB_CACHE
        except Exception:  # noqa: BLE001 - no hub library: no cache to list
            return []
    root = Path(cache_dir)
    found = []
    if not root.is_dir():
        return found
    for repo in sorted(root.glob("models--*")):
        for config in sorted(repo.glob("snapshots/*/config.json")):
            try:
                data = json.loads(config.read_text())
            except (OSError, json.JSONDecodeError):
                continue
            if isinstance(data, dict) and _is_causal_lm(data):
                found.append({"id": repo.name[len("models--"):].replace("--", "/"), "path": str(config.parent),
                              "model_type": data.get("model_type")})
                break
    return found


class BackboneError(ValueError):
    """A backbone that cannot be used offline; the message is one line a steward can act on."""


def _is_causal_lm(config: dict) -> bool:
    archs = config.get("architectures") or []
    return any(a.endswith("ForCausalLM") or a.endswith("LMHeadModel") for a in archs)


TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.json", "tokenizer.model", "spiece.model")


def resolve_backbone(backbone: str | os.PathLike, cache_dir: str | os.PathLike | None = None) -> str:
    """Check, before anything is trained, that `backbone` is a causal LM usable offline: a local directory
    holding a causal LM's config.json and its tokenizer, or the id of one in the local Hugging Face cache
    (see list_local_causal_lms). Returns the backbone as given (stripped); raises BackboneError with a
    one-line reason. Nothing is downloaded."""
    text = str(backbone).strip()
    if not text:
        raise BackboneError("no backbone given: name a local model directory or a model in the local "
                            "Hugging Face cache, or use the offline default")
    path = Path(text).expanduser()
    looks_like_path = path.is_absolute() or text.startswith((".", "~")) or text.count("/") > 1
    if not path.exists():
        if not looks_like_path:
            ids = {m["id"] for m in list_local_causal_lms(cache_dir)}
            if text in ids:
                return text
            raise BackboneError(f"{text!r} is neither a local directory nor a causal language model in the local "
                                "Hugging Face cache (nothing is downloaded here)")
        raise BackboneError(f"no such directory: {text}")
    if not path.is_dir():
        raise BackboneError(f"{text} is a file; give the directory that holds the model's config.json")
    try:
        config = json.loads((path / "config.json").read_text())
    except FileNotFoundError:
        raise BackboneError(f"{text} holds no config.json: not a Hugging Face model directory") from None
    except (OSError, json.JSONDecodeError) as e:
        raise BackboneError(f"cannot read {path / 'config.json'}: {e}") from None
    if not isinstance(config, dict) or (config.get("architectures") and not _is_causal_lm(config)):
        archs = ", ".join(config.get("architectures") or []) if isinstance(config, dict) else "?"
        raise BackboneError(f"{text} is not a causal language model (architectures: {archs})")
    if not any((path / f).exists() for f in TOKENIZER_FILES):
        raise BackboneError(f"{text} has no tokenizer files (tokenizer.json, vocab.json, …)")
    return text
