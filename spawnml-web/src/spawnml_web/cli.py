"""``spawnml export-web MODEL OUT/``: a model as a static site for browsers."""

from __future__ import annotations

import argparse
from typing import Any

from spawnml.export import add_shape_argument, parse_shapes

from .export import DEFAULT_BACKENDS


def cmd_export_web(args: argparse.Namespace) -> int:
    from spawnml.cli_model import model_path

    from .export import export_web

    backends = [b.strip() for b in args.backend.split(",") if b.strip()]
    index = export_web(model_path(args.model), args.out, backends, parse_shapes(args.shape),
                       threads=args.threads)
    print(f"wrote {args.out}/: index.html, spawnml.mjs, export.json and one folder per backend")
    for name, e in index["exports"].items():
        print(f"  {name:7s} {e['kernels']} kernels, {e['launches']} launches, "
              f"{e['weights_bytes']:,} bytes of weights ({e['seconds']:.1f} s)")
    for kind in ("inputs", "outputs"):
        for t in index[kind]:
            print(f"  {kind[:-1]:6s} {t['name']}: {t['dtype']} {tuple(t['shape'])}")
    print(f"serve it over http (a page cannot load modules from file://), e.g. "
          f"python -m http.server -d {args.out} 8000, and open http://127.0.0.1:8000/")
    return 0


def add_commands(cli: Any) -> None:
    p = cli.add_parser(
        "export-web",
        help="write a model as a static web page that runs it on WebGPU or Wasm",
        description="Plan MODEL for each backend for fixed input shapes and write OUT/ with "
        "index.html, the spawnml.mjs runtime and, per backend, the generated kernels, the "
        "plan (model.json) and the weights.",
    )
    p.add_argument("model", help="an ONNX file, URL or built-in model name")
    p.add_argument("out", help="the folder to write")
    p.add_argument("--backend", default=",".join(DEFAULT_BACKENDS),
                   help=f"comma-separated web targets (default: {','.join(DEFAULT_BACKENDS)})")
    add_shape_argument(p)
    p.add_argument("--threads", type=int, default=1, metavar="N",
                   help="wasm: also write a module for N threads, which a cross-origin "
                   "isolated page uses (default 1: one thread only)")
    p.set_defaults(func=cmd_export_web)
