#!/usr/bin/env bash
# Quick start 2: lint, every test of every package, then (without arguments) the conformance
# matrix on every backend, the example third-party backend's inherited tests, and spawnml-ray
# installed alone in a fresh venv.
# Arguments go to pytest and skip the last three steps.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x .venv/bin/python ]; then
  echo "test: no .venv here; run scripts/setup.sh first" >&2
  exit 1
fi
.venv/bin/ruff check .
.venv/bin/python -m pytest "$@"
[ "$#" -eq 0 ] || exit 0

# Every op and the kernel suite on every backend (cuda: NVRTC compile checks). The matrix is
# written to build/; the run fails on any cell that fails now but passed in the committed
# matrix (docs/conformance.json); the known failures stay listed as failures in the report.
mkdir -p build
.venv/bin/spawnml-conformance --backend cpu,opencl,webgpu,webgl,wasm,cuda --compile-only cuda \
  --onnx-node-tests --max-cases 4 --quiet --json build/conformance.json \
  --markdown build/conformance.md --baseline docs/conformance.json | tail -n 25
scripts/check_example_backend.sh
scripts/check_ray_install.sh
