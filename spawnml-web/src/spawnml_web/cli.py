"""``spawnml export-web MODEL OUT/``: a model as a static site for browsers."""

from __future__ import annotations

import argparse
from typing import Any

from spawnml.errors import InvalidInputError
from spawnml.export import add_shape_argument, parse_shapes

from .export import DEFAULT_BACKENDS, PAGE_TASKS


def cmd_export_web(args: argparse.Namespace) -> int:
    from spawnml.cli_model import model_path

    from .export import export_web

    backends = [b.strip() for b in args.backend.split(",") if b.strip()]
    index = export_web(model_path(args.model), args.out, backends, parse_shapes(args.shape),
                       threads=args.threads, pipeline=args.pipeline,
                       image_size=parse_image_size(args.image_size))
    print(f"wrote {args.out}/: index.html, spawnml.mjs, export.json and one folder per backend")
    if args.pipeline:
        page = index["pipeline"]
        print(f"  the {page['task']} page, for images of {page['image'][0]}x{page['image'][1]} "
              f"(height x width)" + "".join(f"; stage {s}/" for s in page["stages"]))
    for name, e in index["exports"].items():
        print(f"  {name:7s} {e['kernels']} kernels, {e['launches']} launches, "
              f"{e['weights_bytes']:,} bytes of weights ({e['seconds']:.1f} s)")
    for kind in ("inputs", "outputs"):
        for t in index[kind]:
            print(f"  {kind[:-1]:6s} {t['name']}: {t['dtype']} {tuple(t['shape'])}")
    print(f"serve it over http (a page cannot load modules from file://), e.g. "
          f"python -m http.server -d {args.out} 8000, and open http://127.0.0.1:8000/")
    return 0


def parse_image_size(text: str | None) -> tuple[int, int] | None:
    """``--image-size H,W`` as (height, width)."""
    if text is None:
        return None
    try:
        h, w = (int(v) for v in text.replace("x", ",").split(","))
    except ValueError:
        h = w = 0
    if not (0 < h <= 8192 and 0 < w <= 8192):
        raise InvalidInputError(f"--image-size expects H,W (1..8192 each), got {text!r}")
    return h, w


def add_commands(cli: Any) -> None:
    p = cli.add_parser(
        "export-web",
        help="write a model, or a pipeline's page, as a static site that runs it on WebGPU, "
        "WebGL2 or Wasm",
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
    p.add_argument("--pipeline", choices=PAGE_TASKS, metavar="TASK",
                   help=f"write that pipeline's page ({', '.join(PAGE_TASKS)}): the picked "
                   "photo's pre- and post-processing run as generated kernels around MODEL")
    p.add_argument("--image-size", metavar="H,W",
                   help="with --pipeline: the image size the page works at (default: the "
                   "model's input size, else 512,512)")
    p.set_defaults(func=cmd_export_web)
