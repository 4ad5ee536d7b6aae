#!/usr/bin/env bash
# Quick start 2: lint, then every test of every package. Arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x .venv/bin/python ]; then
  echo "test: no .venv here; run scripts/setup.sh first" >&2
  exit 1
fi
.venv/bin/ruff check .
.venv/bin/python -m pytest "$@"
