"""Time the README's main job, `spawnml remove-bg` (IS-Net, 1024x1024) on the cat photo, on
every backend, and write the table into README.md between its remove-bg-times markers.

    .venv/bin/python scripts/time_remove_bg.py [--backends cpu,opencl,...] [--timeout 600]
        [--no-write]

Each backend runs the command as a user would, in a fresh process (model load, kernel
compilation and the run included), one backend at a time; a backend still running after
--timeout seconds is stopped and shown as "> N s". The mask of each finished run is compared
with the cpu backend's (largest difference, 0..1).
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from PIL import Image

ROOT = Path(__file__).resolve().parent.parent
SPAWNML = str(Path(sys.executable).with_name("spawnml"))
START, END = "<!-- remove-bg-times:start -->", "<!-- remove-bg-times:end -->"


def _cpu() -> str:
    model = next((line.split(":", 1)[1].strip() for line in
                  Path("/proc/cpuinfo").read_text().splitlines()
                  if line.startswith("model name")), platform.processor())  # fmt: skip
    return f"{os.cpu_count()} cores, {model}"


def time_backend(backend: str, image: str, out: Path, timeout: float) -> tuple[float, bool]:
    """Seconds one `spawnml remove-bg` takes on ``backend``; False when it timed out."""
    cmd = [SPAWNML, "remove-bg", image, "-m", "isnet", "-b", backend, "--no-progress",
           "-o", str(out / f"{backend}.png"), "--mask", str(out / f"{backend}-mask.png")]
    start = time.perf_counter()
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return timeout, False
    if done.returncode:
        raise SystemExit(f"{backend}: {' '.join(cmd)} failed:\n{done.stderr}")
    return time.perf_counter() - start, True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backends", default="cpu,opencl,webgpu,wasm,webgl")
    parser.add_argument("--timeout", type=float, default=600)
    parser.add_argument("--no-write", action="store_true", help="print the table only")
    args = parser.parse_args(argv)
    image = subprocess.run([SPAWNML, "samples", "chelsea.png"], capture_output=True, text=True,
                           check=True).stdout.strip()  # fmt: skip
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        for backend in args.backends.split(","):
            seconds, finished = time_backend(backend, image, out, args.timeout)
            print(f"{backend}: {seconds:.0f} s{'' if finished else ' (stopped)'}", flush=True)
            diff = "-"
            ref, mask = out / "cpu-mask.png", out / f"{backend}-mask.png"
            if finished and ref.exists() and backend != "cpu":
                a, b = (np.asarray(Image.open(p), np.float64) / 255 for p in (ref, mask))
                diff = f"{np.abs(a - b).max():.3f}"
            rows.append(f"| {backend} | {seconds:.0f} s | {diff} |" if finished else
                        f"| {backend} | > {seconds:.0f} s (stopped) | - |")  # fmt: skip
    today = datetime.date.today().isoformat()
    table = "\n".join([
        START,
        f"Measured {today} on {_cpu()} (`.venv/bin/python scripts/time_remove_bg.py`): one "
        "`spawnml remove-bg chelsea.png -m isnet -b BACKEND` each, model load and kernel "
        "compilation included.",
        "",
        "| backend | time | mask vs cpu (max abs) |",
        "|---|---|---|",
        *rows,
        END,
    ])  # fmt: skip
    print(table)
    if not args.no_write:
        readme = ROOT / "README.md"
        text = readme.read_text()
        if START not in text:
            raise SystemExit(f"README.md has no {START} ... {END} section to fill")
        text = re.sub(re.escape(START) + ".*?" + re.escape(END), lambda _m: table, text,
                      flags=re.S)  # fmt: skip
        readme.write_text(text)
        print("README.md updated")
    return 0


if __name__ == "__main__":
    sys.exit(main())
