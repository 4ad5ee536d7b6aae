"""The five subcommands: registered through the plugin hook, complete --help, real runs."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from spawnml.cli import build_parser, main
from spawnml.plugins import PluginManager
from spawnml_pipelines import testing
from spawnml_pipelines.classify import IMAGENET_MEAN, IMAGENET_STD
from spawnml_pipelines.image_io import save_image
from spawnml_pipelines.kernels import reference as ref

COMMANDS = ("classify", "depth", "style", "remove-bg", "upscale")


def subparsers() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    (action,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(action.choices)


def test_plugin_registers_pipelines_and_commands() -> None:
    pm = PluginManager()
    pm.load_entry_points(only={"pipelines"})
    (record,) = pm.records
    assert record.loaded and not record.error, record.error
    assert record.hooks == ["spawnml_register_commands", "spawnml_register_models",
                            "spawnml_register_pipelines"]
    registered: dict[str, type] = {}
    pm.hook.spawnml_register_pipelines(register=lambda task, cls: registered.setdefault(task, cls))
    assert sorted(registered) == sorted([*COMMANDS, "text-generation"])


@pytest.mark.parametrize("command", COMMANDS)
def test_help_is_complete(command: str) -> None:
    sub = subparsers()[command]
    assert sub.description and len(sub.description) > 40
    for action in sub._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        assert action.help and len(action.help) > 10, (command, action.dest)
        if action.default not in (None, False) and action.option_strings:
            assert "default" in action.help, (command, action.dest, action.help)
    text = sub.format_help()
    for needle in ("--model", "--backend", "--progress", "image"):
        assert needle in text


def test_help_runs_from_the_console_script() -> None:
    done = subprocess.run([sys.executable, "-m", "spawnml", "remove-bg", "--help"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert "--background {transparent,color,blur}" in done.stdout


@pytest.fixture
def image(tmp_path: Path, photo_like) -> Path:
    return save_image(photo_like(40, 52), tmp_path / "in.png")


def test_classify_cli(small_models, image: Path, backend_name: str, capsys) -> None:
    assert main(["classify", str(image), "-m", str(small_models["classify"]), "-b",
                 backend_name, "-k", "3", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    img = np.asarray(Image.open(image))
    want = testing.classify(small_models["classify"], img, (96, 96), 110, IMAGENET_MEAN,
                            IMAGENET_STD)
    assert [p["index"] for p in out] == list(np.argsort(-want, kind="stable")[:3])
    np.testing.assert_allclose([p["score"] for p in out], np.sort(want)[::-1][:3], rtol=1e-4)


@pytest.mark.parametrize("command, extra", [
    ("depth", ["--colormap", "viridis"]),
    ("style", []),
    ("remove-bg", ["--background", "color", "--color", "10,20,30"]),
    ("upscale", []),
])
def test_image_commands_match_the_reference(small_models, image: Path, tmp_path: Path,
                                            backend_name: str, command: str,
                                            extra: list[str]) -> None:
    """Each command on each backend against onnxruntime + the numpy reference."""
    out = tmp_path / f"{command}.png"
    model = small_models[command]
    assert main([command, str(image), "-m", str(model), "-b", backend_name,
                 "-o", str(out), *extra]) == 0
    got = np.asarray(Image.open(out))
    img = np.asarray(Image.open(image))
    if command == "depth":
        depth = testing.depth(model, img, (64, 64), IMAGENET_MEAN, IMAGENET_STD)
        want = ref.colormap(depth, "viridis")
    elif command == "style":
        want = testing.style(model, img, (64, 64))
    elif command == "remove-bg":
        mask = testing.remove_bg_mask(model, img, (64, 64), (128.0,) * 3, (256.0,) * 3)
        want = ref.composite_over(img, mask, np.array([[[10, 20, 30]]], np.uint8))
    else:
        want = ref.merge_luma_chroma(testing.upscale_luma(model, img, (48, 48), 16, 4), img)
    diff = np.abs(got.astype(int) - want.astype(int))
    assert got.shape == want.shape and diff.max() <= 1 and (diff > 0).mean() <= 0.01


def test_remove_bg_transparent_png_and_mask(small_models, image: Path, tmp_path: Path) -> None:
    out, mask = tmp_path / "o.png", tmp_path / "m.png"
    assert main(["remove-bg", str(image), "-m", str(small_models["remove-bg"]), "-b", "cpu",
                 "-o", str(out), "--mask", str(mask)]) == 0
    assert Image.open(out).mode == "RGBA" and Image.open(mask).mode == "L"


def test_errors_are_reported_not_raised(tmp_path: Path, capsys) -> None:
    assert main(["classify", str(tmp_path / "missing.png"), "-b", "cpu"]) == 1
    assert "cannot read image" in capsys.readouterr().err
    image = tmp_path / "img.png"
    Image.fromarray(np.zeros((8, 8, 3), np.uint8)).save(image)
    assert main(["depth", str(image), "-m", "nonexistent-model", "-b", "cpu"]) == 1
    assert "not a file, a URL or a built-in name" in capsys.readouterr().err


def test_progress_bar_on_long_runs(small_models, image: Path, tmp_path: Path, capsys) -> None:
    assert main(["upscale", str(image), "-m", str(small_models["upscale"]), "-b", "cpu",
                 "-o", str(tmp_path / "u.png"), "--progress"]) == 0
    err = capsys.readouterr().err
    assert "upscale:" in err and "100.0%" in err and "2/2" in err  # 1×2 tiles
