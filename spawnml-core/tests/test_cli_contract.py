"""The CLI contract, checked on every subcommand (plugins' included): complete ``--help``,
and bad arguments end in exit status 2 (usage) or 1 (one ``spawnml: error:`` line naming
what was wrong), never a traceback and never exit 0."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import numpy as np
import pytest

from spawnml.cli import build_parser, main

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402

M = "squeezenet1_1"


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


COMMANDS = _subparsers()


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    d = tmp_path_factory.mktemp("cli")
    (d / "text.txt").write_text("not a model, not an image\n")
    np.save(d / "small.npy", np.zeros((1, 3, 5, 5), np.float32))
    from PIL import Image

    Image.fromarray(np.full((32, 48, 3), 128, np.uint8)).save(d / "img.png")
    node = helper.make_node("Frobnicate", ["x"], ["y"], domain="com.example")
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", 1, [2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid("com.example", 1)])
    onnx.save(model, d / "unsupported.onnx")
    return {"dir": str(d), "txt": str(d / "text.txt"), "npy": str(d / "small.npy"),
            "img": str(d / "img.png"), "unsupported": str(d / "unsupported.onnx")}


# (argv with {placeholders}, expected exit status, regex the error line must match)
CASES: list[tuple[str, int, str]] = [
    # core
    ("backends --bogus", 2, "unrecognized arguments"),
    ("backends extra", 2, "unrecognized arguments"),
    ("plugins --bogus", 2, "unrecognized arguments"),
    ("plugins --json extra", 2, "unrecognized arguments"),
    ("info", 2, "required: model"),
    ("info nope", 1, "not a file, a URL or a built-in name.*squeezenet1_1"),
    ("info missing.onnx", 1, "model file 'missing.onnx' does not exist"),
    ("info {dir}", 1, "is a directory"),
    ("info {txt}", 1, "not a valid ONNX protobuf"),
    (f"info {M} --backends nope", 1, "no backend named 'nope' is registered.*cpu"),
    ("run", 2, "required: model"),
    ("run nope", 1, "not a file, a URL or a built-in name"),
    (f"run {M} --backend nope", 1, "no backend named 'nope'"),
    (f"run {M} --backend ,", 1, "no backend named in ','"),
    (f"run {M} --input x", 1, "--input expects NAME=FILE.npy"),
    (f"run {M} --input x=a.npy", 1, "has no input 'x' \\(inputs: input\\)"),
    (f"run {M} --input input=missing.npy", 1, "cannot read 'missing.npy'"),
    (f"run {M} --input input={{txt}}", 1, "cannot read .* as a .npy array"),
    (f"run {M} --input input={{npy}}", 1, "dimension 2 must be 224.*got 5"),
    (f"run {M} --compare nope", 1, "no backend named 'nope'"),
    (f"run {M} --benchmark -1", 1, "--benchmark must be >= 0"),
    (f"run {M} --benchmark x", 2, "invalid int value"),
    (f"run {M} --plot p.png", 1, "add --profile"),
    ("run {unsupported} --backend cpu", 1, "operators spawnml does not implement.*Frobnicate"),
    ("bench", 2, "required: MODEL"),
    ("bench nope", 1, "not a file, a URL or a built-in name"),
    (f"bench {M} --backends nope", 1, "no backend named 'nope'"),
    (f"bench {M} --against nope", 1, "no backend named 'nope'"),
    (f"bench {M} --runs 0", 1, "--runs must be at least 1"),
    (f"bench {M} --runs x", 2, "invalid int value"),
    ("bench {unsupported} --backends cpu --runs 1", 1, "1 of 1 model/contender pairs failed"),
    ("ops --backend nope", 1, "no backend named 'nope' is registered"),
    ("ops --format xml", 2, "invalid choice"),
    ("models --fetch nope", 1, "no built-in model 'nope'"),
    ("models --bogus", 2, "unrecognized arguments"),
    # spawnml-pipelines
    ("samples dog", 1, "unknown sample 'dog.png'.*chelsea.png"),
    ("samples --bogus", 2, "unrecognized arguments"),
    ("classify", 2, "required: image"),
    ("classify missing.png", 1, "cannot read image 'missing.png'"),
    ("classify {txt}", 1, "cannot read image"),
    ("classify {img} -b nope", 1, "no backend named 'nope'"),
    ("classify {img} -m nope", 1, "not a file, a URL or a built-in name"),
    ("classify {img} -k 0", 2, "must be at least 1"),
    ("classify {img} -b cpu --mean 1,2", 1, "mean: expected 3 values"),
    ("depth missing.png", 1, "cannot read image"),
    ("depth {img} -c nope", 2, "invalid choice"),
    ("style missing.png", 1, "cannot read image"),
    ("style {img} --max-side x", 2, "expected an integer"),
    ("remove-bg missing.png", 1, "cannot read image"),
    ("remove-bg {img} --background nope", 2, "invalid choice"),
    ("remove-bg {img} --color zz", 2, "expected #RRGGBB"),
    ("upscale missing.png", 1, "cannot read image"),
    ("upscale {img} --overlap -1", 2, "must be at least 0"),
    ("upscale {img} -b cpu --tile 3", 1, "fixed \\(224, 224\\) tiles"),
    ("generate", 2, "required: MODEL_DIR, -p/--prompt"),
    ("generate nope -p hi", 1, "model folder 'nope' does not exist.*tiny_llama"),
    ("generate {txt} -p hi", 1, "is not a folder"),
    ("generate {dir} -p hi -b cpu", 1, "no tokenizer.json"),
    ("generate {dir} -p hi -n 0", 2, "must be at least 1"),
    ("generate {dir} -p hi --top-p 1.5", 2, "must be at most 1"),
    ("generate {dir} -p hi -t x", 2, "expected a number"),
    ("generate {dir} -p hi --kv-block 0", 2, "must be at least 1"),
    # spawnml-conformance
    ("conformance --bogus", 2, "unrecognized arguments"),
    ("conformance --backend nope", 2, "'nope' is not registered"),
    # spawnml-backend-wasm
    ("export-wasm", 2, "required: model, out"),
    ("export-wasm nope out", 1, "not a file, a URL or a built-in name"),
    (f"export-wasm {M} out --shape x", 1, "--shape expects NAME=D0,D1"),
    (f"export-wasm {M} out --shape input=1,3,a", 1, "--shape expects NAME=D0,D1"),
    (f"export-wasm {M} out --shape nope=1,3", 1, "not model inputs \\(inputs: \\['input'\\]\\)"),
    ("export-wasm {unsupported} out", 1, "Frobnicate"),
    (f"export-wasm {M} out --threads 0", 1, "--threads must be between 1 and 64, got 0"),
    (f"export-wasm {M} out --threads x", 2, "invalid int value"),
    # spawnml-web
    ("export-web", 2, "required: model, out"),
    ("export-web nope out", 1, "not a file, a URL or a built-in name"),
    (f"export-web {M} out --backend metal", 1, "no web target named \\['metal'\\]"),
    (f"export-web {M} out --backend ,", 1, "needs at least one backend"),
    (f"export-web {M} out --backend wasm --shape x", 1, "--shape expects NAME=D0,D1"),
    ("export-web {unsupported} out --backend wasm", 1, "Frobnicate"),
    (f"export-web {M} out --threads 0", 1, "threads must be between 1 and 64, got 0"),
    (f"export-web {M} out --pipeline blur", 2, "invalid choice: 'blur'"),
    (f"export-web {M} out --image-size 3,4", 1, "give --pipeline TASK too"),
    (f"export-web {M} out --pipeline depth --image-size 0,4", 1, "--image-size expects H,W"),
    (f"export-web {M} out --pipeline depth --shape x=1", 1, "takes --image-size H,W instead"),
    # spawnml-ray
    ("batch", 2, "required"),
    ("batch nope {dir} out", 2, "invalid choice"),
]


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("argv, status, message", CASES, ids=[c[0] for c in CASES])
def test_bad_arguments(argv: str, status: int, message: str, files: dict[str, str],
                       capsys: pytest.CaptureFixture[str], tmp_path: Path,
                       monkeypatch: pytest.MonkeyPatch) -> None:
    words = argv.format(**files).split()
    if words[0] not in COMMANDS:
        pytest.skip(f"the plugin that adds `spawnml {words[0]}` is not installed")
    monkeypatch.chdir(tmp_path)
    code, _, err = _run(words, capsys)
    assert code == status, err
    assert "Traceback" not in err
    lines = [line for line in err.splitlines() if "error:" in line]
    assert len(lines) == 1, err
    assert re.search(message, err[err.index(lines[0]):], re.S), err  # details may follow
    if status == 1:
        assert lines[0].startswith("spawnml: error: ")
    assert not list(tmp_path.iterdir()), "a failed command must not leave files behind"


def test_every_subcommand_has_bad_argument_cases() -> None:
    covered = {c[0].split()[0] for c in CASES}
    assert set(COMMANDS) <= covered, f"no bad-argument case for {set(COMMANDS) - covered}"
    assert len(CASES) >= 40


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_help_describes_every_argument(command: str, capsys: pytest.CaptureFixture[str]
                                       ) -> None:
    code, out, _ = _run([command, "--help"], capsys)
    assert code == 0
    assert out.startswith("usage: ")
    undocumented = [a.dest for a in COMMANDS[command]._actions if not a.help]
    assert not undocumented, f"`spawnml {command}` arguments without help: {undocumented}"


def test_debug_shows_the_traceback(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(["info", "nope", "--debug"], capsys)
    assert code == 1 and "Traceback" in err and "spawnml: error: model 'nope'" in err


def test_a_foreign_exception_is_one_line(monkeypatch: pytest.MonkeyPatch,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    import spawnml.cli_model as cli_model

    def boom(*_args: object) -> None:
        raise KeyError("surprise")

    monkeypatch.setattr(cli_model, "model_path", boom)
    code, _, err = _run(["info", M], capsys)
    assert code == 1
    assert err.strip() == ("spawnml: error: KeyError: 'surprise' (run with --debug for the "
                           "traceback)")


def test_bench_progress_only_on_a_terminal(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(["bench", M, "--backends", "cpu", "--runs", "1"], capsys)
    assert code == 0 and "\r" not in err and M in out
    code, _, err = _run(["bench", M, "--backends", "cpu", "--runs", "1", "--progress"], capsys)
    assert code == 0 and "\r[" in err
