"""Run the code blocks of Markdown documents as tests, so that a snippet that stops working
fails CI.

:func:`collect` reads fenced code blocks (```` ``` ```` or ``~~~``) with their file and line,
:func:`run_snippet` runs one, and :func:`pytest_params` turns them into pytest parameters::

    from pathlib import Path

    import pytest

    from spawnml.testing.markdown_snippets import collect, pytest_params, run_snippet

    ROOT = Path(__file__).resolve().parents[1]

    @pytest.mark.parametrize("snippet", pytest_params(collect([ROOT / "README.md"], ROOT)))
    def test_docs(snippet):
        run_snippet(snippet)

A block's language says what it is:

* ``python`` (``py``, ``python3``): run with the current interpreter (``sys.executable``) in a
  fresh process, in a fresh empty temporary working directory, as ``__main__``. The code is
  compiled under the Markdown file's own path and line numbers, so a traceback names
  ``README.md``, line 113, and ``@kernel`` functions find their source.
* ``bash``, ``sh``, ``shell``, ``console`` or no language: commands, run with bash under
  ``set -e`` from the root directory, with the interpreter's ``bin`` folder (the virtual
  environment's) first on ``PATH``. ``# ...`` lines are comments. If some lines start with
  ``$ ``, those are the commands and the other non-blank lines their expected output.
* ``text``, ``txt``, ``output`` and every other language (``c``, ``toml``, ...): listings,
  not run, unless a directive below says otherwise.

Directives are HTML comments (invisible once rendered) on the lines right above a block,
one per comment; blank lines and other comments may sit between them and the fence:

``<!-- snippet: skip: REASON -->``
    Do not run the block; the reason is required and becomes the skip message. Only for
    blocks that cannot run in a test (installs, multi-minute jobs, hardware, placeholders),
    never for one that is merely broken.
``<!-- snippet: output -->`` (optionally ``output: rtol=1e-3, atol=1e-6``)
    This block is the expected standard output of the previous runnable block in the file.
    Lines are compared one by one (trailing blanks ignored); a line that is just ``...``
    matches any number of lines, a line ending in ``...`` matches any line that starts like
    it; numbers compare as values within ``rtol``/``atol`` (default: equal), and whitespace
    between them is not significant.
``<!-- snippet: continue -->``
    A ``python`` block that continues the previous one (it may even go on with the indented
    body of a class the other began): the two run as one program, as one test named after
    the first block.
``<!-- snippet: excerpt: PATH -->``
    The block quotes the file ``PATH`` (relative to the root): its non-blank lines, stripped,
    must appear in that file in the same order (``...`` lines are ignored). For code shown in
    pieces whose whole is tested elsewhere.
``<!-- snippet: cwd: DIR -->``
    Run in ``DIR`` (relative to the root), or in a fresh temporary directory for ``tmp``.
``<!-- snippet: timeout: SECONDS -->``
    Instead of :data:`DEFAULT_TIMEOUT`.
``<!-- snippet: slow -->``
    The block takes long (more than about 20 s): :func:`pytest_params` marks it ``slow``.

A malformed directive (unknown, a skip without a reason, an ``output`` with no block before
it, a directive followed by prose instead of a block) is reported as a failing snippet at
its line rather than ignored.
"""

from __future__ import annotations

import json
import math
import os
import re
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "DEFAULT_TIMEOUT", "Block", "Snippet", "SnippetFailure", "SnippetSyntaxError",
    "extract_blocks", "collect", "run_snippet", "match_output", "pytest_params",
]

DEFAULT_TIMEOUT = 300.0
PYTHON = frozenset({"python", "py", "python3"})
SHELL = frozenset({"", "bash", "sh", "shell", "console"})
DIRECTIVES = frozenset({"skip", "output", "continue", "excerpt", "cwd", "timeout", "slow"})

_FENCE = re.compile(r"^(?P<indent> *)(?P<fence>`{3,}|~{3,})\s*(?P<info>[^`]*)$")
_COMMENT = re.compile(r"^\s*<!--(?P<body>.*?)-->\s*$")
_DIRECTIVE = re.compile(r"^\s*snippet\s*:(?P<rest>.*)$", re.S)
_NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|[-+]?(?:nan|inf)\b")
_TAIL_LINES = 60


class SnippetFailure(AssertionError):
    """A block failed: a non-zero exit, a timeout, output that differs, a misquoted excerpt.
    The message starts with the block's ``file:line``."""


class SnippetSyntaxError(ValueError):
    """A malformed ``<!-- snippet: ... -->`` directive; the message starts with its
    ``file:line``."""


@dataclass(frozen=True)
class Block:
    """One fenced code block: ``line`` is the line of its opening fence (1-based)."""

    path: Path
    line: int
    lang: str
    code: str
    directives: tuple[tuple[str, str, int], ...] = ()  # (key, value, line of the comment)
    error: str = ""  # set for directives that no block follows (``line`` is the comment's)

    @property
    def first_code_line(self) -> int:
        return self.line + 1


@dataclass
class Snippet:
    """What one test runs: a block (or a ``continue`` chain of them) and its expectations.

    ``kind`` is ``python``, ``shell``, ``excerpt``, ``skip`` or ``invalid`` (``reason`` then
    holds the skip reason or the error)."""

    id: str
    kind: str
    parts: list[Block]
    root: Path
    expected: list[Block] = field(default_factory=list)
    reason: str = ""
    cwd: str | None = None
    timeout: float = DEFAULT_TIMEOUT
    slow: bool = False
    excerpt: str | None = None
    rtol: float = 0.0
    atol: float = 0.0

    @property
    def block(self) -> Block:
        return self.parts[0]

    @property
    def code(self) -> str:
        return "".join(p.code for p in self.parts)


def _location(root: Path, path: Path, line: int) -> str:
    try:
        name = path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        name = str(path)
    return f"{name}:{line}"


def _parse_directive(body: str) -> tuple[str, str] | None:
    m = _DIRECTIVE.match(body)
    if m is None:
        return None
    key, _, value = m["rest"].strip().partition(":")
    return key.strip(), value.strip()


def extract_blocks(path: Path | str, text: str | None = None) -> list[Block]:
    """The fenced code blocks of a Markdown file (or of ``text``), in order, each with the
    ``snippet:`` directives above it; directives that no block follows come back as a
    :class:`Block` with ``error`` set."""
    path = Path(path)
    lines = (path.read_text(encoding="utf-8") if text is None else text).splitlines()
    found: list[Block] = []

    def orphan(reason: str) -> Block:
        key, _, line = pending[0]
        return Block(path, line, "", "", tuple(pending),
                     error=f"'snippet: {key}' is not followed by a code block{reason}")

    pending: list[tuple[str, str, int]] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        fence = _FENCE.match(line)
        if fence is None:
            comment = _COMMENT.match(line)
            if comment is not None:
                directive = _parse_directive(comment["body"])
                if directive is not None:
                    pending.append((*directive, i + 1))
            elif line.strip() and pending:
                found.append(orphan(" (only blank lines and comments may come between them)"))
                pending = []
            i += 1
            continue
        indent, mark = len(fence["indent"]), fence["fence"]
        lang = fence["info"].strip().split(maxsplit=1)[0].lower() if fence["info"].strip() else ""
        close = re.compile(rf"^ *{re.escape(mark[0])}{{{len(mark)},}}\s*$")
        body: list[str] = []
        j = i + 1
        while j < len(lines) and not close.match(lines[j]):
            text_line = lines[j]
            strip = min(indent, len(text_line) - len(text_line.lstrip(" ")))
            body.append(text_line[strip:] + "\n")
            j += 1
        found.append(Block(path, i + 1, lang, "".join(body), tuple(pending)))
        pending = []
        i = j + 1
    if pending:
        found.append(orphan(""))
    return found


def _tolerances(value: str, where: str) -> tuple[float, float]:
    tol = {"rtol": 0.0, "atol": 0.0}
    for item in filter(None, (s.strip() for s in value.split(","))):
        key, eq, number = item.partition("=")
        try:
            if not eq or key.strip() not in tol:
                raise ValueError(item)
            tol[key.strip()] = float(number)
        except ValueError:
            raise SnippetSyntaxError(
                f"{where}: 'snippet: output: {value}': expected 'rtol=X' and/or 'atol=Y'"
            ) from None
    return tol["rtol"], tol["atol"]


def _directives(block: Block, root: Path) -> dict[str, str]:
    seen: dict[str, str] = {}
    for key, value, line in block.directives:
        where = _location(root, block.path, line)
        if key not in DIRECTIVES:
            known = ", ".join(sorted(DIRECTIVES))
            raise SnippetSyntaxError(
                f"{where}: unknown directive 'snippet: {key}' (known: {known})")
        if key in seen:
            raise SnippetSyntaxError(f"{where}: 'snippet: {key}' given twice for one block")
        if key in ("skip", "excerpt", "cwd", "timeout") and not value:
            what = "a reason" if key == "skip" else "a value"
            raise SnippetSyntaxError(
                f"{where}: 'snippet: {key}' needs {what}: <!-- snippet: {key}: ... -->")
        if key in ("continue", "slow") and value:
            raise SnippetSyntaxError(f"{where}: 'snippet: {key}' takes no value")
        seen[key] = value
    return seen


def collect(paths: Iterable[Path | str], root: Path | str) -> list[Snippet]:
    """Every block of ``paths`` that is run, checked, skipped or malformed, as one
    :class:`Snippet` each (listings are left out; ``output`` and ``continue`` blocks are
    folded into the block they belong to). Ids are ``file:line`` relative to ``root``."""
    root = Path(root)
    snippets: list[Snippet] = []
    for path in paths:
        last: Snippet | None = None  # the previous runnable (or skipped) block of this file
        for block in extract_blocks(path):
            loc = _location(root, block.path, block.line)
            if block.error:
                snippets.append(Snippet(loc, "invalid", [block], root,
                                        reason=f"{loc}: {block.error}"))
                continue
            try:
                d = _directives(block, root)
                kind = ("python" if block.lang in PYTHON
                        else "shell" if block.lang in SHELL else "listing")
                if "output" in d:
                    if last is None:
                        raise SnippetSyntaxError(
                            f"{loc}: an 'output' block must follow a python or shell block")
                    last.expected.append(block)
                    if last.kind != "skip":
                        last.rtol, last.atol = _tolerances(d["output"], loc)
                    continue
                if "continue" in d:
                    if kind != "python" or last is None or last.block.lang not in PYTHON:
                        raise SnippetSyntaxError(
                            f"{loc}: 'continue' joins a python block to the python block "
                            "before it")
                    last.parts.append(block)
                    last.slow = last.slow or "slow" in d
                    if "timeout" in d:
                        last.timeout = max(last.timeout, _timeout(d["timeout"], loc))
                    continue
                snippet = Snippet(loc, kind, [block], root, slow="slow" in d)
                if "timeout" in d:
                    snippet.timeout = _timeout(d["timeout"], loc)
                if "cwd" in d:
                    snippet.cwd = d["cwd"]
                if "skip" in d:
                    snippet.kind, snippet.reason = "skip", d["skip"]
                elif "excerpt" in d:
                    snippet.kind, snippet.excerpt = "excerpt", d["excerpt"]
                elif kind == "listing":
                    if d:
                        raise SnippetSyntaxError(
                            f"{loc}: a ```{block.lang} block is a listing, never run: "
                            f"'snippet: {next(iter(d))}' does not apply (use 'excerpt: PATH' "
                            "to check a quote, 'output' for expected output)")
                    continue
                snippets.append(snippet)
                last = snippet if snippet.kind in ("python", "shell", "skip") else None
            except SnippetSyntaxError as exc:
                snippets.append(Snippet(loc, "invalid", [block], root, reason=str(exc)))
    return snippets


def _timeout(value: str, where: str) -> float:
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    if not seconds > 0:
        raise SnippetSyntaxError(f"{where}: 'snippet: timeout: {value}' is not a positive number")
    return seconds


# -- running ---------------------------------------------------------------------------------

_PYTHON_RUNNER = """\
import json, sys
namespace = {"__name__": "__main__", "__builtins__": __builtins__}
with open(sys.argv[1], encoding="utf-8") as f:
    parts = json.load(f)
sys.argv = [parts[0]["file"]]  # as if the Markdown file were the script, without arguments
for part in parts:
    # Blank lines first, so that line numbers are those of the Markdown file.
    exec(compile("\\n" * (part["line"] - 1) + part["code"], part["file"], "exec"), namespace)
"""


def _tail(text: str) -> str:
    lines = text.rstrip().splitlines()
    if len(lines) > _TAIL_LINES:
        lines = [f"[... {len(lines) - _TAIL_LINES} lines before ...]", *lines[-_TAIL_LINES:]]
    return "\n".join(lines)


def _environment(extra: Mapping[str, str] | None) -> dict[str, str]:
    env = dict(os.environ)
    bindir = str(Path(sys.executable).parent)
    env["PATH"] = os.pathsep.join([bindir, env.get("PATH", "")]) if env.get("PATH") else bindir
    env.setdefault("PYTHONUNBUFFERED", "1")
    env.update(extra or {})
    return env


def _execute(snippet: Snippet, argv: list[str], cwd: Path, env: dict[str, str],
             what: str) -> str:
    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=snippet.timeout)
    except subprocess.TimeoutExpired:
        try:
            if hasattr(os, "killpg"):
                os.killpg(proc.pid, signal.SIGKILL)  # the block's own session, children too
            else:  # pragma: no cover - Windows
                proc.kill()
        except ProcessLookupError:
            pass
        out, err = proc.communicate()
        raise SnippetFailure(
            f"{snippet.id}: {what} block timed out after {snippet.timeout:g} s "
            "(<!-- snippet: timeout: SECONDS --> raises the limit)\n"
            f"--- stdout ---\n{_tail(out)}\n--- stderr ---\n{_tail(err)}") from None
    if proc.returncode:
        raise SnippetFailure(
            f"{snippet.id}: {what} block failed with exit status {proc.returncode}\n"
            f"--- stderr ---\n{_tail(err)}\n--- stdout ---\n{_tail(out)}")
    return out


def _console(block: Block) -> tuple[str, list[tuple[int, str]]] | None:
    """Commands and expected output of a block written with ``$ `` prompts, else None."""
    lines = block.code.splitlines()
    if not any(s.startswith("$ ") or s == "$" for s in lines):
        return None
    commands, expected, continued = [], [], False
    for n, s in enumerate(lines):
        if s.startswith("$ ") or s == "$" or continued:
            command = s[2:] if not continued else s
            commands.append(command)
            continued = command.rstrip().endswith("\\")
        else:
            commands.append("")  # keeps the script's line numbers those of the file
            if s.strip():
                expected.append((block.first_code_line + n, s))
    return "\n".join(commands) + "\n", expected


def _python_parts(snippet: Snippet) -> list[dict[str, Any]]:
    """The code to compile, as ``{file, line, code}``: a ``continue`` block is joined to the
    block before it (blank lines in between keep the file's line numbers), so it may go on
    with an indented class or function body."""
    parts: list[dict[str, Any]] = []
    for block in snippet.parts:
        file = str(block.path.resolve())
        if parts and parts[-1]["file"] == file:
            last = parts[-1]
            gap = block.first_code_line - last["line"] - last["code"].count("\n")
            if gap >= 0:
                last["code"] += "\n" * gap + block.code
                continue
        parts.append({"file": file, "line": block.first_code_line, "code": block.code})
    return parts


def run_snippet(snippet: Snippet, env: Mapping[str, str] | None = None) -> str:
    """Run (or check) one snippet and return what it printed; raise :class:`SnippetFailure`
    (or :class:`SnippetSyntaxError` for a malformed directive), whose message starts with
    the block's ``file:line``. A ``skip`` snippet raises :class:`SnippetFailure` too: skip it
    before calling (:func:`pytest_params` does)."""
    if snippet.kind == "invalid":
        raise SnippetSyntaxError(snippet.reason)
    if snippet.kind == "skip":
        raise SnippetFailure(f"{snippet.id}: skipped block ({snippet.reason}) was run")
    if snippet.kind == "excerpt":
        _check_excerpt(snippet)
        return ""
    environ = _environment(env)
    with tempfile.TemporaryDirectory(prefix="snippet-") as tmp:
        work = Path(tmp) / "work"  # empty: the block's code goes beside it
        work.mkdir()
        if snippet.cwd is None:
            cwd = work if snippet.kind == "python" else snippet.root
        else:
            cwd = work if snippet.cwd == "tmp" else snippet.root / snippet.cwd
        if snippet.kind == "python":
            program = Path(tmp) / "snippet.json"
            program.write_text(json.dumps(_python_parts(snippet)), encoding="utf-8")
            argv = [sys.executable, "-c", _PYTHON_RUNNER, str(program)]
            out = _execute(snippet, argv, cwd, environ, "python")
            inline: list[tuple[int, str]] = []
        else:
            block = snippet.block
            console = _console(block)
            code, inline = console if console is not None else (block.code, [])
            name = snippet.id.rsplit(":", 1)[0]
            # ERR reports the failing command at its line in the Markdown file.
            script = ("set -e; trap 's=$?; echo \"$0:$LINENO: exit status $s: $BASH_COMMAND\""
                      " >&2' ERR" + "\n" * (block.first_code_line - 1) + code)
            out = _execute(snippet, ["bash", "-c", script, name], cwd, environ, "shell")
    if inline:
        match_output(out, inline, snippet, "the output after its commands")
    if snippet.expected:
        expected = [(b.first_code_line + n, s) for b in snippet.expected
                    for n, s in enumerate(b.code.splitlines())]
        where = ", ".join(_location(snippet.root, b.path, b.line) for b in snippet.expected)
        match_output(out, expected, snippet, f"the output block at {where}")
    return out


# -- output and excerpts ---------------------------------------------------------------------


def _split_numbers(line: str) -> tuple[list[str], list[float]]:
    texts, numbers, pos = [], [], 0
    for m in _NUMBER.finditer(line):
        texts.append(re.sub(r"\s+", "", line[pos:m.start()]))
        numbers.append(float(m.group()))
        pos = m.end()
    texts.append(re.sub(r"\s+", "", line[pos:]))
    return texts, numbers


def _line_matches(expected: str, actual: str, rtol: float, atol: float) -> bool:
    if expected.endswith("..."):
        expected = expected[:-3]
        head = actual[:len(expected) + 32]  # a number may print longer than shown
        return any(_line_matches(expected, head[:n], rtol, atol)
                   for n in range(len(head), -1, -1))
    et, en = _split_numbers(expected)
    at, an = _split_numbers(actual)
    if et != at or len(en) != len(an):
        return False
    return all(a == e or math.isclose(a, e, rel_tol=rtol, abs_tol=atol)
               or (math.isnan(a) and math.isnan(e)) for e, a in zip(en, an))


def match_output(printed: str, expected: Sequence[tuple[int, str]], snippet: Snippet,
                 what: str = "the expected output") -> None:
    """Compare what a block printed with ``(markdown line, text)`` pairs (the rules are in
    the module docstring); raise :class:`SnippetFailure` at the first difference."""
    actual = [s.rstrip() for s in printed.rstrip().splitlines()]  # trailing blanks never count
    want = [(n, s.rstrip()) for n, s in expected]
    while want and not want[-1][1]:
        want.pop()
    name = snippet.id.rsplit(":", 1)[0]

    def fail(line: int, text: str, got: str) -> SnippetFailure:
        return SnippetFailure(
            f"{snippet.id}: printed output differs from {what}, at {name}:{line}\n"
            f"  expected: {text}\n  printed:  {got}\n"
            f"(numbers: rtol={snippet.rtol:g}, atol={snippet.atol:g})\n"
            f"--- printed ---\n{_tail(printed)}")

    def match(w: int, a: int) -> bool:  # backtracking only at whole-line '...'
        while w < len(want):
            text = want[w][1]
            if text.strip() == "...":
                return any(match(w + 1, k) for k in range(a, len(actual) + 1))
            if a >= len(actual) or not _line_matches(text, actual[a], snippet.rtol,
                                                     snippet.atol):
                return False
            w, a = w + 1, a + 1
        return a == len(actual)

    if match(0, 0):
        return
    # Name the first line that cannot match, walking the literal lines in order.
    a = 0
    for line, text in want:
        if text.strip() == "...":
            raise fail(line, "... (then the lines after it)", "(no alignment of the rest)")
        if a >= len(actual):
            raise fail(line, text, "(nothing: the output ended)")
        if not _line_matches(text, actual[a], snippet.rtol, snippet.atol):
            raise fail(line, text, actual[a])
        a += 1
    raise fail(want[-1][0] if want else snippet.block.line, "(end of output)", actual[a])


def _check_excerpt(snippet: Snippet) -> None:
    path = snippet.root / str(snippet.excerpt)
    if not path.is_file():
        raise SnippetFailure(f"{snippet.id}: 'excerpt: {snippet.excerpt}': no such file")
    source = [s.strip() for s in path.read_text(encoding="utf-8").splitlines()]
    at = 0
    for n, text in enumerate(snippet.code.splitlines()):
        text = text.strip()
        if not text or text == "...":
            continue
        try:
            at = source.index(text, at) + 1
        except ValueError:
            line = snippet.block.first_code_line + n
            after = f" after its line {at}" if at else ""
            raise SnippetFailure(
                f"{snippet.id}: the quoted line {_location(snippet.root, snippet.block.path, line)}"
                f" is not in {snippet.excerpt}{after}:\n  {text}") from None


# -- pytest ----------------------------------------------------------------------------------


def pytest_params(snippets: Iterable[Snippet], slow_mark: str | None = "slow") -> list[Any]:
    """``pytest.param`` per snippet, with its ``file:line`` id, skipped with its reason, and
    marked ``slow_mark`` (a registered marker name, or None) where it says ``slow``."""
    import pytest

    params = []
    for s in snippets:
        marks: list[Any] = []
        if s.kind == "skip":
            marks.append(pytest.mark.skip(reason=f"{s.id}: {s.reason}"))
        if s.slow and slow_mark:
            marks.append(getattr(pytest.mark, slow_mark))
        params.append(pytest.param(s, id=s.id, marks=marks))
    return params


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m spawnml.testing.markdown_snippets [--root DIR] FILE.md ...``: list the
    blocks found, then run them, printing one line each; exit 1 if any failed."""
    import argparse
    import time

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("files", nargs="+", type=Path)
    parser.add_argument("--root", type=Path, default=Path.cwd())
    parser.add_argument("--list", action="store_true", help="only list the blocks")
    args = parser.parse_args(argv)
    failed = 0
    for s in collect(args.files, args.root):
        label = s.kind + (" (slow)" if s.slow else "")
        if args.list or s.kind == "skip":
            print(f"{s.id:40} {label:14} {s.reason}", flush=True)
            continue
        start = time.perf_counter()
        try:
            run_snippet(s)
            status = "ok"
        except (SnippetFailure, SnippetSyntaxError) as exc:
            failed += 1
            status = f"FAILED\n{exc}"
        print(f"{s.id:40} {label:14} {time.perf_counter() - start:6.1f} s {status}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
