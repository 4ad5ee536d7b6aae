"""Small decoder-only test models, built offline and cached outside git.

``tiny_llama`` (Llama architecture) and ``tiny_qwen2`` (Qwen2: q/k/v biases, tied
embeddings) get seeded random weights from a ``transformers`` config (no download) and a
byte-level BPE tokenizer trained with the ``tokenizers`` package on :data:`CORPUS`, whose
vocabulary size is the model's. ``small_llama`` (hidden 512, 4 layers, vocabulary 8192) is
the benchmark size where arithmetic is no longer negligible next to per-step overhead; its
tokenizer is tiny_llama's 384 tokens (the corpus has no more), the other ids never come from
text. Each is written three ways under
``<cache>/models/text/<name>-v<VERSION>/``:

* ``hf/``: the Hugging Face folder (config.json, safetensors weights, tokenizer files);
* ``torch/``: ``torch.onnx.export`` of a wrapper in the optimum layout — inputs
  ``input_ids``, ``attention_mask``, ``position_ids``, ``past_key_values.N.key/value``
  ([batch, kv_heads, past, head_dim]); outputs ``logits`` and ``present.N.key/value``;
* ``genai/``: the onnxruntime-genai model builder's int4 CPU model (``genai_config.json`` +
  ``model.onnx`` with GroupQueryAttention, MatMulNBits, SkipSimplifiedLayerNormalization...).

Building needs torch, transformers and tokenizers (onnxruntime-genai for ``genai``); a
missing one raises MissingDependencyError saying what to install.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from spawnml.errors import InvalidInputError, MissingDependencyError
from spawnml.testing.models import cache_dir

VERSION = 1  # bump when a config, the corpus, the seed or the export changes
FORMATS = ("hf", "torch", "genai")

CORPUS = """\
Small models run everywhere when every operator is written once and compiled for each
device. The cache of keys and values stays on the device between steps, so a token costs
one pass over the weights and no copy of the cache. A sampler picks the next token from the
logits: greedy takes the largest, temperature flattens or sharpens them, top-k keeps the k
largest, top-p keeps the smallest set whose probability reaches p, and a repetition penalty
makes tokens already seen less likely. Streaming returns text as soon as it is decoded.
The quick brown fox jumps over the lazy dog; pack my box with five dozen liquor jugs.
Numbers such as 0 1 2 3 4 5 6 7 8 9 10 100 1000 and symbols like ( ) [ ] { } + - * / = < >
appear in code, and code appears in text: def f(x): return x * 2 if x > 0 else -x.
"""


@dataclass(frozen=True)
class TinyDecoder:
    """One test model: its transformers architecture and config values."""

    name: str
    architecture: str  # "llama" or "qwen2"
    hidden: int = 64
    layers: int = 2
    heads: int = 4
    kv_heads: int = 2
    intermediate: int = 128
    context: int = 256
    vocab: int = 384
    seed: int = 0
    tokenizer_vocab: int | None = None  # None: ``vocab``

    @property
    def tokens(self) -> int:
        """The tokenizer's vocabulary size."""
        return self.tokenizer_vocab or self.vocab


TINY_MODELS = {m.name: m for m in (
    TinyDecoder("tiny_llama", "llama"),
    TinyDecoder("tiny_qwen2", "qwen2", seed=1),
    TinyDecoder("small_llama", "llama", hidden=512, layers=4, heads=8, kv_heads=4,
                intermediate=1408, context=512, vocab=8192, seed=2, tokenizer_vocab=384),
)}


def model_root(name: str) -> Path:
    """Where the model's three folders are (or will be) cached."""
    return cache_dir() / "text" / f"{name}-v{VERSION}"


def tiny_model(name: str, fmt: str = "torch") -> Path:
    """The folder of test model ``name`` in format ``fmt`` (hf, torch, genai), built once."""
    if name not in TINY_MODELS:
        raise InvalidInputError(f"no test model {name!r}; known: {', '.join(TINY_MODELS)}")
    if fmt not in FORMATS:
        raise InvalidInputError(f"format {fmt!r}: expected one of {', '.join(FORMATS)}")
    folder = model_root(name) / fmt
    if not (folder / ".complete").exists():
        builders = {"hf": _build_hf, "torch": _build_torch, "genai": _build_genai}
        _atomic_build(folder, lambda tmp: builders[fmt](TINY_MODELS[name], tmp))
    return folder


def _atomic_build(folder: Path, build: Any) -> None:
    """Build into a temporary sibling, then rename, so a half-built folder never shows."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name}-", dir=folder.parent))
    try:
        build(tmp)
        (tmp / ".complete").write_text("ok\n")
        if folder.exists():
            shutil.rmtree(folder)
        os.replace(tmp, folder)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _require(module: str, package: str) -> Any:
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingDependencyError(
            f"building the text test models needs {package} (pip install {package}): {exc}"
        ) from exc


def train_tokenizer(vocab_size: int) -> Any:
    """A byte-level BPE ``tokenizers.Tokenizer`` trained on :data:`CORPUS`, exactly
    ``vocab_size`` entries (token 0 is ``<|endoftext|>``)."""
    tk = _require("tokenizers", "tokenizers")
    tok = tk.Tokenizer(tk.models.BPE())
    tok.pre_tokenizer = tk.pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = tk.decoders.ByteLevel()
    trainer = tk.trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=["<|endoftext|>"], show_progress=False,
        initial_alphabet=tk.pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator([CORPUS] * 4, trainer)
    if tok.get_vocab_size() != vocab_size:
        raise InvalidInputError(f"the corpus gives {tok.get_vocab_size()} tokens, not "
                                f"{vocab_size}: lower the model's vocab")
    return tok


def _hf_config(spec: TinyDecoder) -> Any:
    transformers = _require("transformers", "transformers")
    common = dict(
        vocab_size=spec.vocab, hidden_size=spec.hidden, intermediate_size=spec.intermediate,
        num_hidden_layers=spec.layers, num_attention_heads=spec.heads,
        num_key_value_heads=spec.kv_heads, max_position_embeddings=spec.context,
        bos_token_id=0, eos_token_id=0, attn_implementation="eager")
    if spec.architecture == "llama":
        return transformers.LlamaConfig(**common, tie_word_embeddings=False)
    return transformers.Qwen2Config(**common, tie_word_embeddings=True)


def _build_hf(spec: TinyDecoder, out: Path) -> None:
    torch = _require("torch", "torch==2.13.0")
    transformers = _require("transformers", "transformers")
    tok = train_tokenizer(spec.tokens)
    torch.manual_seed(spec.seed)
    config = _hf_config(spec)
    model = transformers.AutoModelForCausalLM.from_config(config).eval()
    with torch.no_grad():  # the default init leaves norms at 1: vary them a little
        for name, p in model.named_parameters():
            if "norm" in name:
                p.add_(0.1 * torch.randn_like(p))
    model.save_pretrained(out)
    tok.save(str(out / "tokenizer.json"))
    fast = transformers.PreTrainedTokenizerFast(tokenizer_file=str(out / "tokenizer.json"),
                                                eos_token="<|endoftext|>",
                                                bos_token="<|endoftext|>")
    fast.save_pretrained(out)


def _build_torch(spec: TinyDecoder, out: Path) -> None:
    from .export import export_decoder

    hf = tiny_model(spec.name, "hf")
    export_decoder(hf, out / "model.onnx")
    for name in ("tokenizer.json", "config.json"):
        shutil.copy(hf / name, out / name)


def _build_genai(spec: TinyDecoder, out: Path) -> None:
    _require("onnxruntime_genai", "onnxruntime-genai")
    hf = tiny_model(spec.name, "hf")
    with tempfile.TemporaryDirectory() as cache:
        cmd = [sys.executable, "-m", "onnxruntime_genai.models.builder", "-i", str(hf),
               "-o", str(out), "-p", "int4", "-e", "cpu", "-c", cache]
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0 or not (out / "genai_config.json").exists():
        raise InvalidInputError(f"the onnxruntime-genai builder failed:\n{done.stderr[-2000:]}")
    for name in ("tokenizer.json", "config.json"):
        if not (out / name).exists():
            shutil.copy(hf / name, out / name)


if __name__ == "__main__":  # python -m spawnml_pipelines.text.models [NAME] [FORMAT]
    names = sys.argv[1:2] or list(TINY_MODELS)
    formats = sys.argv[2:3] or list(FORMATS)
    for n in names:
        for f in formats:
            print(tiny_model(n, f))
