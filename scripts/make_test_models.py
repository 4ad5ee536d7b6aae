#!/usr/bin/env python3
"""Build the generated test models (deterministic random weights) into the model cache.

    .venv/bin/python scripts/make_test_models.py [--rebuild] [NAME ...]

Models land in ``$SPAWNML_CACHE/models/generated`` (default ``~/.cache/spawnml/models``);
an unchanged generator is not rebuilt. Never commit the files.
"""

from __future__ import annotations

import argparse
import time

from spawnml.testing.models import GENERATED, generated_model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "names",
        nargs="*",
        choices=[[], *GENERATED],
        metavar="NAME",
        help=f"models to build (default all: {', '.join(GENERATED)})",
    )
    parser.add_argument("--rebuild", action="store_true", help="rebuild even when cached")
    args = parser.parse_args()
    for name in args.names or GENERATED:
        start = time.perf_counter()
        path = generated_model(name, rebuild=args.rebuild)
        took = time.perf_counter() - start
        print(f"{name:16s} {path.stat().st_size / 1e6:7.1f} MB  {took:5.1f} s  {path}")


if __name__ == "__main__":
    main()
