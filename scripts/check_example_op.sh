#!/usr/bin/env bash
# The example third-party op plugin (conformance/examples/spawnml-ops-example) installed the
# way an op author installs theirs, into its own venv layered over .venv (so
# com.example::Swish never shows up in the main environment's op registry), then its tests:
# its cases on every available backend (the op kit), a model using it, a bad attribute.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/example_plugin_venv.sh build/example-op-venv conformance/examples/spawnml-ops-example
build/example-op-venv/bin/python -m pytest -q -p no:cacheprovider \
  conformance/examples/spawnml-ops-example/tests
