"""Resident memory over many generated tokens: RSS after each round of generation.

    .venv/bin/python scripts/generate_rss.py [--model tiny_llama] [--backend cpu]
        [--rounds 10] [--tokens 200]

Each round generates --tokens tokens (sampled, so the cache and the plans see the same
shapes each round); a leak of device or host buffers per token or per generation shows as
RSS growing round after round. Linux only (reads /proc/self/status).
"""

from __future__ import annotations

import argparse
import gc
import sys

from spawnml_pipelines.text import GenerationConfig, TextGenerator


def rss_mib() -> float:
    """This process's resident set size in MiB."""
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="tiny_llama", help="model folder or test model name")
    p.add_argument("--backend", default="cpu", help="backend (default cpu)")
    p.add_argument("--rounds", type=int, default=10, help="generations (default 10)")
    p.add_argument("--tokens", type=int, default=200, help="tokens per generation (default 200)")
    args = p.parse_args(argv)
    config = GenerationConfig(max_tokens=args.tokens, temperature=1.0, seed=0, ignore_eos=True)
    with TextGenerator(args.model, args.backend) as gen:
        prompt = gen.encode("The cache stays on the device.")
        sizes = []
        for i in range(args.rounds):
            n = sum(1 for _ in gen.generate_ids(prompt, config))
            gc.collect()
            sizes.append(rss_mib())
            print(f"round {i + 1}: {n} tokens, RSS {sizes[-1]:.1f} MiB", flush=True)
    growth = sizes[-1] - sizes[1] if len(sizes) > 1 else 0.0
    print(f"RSS change from round 2 to round {args.rounds} "
          f"({(args.rounds - 2) * args.tokens} tokens): {growth:+.1f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
