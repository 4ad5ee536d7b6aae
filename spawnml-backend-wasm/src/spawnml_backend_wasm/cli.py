"""``spawnml export-wasm MODEL OUT/``: a model as one self-contained WebAssembly module."""

from __future__ import annotations

import argparse
from typing import Any

from spawnml.errors import InvalidInputError
from spawnml.export import add_shape_argument, parse_shapes


def cmd_export_wasm(args: argparse.Namespace) -> int:
    from spawnml.cli_model import model_path

    from .export import export_wasm

    if not 1 <= args.threads <= 64:
        raise InvalidInputError(f"--threads must be between 1 and 64, got {args.threads}")
    manifest = export_wasm(model_path(args.model), args.out, parse_shapes(args.shape),
                           args.threads)
    print(f"wrote {args.out}/: model.wasm ({manifest['module_bytes']:,} bytes, "
          f"{manifest['kernels']} kernels, {manifest['launches']} launches), "
          f"model.weights ({manifest['weights']['bytes']:,} bytes), model.json, "
          f"spawnml-model.mjs, spawnml-worker.mjs, run.mjs"
          f"{'' if args.threads > 1 else ', wasi-run.wasm'} in {manifest['export_seconds']:.1f} s")
    if args.threads > 1:
        print(f"  {args.threads} threads on a shared memory: {manifest['split_launches']} of "
              f"{manifest['launches']} launches are split across them")
    for kind in ("inputs", "outputs"):
        for t in manifest[kind]:
            print(f"  {kind[:-1]:6s} {t['name']}: {t['dtype']} {tuple(t['shape'])}")
    print(f"run it with: node {args.out}/run.mjs --input NAME=FILE.bin --out OUT_DIR")
    if args.threads == 1:
        print(f"         or: wasmtime run --dir {args.out}::model --dir IN_DIR::in "
              f"--dir OUT_DIR::out --preload model={args.out}/model.wasm "
              f"{args.out}/wasi-run.wasm")
    return 0


def add_commands(cli: Any) -> None:
    p = cli.add_parser(
        "export-wasm",
        help="write a model as one self-contained WebAssembly module (node, browsers, wasmtime)",
        description="Plan MODEL on the wasm backend for fixed input shapes and write OUT/ "
        "with model.wasm (every kernel and the plan), model.weights, model.json (the "
        "manifest) and a JS loader plus a node runner (run.mjs).",
    )
    p.add_argument("model", help="an ONNX file, URL or built-in model name")
    p.add_argument("out", help="the folder to write")
    add_shape_argument(p)
    p.add_argument("--threads", type=int, default=1, metavar="N",
                   help="run on N threads sharing the module's memory (hosts with the Wasm "
                   "threads proposal: node, cross-origin isolated pages; default 1)")
    p.set_defaults(func=cmd_export_wasm)
