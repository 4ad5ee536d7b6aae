"""``spawnml classify | depth | style | remove-bg | upscale | generate``: the pipelines on the
command line."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from .image_io import load_image, save_image
from .kernels.colormap import COLORMAPS
from .models import models_for
from .remove_bg import BACKGROUNDS, parse_color


def _at_least(low: int) -> Any:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"must be at least {low}, got {value}")
        return value

    return parse


def _color(text: str) -> str:
    try:
        parse_color(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def _models_for(task: str) -> str:
    return ", ".join(f"{m.name} ({m.about})" for m in models_for(task))


def _common(p: argparse.ArgumentParser, task: str, default_model: str) -> None:
    p.add_argument("image", help="input image (PNG, JPEG, ... anything Pillow reads)")
    p.add_argument("-m", "--model", default=default_model,
                   help=f"ONNX model: a path, an http(s)/file URL (fetched into the cache), or a "
                        f"known name (default {default_model}; known: {_models_for(task)})")
    p.add_argument("-b", "--backend", default=None,
                   help="backend to run on (cpu, webgpu, opencl, webgl, wasm, cuda; default: "
                        "every available one in preference order, see `spawnml backends`); "
                        "nodes it cannot run fall back to cpu")
    p.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                   help="progress bars on stderr (default: when stderr is a terminal)")


def _output(p: argparse.ArgumentParser, default: str) -> None:
    p.add_argument("-o", "--output", default=None,
                   help=f"output image path (default: <image stem>-{default}.png in the current "
                        "directory)")


def _out_path(args: argparse.Namespace, suffix: str) -> Path:
    return Path(args.output) if args.output else Path(f"{Path(args.image).stem}-{suffix}.png")


def _report(args: argparse.Namespace, pipe: Any, start: float, path: Path | None) -> None:
    took = time.perf_counter() - start
    where = f" -> {path}" if path else ""
    print(f"{pipe.task} on {pipe.backend} with {pipe.model_path.name} in {took:.2f} s{where}",
          file=sys.stderr)



def cmd_classify(args: argparse.Namespace) -> int:
    from .classify import ImageClassificationPipeline

    start = time.perf_counter()
    image = load_image(args.image)  # a bad image fails before the model loads
    pipe = ImageClassificationPipeline(args.model, args.backend, labels=args.labels,
                                       mean=args.mean, std=args.std,
                                       resize_short=args.resize_short, progress=args.progress)
    preds = pipe(image, top_k=args.top_k)
    if args.json:
        print(json.dumps([p.__dict__ for p in preds], indent=2))
    else:
        for p in preds:
            print(f"{p.score:8.4f}  {p.label}")
    _report(args, pipe, start, None)
    return 0


def cmd_depth(args: argparse.Namespace) -> int:
    from .depth import DepthEstimationPipeline

    start = time.perf_counter()
    image = load_image(args.image)  # a bad image fails before the model loads
    pipe = DepthEstimationPipeline(args.model, args.backend, mean=args.mean, std=args.std,
                                   progress=args.progress)
    result = pipe(image)
    path = save_image(result.colorize(args.colormap), _out_path(args, "depth"))
    if args.raw:
        import numpy as np

        np.save(args.raw, result.depth)
    _report(args, pipe, start, path)
    return 0


def cmd_style(args: argparse.Namespace) -> int:
    from .style import StyleTransferPipeline

    start = time.perf_counter()
    image = load_image(args.image)  # a bad image fails before the model loads
    pipe = StyleTransferPipeline(args.model, args.backend, max_side=args.max_side,
                                 progress=args.progress)
    path = save_image(pipe(image), _out_path(args, "style"))
    _report(args, pipe, start, path)
    return 0


def cmd_remove_bg(args: argparse.Namespace) -> int:
    from .remove_bg import BackgroundRemovalPipeline

    start = time.perf_counter()
    image = load_image(args.image)  # a bad image fails before the model loads
    pipe = BackgroundRemovalPipeline(args.model, args.backend, progress=args.progress)
    result = pipe(image, background=args.background, color=args.color,
                  blur_sigma=args.blur_sigma)
    path = save_image(result.image, _out_path(args, "nobg"))
    if args.mask:
        import numpy as np

        save_image((np.clip(result.mask, 0, 1) * 255).round().astype(np.uint8), args.mask)
    _report(args, pipe, start, path)
    return 0


def cmd_upscale(args: argparse.Namespace) -> int:
    from .upscale import SuperResolutionPipeline

    start = time.perf_counter()
    image = load_image(args.image)  # a bad image fails before the model loads
    pipe = SuperResolutionPipeline(args.model, args.backend, tile=args.tile,
                                   overlap=args.overlap, progress=args.progress)
    path = save_image(pipe(image), _out_path(args, "x3"))
    _report(args, pipe, start, path)
    return 0


def cmd_samples(args: argparse.Namespace) -> int:
    import shutil

    from .samples import SAMPLES, sample_image

    if not args.names:
        print("sample photos (from the scikit-image wheel, fetched with pip on first use):")
        print("\n".join(f"  {name}" for name in SAMPLES))
        return 0
    for name in args.names:
        path = sample_image(name)
        if args.to:
            Path(args.to).mkdir(parents=True, exist_ok=True)
            path = Path(shutil.copy(path, Path(args.to) / path.name))
        print(path)
    return 0


def add_commands(sub: Any) -> None:
    """Register the pipeline subcommands on the ``spawnml`` subparsers object."""
    p = sub.add_parser("samples", help="list the sample photos, or extract them and print paths",
                       description=(
                           "Sample photos for trying the pipelines (chelsea.png is a cat), "
                           "taken from the scikit-image wheel on first use. Without names: "
                           "list them; with names: print each one's path in the cache, or "
                           "copy them into --to DIR."))
    p.add_argument("names", nargs="*", metavar="NAME", help="sample names, e.g. chelsea.png")
    p.add_argument("--to", metavar="DIR", help="copy the samples into DIR")
    p.set_defaults(func=cmd_samples)

    p = sub.add_parser("classify", help="top-k labels of an image with probabilities",
                       description=(
                           "Classify an image: resize the short side, centre-crop to the "
                           "model's input size, normalise (options, else the model's metadata, "
                           "else ImageNet statistics), run, softmax, print the top-k labels."))
    _common(p, "classify", "squeezenet1_1")
    p.add_argument("-k", "--top-k", type=_at_least(1), default=5,
                   help="how many labels to print (default 5)")
    p.add_argument("--labels", default=None,
                   help="labels file: one per line, or a JSON list (default: the model's "
                        "'labels' metadata, else class_<i>)")
    p.add_argument("--resize-short", type=_at_least(1), default=None,
                   help="short side before the centre crop (default: input size × 256/224)")
    p.add_argument("--mean", default=None, help="per-channel mean on 0..255 pixels, 'r,g,b'")
    p.add_argument("--std", default=None, help="per-channel std on 0..255 pixels, 'r,g,b'")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(func=cmd_classify)

    p = sub.add_parser("depth", help="monocular depth estimation, written as a colour map",
                       description=(
                           "Estimate relative depth (Depth-Anything-style model): resize to the "
                           "model's input, predict, upscale bilinearly to the image's exact size, "
                           "colour-map."))
    _common(p, "depth", "depth_tiny")
    _output(p, "depth")
    p.add_argument("-c", "--colormap", choices=COLORMAPS, default="plasma",
                   help="colour map (default plasma)")
    p.add_argument("--raw", default=None, help="also save the float depth map as .npy here")
    p.add_argument("--mean", default=None, help="per-channel mean on 0..255 pixels, 'r,g,b'")
    p.add_argument("--std", default=None, help="per-channel std on 0..255 pixels, 'r,g,b'")
    p.set_defaults(func=cmd_depth)

    p = sub.add_parser("style", help="fast neural style transfer",
                       description=("Restyle an image with a fast-neural-style TransformerNet "
                                    "(pixels 0-255 in, output clamped to 0-255)."))
    _common(p, "style", "transformer_net")
    _output(p, "style")
    p.add_argument("--max-side", type=_at_least(1), default=1024,
                   help="longer side the image is resized to for models without a fixed size "
                        "(default 1024)")
    p.set_defaults(func=cmd_style)

    p = sub.add_parser("remove-bg", help="background removal (IS-Net)",
                       description=(
                           "Remove the background: IS-Net predicts a 1024×1024 mask, upscaled "
                           "to the image and used as its alpha channel (transparent PNG), or "
                           "to composite the subject over a colour or a blurred background."))
    _common(p, "remove-bg", "isnet")
    _output(p, "nobg")
    p.add_argument("--background", choices=BACKGROUNDS, default="transparent",
                   help="what replaces the background (default transparent)")
    p.add_argument("--color", type=_color, default="#ffffff",
                   help="background colour for --background color: #RRGGBB or R,G,B "
                        "(default #ffffff)")
    p.add_argument("--blur-sigma", type=float, default=None,
                   help="Gaussian sigma for --background blur (default: longer side / 50)")
    p.add_argument("--mask", default=None, help="also save the mask as a grayscale image here")
    p.set_defaults(func=cmd_remove_bg)

    p = sub.add_parser("upscale", help="×3 super-resolution (ESPCN) by overlapping tiles",
                       description=(
                           "Upscale an image of any size: the BT.601 luma is processed in "
                           "overlapping tiles of the model's input size, blended seamlessly, "
                           "and recombined with the bilinearly upsampled chroma."))
    _common(p, "upscale", "espcn_x3")
    _output(p, "x3")
    p.add_argument("--tile", type=_at_least(1), default=None,
                   help="tile side for models without a fixed input size (default 128)")
    p.add_argument("--overlap", type=_at_least(0), default=16,
                   help="tile overlap in input pixels (a quarter of it at each inner edge is "
                        "discarded, the rest cross-faded; default 16)")
    p.set_defaults(func=cmd_upscale)

    from .text.cli import add_generate_command

    add_generate_command(sub)
