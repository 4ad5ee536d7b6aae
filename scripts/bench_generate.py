"""Text generation speed: prefill and decode tokens/s per spawnml backend beside
onnxruntime's greedy loop, in the same run on the same model and prompt.

    .venv/bin/python scripts/bench_generate.py [--model tiny_llama] [--backends cpu,wasm]
        [--prompt-tokens 32] [--tokens 64] [--runs 3] [--threads 0]

Each contender generates greedily with the same prompt ids after one warm-up generation
(plans built and recorded, kernels compiled); the best of --runs is reported. Prefill:
prompt tokens / time of the first model run (first token included); decode: new tokens
after the first / time of the decode steps. spawnml's times cover its model run, the KV
cache window step and the logits (or argmax) read per token; onnxruntime's cover its runs
with the cache grown on the host (its natural loop). Tokens must agree with onnxruntime's.
"""

from __future__ import annotations

import argparse
import sys

from spawnml.registry import get_available_backends
from spawnml_pipelines.text import GenerationConfig, GenerationStats, TextGenerator
from spawnml_pipelines.text.folder import read_folder
from spawnml_pipelines.text.reference import ort_greedy


def best(stats: list[GenerationStats]) -> tuple[float, float]:
    """The best prefill and decode tokens/s over the runs."""
    return (max(s.prefill_tokens_per_s for s in stats), max(s.decode_tokens_per_s for s in stats))


def bench_backend(model: str, backend: str, prompt: list[int], tokens: int, runs: int,
                  kv_block: int) -> tuple[float, float, list[int]]:
    config = GenerationConfig(max_tokens=tokens, ignore_eos=True)
    with TextGenerator(model, backend, kv_block=kv_block) as gen:
        got = list(gen.generate_ids(prompt, config))  # warm-up: plans, kernels, recordings
        stats = []
        for _ in range(runs):
            got = list(gen.generate_ids(prompt, config))
            stats.append(gen.last_stats)
    return (*best(stats), got)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="tiny_llama", help="model folder or test model name")
    p.add_argument("--backends", default=None, help="comma-separated (default: available)")
    p.add_argument("--prompt-tokens", type=int, default=32, help="prompt length (default 32)")
    p.add_argument("--tokens", type=int, default=64, help="new tokens (default 64)")
    p.add_argument("--runs", type=int, default=3, help="measured runs (default 3)")
    p.add_argument("--threads", type=int, default=0,
                   help="onnxruntime intra-op threads (default 0: its own choice)")
    p.add_argument("--kv-block", type=int, default=64, help="spawnml's cache block")
    args = p.parse_args(argv)
    folder = read_folder(args.model)
    from spawnml_pipelines.text.tokenizer import load_tokenizer

    text = "The cache of keys and values stays on the device between steps. " * 20
    prompt = load_tokenizer(folder.tokenizer).encode(text).ids[: args.prompt_tokens]
    backends = args.backends.split(",") if args.backends else get_available_backends()
    ort_stats = []
    for _ in range(args.runs + 1):
        want, s = ort_greedy(folder.model, prompt, args.tokens, head_dim=folder.head_dim,
                             threads=args.threads)
        ort_stats.append(s)
    ort_prefill, ort_decode = best(ort_stats[1:])
    print(f"model {folder.path} ({folder.model.name}), prompt {len(prompt)} tokens, "
          f"{args.tokens} new tokens, best of {args.runs}")
    print("| runtime | prefill tokens/s | decode tokens/s | decode vs onnxruntime | "
          "tokens equal |")
    print("|---|---:|---:|---:|---|")
    print(f"| onnxruntime (cpu) | {ort_prefill:.0f} | {ort_decode:.0f} | 1.00 | - |")
    for backend in backends:
        try:
            prefill, decode, got = bench_backend(str(folder.path), backend, prompt, args.tokens,
                                                 args.runs, args.kv_block)
        except Exception as exc:  # noqa: BLE001 - report and go on with the next backend
            print(f"| spawnml {backend} | failed: {type(exc).__name__}: {exc} | | | |")
            continue
        print(f"| spawnml {backend} | {prefill:.0f} | {decode:.0f} | "
              f"{decode / ort_decode:.2f} | {'yes' if got == want else 'NO'} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
