"""Every code block of README.md, docs/*.md and the package READMEs runs as written.

Each block is one test, named ``FILE:LINE`` (``pytest tests/test_docs.py -k README.md:105``);
the conventions (skip, expected output, excerpts, ...) are those of
``spawnml.testing.markdown_snippets``. ``python -m spawnml.testing.markdown_snippets --list
README.md docs/*.md */README.md`` lists the blocks.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from spawnml.testing.markdown_snippets import collect, pytest_params, run_snippet

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")),
        *sorted(ROOT.glob("*/README.md"))]
SNIPPETS = collect(DOCS, ROOT)


def test_the_docs_have_snippets():
    assert len(SNIPPETS) > 20, [s.id for s in SNIPPETS]


@pytest.mark.parametrize("snippet", pytest_params(SNIPPETS))
def test_snippet(snippet):
    run_snippet(snippet)
