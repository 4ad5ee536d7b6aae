"""spawnml.testing.markdown_snippets: blocks are found, run, compared and reported at their
file:line (the docs' own snippets are run by tests/test_docs.py at the workspace root)."""

from __future__ import annotations

import textwrap

import pytest

from spawnml.testing.markdown_snippets import (
    SnippetFailure,
    SnippetSyntaxError,
    collect,
    extract_blocks,
    run_snippet,
)


def _doc(tmp_path, text: str):
    path = tmp_path / "guide.md"
    path.write_text(textwrap.dedent(text))
    return collect([path], tmp_path)


def test_blocks_are_found_with_their_line_language_and_directives(tmp_path):
    path = tmp_path / "a.md"
    path.write_text("# t\n\n<!-- snippet: slow -->\n\n```Python title\nx = 1\n```\n\n"
                    "- item\n\n  ~~~~\n  echo hi\n  ```\n  ~~~~\n")
    first, second = extract_blocks(path)
    assert (first.line, first.lang, first.code) == (5, "python", "x = 1\n")
    assert [d[:2] for d in first.directives] == [("slow", "")]
    assert (second.line, second.lang, second.code) == (11, "", "echo hi\n```\n")
    assert second.directives == ()


def test_a_passing_python_block_passes_and_prints_what_the_output_block_says(tmp_path):
    (snippet,) = _doc(tmp_path, """\
        ```python
        import math
        print("pi is", math.pi, "and a list", [1.5, 2.25])
        print("done")
        ```

        <!-- snippet: output: rtol=1e-3 -->
        ```text
        pi is 3.1416 and a list [1.5,  2.25]
        ...
        ```
    """)
    assert (snippet.id, snippet.kind, snippet.rtol) == ("guide.md:1", "python", 1e-3)
    assert run_snippet(snippet).splitlines()[-1] == "done"


def test_a_broken_block_fails_naming_the_markdown_file_and_line(tmp_path):
    (snippet,) = _doc(tmp_path, """\
        Some prose.

        ```python
        import os

        print(os.sep, undefined_name)
        ```
    """)
    with pytest.raises(SnippetFailure) as failure:
        run_snippet(snippet)
    message = str(failure.value)
    assert message.startswith("guide.md:3: python block failed with exit status 1")
    # the traceback points into the Markdown file, at the line of the bad statement
    assert f'File "{tmp_path / "guide.md"}", line 6' in message
    assert "NameError: name 'undefined_name' is not defined" in message


def test_wrong_expected_output_fails_at_the_differing_line(tmp_path):
    (snippet,) = _doc(tmp_path, """\
        ```python
        print("loss", 0.25)
        print("accuracy", 0.9)
        ```
        <!-- snippet: output: rtol=1e-3 -->
        ```
        loss 0.2501
        accuracy 0.8
        ```
    """)
    with pytest.raises(SnippetFailure, match=r"(?s)guide.md:1: printed output differs from "
                       r"the output block at guide.md:6, at guide.md:8\n"
                       r"  expected: accuracy 0.8\n  printed:  accuracy 0.9"):
        run_snippet(snippet)


@pytest.mark.parametrize("expected, ok", [
    ("a\n...\nz", True),        # '...' alone: any lines
    ("a\nbcd\n...", True),
    ("a\n...\ny", False),       # but the last line must still match
    ("a\nb\nc", False),         # and every line must be accounted for
    ("a\nb\nc\nz\nextra", False),
    ("a\nb...\n...", True),     # a tail wildcard
])
def test_ellipsis_lines(tmp_path, expected, ok):
    (snippet,) = _doc(tmp_path, "```python\nprint('a\\nbcd\\nc\\nz')\n```\n"
                      "<!-- snippet: output -->\n```text\n" + expected + "\n```\n")
    if ok:
        run_snippet(snippet)
    else:
        with pytest.raises(SnippetFailure, match="printed output differs"):
            run_snippet(snippet)


def test_a_skip_needs_a_reason_and_unknown_or_orphaned_directives_are_errors(tmp_path):
    bad = _doc(tmp_path, """\
        <!-- snippet: skip -->
        ```python
        print(1)
        ```

        <!-- snippet: skip-this -->
        ```python
        print(2)
        ```

        <!-- snippet: output -->
        ```text
        3
        ```

        <!-- snippet: skip: needs a GPU -->

        prose between the directive and its block
    """)
    assert [s.kind for s in bad] == ["invalid"] * 4
    messages = []
    for snippet in bad:
        with pytest.raises(SnippetSyntaxError) as error:
            run_snippet(snippet)
        messages.append(str(error.value))
    assert messages[0].startswith("guide.md:1: 'snippet: skip' needs a reason")
    assert messages[1].startswith("guide.md:6: unknown directive 'snippet: skip-this'")
    assert messages[2].startswith("guide.md:12: an 'output' block must follow")
    assert messages[3].startswith("guide.md:16: 'snippet: skip' is not followed by a code block")


def test_skip_with_a_reason_and_listings(tmp_path):
    snippets = _doc(tmp_path, """\
        <!-- snippet: skip: needs a GPU -->
        ```python
        raise SystemExit(1)
        ```
        <!-- snippet: output -->
        ```text
        ignored with the skipped block
        ```
        ```c
        int never_run;
        ```
        ```text
        a listing
        ```
    """)
    assert [(s.kind, s.reason) for s in snippets] == [("skip", "needs a GPU")]


def test_continue_runs_both_blocks_in_one_process_and_python_blocks_do_not_share_files(
        tmp_path):
    first, second = _doc(tmp_path, """\
        ```python
        open("left-behind.txt", "w").write("x")
        total = 40
        ```
        Prose.
        <!-- snippet: continue -->
        ```python
        print(total + 2)
        ```
        <!-- snippet: output -->
        ```text
        42
        ```
        ```python
        import os
        assert not os.path.exists("left-behind.txt")
        ```
    """)
    assert [p.line for p in first.parts] == [1, 7]
    run_snippet(first)
    run_snippet(second)


def test_kernels_defined_in_a_snippet_find_their_source_in_the_markdown(tmp_path):
    (snippet,) = _doc(tmp_path, """\
        ```python
        import numpy as np
        from spawnml import get_backend
        from spawnml.kernel import Output, Tensor, kernel, run_kernel

        @kernel
        def double(x: Tensor, out: Output):
            return x.flat[out.flat] * 2.0

        print(run_kernel(get_backend("cpu"), double, [np.arange(3, dtype="float32")], (3,),
                         "float32"))
        ```
        <!-- snippet: output -->
        ```text
        [0. 2. 4.]
        ```
    """)
    run_snippet(snippet)


def test_shell_blocks_stop_at_the_first_failing_command_and_name_its_line(tmp_path):
    ok, prompts, broken = _shell_doc(tmp_path)
    run_snippet(ok)
    prompts.rtol = 1e-3
    run_snippet(prompts)
    with pytest.raises(SnippetFailure) as failure:
        run_snippet(broken)
    message = str(failure.value)
    assert message.startswith("guide.md:13: shell block failed with exit status 1")
    assert "guide.md:15: exit status 1: false" in message
    assert "never" not in message


def _shell_doc(tmp_path):
    return _doc(tmp_path, """\
        ```bash
        # a comment, then a command that finds the venv's python on PATH
        python -c 'import sys; print(sys.prefix)'
        ```
        ```console
        $ echo one
        one
        $ printf '%s\\n' 2.0001 \\
            three
        2
        three
        ```
        ```sh
        echo before
        false
        echo never
        ```
    """)


def test_excerpts_must_quote_the_file_in_order(tmp_path):
    (tmp_path / "mod.py").write_text("import os\n\n\ndef f():\n    return os.sep\n")
    good, bad = _doc(tmp_path, """\
        <!-- snippet: excerpt: mod.py -->
        ```python
        def f():
            ...
            return os.sep
        ```
        <!-- snippet: excerpt: mod.py -->
        ```python
        def f():
            return os.sep
        import os
        ```
    """)
    run_snippet(good)
    with pytest.raises(SnippetFailure, match=r"guide.md:8: the quoted line guide.md:11 is not "
                       r"in mod.py after its line 5:\n  import os"):
        run_snippet(bad)


def test_a_block_that_runs_too_long_is_stopped(tmp_path):
    (snippet,) = _doc(tmp_path, """\
        <!-- snippet: timeout: 1 -->
        ```python
        import time
        print("started", flush=True)
        time.sleep(60)
        ```
    """)
    with pytest.raises(SnippetFailure, match=r"(?s)guide.md:2: python block timed out after "
                       r"1 s.*started"):
        run_snippet(snippet)
