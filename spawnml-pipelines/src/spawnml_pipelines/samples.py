"""Real example photos, taken from the scikit-image wheel (fetched with pip into the cache).

scikit-image ships photographs under ``skimage/data/`` (``chelsea.png`` is a cat,
``astronaut.png``, ``coffee.png``, ...). ``sample_image(name)`` runs ``pip download
--no-deps`` once, extracts the picture into ``<cache>/samples/`` and returns its path;
scikit-image itself is never installed or imported.
"""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

from spawnml.errors import InvalidInputError
from spawnml.hub import HubError, OfflineError, cache_dir, file_sha256, is_offline

SKIMAGE = "scikit-image==0.25.2"
SAMPLES = ("chelsea.png", "astronaut.png", "coffee.png", "rocket.jpg", "motorcycle_left.png")


def _wheel() -> Path:
    into = cache_dir() / "downloads"
    version = SKIMAGE.split("==")[1]
    found = sorted(into.glob(f"scikit_image-{version}-*.whl"))
    if found:
        return found[-1]
    if is_offline():
        raise OfflineError(f"SPAWNML_OFFLINE is set and {SKIMAGE} is not in {into}")
    into.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
         "--quiet", "-d", str(into), SKIMAGE],
        capture_output=True, text=True, check=False,
    )
    found = sorted(into.glob(f"scikit_image-{version}-*.whl"))
    if done.returncode or not found:
        raise HubError(f"pip download {SKIMAGE} failed:\n{done.stderr.strip()}")
    return found[-1]


def sample_image(name: str = "chelsea.png") -> Path:
    """The local path of a sample photo (``chelsea.png``: the cat), fetching it if needed."""
    if "." not in name:
        name += ".png"
    if name not in SAMPLES:
        raise InvalidInputError(f"unknown sample {name!r}; known: {', '.join(SAMPLES)}")
    dest = cache_dir() / "samples" / name
    record = dest.with_name(dest.name + ".sha256")
    if dest.exists() and record.exists() and file_sha256(dest) == record.read_text().strip():
        return dest
    with zipfile.ZipFile(_wheel()) as z:
        data = z.read(f"skimage/data/{name}")
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_suffix(".part")
    tmp.write_bytes(data)
    tmp.replace(dest)
    record.write_text(file_sha256(dest) + "\n")
    return dest


def main(argv: list[str] | None = None) -> int:
    """``python -m spawnml_pipelines.samples NAME``: print the sample's local path."""
    import argparse

    parser = argparse.ArgumentParser(description="Print the local path of a sample photo "
                                     "(fetched from the scikit-image wheel on first use).")
    parser.add_argument("name", nargs="?", default="chelsea.png", help=", ".join(SAMPLES))
    print(sample_image(parser.parse_args(argv).name))
    return 0


if __name__ == "__main__":
    sys.exit(main())
