"""``spawnml generate MODEL_DIR --prompt "..."``: stream generated text to the terminal."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any


def _number(kind: type, low: float, *, above: bool = False, high: float | None = None
            ) -> Callable[[str], Any]:
    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"expected {'an integer' if kind is int else 'a number'}, got {text!r}"
            ) from None
        if value < low or (above and value == low):
            raise argparse.ArgumentTypeError(
                f"must be {'above' if above else 'at least'} {low}, got {value}")
        if high is not None and value > high:
            raise argparse.ArgumentTypeError(f"must be at most {high}, got {value}")
        return value

    return parse


def cmd_generate(args: argparse.Namespace) -> int:
    from .generator import GenerationConfig, TextGenerator

    config = GenerationConfig(
        temperature=args.temperature, top_k=args.top_k, top_p=args.top_p,
        repetition_penalty=args.repetition_penalty, seed=args.seed,
        max_tokens=args.max_tokens, stop_tokens=tuple(args.stop_token or ()),
        ignore_eos=args.ignore_eos)
    with TextGenerator(args.model, args.backend, kv_block=args.kv_block) as gen:
        if args.echo:
            print(args.prompt, end="", flush=True)
        for token in gen.stream(args.prompt, config):
            print(token.text, end="", flush=True)
        print()
        s = gen.last_stats
        print(f"{gen.backend}: prefill {s.prompt_tokens} tokens in {s.prefill_s * 1e3:.1f} ms "
              f"({s.prefill_tokens_per_s:.1f} tokens/s); decode {max(s.new_tokens - 1, 0)} "
              f"steps in {s.decode_s * 1e3:.1f} ms ({s.decode_tokens_per_s:.1f} tokens/s); "
              f"{s.new_tokens} new tokens, stopped: {s.stop_reason}", file=sys.stderr)
    return 0


def add_generate_command(sub: Any) -> None:
    """Register ``spawnml generate`` on the ``spawnml`` subparsers object."""
    p = sub.add_parser(
        "generate", help="generate text with a decoder-only model, streamed as it comes",
        description=(
            "Generate text from a prompt with a decoder-only ONNX model exported with its KV "
            "cache (model.onnx + tokenizer.json [+ genai_config.json / config.json] in one "
            "folder). The cache stays on the device between tokens; the text is streamed to "
            "stdout, and prefill and decode tokens/s are printed on stderr at the end."))
    p.add_argument("model", metavar="MODEL_DIR",
                   help="model folder, or a generated test model: tiny_llama, tiny_qwen2 "
                        "(add :genai for the onnxruntime-genai build)")
    p.add_argument("-p", "--prompt", required=True, help="the text to continue")
    p.add_argument("-b", "--backend", default=None,
                   help="backend to run on (cpu, webgpu, opencl, webgl, wasm, cuda; default: "
                        "every available one in preference order); nodes it cannot run fall "
                        "back to cpu")
    p.add_argument("-n", "--max-tokens", type=_number(int, 1), default=64,
                   help="most new tokens (default 64; fewer when the model's context is full)")
    p.add_argument("-t", "--temperature", type=_number(float, 0), default=0.0,
                   help="sampling temperature; 0 is greedy decoding (default 0)")
    p.add_argument("--top-k", type=_number(int, 0), default=0,
                   help="sample among the k most likely tokens only (default 0: all)")
    p.add_argument("--top-p", type=_number(float, 0, above=True, high=1), default=1.0,
                   help="sample among the most likely tokens whose probability reaches p "
                        "(default 1.0: all)")
    p.add_argument("--repetition-penalty", type=_number(float, 0, above=True), default=1.0,
                   help="divide the logits of tokens already seen by this (default 1.0: off)")
    p.add_argument("--seed", type=int, default=None,
                   help="random seed of the sampler, for reproducible sampling (default: none)")
    p.add_argument("--stop-token", type=_number(int, 0), action="append", metavar="ID",
                   help="stop after this token id (repeatable; the model's end-of-sequence "
                        "tokens always stop it unless --ignore-eos)")
    p.add_argument("--ignore-eos", action="store_true",
                   help="keep going past the model's end-of-sequence tokens")
    p.add_argument("--kv-block", type=_number(int, 1), default=64,
                   help="positions the KV cache window grows by when full (default 64)")
    p.add_argument("--echo", action="store_true", help="print the prompt before the new text")
    p.set_defaults(func=cmd_generate)
